package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/vcon/lawfulbasis"
)

// Location says where a version's sealed bytes are.
type Location string

const (
	InDir  Location = "dir"    // a file in the data directory
	InS3   Location = "s3"     // an object in the bucket
	Packed Location = "packed" // a row of a Parquet pack file in the bucket
)

// PurgeState is how far a version's purge went.
type PurgeState int

const (
	Kept         PurgeState = 0 // not being purged
	KeyDestroyed PurgeState = 1 // the data key is gone; bytes may remain
)

var (
	// ErrExists is returned when a create finds a current version.
	ErrExists = errors.New("catalog: the vCon already has a current version")
	// ErrHeld is returned when a legal hold forbids the change.
	ErrHeld = errors.New("catalog: the vCon is under legal hold")
	// ErrChanged is returned when the rows a commit replaces moved since
	// the work started (docs/FORMAT.md, invariant 6).
	ErrChanged = errors.New("catalog: the rows changed meanwhile")
)

// Version is one stored version of a vCon.
type Version struct {
	ID              ids.ID
	Tenant          ids.ID
	UUID            ids.ID
	StoredAt        time.Time
	ContentType     string
	ContentEncoding string
	Form            vocab.Form
	Size            int64
	SealedSize      int64
	WrappedKey      []byte // nil once the purge destroyed it
	HiddenAt        *time.Time
	Purge           PurgeState
	Location        Location
	PackFile        *ids.ID
	PackOffset      int64
	PackLength      int64
	PackKey         string // the pack file's object key, for packed versions
	Current         bool   // filled by the queries that know
	// BodyMAC is the keyed hash of the body that recognises a retried
	// store (docs/FORMAT.md, "Store"): written by InsertVersion, never
	// read into a Version.
	BodyMAC []byte
	// Lawful is what the version's lawful-basis attachments say
	// (catalog/lawfulbasis.go): written by InsertVersion, read with every
	// version, so that a read decides on the row it already reads.
	Lawful lawfulbasis.Summary
	// Signers is the JSON array of the signers its signatures were
	// verified to (docs/FORMAT.md, "Signatures"), "" when none was
	// checked; Unread says why its metadata was left unread, "" when it
	// was read. Written by InsertVersion.
	Signers string
	Unread  string
}

const versionCols = `v.id, v.tenant, v.uuid, v.stored_at, v.content_type, v.content_encoding, v.form, v.size, v.sealed_size,
	v.wrapped_key, v.hidden_at, v.purge, v.location, v.pack_file, v.pack_offset, v.pack_length,
	(SELECT p.object_key FROM pack_files p WHERE p.id = v.pack_file),
	v.lawful_basis, v.lawful_expires, v.purposes_granted, v.purposes_refused, v.signers, v.unread`

func scanVersion(r row, extra ...any) (Version, error) {
	var v Version
	var id, tenant, uuid, pack []byte
	var stored int64
	var hidden, off, length sql.NullInt64
	var packKey, basis, granted, refused, signers, unread sql.NullString
	var expires sql.NullInt64
	dest := append([]any{&id, &tenant, &uuid, &stored, &v.ContentType, &v.ContentEncoding, &v.Form, &v.Size, &v.SealedSize,
		&v.WrappedKey, &hidden, &v.Purge, &v.Location, &pack, &off, &length, &packKey,
		&basis, &expires, &granted, &refused, &signers, &unread}, extra...)
	if err := r.Scan(dest...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return v, ErrNotFound
		}
		return v, fmt.Errorf("catalog: read version: %w", err)
	}
	copy(v.ID[:], id)
	copy(v.Tenant[:], tenant)
	copy(v.UUID[:], uuid)
	v.StoredAt = fromNanos(stored)
	v.HiddenAt = nullTime(hidden)
	if pack != nil {
		var p ids.ID
		copy(p[:], pack)
		v.PackFile = &p
	}
	v.PackOffset, v.PackLength, v.PackKey = off.Int64, length.Int64, packKey.String
	v.Lawful = lawfulbasis.Summary{Basis: basis.String, Expires: nullTime(expires),
		Granted: strings.Fields(granted.String), Refused: strings.Fields(refused.String)}
	v.Signers, v.Unread = signers.String, unread.String
	return v, nil
}

// StoreMode says what a store does with an existing current version.
type StoreMode int

const (
	CreateOnly StoreMode = iota // refuse with ErrExists (POST)
	Replace                     // hide it (PUT)
)

