// Package archive is the data path: it stores, reads, deletes and purges
// sealed vCon versions, keeping the catalog and the object store in the
// order docs/FORMAT.md gives (write new, commit, then delete old; a purge
// starts by destroying the key).
package archive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/jws"
	"github.com/vcon-server/vcon-server/internal/kms"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
)

// Config is what an Archive is made of.
type Config struct {
	Cat     *catalog.Catalog
	Objects objstore.Store
	// Loc is where new objects go: catalog.InDir or catalog.InS3, matching
	// Objects.
	Loc catalog.Location
	Key *seal.MasterKey
	// KeyServices reaches the key services of tenants' own keys (the
	// services of [kms]); nil without [kms], where no tenant has one.
	KeyServices KeyServices
	// KMSTenantKeys (kms.tenant_keys = "kms") gives each new tenant a key
	// of its own, made in its key service.
	KMSTenantKeys bool
	// KeyCache is how long a tenant key its own KMS key wraps stays
	// unwrapped in memory (kms.key_cache; 300 s when zero).
	KeyCache         time.Duration
	MaxSize          int64
	DefaultRetention time.Duration
	// LawfulSkew is how long a lawful basis holds past its expiration
	// ([lawful_basis] skew): the sweep erases a vCon once it is past.
	LawfulSkew time.Duration
	Log        *slog.Logger
	Now        func() time.Time
	// Purged, when set, is told how many data keys each purge destroyed
	// (a DELETE with retention 0d, or the sweep): the server's metrics.
	Purged func(n int)
	// Parquet turns Parquet storage on ([storage.parquet]); nil leaves
	// every version an object.
	Parquet *ParquetOptions
	// Replica, when set, is the catalog's replica: a purge goes on to its
	// bytes only once the replica forgot its key (docs/FORMAT.md, "Purge
	// of an object", step 1), and a new pack file is written only once
	// the replica holds its pending row ("Pack run", step 2).
	Replica Replica
	// DataDir, when set, is the data directory: a tenant's delete removes
	// its emptied folders there, whose names are the tenant's id.
	DataDir string
}

// KeyServices are the key services that hold tenants' own keys
// (docs/keys.md): [kms]'s own, named "", and each [kms.tenant.NAME] table,
// named NAME, with credentials of their own.
type KeyServices interface {
	// ServiceOf names the service of the tenant named tenant's own key.
	ServiceOf(tenant string) string
	// Key makes the Wrapper of key on service.
	Key(service, key string) (kms.Wrapper, error)
	// Admin makes and deletes keys on service; an error for a service
	// that cannot (programs of one's own).
	Admin(service string) (kms.KeyAdmin, error)
}

// Replica is the catalog's replica as the archive sees it: Sync returns
// once every change committed before the call is in the replica; Forget
// once no replica object holds a key destroyed before the call.
type Replica interface {
	Sync(ctx context.Context) error
	Forget(ctx context.Context) error
}

// Archive joins the catalog, the object store and the master key. It is
// whole once New returns: nothing is switched on or off later.
type Archive struct {
	Config
	packer  *Packer      // nil without Parquet storage
	flights purgeFlights // the purges being finished, by version
	erasing sync.Map     // ids.ID → true: the erasures a call of this process runs (erase.go)
	tkeys   tenantKeys   // the tenant keys unwrapped so far (tenantkeys.go)
	tdels   sync.Map     // ids.ID → true: the tenant deletes a call of this process runs (tenantdelete.go)
	anchors sync.Map     // ids.ID → parsedAnchors: tenants' trust anchors as last parsed (signatures.go)
	chains  jws.Chains   // the signers' chains verified to them

	// rec is storage's purge count and the stores in flight (recover.go).
	rec recoveryState
}

// New makes the Archive of c. With Parquet storage it also removes what an
// earlier process left in the spool, so it runs only where this process
// holds the data directory's lock or writes no pack files.
func New(c Config) (*Archive, error) {
	a := &Archive{Config: c}
	if c.Parquet != nil {
		p, err := newPacker(a, *c.Parquet)
		if err != nil {
			return nil, err
		}
		a.packer = p
	}
	return a, nil
}

// Packer runs the Archive's Parquet storage; nil without it.
func (a *Archive) Packer() *Packer { return a.packer }

var (
	// ErrNotFound: no such vCon for this tenant (or another tenant's).
	ErrNotFound = errors.New("no such vCon")
	// ErrUUIDMismatch: a PUT whose body names another uuid than its URL.
	ErrUUIDMismatch = errors.New("the vCon's uuid differs from the uuid in the URL")
	// ErrPurgeIncomplete: the data key is destroyed but the bytes could not
	// all be removed yet; the purge sweep finishes it.
	ErrPurgeIncomplete = errors.New("the vCon is deleted and can no longer be read, but removing its stored bytes failed; the purge sweep will finish it")
	// ErrPurgeAwaitsReplica: the data key is destroyed in the catalog, but
	// the catalog's replica did not yet roll over to a generation without
	// it; the purge sweep finishes the purge once the replica answers.
	ErrPurgeAwaitsReplica = errors.New("the vCon is deleted and can no longer be read, but the catalog's replica is behind and may still hold its keys; the purge sweep finishes the purge once the replica answers, retry later")
	// ErrDamaged: stored bytes failed authentication or are missing.
	ErrDamaged = errors.New("the stored version is damaged")
)

func (a *Archive) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// retention returns the tenant's retention as set now.
func (a *Archive) retention(t catalog.Tenant) time.Duration {
	if t.RetentionDays != nil {
		return time.Duration(*t.RetentionDays) * 24 * time.Hour
	}
	return a.DefaultRetention
}

func (a *Archive) logError(msg string, err error) {
	if a.Log != nil {
		// Errors from below never name a tenant, uuid or key, and neither
		// does the log (docs/configuration.md, "[log]").
		a.Log.Error(msg, "error", err.Error())
	}
}

func wrapf(format string, err error) error { return fmt.Errorf(format+": %w", err) }
