package catalog

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// A tenant removed for good (docs/FORMAT.md, "Tenant delete"): one
// transaction destroys its key and marks it deleting (tenant_deletions),
// later ones delete its rows a page at a time, the tenants row last; the
// deletion's row stays, with its receipt.

// TenantDeletion is a row of tenant_deletions.
type TenantDeletion struct {
	ID          ids.ID
	Tenant      ids.ID
	Actor       string
	Label       string
	RequestedAt time.Time
	Vcons       int
	Versions    int
	// Digest is the lowercase hex SHA-256 of one line per vCon of the
	// tenant, in uuid order, as an erasure's receipt lists erased ones:
	// "erased UUID VERSIONS true\n".
	Digest string
	// KMSKey is the KMS key of the tenant's own that wrapped its key,
	// until its deletion is scheduled; empty with the master key.
	// KMSService is the [kms.tenant.NAME] table that reaches it (empty:
	// [kms]'s own).
	KMSKey, KMSService string
	RowsDoneAt         *time.Time
	DoneAt             *time.Time
	Receipt            string
}

// HeldError refuses the delete of a tenant with vCons under legal hold.
type HeldError struct{ Held int }

func (e *HeldError) Error() string {
	return fmt.Sprintf("catalog: %d of the tenant's vCons are under legal hold", e.Held)
}

