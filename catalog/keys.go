package catalog

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/vcon/lawfulbasis"
)

// Scopes a tenant key may hold: audit reads the tenant's audit log as a
// transparency log (docs/audit-log.md); mcp, with read, lets an AI
// assistant read through POST /mcp (docs/mcp.md).
var Scopes = []string{"write", "read", "delete", ScopeAudit, ScopeMCP}

// ScopeAudit is the tenant key scope of the audit log's routes.
const ScopeAudit = "audit"

// ScopeMCP is the tenant key scope of the MCP endpoint.
const ScopeMCP = "mcp"

// The scopes an operator key may hold, each a part of the admin API
// (docs/keys-and-audit.md); every admin route names one (server/server.go).
const (
	ScopeMetrics  = "metrics"  // GET /metrics
	ScopeTenants  = "tenants"  // tenants and every tenant setting
	ScopeHolds    = "holds"    // legal holds
	ScopeWebhooks = "webhooks" // a tenant's webhook
	ScopeLog      = "log"      // the admin log
)

// OperatorScopes is every scope an operator key may hold. An operator key
// stored without scopes holds them all: so are the keys made before
// operator keys had scopes, and those made since without --scope, which
// then also hold a scope added later.
var OperatorScopes = []string{ScopeMetrics, ScopeTenants, ScopeHolds, ScopeWebhooks, ScopeLog}

// Key is an API key. Tenant is nil for an operator key. The token itself is
// never stored: only its SHA-256. Scopes are the key's scopes, an
// operator key's every scope when it was made without any.
type Key struct {
	ID        string
	Tenant    *ids.ID
	Scopes    []string
	Label     string
	CreatedAt time.Time
	RevokedAt *time.Time
	// Purposes are what a tenant key's reads are for (docs/lawful-basis.md),
	// sorted; none for a key bound to no purpose.
	Purposes []string
	// LawfulMode is the tenant's lawful-basis mode as KeyByToken read it,
	// in the same statement, so that a request learns it without a query
	// of its own; "" from every other read of a key.
	LawfulMode vocab.LawfulMode
}

// Operator reports whether k is an operator key.
func (k Key) Operator() bool { return k.Tenant == nil }

// Has reports whether k holds scope.
func (k Key) Has(scope string) bool { return slices.Contains(k.Scopes, scope) }

// tokenPrefix lets secret scanners and operators recognise a token.
const tokenPrefix = "vcs_"

