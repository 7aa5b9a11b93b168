package archive

import (
	"context"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/ids"
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
		if err := a.Objects.Delete(ctx, f.Key); err != nil {
			return wrapf("pack: delete a retired file", err)
		}
		id := f.ID
		if err := a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.ForgetPackFile(id, catalog.PackRetired) }); err != nil {
			return err
		}
		st.Dropped++
	}
	var gone []int64
	for i := 0; i+1 < len(ms); i++ {
		if now.Before(ms[i+1].CreatedAt.Add(p.opt.ReaderGrace)) {
			break
		}
		if err := a.Objects.Delete(ctx, ManifestKey(tenant, ms[i].Seq)); err != nil {
			return wrapf("pack: delete a superseded manifest", err)
		}
		gone = append(gone, ms[i].Seq)
	}
	if len(gone) == 0 {
		return nil
	}
	st.Dropped += len(gone)
	return a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.ForgetManifests(tenant, gone) })
}
