package auditlog

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/translog"
)

// A Saved is a checkpoint kept outside the catalog (by a tenant, a
// witness) that a log must be consistent with; Name says where it came
// from, for the report.
type Saved struct {
	Name string
	Note []byte
}

// Report is what Verify found of a sound log.
type Report struct {
	Origin  string
	Records uint64 // rows of the log
	Signed  uint64 // the size of the newest checkpoint
	Saved   int    // saved checkpoints found consistent
}

// ErrTampered: the log's rows are not what its tree and checkpoints
// signed; the message names the first record that differs.
var ErrTampered = errors.New("the audit log was changed")

// Verify recomputes log's tree from its rows, each leaf from the row's
// columns (docs/audit-log.md, "Checking a log"): each leaf must be the
// one the tree appended for that row, the newest signed checkpoint must
// verify under the catalog's log key and be the root of the records it
// covers, and each saved checkpoint must verify and be the root of the
// records it covers, so that the log extends it. The first difference is
// an ErrTampered naming the record.
func Verify(ctx context.Context, cat *catalog.Catalog, name string, log []byte, saved []Saved) (Report, error) {
	rep := Report{Origin: Origin(name, log)}
	keys, err := cat.SigningKeysFor(ctx, catalog.PurposeLog)
	if err != nil {
		return rep, err
	}
	// A catalog no server has served yet has no log key, and no
	// checkpoint: its rows and leaves are checked all the same.
	var pub ed25519.PublicKey
	if len(keys) > 0 {
		pub = ed25519.PublicKey(keys[len(keys)-1].Public)
	} else if len(saved) > 0 {
		return rep, errors.New("auditlog: the catalog holds no log signing key, so no checkpoint can be of its logs: start the server once (serve makes it), or give the catalog the checkpoints were signed for")
	}
	var wants []want
	cp, err := newestCheckpoint(ctx, cat, log, rep.Origin, pub)
	if err != nil {
		return rep, err
	}
	if cp != nil {
		rep.Signed = cp.Size
		wants = append(wants, want{"the newest checkpoint", *cp})
	}
	for _, s := range saved {
		cp, err := translog.Open(s.Note, rep.Origin, pub)
		if err != nil {
			return rep, fmt.Errorf("auditlog: the checkpoint %s is not one of this log's under its key: %w", s.Name, err)
		}
		wants = append(wants, want{"the checkpoint " + s.Name, cp})
	}
	roots := map[uint64]translog.Hash{0: translog.EmptyRoot}
	for _, w := range wants {
		if w.cp.Size > 0 { // the empty tree's root is known; a checkpoint of none is signed while the replica holds no record yet
			roots[w.cp.Size] = translog.Hash{}
		}
	}
	var edge translog.Edge
	var scratch []byte // the stored hashes Append gives, unused here
	var n uint64
	var first error // the first record whose row differs from its leaf
	err = cat.LogRows(ctx, log, func(r catalog.LogRow) error {
		if r.ID == 0 {
			if first == nil {
				first = fmt.Errorf("%w: record %d is missing: the tree holds its leaf (appended for row id %d) but the catalog has no row there", ErrTampered, r.Index, r.StoredID)
			}
			return nil
		}
		leaf := translog.LeafHash(r.Leaf)
		if first == nil {
			first = rowDiffers(r, leaf)
		}
		scratch = edge.Append(scratch[:0], n, leaf)
		n++
		if _, ok := roots[n]; ok {
			roots[n] = edge.Root()
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	rep.Records = n
	if first != nil {
		return rep, first
	}
	for _, w := range wants {
		if w.cp.Size > n {
			return rep, fmt.Errorf("%w: %s covers %d records, the catalog holds %d: record %d onwards is missing", ErrTampered, w.what, w.cp.Size, n, n)
		}
		if roots[w.cp.Size] != w.cp.Root {
			return rep, fmt.Errorf("%w: the first %d records do not hash to the root of %s: the rows and their tree were both changed", ErrTampered, w.cp.Size, w.what)
		}
	}
	rep.Saved = len(saved)
	return rep, nil
}

// A want is a checkpoint the rows must hash to, named for the report.
type want struct {
	what string
	cp   translog.Checkpoint
}

// newestCheckpoint is the catalog's newest checkpoint of log, verified
// under pub and against the size recorded beside it; nil when none was
// signed yet.
func newestCheckpoint(ctx context.Context, cat *catalog.Catalog, log []byte, origin string, pub ed25519.PublicKey) (*translog.Checkpoint, error) {
	size, note, err := cat.LogCheckpoint(ctx, log)
	if errors.Is(err, catalog.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(note, []byte(origin+"\n")) {
		return nil, fmt.Errorf("auditlog: the newest checkpoint in the catalog names the log otherwise than %s: after a change of [audit_log] name, start the server once, which signs the log again under its name", origin)
	}
	if pub == nil {
		return nil, fmt.Errorf("%w: the catalog holds a checkpoint of the log but no log signing key to verify it with: the key's row was deleted", ErrTampered)
	}
	cp, err := translog.Open(note, origin, pub)
	if err != nil {
		return nil, fmt.Errorf("%w: the newest checkpoint in the catalog does not verify: %w", ErrTampered, err)
	}
	if cp.Size != size {
		return nil, fmt.Errorf("%w: the newest checkpoint is recorded over %d records but signs %d", ErrTampered, size, cp.Size)
	}
	return &cp, nil
}

// rowDiffers says how row r differs from the leaf the tree appended for
// it, or nil when it does not.
func rowDiffers(r catalog.LogRow, leaf translog.Hash) error {
	switch {
	case !r.HasStored:
		return fmt.Errorf("%w: record %d (row id %d) has no leaf in the tree: it was added outside vcon-server", ErrTampered, r.Index, r.ID)
	case r.StoredID != r.ID:
		return fmt.Errorf("%w: record %d is row id %d, but the tree appended it for row id %d: a record before it was deleted, or rows were moved", ErrTampered, r.Index, r.ID, r.StoredID)
	case leaf != r.Stored:
		return fmt.Errorf("%w: record %d (row id %d) differs from the leaf appended for it: a column of its row was changed", ErrTampered, r.Index, r.ID)
	}
	return nil
}
