package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
)

// The catalog counts its purges in meta (key "purges"): one more in every
// transaction that destroys data keys. Storage keeps the count as it stood
// before the purge's tombstones were written, so a start that finds a
// higher count in storage than in the catalog knows the catalog was
// restored from an older copy (docs/FORMAT.md, "Purge of an object",
// "Restore"). A catalog without the key has never been started by a
// server that counts: what it missed is unknown.

const metaPurges = "purges"

// PurgeCount reads the catalog's count of purges; known is false when the
// catalog has none recorded yet.
func (c *Catalog) PurgeCount(ctx context.Context) (n int64, known bool, err error) {
	var v []byte
	err = c.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, metaPurges).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("catalog: read the purge count: %w", err)
	}
	n, err = strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("catalog: the purge count %q is not a number", v)
	}
	return n, true, nil
}

// CountPurge adds one to the count of purges, in the transaction that
// destroys their keys, and returns the new count.
func (tx *Tx) CountPurge() (int64, error) {
	n, _, err := tx.purgeCount()
	if err != nil {
		return 0, err
	}
	n++
	return n, tx.SetMeta(metaPurges, []byte(strconv.FormatInt(n, 10)))
}

// RaisePurgeCount records a count of purges of at least n; a count is
// never lowered.
func (tx *Tx) RaisePurgeCount(n int64) error {
	have, known, err := tx.purgeCount()
	if err != nil {
		return err
	}
	if known && have >= n {
		return nil
	}
	return tx.SetMeta(metaPurges, []byte(strconv.FormatInt(max(have, n), 10)))
}

func (tx *Tx) purgeCount() (n int64, known bool, err error) {
	var v []byte
	err = tx.queryRow(`SELECT value FROM meta WHERE key = ?`, metaPurges).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	n, err = strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("catalog: the purge count %q is not a number", v)
	}
	return n, true, nil
}
