package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/jws"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/parquetstore"
	"github.com/vcon-server/vcon-server/vcon"
	"github.com/vcon-server/vcon-server/vcon/lawfulbasis"
)

// process fetches a batch of versions, checks in one catalog read that
// their keys still exist, and makes their rows. It runs on a worker;
// errors name the version id (an operator's handle, never vCon content).
func (x *run) process(ctx context.Context, j *job) {
	var arrived []ids.ID
	for i := range j.items {
		it := &j.items[i]
		if it.withheld {
			continue
		}
		sealed, gone, err := x.fetch(ctx, it.v)
		if err != nil {
			j.err = err
			return
		}
		if gone {
			it.skip = true
			continue
		}
		it.row = parquetstore.ExportRow{Version: it.v.ID, StoredAt: it.v.StoredAt, Sealed: sealed}
		arrived = append(arrived, it.v.ID)
	}
	if x.opt.AfterFetch != nil {
		for _, it := range j.items {
			if !it.skip && !it.withheld {
				x.opt.AfterFetch(it.v)
			}
		}
	}
	// The keys are looked up again only now that the bytes are here: a
	// purge destroys the key first, so a version whose key still exists at
	// this point was kept when its bytes were read (docs/FORMAT.md,
	// invariant 4). The clear columns are read with the key found now.
	kept, err := x.opt.Archive.Cat.KeptVersions(ctx, arrived)
	if err != nil {
		j.err = err
		return
	}
	for i := range j.items {
		it := &j.items[i]
		if it.skip || it.withheld {
			continue
		}
		cur, ok := kept[it.v.ID]
		if !ok {
			putSealed(it.row.Sealed)
			it.skip, it.row = true, parquetstore.ExportRow{}
			continue
		}
		if x.level == vocab.LevelNone {
			continue
		}
		if x.columns.Signers {
			it.row.Signers = signersOf(cur.Signers)
		}
		m, ok := x.inspect(ctx, it.row.Sealed, cur)
		if !ok {
			it.unread = true
			continue
		}
		fill(&it.row, x.level, m, cur.Lawful)
	}
}

// fetch reads the sealed bytes of v whole. A store that answers "not
// found" gets v looked up again: it may have been packed or moved meanwhile
// (retry at its new place), or purged (gone: true). A read cut short is
// fetched again before anything is called damaged: a connection can break
// part way.
func (x *run) fetch(ctx context.Context, v catalog.Version) (sealed []byte, gone bool, err error) {
	reads := 0
	for attempt := 0; ; attempt++ {
		rc, err := x.opt.Archive.Sealed(ctx, v)
		if err == nil {
			b, err := readExactly(rc, v.SealedSize)
			rc.Close()
			if err != nil {
				if reads++; reads < 4 && ctx.Err() == nil {
					time.Sleep(time.Duration(reads) * 100 * time.Millisecond)
					attempt--
					continue
				}
				return nil, false, fmt.Errorf("export: read the sealed bytes of version %s: %w", v.ID, err)
			}
			return b, false, nil
		}
		if !errors.Is(err, objstore.ErrNotFound) {
			return nil, false, fmt.Errorf("export: read the sealed bytes of version %s: %w", v.ID, err)
		}
		cur, lerr := x.opt.Archive.Cat.Version(ctx, v.ID)
		if errors.Is(lerr, catalog.ErrNotFound) || (lerr == nil && cur.Purge != catalog.Kept) {
			return nil, true, nil
		}
		if lerr != nil {
			return nil, false, lerr
		}
		moved := cur.Location != v.Location || cur.PackKey != v.PackKey || cur.PackOffset != v.PackOffset
		if !moved || attempt >= 3 {
			return nil, false, fmt.Errorf("export: the sealed bytes of version %s are missing from %s while the catalog keeps the version; run vcon-server check with the server stopped", v.ID, x.opt.Archive.Objects)
		}
		cur.Current = v.Current
		v = cur
	}
}

