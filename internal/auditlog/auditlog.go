// Package auditlog publishes each tenant's audit log and the admin log as
// transparency logs (docs/audit-log.md): signed checkpoints over records
// already synced, tiles and entry bundles in the C2SP tlog-tiles layout,
// tlog-proof inclusion proofs, and the check that recomputes a log from
// its rows (Verify). The trees themselves are the catalog's
// (docs/FORMAT.md, "Audit log tree").
package auditlog

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/translog"
	"github.com/vcon-server/vcon-server/seal"
)

// Logs signs and serves the catalog's logs under one Ed25519 key, each
// log under its own origin.
type Logs struct {
	Cat  *catalog.Catalog
	name string
	key  ed25519.PrivateKey
	mu   sync.Mutex    // one signing pass at a time
	poke chan struct{} // a pass asked for now (Poke)

	// Replicated, with a [replica], is the log point the replica holds,
	// false before it holds a generation: a checkpoint covers only
	// records already replicated. Nil without one.
	Replicated func() (seq int64, ok bool)
	// Published, when set, hears each checkpoint a pass recorded, once
	// its transaction committed: the bucket copy's cue (Copier.Poke). It
	// runs in the pass, so it must not wait.
	Published func(ctx context.Context, log []byte, size uint64, note []byte)
}

// Open makes the logs' signing key unless the catalog has one, sealed
// under the master key as the receipt key is (archive.EnsureKey), and
// opens it. name is the logs' name, the first part of every origin.
func Open(ctx context.Context, cat *catalog.Catalog, mk *seal.MasterKey, name string) (*Logs, error) {
	if err := translog.CheckOrigin(name + "/admin"); err != nil {
		return nil, fmt.Errorf("auditlog: the log name %q: set [audit_log] name to a host name such as vcon.example.com", name)
	}
	if _, err := archive.EnsureKey(ctx, cat, mk, catalog.PurposeLog); err != nil {
		return nil, err
	}
	key, err := archive.OpenKey(ctx, cat, mk, catalog.PurposeLog)
	if err != nil {
		return nil, err
	}
	return &Logs{Cat: cat, name: name, key: key, poke: make(chan struct{}, 1)}, nil
}

// Poke asks Run for a signing pass now rather than at its next tick:
// after a purge, an erasure or a tenant change, whose records a witness
// should see at once. It never waits; a nil Logs ignores it.
func (l *Logs) Poke() {
	if l == nil {
		return
	}
	select {
	case l.poke <- struct{}{}:
	default: // a pass is asked for already
	}
}

// Run signs a pass every interval, and at once when poked, until ctx
// ends; failed hears each pass's error.
func (l *Logs) Run(ctx context.Context, interval time.Duration, failed func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.poke:
		}
		if _, err := l.Sign(ctx); err != nil && ctx.Err() == nil {
			failed(err)
		}
	}
}

// Origin is the name of log: <name>/<tenant id>, or <name>/admin.
func Origin(name string, log []byte) string { return name + "/" + LogName(log) }

// LogName is the last part of log's origin: its tenant's id, or "admin".
func LogName(log []byte) string {
	if string(log) == string(catalog.AdminLogID) {
		return "admin"
	}
	return ids.ID(log).String()
}

// Origin is the name of log.
func (l *Logs) Origin(log []byte) string { return Origin(l.name, log) }

// VerifierKey is log's verifier key, named as its origin (C2SP signed-note).
func (l *Logs) VerifierKey(log []byte) string {
	return translog.VerifierKey(l.Origin(log), l.key.Public().(ed25519.PublicKey))
}

