package catalog

import (
	"context"
	"strings"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
)

// The search index holds, per tenant, 16-byte tokens (keyed hashes of
// normalised party fields, package search) beside the version they came
// from. A query joins them to each vCon's current version, so a hidden
// version stops matching at once; a purge deletes its tokens in the same
// transaction that destroys its key.

// AddTokens records a version's tokens, unless its purge started (the
// background indexer may read a version a purge then takes).
func (tx *Tx) AddTokens(tenant, version ids.ID, tokens [][16]byte) error {
	for _, t := range tokens {
		_, err := tx.exec(`INSERT OR IGNORE INTO search_tokens(tenant, token, uuid, version)
			SELECT ?, ?, uuid, id FROM versions WHERE id = ? AND purge = 0`, tenant[:], t[:], version[:])
		if err != nil {
			return err
		}
	}
	return nil
}

func (tx *Tx) dropTokens(version ids.ID) error {
	_, err := tx.exec(`DELETE FROM search_tokens WHERE version = ?`, version[:])
	return err
}

// SetSearch changes a tenant's search setting, recorded in both logs. A
// change drops the tenant's index; a setting other than off has it
// rebuilt in the background from the first version.
func (c *Catalog) SetSearch(ctx context.Context, id ids.ID, mode vocab.SearchMode, by Actor) (Tenant, error) {
	return c.changeTenant(ctx, id, by, "tenant_search", "search_setting", func(tx *Tx) error {
		t, err := tx.Tenant(id)
		if err != nil {
			return err
		}
		if t.Search == mode {
			return nil
		}
		if _, err := tx.exec(`DELETE FROM search_tokens WHERE tenant = ?`, id[:]); err != nil {
			return err
		}
		_, err = tx.exec(`UPDATE tenants SET search = ?, search_cursor = NULL, search_built = 0, search_key_check = NULL WHERE id = ?`, string(mode), id[:])
		return err
	})
}

// SearchState is where a tenant's background indexing stands.
type SearchState struct {
	Tenant ids.ID
	Mode   vocab.SearchMode
	Cursor ids.ID // the last version indexed; zero before the first
	Built  bool
}

// SearchBacklog lists the tenants whose index is not built yet.
func (c *Catalog) SearchBacklog(ctx context.Context) ([]SearchState, error) {
	return queryAll(ctx, c.db, "search backlog", func(r row) (SearchState, error) {
		var s SearchState
		var id, cursor []byte
		if err := r.Scan(&id, &s.Mode, &cursor); err != nil {
			return s, err
		}
		copy(s.Tenant[:], id)
		copy(s.Cursor[:], cursor)
		return s, nil
	}, `SELECT id, search, search_cursor FROM tenants WHERE search <> 'off' AND search_built = 0`+notDeleting+` ORDER BY id`)
}

// SearchProgress records how far a tenant's background indexing went,
// unless its setting changed meanwhile (then the work is thrown away).
func (tx *Tx) SearchProgress(tenant ids.ID, mode vocab.SearchMode, cursor ids.ID, built bool, keyCheck []byte) (bool, error) {
	res, err := tx.exec(`UPDATE tenants SET search_cursor = ?, search_built = ?, search_key_check = ? WHERE id = ? AND search = ?`,
		cursor[:], built, keyCheck, tenant[:], string(mode))
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// Search pages through a tenant's vCons whose current version has every
// token, in uuid order after the given uuid.
func (c *Catalog) Search(ctx context.Context, tenant ids.ID, tokens [][16]byte, after ids.ID, limit int) ([]ids.ID, error) {
	if len(tokens) == 0 {
		return nil, nil
	}
	args := []any{tenant[:], tokens[0][:], after[:]}
	for _, t := range tokens[1:] {
		args = append(args, t[:])
	}
	return queryAll(ctx, c.db, "search results", scanID, searchQuery(len(tokens)), append(args, limit)...)
}

// searchQuery pages through the vCons whose current version has n tokens,
// by uuid: the first token's rows of the primary key, (tenant, token,
// uuid, version), from the cursor on, each looked up in vcons and, for
// every other token, in the primary key again. CROSS JOIN keeps the
// tokens the outer loop, whatever statistics SQLite has: it would else
// read every vCon of the tenant, in uuid order, for a token a few hold.
func searchQuery(n int) string {
	var q strings.Builder
	q.WriteString(`SELECT s.uuid FROM search_tokens s
	CROSS JOIN vcons c ON c.tenant = s.tenant AND c.uuid = s.uuid AND c.current = s.version
	WHERE s.tenant = ? AND s.token = ? AND s.uuid > ?`)
	for range n - 1 {
		q.WriteString(`
	AND EXISTS (SELECT 1 FROM search_tokens s2 WHERE s2.tenant = s.tenant AND s2.token = ? AND s2.uuid = s.uuid AND s2.version = s.version)`)
	}
	q.WriteString(`
	ORDER BY s.uuid LIMIT ?`)
	return q.String()
}