// readExactly reads exactly n bytes and proves the stream ends there.
func readExactly(r io.Reader, n int64) ([]byte, error) {
	b := getSealed(n)
	if _, err := io.ReadFull(r, b); err != nil {
		putSealed(b)
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("damaged: fewer than the %d bytes the catalog records", n)
		}
		return nil, err
	}
	var one [1]byte
	if m, _ := io.ReadFull(r, one[:]); m > 0 {
		putSealed(b)
		return nil, fmt.Errorf("damaged: more than the %d bytes the catalog records", n)
	}
	return b, nil
}

// inspect opens the sealed bytes with the version's data key and reads the
// body's metadata. Any failure (a damaged object, a body the inspector now
// refuses) is reported as not ok, and counted as unread by the caller; the
// reason is not kept, since it could quote the body.
func (x *run) inspect(ctx context.Context, sealed []byte, v catalog.Version) (*vcon.Meta, bool) {
	m, err := x.opt.Archive.Inspect(ctx, bytes.NewReader(sealed), v, x.opt.MaxVconSize)
	if err != nil {
		return nil, false
	}
	return m, true
}

// fill sets the clear columns of level from m, and the lawful basis from
// lb, the version's own as the catalog keeps it (docs/FORMAT.md, "Lawful
// basis"), which decisions read. An encrypted vCon shows only form, gzip,
// size and, at full, uuid; a count the inspector could not read
// (CountUnknown), a time that is absent or has no zone, and a basis that
// is none or unknown stay NULL.
func fill(r *parquetstore.ExportRow, level vocab.Level, m *vcon.Meta, lb lawfulbasis.Summary) {
	rank := levelRank(level)
	form, gz, size := string(m.Form), m.Gzip, m.Size
	r.Form, r.Gzip, r.Size = &form, &gz, &size
	if rank >= levelRank(vocab.LevelFull) {
		if id, err := ids.Parse(m.UUID); err == nil {
			r.UUID = &id
		}
	}
	if m.Form == vocab.FormEncrypted {
		return
	}
	if rank >= levelRank(vocab.LevelTimes) {
		r.CreatedAt, r.UpdatedAt = m.CreatedAt, m.UpdatedAt
	}
	if rank >= levelRank(vocab.LevelCounts) {
		r.PartyCount, r.DialogCount = count(m.PartyCount), count(m.DialogCount)
		if lb.Basis != lawfulbasis.Unknown {
			r.LawfulBasis = text(lb.Basis)
		}
		r.ExpiresAt = lb.Expires
	}
	if rank >= levelRank(vocab.LevelFull) {
		r.Subject = m.Subject
		if m.PartyCount != vcon.CountUnknown {
			// Read parties: a list, empty when the vCon has none.
			r.Parties = make([]parquetstore.Party, len(m.Parties))
			for i, p := range m.Parties {
				r.Parties[i] = parquetstore.Party{Tel: text(p.Tel), Mailto: text(p.Mailto), Name: text(p.Name)}
			}
		}
	}
}

func levelRank(l vocab.Level) int {
	for i, x := range vocab.Levels {
		if x == l {
			return i
		}
	}
	return -1
}

func count(n int) *int32 {
	if n < 0 {
		return nil
	}
	c := int32(min(n, 1<<31-1))
	return &c
}

func text(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// signersOf is the signers column of a version, from the catalog's record
// of what its signatures were verified to: nil (NULL) when none was
// checked, or when the record does not read.
func signersOf(record string) []parquetstore.Signer {
	var signers []jws.Signer
	if record == "" || json.Unmarshal([]byte(record), &signers) != nil {
		return nil
	}
	out := make([]parquetstore.Signer, len(signers))
	for i, s := range signers {
		out[i] = parquetstore.Signer{Fingerprint: s.Fingerprint, Subject: s.Subject, Issuer: s.Issuer, NotAfter: s.NotAfter, Alg: s.Alg, Anchor: s.Anchor}
	}
	return out
}