// Sign signs a checkpoint of every log grown since its last one, over the
// records committed when the pass began, once the catalog's log is synced
// (catalog.SyncLog): a record a power cut could take back is never
// signed. It returns how many it signed.
func (l *Logs) Sign(ctx context.Context) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sizes, err := l.Cat.LogSizes(ctx)
	if err != nil {
		return 0, err
	}
	if err := l.capReplicated(ctx, sizes); err != nil {
		return 0, err
	}
	signed, err := l.Cat.LogCheckpoints(ctx)
	if err != nil {
		return 0, err
	}
	for log, n := range sizes {
		s, ok := signed[log]
		if ok && s.Size >= n && bytes.HasPrefix(s.Note, []byte(l.Origin([]byte(log))+"\n")) {
			delete(sizes, log)
		}
	}
	// A log whose checkpoint names it otherwise (a new [audit_log] name)
	// is signed again under its name, over what it holds now.
	if len(sizes) == 0 {
		return 0, nil
	}
	if err := l.Cat.SyncLog(); err != nil {
		return 0, err
	}
	type cp struct {
		log  []byte
		size uint64
		note []byte
	}
	var notes []cp
	for log, n := range sizes {
		note, err := l.signAt(ctx, []byte(log), n)
		if err != nil {
			return 0, err
		}
		notes = append(notes, cp{[]byte(log), n, note})
	}
	crashpoint.Hit(crashpoint.LogAfterSign)
	// On a full disk the checkpoint waits for room: the reserve is the
	// deletes' (catalog.UpdateSpare).
	err = l.Cat.UpdateSpare(ctx, func(tx *catalog.Tx) error {
		for _, c := range notes {
			if err := tx.SetLogCheckpoint(c.log, c.size, c.note); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && l.Published != nil {
		for _, c := range notes {
			l.Published(ctx, c.log, c.size, c.note)
		}
	}
	return len(notes), err
}

// capReplicated lowers each log's size to the records the replica holds.
// The sizes were read first: a record appended since is in the replica's
// log too, so the cap never lets an unreplicated one through.
func (l *Logs) capReplicated(ctx context.Context, sizes map[string]uint64) error {
	if l.Replicated == nil {
		return nil
	}
	seq, ok := l.Replicated()
	if !ok {
		clear(sizes)
		return nil
	}
	held, err := l.Cat.LogUnreplicated(ctx, seq)
	if err != nil {
		return err
	}
	for log, first := range held {
		if n, ok := sizes[log]; ok && first < n {
			sizes[log] = first
		}
	}
	return nil
}

func (l *Logs) signAt(ctx context.Context, log []byte, size uint64) ([]byte, error) {
	root, err := translog.TreeHash(l.Cat.LogNodes(ctx, log), size)
	if err != nil {
		return nil, err
	}
	return translog.Sign(translog.Checkpoint{Origin: l.Origin(log), Size: size, Root: root}, l.key)
}

// Checkpoint is log's newest signed checkpoint and its size. A log with
// no checkpoint yet gets one at once: the empty log's, or, for records
// not signed yet, a signing pass's.
func (l *Logs) Checkpoint(ctx context.Context, log []byte) ([]byte, uint64, error) {
	size, note, err := l.Cat.LogCheckpoint(ctx, log)
	if errors.Is(err, catalog.ErrNotFound) || (err == nil && !bytes.HasPrefix(note, []byte(l.Origin(log)+"\n"))) {
		if _, err := l.Sign(ctx); err != nil {
			return nil, 0, err
		}
		size, note, err = l.Cat.LogCheckpoint(ctx, log)
		if errors.Is(err, catalog.ErrNotFound) {
			note, err = l.signAt(ctx, log, 0)
			return note, 0, err
		}
	}
	return note, size, err
}

// CheckpointAt is a signed checkpoint of log at size, one a signing pass
// made: the newest one when it is at size, else the same note made again
// (Ed25519 signs deterministically, so the bytes are the pass's unless
// the log's name changed since). A webhook's audit.checkpoint event is
// sent with it (its row keeps the size only). A size past the newest
// checkpoint's was never signed, and is refused.
func (l *Logs) CheckpointAt(ctx context.Context, log []byte, size uint64) (string, []byte, error) {
	origin := l.Origin(log)
	signed, note, err := l.Cat.LogCheckpoint(ctx, log)
	if err != nil {
		return "", nil, err
	}
	if size > signed {
		return "", nil, fmt.Errorf("auditlog: no checkpoint of %d records was signed (the newest covers %d)", size, signed)
	}
	if size == signed && bytes.HasPrefix(note, []byte(origin+"\n")) {
		return origin, note, nil
	}
	note, err = l.signAt(ctx, log, size)
	return origin, note, err
}

// ErrNoTile: a tile, bundle or record past the newest checkpoint, which
// a client cannot know of yet.
var ErrNoTile = errors.New("the log's newest checkpoint does not cover it: read the checkpoint first, and only what its size holds")

// Tile is the tile t of log (tlog-tiles): its hashes, or its entry
// bundle, each entry a big-endian uint16 length and the leaf's bytes.
// Any tile the newest checkpoint covers whole is served, a partial one of
// an earlier checkpoint's size too: nodes never change once written.
func (l *Logs) Tile(ctx context.Context, log []byte, t translog.Tile) ([]byte, error) {
	_, size, err := l.Checkpoint(ctx, log)
	if err != nil {
		return nil, err
	}
	level := uint(t.Level) * translog.TileHeight
	from := t.N * translog.TileWidth
	if t.Entries {
		level = 0
	}
	end := from + uint64(t.Width)
	if level >= 64 || end>>(64-level) != 0 || end<<level > size {
		return nil, ErrNoTile
	}
	if t.Entries {
		entries, err := l.Cat.LogEntries(ctx, log, from, t.Width)
		if err != nil {
			return nil, err
		}
		var b []byte
		for _, e := range entries {
			b = binary.BigEndian.AppendUint16(b, uint16(len(e)))
			b = append(b, e...)
		}
		return b, nil
	}
	return tileHashes(l.Cat.LogNodes(ctx, log), level, from, t.Width)
}

// tileHashes is a hash tile's bytes: width nodes of level from index from.
func tileHashes(nodes translog.NodeReader, level uint, from uint64, width int) ([]byte, error) {
	b := make([]byte, 0, width*translog.HashSize)
	for i := range uint64(width) {
		h, err := nodes.Node(int(level), from+i)
		if err != nil {
			return nil, err
		}
		b = append(b, h[:]...)
	}
	return b, nil
}

// Proof is the tlog-proof@v1 of the record at index of log against the
// newest checkpoint.
func (l *Logs) Proof(ctx context.Context, log []byte, index uint64) ([]byte, error) {
	note, size, err := l.Checkpoint(ctx, log)
	if err != nil {
		return nil, err
	}
	if index >= size {
		return nil, ErrNoTile
	}
	path, err := translog.InclusionProof(l.Cat.LogNodes(ctx, log), index, size)
	if err != nil {
		return nil, err
	}
	return translog.Proof(index, path, note), nil
}
