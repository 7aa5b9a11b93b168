package archive

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/durable"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/receipt"
	"github.com/vcon-server/vcon-server/objstore"
)

// A tenant removed for good, in the order of docs/FORMAT.md, "Tenant
// delete":
//
//  1. one transaction: its key row deleted, it marked deleting, its API
//     keys revoked and its webhook removed, the admin log's record; then a
//     checkpoint, so that the wrapped key is in no page of the catalog;
//     then, for a key wrapped by a KMS key of the tenant's own, that KMS
//     key's deletion scheduled (Config.KeyServices);
//  2. with a replica, a rollover that forgets the key, as a purge's does;
//  3. every object under the tenant's folders deleted and proven gone:
//     sealed objects, tombstones, pack files, manifests;
//  4. every row of the tenant deleted, a page per transaction, the tenants
//     row last; its folders emptied once more (a store in flight at step 1);
//     with a replica, a compaction, so that neither its objects
//     nor the catalog's change log hold them; a checkpoint;
//  5. the receipt signed, as an erasure's is, and recorded.
//
// Every step after the first is safe to repeat: a crash anywhere after it
// is finished by the next start (Sweep, which Recover runs).

// TenantDeleteFilter is the filter a tenant delete's receipt names: the
// whole tenant.
const TenantDeleteFilter = "tenant"

// ErrTenantHeld refuses the delete of a tenant with vCons under legal
// hold; errors.As gives the count as a *catalog.HeldError.
var ErrTenantHeld = errors.New("the tenant has vCons under legal hold")

// TenantDeletePending is returned when a tenant's key is destroyed (the
// tenant is unknown to every request from then on) but a later step
// failed: the sweep, or the next start, finishes the delete.
type TenantDeletePending struct {
	Deletion catalog.TenantDeletion
	Err      error
}

func (e *TenantDeletePending) Error() string {
	return "the tenant's key is destroyed and nothing of it opens any more, but its delete could not finish yet (" +
		e.Err.Error() + "); the purge sweep and the next start finish it, or run the delete again"
}

func (e *TenantDeletePending) Unwrap() error { return e.Err }

// DeleteTenant removes tenant for good and returns its deletion, done,
// with its receipt. A tenant with a held vCon is refused (ErrTenantHeld)
// and nothing changes.
func (a *Archive) DeleteTenant(ctx context.Context, tenant ids.ID, by catalog.Actor) (catalog.TenantDeletion, error) {
	d, _, err := a.Cat.BeginTenantDelete(ctx, tenant, by)
	var held *catalog.HeldError
	if errors.As(err, &held) {
		return d, fmt.Errorf("%w: %d of its vCons are held; release each hold (hold list, hold release) before deleting the tenant", ErrTenantHeld, held.Held)
	}
	if err != nil {
		return d, err
	}
	a.tkeys.forget(tenant)
	if err := a.checkpoint(ctx); err != nil {
		return d, &TenantDeletePending{Deletion: d, Err: err}
	}
	crashpoint.Hit(crashpoint.TenantDeleteAfterKey)
	if err := a.deleteKMSKey(ctx, d); err != nil {
		return d, &TenantDeletePending{Deletion: d, Err: err}
	}
	return a.finishTenantDelete(ctx, d)
}

// FinishTenantDelete finishes the delete of tenant begun earlier (by this
// process or another), and returns it done; ErrNotFound when the tenant
// has no deletion.
func (a *Archive) FinishTenantDelete(ctx context.Context, tenant ids.ID) (catalog.TenantDeletion, error) {
	d, err := a.Cat.TenantDeletion(ctx, tenant)
	if errors.Is(err, catalog.ErrNotFound) {
		return d, ErrNotFound
	}
	if err != nil || d.DoneAt != nil {
		return d, err
	}
	return a.resumeTenantDelete(ctx, d)
}