// BeginTenantDelete is the first step of a tenant's delete, in one
// transaction: refused (*HeldError) while any of its vCons is held; else
// its key row deleted, its webhook and its API keys' use ended (revoked),
// the deletion written with the tenant's counts and digest, and the admin
// log's record. It returns the deletion and the key row it deleted (for
// a KMS key of the tenant's own to be scheduled for deletion).
func (c *Catalog) BeginTenantDelete(ctx context.Context, tenant ids.ID, by Actor) (TenantDeletion, TenantKey, error) {
	var d TenantDeletion
	var k TenantKey
	err := c.Update(ctx, func(tx *Tx) error {
		if _, err := tx.Tenant(tenant); err != nil {
			return err
		}
		var held int
		if err := tx.queryRow(`SELECT count(*) FROM vcons WHERE tenant = ? AND held = 1`, tenant[:]).Scan(&held); err != nil {
			return fmt.Errorf("catalog: count held vCons: %w", err)
		}
		if held > 0 {
			return &HeldError{Held: held}
		}
		k = TenantKey{Tenant: tenant}
		var kms, service sql.NullString
		err := tx.queryRow(`SELECT wrapped, key_check, kms_key, kms_service FROM tenant_keys WHERE tenant = ?`, tenant[:]).Scan(&k.Wrapped, &k.Check, &kms, &service)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("catalog: read tenant key: %w", err)
		}
		k.KMSKey, k.KMSService = kms.String, service.String
		d = TenantDeletion{ID: ids.NewRandom(), Tenant: tenant, Actor: by.Name, Label: by.Label, RequestedAt: tx.now, KMSKey: k.KMSKey, KMSService: k.KMSService}
		if d.Vcons, d.Versions, d.Digest, err = tx.tenantDigest(tenant); err != nil {
			return err
		}
		stmts := []string{
			`DELETE FROM tenant_keys WHERE tenant = ?`,
			`DELETE FROM webhooks WHERE tenant = ?`,
		}
		for _, q := range stmts {
			if _, err := tx.exec(q, tenant[:]); err != nil {
				return fmt.Errorf("catalog: begin the tenant's delete: %w", err)
			}
		}
		if _, err := tx.exec(`UPDATE keys SET revoked_at = ? WHERE tenant = ? AND revoked_at IS NULL`, nanos(tx.now), tenant[:]); err != nil {
			return fmt.Errorf("catalog: revoke the tenant's keys: %w", err)
		}
		if _, err := tx.exec(`INSERT INTO tenant_deletions(id, tenant, actor, label, requested_at, vcons, versions, digest, kms_key, kms_service)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, d.ID[:], tenant[:], d.Actor, d.Label, nanos(d.RequestedAt),
			d.Vcons, d.Versions, d.Digest, nullString(d.KMSKey), nullString(d.KMSService)); err != nil {
			return fmt.Errorf("catalog: record the tenant's delete: %w", err)
		}
		return tx.record(by, &tenant, "tenant_delete", "", fmt.Sprintf("deletion=%s vcons=%d versions=%d", d.ID, d.Vcons, d.Versions))
	})
	return d, k, err
}

// tenantDigest counts a tenant's vCons and versions and hashes their
// lines in uuid order, reading versions_by_uuid only.
func (tx *Tx) tenantDigest(tenant ids.ID) (vcons, versions int, digest string, err error) {
	h := sha256.New()
	err = eachRow(tx.ctx, tx.tx, "the tenant's vCons", func(r row) error {
		var u []byte
		var n int
		if err := r.Scan(&u, &n); err != nil {
			return err
		}
		var id ids.ID
		copy(id[:], u)
		h.Write([]byte("erased " + id.String() + " " + strconv.Itoa(n) + " true\n"))
		vcons++
		versions += n
		return nil
	}, `SELECT uuid, count(*) FROM versions WHERE tenant = ? GROUP BY uuid ORDER BY uuid`, tenant[:])
	if err != nil {
		return 0, 0, "", err
	}
	return vcons, versions, hex.EncodeToString(h.Sum(nil)), nil
}

const deletionCols = `id, tenant, actor, label, requested_at, vcons, versions, digest, kms_key, kms_service, rows_done_at, done_at, receipt`

func scanDeletion(r row) (TenantDeletion, error) {
	var d TenantDeletion
	var id, tenant []byte
	var requested int64
	var kms, service, receipt sql.NullString
	var rowsDone, done sql.NullInt64
	if err := r.Scan(&id, &tenant, &d.Actor, &d.Label, &requested, &d.Vcons, &d.Versions, &d.Digest, &kms, &service, &rowsDone, &done, &receipt); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return d, ErrNotFound
		}
		return d, fmt.Errorf("catalog: read a tenant's deletion: %w", err)
	}
	copy(d.ID[:], id)
	copy(d.Tenant[:], tenant)
	d.RequestedAt = fromNanos(requested)
	d.KMSKey, d.KMSService, d.Receipt = kms.String, service.String, receipt.String
	if rowsDone.Valid {
		t := fromNanos(rowsDone.Int64)
		d.RowsDoneAt = &t
	}
	if done.Valid {
		t := fromNanos(done.Int64)
		d.DoneAt = &t
	}
	return d, nil
}

// TenantDeletion reads the deletion of tenant; ErrNotFound when none.
func (c *Catalog) TenantDeletion(ctx context.Context, tenant ids.ID) (TenantDeletion, error) {
	return scanDeletion(c.queryRow(ctx, `SELECT `+deletionCols+` FROM tenant_deletions WHERE tenant = ?`, tenant[:]))
}

// TenantDeletionsPending lists the deletions not yet done, oldest first.
func (c *Catalog) TenantDeletionsPending(ctx context.Context) ([]TenantDeletion, error) {
	return queryAll(ctx, c.db, "pending tenant deletions", scanDeletion,
		`SELECT `+deletionCols+` FROM tenant_deletions WHERE done_at IS NULL ORDER BY requested_at, id`)
}

// KMSKeyDeletionScheduled forgets the deletion's KMS key once its
// deletion is scheduled, so that a later start does not ask again.
func (c *Catalog) KMSKeyDeletionScheduled(ctx context.Context, id ids.ID) error {
	return c.Update(ctx, func(tx *Tx) error {
		_, err := tx.exec(`UPDATE tenant_deletions SET kms_key = NULL, kms_service = NULL WHERE id = ?`, id[:])
		return err
	})
}

// deletePage is how many rows of one table a transaction of a tenant's
// delete removes: a page of rows, so that no commit holds the writer long.
var deletePage = 5000 // a test makes it smaller

// tenantPaged are the tables a tenant's delete pages through, each with
// the statement that deletes one page of the tenant's rows, in an order
// that keeps every foreign key: what references a row goes before it.
var tenantPaged = []string{qDelTokens, qDelAudit, qDelLogNodes, qDelEvents, qDelVersions, qDelVcons}

const (
	qDelTokens = `DELETE FROM search_tokens WHERE version IN (SELECT version FROM search_tokens WHERE tenant = ? LIMIT ?)`
	// A page of the tenant's records and then their nodes, the same page
	// of the log: its nodes are the records' index (docs/FORMAT.md,
	// "Audit log tree"). A row with no node is tenantLast's.
	qDelAudit = `DELETE FROM audit WHERE id IN (SELECT rec FROM log_nodes
		WHERE id >= (SELECT num << 40 FROM logs WHERE log = ?1) AND id < (SELECT (num + 1) << 40 FROM logs WHERE log = ?1) ORDER BY id LIMIT ?2)`
	qDelLogNodes = `DELETE FROM log_nodes WHERE id IN (SELECT id FROM log_nodes
		WHERE id >= (SELECT num << 40 FROM logs WHERE log = ?1) AND id < (SELECT (num + 1) << 40 FROM logs WHERE log = ?1) ORDER BY id LIMIT ?2)`
	qDelEvents   = `DELETE FROM webhook_events WHERE id IN (SELECT id FROM webhook_events WHERE tenant = ? LIMIT ?)`
	qDelVersions = `DELETE FROM versions WHERE id IN (SELECT id FROM versions WHERE tenant = ? LIMIT ?)`
	qDelVcons    = `DELETE FROM vcons WHERE (tenant, uuid) IN (SELECT tenant, uuid FROM vcons WHERE tenant = ? LIMIT ?)`
)

// tenantLast deletes the rest of a tenant, in one transaction once the
// paged tables hold none of it: the tenants row last.
var tenantLast = []string{
	`DELETE FROM erase_todo WHERE erasure IN (SELECT id FROM erasures WHERE tenant = ?)`,
	`DELETE FROM erased WHERE erasure IN (SELECT id FROM erasures WHERE tenant = ?)`,
	`DELETE FROM erased WHERE tenant = ?`,
	`DELETE FROM erasures WHERE tenant = ?`,
	`DELETE FROM webhooks WHERE tenant = ?`,
	`DELETE FROM webhook_events WHERE tenant = ?`,
	`DELETE FROM audit WHERE tenant = ?`, // rows with no node: one scan of the table, once
	`DELETE FROM manifests WHERE tenant = ?`,
	`DELETE FROM pack_files WHERE tenant = ?`,
	`DELETE FROM keys WHERE tenant = ?`,
	`DELETE FROM tenant_keys WHERE tenant = ?`,
	`DELETE FROM tenant_anchors WHERE tenant = ?`,
	`DELETE FROM log_checkpoints WHERE log = ?`,
	`DELETE FROM logs WHERE log = ?`,
	`DELETE FROM tenants WHERE id = ?`,
}

// DeleteTenantRows deletes every row of a deleting tenant, a page per
// transaction (docs/FORMAT.md, "Tenant delete", step 4), and records the
// rows done with the last; the admin log and the deletion's row stay. A
// delete cut between pages resumes where it was, since each page deletes
// what is left.
func (c *Catalog) DeleteTenantRows(ctx context.Context, d TenantDeletion) error {
	for {
		var n int64
		err := c.Update(ctx, func(tx *Tx) error {
			n = 0
			for _, q := range tenantPaged {
				res, err := tx.exec(q, d.Tenant[:], deletePage)
				if err != nil {
					return fmt.Errorf("catalog: delete the tenant's rows: %w", err)
				}
				k, _ := res.RowsAffected()
				n += k
			}
			tx.forgetHead(LogID(d.Tenant))
			return nil
		})
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	return c.Update(ctx, func(tx *Tx) error {
		for _, q := range tenantLast {
			if _, err := tx.exec(q, d.Tenant[:]); err != nil {
				return fmt.Errorf("catalog: delete the tenant's rows: %w", err)
			}
		}
		_, err := tx.exec(`UPDATE tenant_deletions SET rows_done_at = ? WHERE id = ? AND rows_done_at IS NULL`, nanos(tx.now), d.ID[:])
		return err
	})
}

// FinishTenantDelete records the deletion done with its receipt, signed
// outside the transaction, unless it is done already.
func (c *Catalog) FinishTenantDelete(ctx context.Context, id ids.ID, done time.Time, receipt string) error {
	return c.Update(ctx, func(tx *Tx) error {
		_, err := tx.exec(`UPDATE tenant_deletions SET done_at = ?, receipt = ? WHERE id = ? AND done_at IS NULL`, nanos(done), receipt, id[:])
		return err
	})
}
