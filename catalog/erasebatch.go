package catalog

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"runtime"
	"slices"
	"strings"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
)

// An erasure takes its vCons in batches (docs/FORMAT.md, "Erasure"): its
// first transaction records it and what it will take, one erase_todo row
// per batch; each later transaction takes one batch and deletes its row.
// No transaction of an erasure holds the writer for long, so another
// tenant's store waits for one batch at most, and a start finishes the
// batches a crash left.

// EraseBatch is the most vCons one transaction of an erasure takes. A
// batch of never-stored uuids is that many index lookups; one of stored
// vCons, a few statements each: a few milliseconds either way.
const EraseBatch = 250

// BeginErasure is an erasure's first transaction: it chooses what the
// erasure takes (a party filter is looked up in the index here, and one
// that matches more than the limit refused before anything changed) and
// records the erasure and its batches. Nothing is hidden nor destroyed
// yet: the batches do that (EraseBatch).
func (tx *Tx) BeginErasure(r EraseRequest) (Erasure, error) {
	e := Erasure{ID: r.ID, Tenant: r.Tenant, Kind: r.Kind, Actor: r.Actor, Label: r.Label, RequestedAt: tx.now, Unsearchable: r.Unsearchable}
	var matched map[ids.ID][]ids.ID
	var err error
	if r.ExpiredBefore != nil {
		e.Reason = ReasonLawfulExpired
		matched, err = tx.expiredMatches(r)
	} else {
		matched, err = tx.eraseMatches(r)
	}
	if err != nil {
		return e, err
	}
	uuids := make([]ids.ID, 0, len(matched))
	for u := range matched {
		uuids = append(uuids, u)
	}
	slices.SortFunc(uuids, func(a, b ids.ID) int { return bytes.Compare(a[:], b[:]) })
	if _, err := tx.exec(`INSERT INTO erasures(id, tenant, kind, actor, label, requested_at, unsearchable, not_found, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID[:], e.Tenant[:], e.Kind, e.Actor, e.Label, nanos(e.RequestedAt), e.Unsearchable, r.NotFound, nullString(e.Reason)); err != nil {
		return e, err
	}
	e.NotFound = r.NotFound
	for n := 0; n*EraseBatch < len(uuids); n++ {
		var b []byte
		for _, u := range uuids[n*EraseBatch : min((n+1)*EraseBatch, len(uuids))] {
			if r.Token == nil {
				b = append(b, u[:]...)
				continue
			}
			versions := matched[u]
			slices.SortFunc(versions, func(a, b ids.ID) int { return bytes.Compare(a[:], b[:]) })
			for _, v := range versions {
				b = append(append(b, u[:]...), v[:]...)
			}
		}
		if _, err := tx.exec(`INSERT INTO erase_todo(erasure, batch, entries) VALUES (?, ?, ?)`, e.ID[:], n, b); err != nil {
			return e, err
		}
	}
	e.Running = len(uuids) > 0
	return e, nil
}

// eraseMatches is what an erasure takes: each uuid named (nil: the whole
// vCon), or each vCon with the versions whose index holds the token.
func (tx *Tx) eraseMatches(r EraseRequest) (map[ids.ID][]ids.ID, error) {
	matched := map[ids.ID][]ids.ID{}
	if r.Token == nil {
		if len(r.UUIDs)+r.NotFound > r.Limit {
			return nil, &TooManyError{Matched: len(r.UUIDs) + r.NotFound, Limit: r.Limit}
		}
		for _, u := range r.UUIDs {
			matched[u] = nil
		}
		return matched, nil
	}
	t, err := tx.Tenant(r.Tenant)
	if err != nil {
		return nil, err
	}
	if t.Search == vocab.SearchOff {
		return nil, ErrSearchOff
	}
	if !tx.searchBuilt(r.Tenant) {
		return nil, ErrIndexIncomplete
	}
	err = eachRow(tx.ctx, tx.tx, "the token's vCons", func(rw row) error {
		var u, v []byte
		if err := rw.Scan(&u, &v); err != nil {
			return err
		}
		uuid := ids.ID(u)
		if _, ok := matched[uuid]; !ok && len(matched) == r.Limit {
			return &TooManyError{Matched: r.Limit + 1, Limit: r.Limit}
		}
		matched[uuid] = append(matched[uuid], ids.ID(v))
		return nil
	}, `SELECT uuid, version FROM search_tokens WHERE tenant = ? AND token = ? ORDER BY uuid`, r.Tenant[:], r.Token[:])
	if err != nil {
		return nil, err
	}
	return matched, nil
}

// EraseBatch takes the next batch of an erasure in one transaction: it
// hides the vCons taken whole, destroys the keys of every version taken
// whatever the retention (a hold still wins: a held vCon is listed and
// left as it is), counts the purge, records the uuids taken and counts
// those the tenant holds nothing of, and deletes the batch. It returns
// whether a batch is left, and the versions whose key it destroyed.
func (tx *Tx) EraseBatch(id ids.ID) (more bool, destroyed []Version, err error) {
	var tb []byte
	var kind, actor string
	if err := tx.queryRow(`SELECT tenant, kind, actor FROM erasures WHERE id = ?`, id[:]).Scan(&tb, &kind, &actor); err != nil {
		return false, nil, err
	}
	tenant, byUUID := ids.ID(tb), kind == "uuids"
	var batch int64
	var entries []byte
	err = tx.queryRow(qNextBatch, id[:]).Scan(&batch, &entries)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, err
	}
	uuids, matched := todoEntries(entries, byUUID)
	notFound := 0
	for _, u := range uuids {
		item, took, err := tx.eraseOne(tenant, u, matched[u], byUUID)
		if err != nil {
			return false, nil, err
		}
		if item == nil {
			if byUUID {
				notFound++
			}
			continue
		}
		if _, err := tx.exec(`INSERT INTO erased(erasure, tenant, uuid, versions, whole, held) VALUES (?, ?, ?, ?, ?, ?)`,
			id[:], tenant[:], item.UUID[:], item.Versions, item.Whole, item.Held); err != nil {
			return false, nil, err
		}
		destroyed = append(destroyed, took...)
	}
	if len(destroyed) > 0 {
		if _, err := tx.CountPurge(); err != nil {
			return false, nil, err
		}
	}
	for _, v := range destroyed {
		// Each purge is in the tenant's log as a sweep's is, labelled
		// with what overrode the retention.
		if err := tx.Audit(v.Tenant, Record{Actor: actor, Label: "erasure", Action: "purge", Target: v.UUID.String(), Status: 200}); err != nil {
			return false, nil, err
		}
	}
	if notFound > 0 {
		if _, err := tx.exec(`UPDATE erasures SET not_found = not_found + ? WHERE id = ?`, notFound, id[:]); err != nil {
			return false, nil, err
		}
	}
	if _, err := tx.exec(`DELETE FROM erase_todo WHERE erasure = ? AND batch = ?`, id[:], batch); err != nil {
		return false, nil, err
	}
	err = tx.queryRow(`SELECT EXISTS (SELECT 1 FROM erase_todo WHERE erasure = ?)`, id[:]).Scan(&more)
	return more, destroyed, err
}

// qNextBatch is an erasure's first batch still to take.
const qNextBatch = `SELECT batch, entries FROM erase_todo WHERE erasure = ? ORDER BY batch LIMIT 1`

// todoEntries reads a batch's entries: 16-byte uuids for a uuids
// erasure, 32-byte pairs of uuid and matched version for a party's, in
// uuid order.
func todoEntries(b []byte, byUUID bool) ([]ids.ID, map[ids.ID]map[ids.ID]bool) {
	var uuids []ids.ID
	matched := map[ids.ID]map[ids.ID]bool{}
	size := 32
	if byUUID {
		size = 16
	}
	for ; len(b) >= size; b = b[size:] {
		u := ids.ID(b[:16])
		if len(uuids) == 0 || uuids[len(uuids)-1] != u {
			uuids = append(uuids, u)
		}
		if !byUUID {
			if matched[u] == nil {
				matched[u] = map[ids.ID]bool{}
			}
			matched[u][ids.ID(b[16:32])] = true
		}
	}
	return uuids, matched
}

// RunErasure takes the batches of an erasure that wait, one transaction
// each, and returns the versions whose key they destroyed. between runs
// after each batch that leaves another. The erasures running at once take
// turns: a commit of the writer holds one batch at most, whatever else it
// holds, so a store waits for one batch at most however many erasures
// run.
func (c *Catalog) RunErasure(ctx context.Context, id ids.ID, between func()) ([]Version, error) {
	var all []Version
	for {
		var more bool
		var took []Version
		done := c.EraseTurn()
		err := c.Update(ctx, func(tx *Tx) error {
			var err error
			more, took, err = tx.EraseBatch(id)
			return err
		})
		done()
		if err != nil {
			return all, err
		}
		all = append(all, took...)
		if !more {
			return all, nil
		}
		if between != nil {
			between()
		}
	}
}

// EraseTurn waits for the erasures' turn and returns its end. The steps
// of an erasure that keep a core or the writer busy for a while (reading
// its uuids, looking them up, each batch) take turns across every erasure
// of the process, so that however many run at once they keep one core
// and one batch of the writer at most, and every other request finds the
// rest.
func (c *Catalog) EraseTurn() func() {
	c.eraseTurn.Lock()
	return c.eraseTurn.Unlock
}

// knownChunk is how many uuids one query of Known looks up.
const knownChunk = 500

// Known returns the uuids of uuids the tenant holds something of (a vCon
// or a hold), in their order, reading outside any write: a uuids erasure
// leaves the others out before its first transaction, so that uuids the
// tenant never stored cost the writer nothing but their count.
func (c *Catalog) Known(ctx context.Context, tenant ids.ID, uuids []ids.ID) ([]ids.ID, error) {
	defer c.EraseTurn()()
	known := map[ids.ID]bool{}
	for i := 0; i < len(uuids); i += knownChunk {
		runtime.Gosched() // a request that became ready meanwhile goes first
		chunk := uuids[i:min(i+knownChunk, len(uuids))]
		args := make([]any, 0, len(chunk)+1)
		args = append(args, tenant[:])
		for _, u := range chunk {
			args = append(args, u[:])
		}
		got, err := queryAll(ctx, c.db, "the uuids to look up", scanID, `SELECT uuid FROM vcons WHERE tenant = ? AND uuid IN (?`+strings.Repeat(", ?", len(chunk)-1)+`)`, args...)
		if err != nil {
			return nil, err
		}
		for _, u := range got {
			known[u] = true
		}
	}
	out := make([]ids.ID, 0, len(known))
	for _, u := range uuids {
		if known[u] {
			out = append(out, u)
		}
	}
	return out, nil
}
