package archive

import (
	"context"
	"errors"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/search"
	"github.com/vcon-server/vcon-server/vcon"
)

// addTokens adds a new version's search tokens in the transaction that
// stores it, when its tenant has search on.
func addTokens(tx *catalog.Tx, tk *seal.TenantKey, v catalog.Version, m *vcon.Meta) error {
	t, err := tx.Tenant(v.Tenant)
	if err != nil || t.Search == vocab.SearchOff {
		return err
	}
	return tx.AddTokens(v.Tenant, v.ID, search.Tokens(tk.IndexKey(), m, t.Search))
}

// Search pages through a tenant's vCons whose current version matches
// every filter (field -> value; a subject filter, each of its words). An
// empty result is returned for a filter that normalises to nothing.
func (a *Archive) Search(ctx context.Context, tenant ids.ID, filters map[string]string, after ids.ID, limit int) ([]ids.ID, error) {
	tk, err := a.TenantKey(ctx, tenant)
	if err != nil {
		return nil, err
	}
	key := tk.IndexKey()
	var tokens [][16]byte
	for _, f := range search.Fields {
		v, ok := filters[f]
		if !ok {
			continue
		}
		ts, ok := search.Filter(key, f, v)
		if !ok {
			return nil, nil
		}
		tokens = append(tokens, ts...)
	}
	return a.Cat.Search(ctx, tenant, tokens, after, limit)
}

// IndexBacklog indexes, for each tenant whose search index is not built,
// up to batch of its kept versions after where it stopped; it returns how
// many versions it read. A crash loses at most one batch of work: the
// cursor is committed with the batch's tokens.
func (a *Archive) IndexBacklog(ctx context.Context, batch int) (int, error) {
	states, err := a.Cat.SearchBacklog(ctx)
	if err != nil {
		return 0, err
	}
	read := 0
	for _, s := range states {
		page, err := a.Cat.KeptPage(ctx, s.Tenant, s.Cursor, batch)
		if err != nil {
			return read, err
		}
		tk, err := a.TenantKey(ctx, s.Tenant)
		var own *TenantKeyError
		if errors.As(err, &own) {
			continue // its own key is revoked or unreachable: the others go on
		}
		if err != nil {
			return read, err
		}
		key := tk.IndexKey()
		found := make([][][16]byte, len(page))
		for i, v := range page {
			m, err := a.inspect(ctx, v)
			if err != nil {
				if errors.Is(err, ErrNotFound) {
					continue // purged meanwhile
				}
				a.logError("search index: a version could not be read", err)
				continue
			}
			found[i] = search.Tokens(key, m, s.Mode)
		}
		read += len(page)
		last := s.Cursor
		if len(page) > 0 {
			last = page[len(page)-1].ID
		}
		err = a.Cat.Update(ctx, func(tx *catalog.Tx) error {
			t, err := tx.Tenant(s.Tenant)
			if err != nil || t.Search != s.Mode {
				return err // the setting changed: this work is void
			}
			for i, v := range page {
				if err := tx.AddTokens(s.Tenant, v.ID, found[i]); err != nil {
					return err
				}
			}
			_, err = tx.SearchProgress(s.Tenant, s.Mode, last, len(page) < batch, tk.CheckValue())
			return err
		})
		if err != nil {
			return read, err
		}
	}
	return read, nil
}