// InsertVersion records a new version and makes it current, hiding the
// version it replaces. It reports whether one was replaced. v.WrappedKey is
// persisted here for the first time (invariant 2). A uuid an erasure took
// whole is refused with ErrErased (docs/erasure.md).
func (tx *Tx) InsertVersion(v Version, mode StoreMode) (replaced bool, err error) {
	if err := tx.refuseErased(v.Tenant, v.UUID); err != nil {
		return false, err
	}
	var cur []byte
	err = tx.queryRow(`SELECT current FROM vcons WHERE tenant = ? AND uuid = ?`, v.Tenant[:], v.UUID[:]).Scan(&cur)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.exec(`INSERT INTO vcons(tenant, uuid, current) VALUES (?, ?, ?)`, v.Tenant[:], v.UUID[:], v.ID[:]); err != nil {
			return false, err
		}
	case err != nil:
		return false, err
	default:
		if cur != nil {
			if mode == CreateOnly {
				return false, ErrExists
			}
			if _, err := tx.exec(`UPDATE versions SET hidden_at = ? WHERE id = ? AND hidden_at IS NULL`, nanos(tx.now), cur); err != nil {
				return false, err
			}
			replaced = true
		}
		if _, err := tx.exec(`UPDATE vcons SET current = ? WHERE tenant = ? AND uuid = ?`, v.ID[:], v.Tenant[:], v.UUID[:]); err != nil {
			return false, err
		}
	}
	basis, expires, granted, refused := lawfulCols(v.Lawful)
	_, err = tx.exec(`INSERT INTO versions(id, tenant, uuid, stored_at, content_type, content_encoding, form, size, sealed_size, wrapped_key, location, body_mac,
		lawful_basis, lawful_expires, purposes_granted, purposes_refused, signers, unread)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID[:], v.Tenant[:], v.UUID[:], nanos(v.StoredAt), v.ContentType, v.ContentEncoding, string(v.Form), v.Size, v.SealedSize, v.WrappedKey, string(v.Location), v.BodyMAC,
		basis, expires, granted, refused, nullString(v.Signers), nullString(v.Unread))
	return replaced, err
}

// Hide clears a vCon's current version and hides every version of it (a
// DELETE). It returns the versions this call hid; ErrNotFound when the vCon
// has no current version, ErrHeld when it is held.
func (tx *Tx) Hide(tenant, uuid ids.ID) ([]ids.ID, error) {
	var cur []byte
	var held bool
	err := tx.queryRow(`SELECT current, held FROM vcons WHERE tenant = ? AND uuid = ?`, tenant[:], uuid[:]).Scan(&cur, &held)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && cur == nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if held {
		return nil, ErrHeld
	}
	// Read whole before the update hides them: SQLite leaves undefined
	// what a read still open sees of the rows its transaction changes.
	hid, err := queryAll(tx.ctx, tx.tx, "versions to hide", scanID, `SELECT id FROM versions WHERE tenant = ? AND uuid = ? AND hidden_at IS NULL`, tenant[:], uuid[:])
	if err != nil {
		return nil, err
	}
	if _, err := tx.exec(`UPDATE versions SET hidden_at = ? WHERE tenant = ? AND uuid = ? AND hidden_at IS NULL`, nanos(tx.now), tenant[:], uuid[:]); err != nil {
		return nil, err
	}
	if _, err := tx.exec(`UPDATE vcons SET current = NULL WHERE tenant = ? AND uuid = ?`, tenant[:], uuid[:]); err != nil {
		return nil, err
	}
	return hid, nil
}

// Replay is the current version a store's body repeats byte for byte.
type Replay struct {
	Version  ids.ID
	StoredAt time.Time
}

const qReplay = `SELECT v.id, v.stored_at FROM vcons c JOIN versions v ON v.id = c.current
	WHERE c.tenant = ? AND c.uuid = ? AND v.purge = 0 AND v.body_mac = ? AND v.content_type = ? AND v.content_encoding = ?`

// ReplayOf returns the vCon's current version when its body's keyed hash
// is mac and it was stored with the same content type and encoding (a
// retried store); ErrNotFound otherwise.
func (tx *Tx) ReplayOf(tenant, uuid ids.ID, mac []byte, contentType, contentEncoding string) (Replay, error) {
	return scanReplay(tx.queryRow(qReplay, tenant[:], uuid[:], mac, contentType, contentEncoding))
}

// ReplayOf is Tx.ReplayOf in a read of its own: a store asks it before
// making its object durable, so a retry costs no write.
func (c *Catalog) ReplayOf(ctx context.Context, tenant, uuid ids.ID, mac []byte, contentType, contentEncoding string) (Replay, error) {
	return scanReplay(c.db.QueryRowContext(ctx, qReplay, tenant[:], uuid[:], mac, contentType, contentEncoding))
}

func scanReplay(row *sql.Row) (Replay, error) {
	var id []byte
	var at int64
	err := row.Scan(&id, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return Replay{}, ErrNotFound
	}
	if err != nil {
		return Replay{}, err
	}
	var r Replay
	copy(r.Version[:], id)
	r.StoredAt = fromNanos(at)
	return r, nil
}

// MoveVersion records that a version's object moved between locations;
// ErrChanged when it was no longer where the mover found it.
func (tx *Tx) MoveVersion(id ids.ID, from, to Location) error {
	res, err := tx.exec(`UPDATE versions SET location = ? WHERE id = ? AND location = ?`, string(to), id[:], string(from))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrChanged
	}
	return nil
}
