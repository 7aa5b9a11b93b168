package auditlog

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/translog"
	"github.com/vcon-server/vcon-server/objstore"
)

// A Copier writes each log's newest checkpoint and its hash tiles to
// buckets, in the tlog-tiles layout under logs/<tenant id>/ (logs/admin/
// for the admin log): a copy outside the catalog that a rewritten log
// cannot be consistent with (docs/audit-log.md, "Witnesses"). Entry
// bundles are never written: a hash tells nothing of a record. It runs
// beside the signing pass, never in it: a bucket that fails delays the
// copy, never a checkpoint.
type Copier struct {
	Logs    *Logs
	Targets []objstore.Store
	poke    chan struct{}
}

// metaCopied is the meta key of what each target holds: by target name
// (its String) and log key in hex, the size of the checkpoint copied, so
// that a start copies only what is new.
const metaCopied = "log_copies"

// CopyPrefix is the folder of the logs' copies in a target.
const CopyPrefix = "logs/"

// NewCopier makes a copier of l's logs to targets, one of each name.
func NewCopier(l *Logs, targets ...objstore.Store) *Copier {
	c := &Copier{Logs: l, poke: make(chan struct{}, 1)}
	seen := map[string]bool{}
	for _, t := range targets {
		if t != nil && !seen[t.String()] {
			seen[t.String()] = true
			c.Targets = append(c.Targets, t)
		}
	}
	return c
}

// Poke asks for a pass now; it never waits (Logs.Published calls it).
func (c *Copier) Poke() {
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

// Run copies at the first poke after each interval, until ctx ends;
// failed hears each pass's error, and a failed pass is tried again after
// the interval. A copy costs a PUT per log and tree level: a log that
// grows every second is copied once an interval, never once a second
// (the webhook has each checkpoint).
func (c *Copier) Run(ctx context.Context, interval time.Duration, failed func(error)) {
	for {
		err := c.Copy(ctx)
		if err != nil && ctx.Err() == nil {
			failed(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
		if err != nil {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-c.poke:
		}
	}
}

// Copy copies to every target each log whose checkpoint is newer than
// the one it holds, and records what it copied. It goes on past a log or
// a target that fails, and returns the first error.
func (c *Copier) Copy(ctx context.Context) error {
	if len(c.Targets) == 0 {
		return nil
	}
	cps, err := c.Logs.Cat.LogCheckpoints(ctx)
	if err != nil {
		return err
	}
	copied := map[string]map[string]uint64{}
	if b, err := c.Logs.Cat.Meta(ctx, metaCopied); err == nil {
		if err := json.Unmarshal(b, &copied); err != nil {
			copied = map[string]map[string]uint64{} // damaged: copy again; tiles are written create-only
		}
	} else if !errors.Is(err, catalog.ErrNotFound) {
		return err
	}
	logs := make([]string, 0, len(cps))
	for log := range cps {
		logs = append(logs, log)
	}
	sort.Strings(logs)
	var first error
	changed := false
	for _, t := range c.Targets {
		done := copied[t.String()]
		if done == nil {
			done = map[string]uint64{}
			copied[t.String()] = done
		}
		for _, log := range logs {
			cp, k := cps[log], hex.EncodeToString([]byte(log))
			if cp.Size <= done[k] {
				continue
			}
			if err := c.copyLog(ctx, t, []byte(log), done[k], cp); err != nil {
				if first == nil {
					first = fmt.Errorf("auditlog: copy an audit log to %s (tried again at the next pass): %w", t, err)
				}
				if ctx.Err() != nil {
					break
				}
				continue
			}
			done[k], changed = cp.Size, true
		}
		// A deleted tenant's log is gone from the catalog; its copy stays
		// in the bucket (hashes only), its record here does not.
		for k := range done {
			if b, err := hex.DecodeString(k); err == nil {
				if _, ok := cps[string(b)]; !ok {
					delete(done, k)
					changed = true
				}
			}
		}
	}
	if changed {
		b, _ := json.Marshal(copied)
		if err := c.Logs.Cat.Update(context.WithoutCancel(ctx), func(tx *catalog.Tx) error { return tx.SetMeta(metaCopied, b) }); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// CopyFolder is the folder of log's copy in a target.
func CopyFolder(log []byte) string { return CopyPrefix + LogName(log) + "/" }

// copyLog writes the tiles of log that the checkpoint cp covers and a
// copy of size from holds not, then cp, then deletes the partial tiles
// of from that cp's supersede. A tile once written never changes: one
// already there that differs from the catalog's means the log the
// bucket holds is not this one, and the copy stops there.
func (c *Copier) copyLog(ctx context.Context, t objstore.Store, log []byte, from uint64, cp catalog.StoredCheckpoint) error {
	dir := CopyFolder(log)
	nodes := c.Logs.Cat.LogNodes(ctx, log)
	var stale []string
	for level := uint(0); level < 64 && cp.Size>>level != 0; level += translog.TileHeight {
		have, had := cp.Size>>level, from>>level
		for n := had / translog.TileWidth; n < have/translog.TileWidth; n++ {
			if err := c.putTile(ctx, t, dir, nodes, translog.Tile{Level: int(level / translog.TileHeight), N: n, Width: translog.TileWidth}); err != nil {
				return err
			}
		}
		if w := have % translog.TileWidth; w != 0 {
			if err := c.putTile(ctx, t, dir, nodes, translog.Tile{Level: int(level / translog.TileHeight), N: have / translog.TileWidth, Width: int(w)}); err != nil {
				return err
			}
		}
		if w := had % translog.TileWidth; w != 0 && had != have {
			stale = append(stale, dir+"tile/"+translog.Tile{Level: int(level / translog.TileHeight), N: had / translog.TileWidth, Width: int(w)}.Path())
		}
	}
	if err := objstore.Put(ctx, t, dir+"checkpoint", bytes.NewReader(cp.Note), false); err != nil {
		return err
	}
	// A reader of the checkpoint before holds its partial tiles' wider
	// or full ones now (tlog-tiles lets a partial tile go once a wider
	// one is there). A delete that fails leaves a tile, harmless.
	for _, k := range stale {
		t.Delete(ctx, k)
	}
	return nil
}

// putTile writes one hash tile create-only; one there already must hold
// the same bytes.
func (c *Copier) putTile(ctx context.Context, t objstore.Store, dir string, nodes translog.NodeReader, tile translog.Tile) error {
	level := uint(tile.Level) * translog.TileHeight
	b, err := tileHashes(nodes, level, tile.N*translog.TileWidth, tile.Width)
	if err != nil {
		return err
	}
	key := dir + "tile/" + tile.Path()
	err = objstore.Put(ctx, t, key, bytes.NewReader(b), true)
	if !errors.Is(err, objstore.ErrExists) {
		return err
	}
	rc, err := t.Get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	got, err := io.ReadAll(io.LimitReader(rc, int64(len(b))+1))
	if err != nil {
		return err
	}
	if !bytes.Equal(got, b) {
		return fmt.Errorf("the copy's tile %s is not the catalog's: the log was rewritten, or restored behind what the bucket holds; run vcon-server audit verify, and keep the bucket's copy as evidence", tile.Path())
	}
	return nil
}