// FinishTenantDeletes finishes every tenant delete a crash or a failure
// cut off: the sweep runs it, and so the start-up recovery.
func (a *Archive) FinishTenantDeletes(ctx context.Context) error {
	ds, err := a.Cat.TenantDeletionsPending(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range ds {
		if _, running := a.tdels.Load(d.ID); running {
			continue // a request of this process runs it
		}
		if _, err := a.resumeTenantDelete(ctx, d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// resumeTenantDelete is the rest of step 1 (its checkpoint, the KMS key),
// then steps 2 to 5.
func (a *Archive) resumeTenantDelete(ctx context.Context, d catalog.TenantDeletion) (catalog.TenantDeletion, error) {
	a.tkeys.forget(d.Tenant)
	if err := a.checkpoint(ctx); err != nil {
		return d, &TenantDeletePending{Deletion: d, Err: err}
	}
	if err := a.deleteKMSKey(ctx, d); err != nil {
		return d, &TenantDeletePending{Deletion: d, Err: err}
	}
	return a.finishTenantDelete(ctx, d)
}

// deleteKMSKey schedules the deletion of the KMS key of the tenant's own
// that wrapped its key, on its key service, and forgets it once
// that is done. A key wrapped by the master key (KMSKey empty) has none.
func (a *Archive) deleteKMSKey(ctx context.Context, d catalog.TenantDeletion) error {
	if d.KMSKey == "" {
		return nil
	}
	if a.KeyServices == nil {
		return errors.New("the tenant's key is wrapped by a KMS key of its own, and this process has no [kms] to schedule that key's deletion; run it with the [kms] table that names it")
	}
	admin, err := a.KeyServices.Admin(d.KMSService)
	if err != nil {
		return err
	}
	if err := admin.DeleteKey(ctx, d.KMSKey); err != nil {
		return fmt.Errorf("schedule the deletion of the tenant's KMS key: %w", err)
	}
	return a.Cat.KMSKeyDeletionScheduled(ctx, d.ID)
}

// finishTenantDelete is steps 2 to 5, run once at a time per deletion in
// this process.
func (a *Archive) finishTenantDelete(ctx context.Context, d catalog.TenantDeletion) (catalog.TenantDeletion, error) {
	if _, running := a.tdels.LoadOrStore(d.ID, true); running {
		return d, &TenantDeletePending{Deletion: d, Err: errors.New("another call of this process is deleting the tenant")}
	}
	defer a.tdels.Delete(d.ID)
	pending := func(err error) (catalog.TenantDeletion, error) {
		a.logError("tenant delete: the rest waits for the sweep", err)
		return d, &TenantDeletePending{Deletion: d, Err: err}
	}
	if d.RowsDoneAt == nil {
		// 2. The replica forgets the key, as for a purge: no replica
		// object holds it once this returns.
		if err := a.forget(ctx); err != nil {
			return pending(err)
		}
		// 3 and 4 under the tenant's pack lock, so that no pack run or
		// merge writes a file of it meanwhile.
		if err := a.deleteTenantData(ctx, d); err != nil {
			return pending(err)
		}
		crashpoint.Hit(crashpoint.TenantDeleteAfterRows)
	}
	// The replica compacted, so that neither its objects hold the rows
	// just deleted nor the catalog's change log their keys; then a
	// checkpoint, so that no page of the log holds them either.
	if c, ok := a.Replica.(compacter); ok {
		if err := c.Compact(ctx); err != nil {
			return pending(fmt.Errorf("%w: %w", errForget, err))
		}
	}
	if err := a.checkpoint(ctx); err != nil {
		return pending(err)
	}
	// 5. The receipt, signed as an erasure's.
	key, err := a.signingKey(ctx)
	if err != nil {
		return pending(err)
	}
	done := a.now().UTC()
	jws, err := receipt.Sign(key, TenantReceipt(d, done))
	if err != nil {
		return pending(err)
	}
	if err := a.Cat.FinishTenantDelete(ctx, d.ID, done, jws); err != nil {
		return pending(err)
	}
	return a.Cat.TenantDeletion(ctx, d.Tenant)
}

// compacter is a replica that can compact (replica.Replica).
type compacter interface {
	Compact(ctx context.Context) error
}

// deleteTenantData is steps 3 and 4.
func (a *Archive) deleteTenantData(ctx context.Context, d catalog.TenantDeletion) error {
	if a.packer != nil {
		unlock, err := a.packer.lock(ctx, d.Tenant)
		if err != nil {
			return err
		}
		defer unlock()
	}
	if err := a.deleteTenantObjects(ctx, d.Tenant); err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.TenantDeleteAfterObjects)
	if err := a.Cat.DeleteTenantRows(ctx, d); err != nil {
		return err
	}
	// A store that passed its key's check before step 1 and committed
	// after the listing above left an object whose row step 4 deleted;
	// none commits from here, with the tenants row gone: list once more.
	return a.deleteTenantObjects(ctx, d.Tenant)
}

// tenantPrefixes are the folders of every object of tenant in the store
// (docs/FORMAT.md, "Where things are").
func (a *Archive) tenantPrefixes(tenant ids.ID) []string {
	if a.Loc == catalog.InDir {
		return []string{kindPrefix(catalog.InDir, kindObjects, tenant), kindPrefix(catalog.InDir, kindPurged, tenant)}
	}
	return []string{tenantFolder(tenant)}
}

// deleteTenantObjects is step 3: every object under the tenant's folders
// deleted, then the folders listed again to prove them empty; and, in the
// data directory, the emptied folders themselves, named by the tenant's
// id, removed.
func (a *Archive) deleteTenantObjects(ctx context.Context, tenant ids.ID) error {
	for _, prefix := range a.tenantPrefixes(tenant) {
		var keys []string
		err := a.Objects.List(ctx, prefix, func(i objstore.Info) error {
			keys = append(keys, i.Key)
			return nil
		})
		if err != nil {
			return wrapf("tenant delete: list the tenant's objects", err)
		}
		for len(keys) > 0 {
			n := min(len(keys), 1000)
			failed, err := objstore.DeleteMany(ctx, a.Objects, keys[:n])
			if err != nil {
				return wrapf(fmt.Sprintf("tenant delete: delete the tenant's objects (%d not deleted)", len(failed)), err)
			}
			keys = keys[n:]
		}
		left := 0
		err = a.Objects.List(ctx, prefix, func(objstore.Info) error {
			left++
			return nil
		})
		if err != nil {
			return wrapf("tenant delete: prove the tenant's objects gone", err)
		}
		if left > 0 {
			return fmt.Errorf("tenant delete: prove the tenant's objects gone: the storage still lists %d objects it was told to delete", left)
		}
	}
	return a.removeTenantFolders(tenant)
}

// removeTenantFolders removes the tenant's folders in the data directory,
// whatever a kill left in them (a store's temporary file), and syncs
// their parents.
func (a *Archive) removeTenantFolders(tenant ids.ID) error {
	if a.DataDir == "" {
		return nil
	}
	for _, kind := range []string{kindObjects, kindPurged} {
		parent := filepath.Join(a.DataDir, kind)
		dir := filepath.Join(parent, tenant.String())
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			// The path names the tenant: the log gets the cause only.
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return wrapf("tenant delete: remove the tenant's folder in the data directory", err)
		}
		if err := durable.SyncDir(parent); err != nil {
			return wrapf("tenant delete: sync the data directory", err)
		}
	}
	return nil
}

// TenantReceipt is the payload of a tenant delete's receipt: an erasure
// receipt's, whose erasure is the deletion's id, whose filter is
// "tenant", and whose digest stands for a line per vCon the tenant held
// (catalog.TenantDeletion.Digest), never listing their uuids.
func TenantReceipt(d catalog.TenantDeletion, done time.Time) receipt.Payload {
	return receipt.Payload{
		Erasure: d.ID.String(), Tenant: d.Tenant.String(), Filter: TenantDeleteFilter,
		RequestedAt: d.RequestedAt.UTC().Format(time.RFC3339Nano), DoneAt: done.UTC().Format(time.RFC3339Nano),
		Digest: &receipt.Digest{SHA256: d.Digest, Erased: d.Vcons, Versions: d.Versions},
	}
}
