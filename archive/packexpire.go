package archive

import (
	"context"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
)

// dropExpired deletes the retired files and superseded manifests whose
// reader grace is over. A retired file's grace runs from the first
// manifest written without it, so a reader on the manifest before always
// has reader_grace to read it.
func (p *Packer) dropExpired(ctx context.Context, tenant ids.ID, st *PackStats) error {
	a := p.a
	now := a.now()
	ms, err := a.Cat.Manifests(ctx, tenant)
	if err != nil {
		return err
	}
	retired, err := a.Cat.PackFiles(ctx, tenant, catalog.PackRetired)
	if err != nil {
		return err
	}
	var expired []catalog.PackFile
	for _, f := range retired {
		var since *time.Time
		for _, m := range ms {
			if f.RetiredAt != nil && !m.CreatedAt.Before(*f.RetiredAt) {
				since = &m.CreatedAt
				break
			}
		}
		if since == nil || now.Before(since.Add(p.opt.ReaderGrace)) {
			continue
		}
		expired = append(expired, f)
	}
	var gone []int64
	for i := 0; i+1 < len(ms); i++ {
		if now.Before(ms[i+1].CreatedAt.Add(p.opt.ReaderGrace)) {
			break
		}
		gone = append(gone, ms[i].Seq)
	}
	// The files and the manifests go in one batch delete; each is
	// forgotten only once its delete succeeded, as one by one.
	keys := make([]string, 0, len(expired)+len(gone))
	for _, f := range expired {
		keys = append(keys, f.Key)
	}
	for _, seq := range gone {
		keys = append(keys, ManifestKey(tenant, seq))
	}
	if len(keys) == 0 {
		return nil
	}
	failedKeys, derr := objstore.DeleteMany(ctx, a.Objects, keys)
	failed := make(map[string]bool, len(failedKeys))
	for _, k := range failedKeys {
		failed[k] = true
	}
	for _, f := range expired {
		if failed[f.Key] {
			continue
		}
		id := f.ID
		if err := a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.ForgetPackFile(id, catalog.PackRetired) }); err != nil {
			return err
		}
		st.Dropped++
	}
	manifestsGone := true
	for _, seq := range gone {
		manifestsGone = manifestsGone && !failed[ManifestKey(tenant, seq)]
	}
	// The manifests are forgotten together, or not at all (and deleted
	// again by the next run).
	if manifestsGone && len(gone) > 0 {
		if err := a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.ForgetManifests(tenant, gone) }); err != nil {
			return err
		}
		st.Dropped += len(gone)
	}
	if !manifestsGone {
		return wrapf("pack: delete a superseded manifest", derr)
	}
	if len(failedKeys) > 0 {
		return wrapf("pack: delete a retired file", derr)
	}
	return nil
}