// HashToken is what the keys table holds of a token.
func HashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// CreateKey makes a key and returns it with its token, which is shown once.
// An operator key with no scopes holds every operator scope. purposes
// bind a tenant key (CheckPurposes); an operator key has none.
func (tx *Tx) CreateKey(tenant *ids.ID, scopes, purposes []string, label string) (Key, string, error) {
	purposes, err := CheckPurposes(tenant, purposes)
	if err != nil {
		return Key{}, "", err
	}
	var idb [8]byte
	var secret [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return Key{}, "", err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return Key{}, "", err
	}
	k := Key{ID: hex.EncodeToString(idb[:]), Tenant: tenant, Scopes: keyScopes(tenant, scopes), Label: label, CreatedAt: tx.now, Purposes: purposes}
	token := tokenPrefix + k.ID + "_" + base64.RawURLEncoding.EncodeToString(secret[:])
	var tb any
	if tenant != nil {
		tb = tenant[:]
	}
	var pb any
	if len(purposes) > 0 {
		pb = strings.Join(purposes, " ")
	}
	_, err = tx.exec(`INSERT INTO keys(id, tenant, scopes, label, token_hash, created_at, purposes) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		k.ID, tb, strings.Join(scopes, ","), label, HashToken(token), nanos(tx.now), pb)
	if err != nil {
		return Key{}, "", fmt.Errorf("catalog: create key: %w", err)
	}
	return k, token, nil
}

// RevokeKey marks a key revoked; ErrNotFound when no such key exists.
func (tx *Tx) RevokeKey(id string) (Key, error) {
	k, err := scanKey(tx.queryRow(`SELECT `+keyCols+` FROM keys WHERE id = ?`, id))
	if err != nil {
		return k, err
	}
	if k.RevokedAt == nil {
		if _, err := tx.exec(`UPDATE keys SET revoked_at = ? WHERE id = ?`, nanos(tx.now), id); err != nil {
			return k, err
		}
		now := tx.now
		k.RevokedAt = &now
	}
	return k, nil
}

// keyScopes is what a key stored with scopes holds.
func keyScopes(tenant *ids.ID, scopes []string) []string {
	if tenant == nil && len(scopes) == 0 {
		return slices.Clone(OperatorScopes)
	}
	return scopes
}

// MaxKeyPurposes bounds the purposes a key is bound to, as the draft
// bounds an attachment's grants.
const MaxKeyPurposes = 100

// CheckPurposes returns purposes sorted, once each, or says why a key
// cannot be bound to them: each is a vocabulary word
// (lawfulbasis.ValidPurpose), and only a tenant key reads for a purpose.
func CheckPurposes(tenant *ids.ID, purposes []string) ([]string, error) {
	if len(purposes) == 0 {
		return nil, nil
	}
	if tenant == nil {
		return nil, errors.New("an operator key reads no vCon, so it has no purpose: give --purpose to a tenant key")
	}
	for _, p := range purposes {
		if !lawfulbasis.ValidPurpose(p) {
			return nil, fmt.Errorf("purpose %q is not 1 to %d characters of a-z, 0-9 and _: name it as the vCons' purpose_grants do", p, lawfulbasis.MaxPurposeLen)
		}
	}
	out := slices.Compact(slices.Sorted(slices.Values(purposes)))
	if len(out) > MaxKeyPurposes {
		return nil, fmt.Errorf("a key has at most %d purposes, not %d", MaxKeyPurposes, len(out))
	}
	return out, nil
}

const keyCols = `id, tenant, scopes, label, created_at, revoked_at, purposes`

func scanKey(r row, extra ...any) (Key, error) {
	var k Key
	var tenant []byte
	var scopes string
	var created int64
	var revoked sql.NullInt64
	var purposes sql.NullString
	if err := r.Scan(append([]any{&k.ID, &tenant, &scopes, &k.Label, &created, &revoked, &purposes}, extra...)...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return k, ErrNotFound
		}
		return k, fmt.Errorf("catalog: read key: %w", err)
	}
	if tenant != nil {
		var t ids.ID
		copy(t[:], tenant)
		k.Tenant = &t
	}
	var list []string
	if scopes != "" {
		list = strings.Split(scopes, ",")
	}
	k.Scopes = keyScopes(k.Tenant, list)
	k.CreatedAt = fromNanos(created)
	k.RevokedAt = nullTime(revoked)
	k.Purposes = strings.Fields(purposes.String)
	return k, nil
}

// KeyByToken finds the live key a token belongs to; ErrNotFound for an
// unknown or revoked token. It reads the catalog on every call, so keys
// made or revoked by the CLI apply at once.
func (c *Catalog) KeyByToken(ctx context.Context, token string) (Key, error) {
	if !strings.HasPrefix(token, tokenPrefix) {
		return Key{}, ErrNotFound
	}
	// The tenant's lawful-basis mode comes with the key, by its primary
	// key: a read learns whether to decide without a query of its own.
	var mode sql.NullString
	k, err := scanKey(c.queryRow(ctx, `SELECT `+keyCols+`, (SELECT t.lawful_basis FROM tenants t WHERE t.id = keys.tenant)
		FROM keys WHERE token_hash = ?`, HashToken(token)), &mode)
	k.LawfulMode = vocab.LawfulMode(mode.String)
	if err != nil {
		return k, err
	}
	if k.RevokedAt != nil {
		return Key{}, ErrNotFound
	}
	return k, nil
}

// Keys lists keys, every one or a tenant's.
func (c *Catalog) Keys(ctx context.Context, tenant *ids.ID) ([]Key, error) {
	q := `SELECT ` + keyCols + ` FROM keys ORDER BY created_at, id`
	var args []any
	if tenant != nil {
		q = `SELECT ` + keyCols + ` FROM keys WHERE tenant = ? ORDER BY created_at, id`
		args = append(args, tenant[:])
	}
	return queryAll(ctx, c.db, "keys", func(r row) (Key, error) { return scanKey(r) }, q, args...)
}

// NewKey creates a key, recorded in the admin log and, for a tenant key,
// in the tenant's log. The token is returned once and kept nowhere.
func (c *Catalog) NewKey(ctx context.Context, tenant *ids.ID, scopes []string, label string, by Actor) (Key, string, error) {
	return c.NewBoundKey(ctx, tenant, scopes, nil, label, by)
}

// NewBoundKey is NewKey for a key bound to purposes (CheckPurposes).
func (c *Catalog) NewBoundKey(ctx context.Context, tenant *ids.ID, scopes, purposes []string, label string, by Actor) (Key, string, error) {
	var k Key
	var token string
	err := c.Update(ctx, func(tx *Tx) error {
		if tenant != nil {
			if _, err := tx.Tenant(*tenant); err != nil {
				return err
			}
		}
		var err error
		if k, token, err = tx.CreateKey(tenant, scopes, purposes, label); err != nil {
			return err
		}
		return tx.record(by, tenant, "key_create", "key", k.ID)
	})
	return k, token, err
}

// Revoke revokes a key, recorded as NewKey records its creation.
func (c *Catalog) Revoke(ctx context.Context, id string, by Actor) (Key, error) {
	var k Key
	err := c.Update(ctx, func(tx *Tx) error {
		var err error
		if k, err = tx.RevokeKey(id); err != nil {
			return err
		}
		return tx.record(by, k.Tenant, "key_revoke", "key", k.ID)
	})
	return k, err
}
