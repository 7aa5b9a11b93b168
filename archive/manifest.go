package archive

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
)

// ManifestFormat is the format number every manifest carries.
const ManifestFormat = 1

// livePage is how many live version ids one catalog read returns while a
// manifest is written: the reads stay short however many a tenant has.
const livePage = 10000

// manifestHeader is what a manifest holds before its body. The digest the
// catalog records covers the body only, so two manifests that name the same
// files and live versions have the same digest whatever their numbers.
func manifestHeader(seq int64) string {
	return `{"format":` + strconv.Itoa(ManifestFormat) + `,"seq":` + strconv.FormatInt(seq, 10) + `,`
}

// ManifestFile is one entry of a manifest's files.
type ManifestFile struct {
	Path  string `json:"path"` // relative to the tenant's folder
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
}

// Manifest is a manifest as readers decode it (docs/FORMAT.md, "Manifests").
type Manifest struct {
	Format int            `json:"format"`
	Seq    int64          `json:"seq"`
	Files  []ManifestFile `json:"files"`
	Live   []string       `json:"live"` // 32 lowercase hex digits each
}

// ensureManifest writes the tenant's next manifest when the live files or
// the live packed versions differ from what the newest recorded manifest
// named (docs/FORMAT.md, "Manifests"). It runs after every change and at
// start, so a manifest a crash kept from being written is written then.
// The caller holds the tenant's lock.
func (p *Packer) ensureManifest(ctx context.Context, tenant ids.ID) error {
	a := p.a
	files, err := a.Cat.PackFiles(ctx, tenant, catalog.PackLive)
	if err != nil {
		return err
	}
	ms, err := a.Cat.Manifests(ctx, tenant)
	if err != nil {
		return err
	}
	if len(files) == 0 && len(ms) == 0 {
		return nil // nothing was ever packed: there is nothing to name
	}
	body, digest, err := p.writeManifestBody(ctx, tenant, files)
	if err != nil {
		return err
	}
	defer func() {
		body.Close()
		os.Remove(body.Name())
	}()
	seq := int64(1)
	if len(ms) > 0 {
		newest := ms[len(ms)-1]
		if bytes.Equal(newest.Digest, digest) {
			return nil
		}
		seq = newest.Seq + 1
	}
	for attempt := 0; attempt < 8; attempt++ {
		err := p.putManifest(ctx, tenant, seq, body)
		if err == nil {
			crashpoint.Hit(crashpoint.ManifestAfterPut)
			return a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.RecordManifest(tenant, seq, digest) })
		}
		if !errors.Is(err, objstore.ErrExists) {
			return err
		}
		// The number is taken: an earlier attempt wrote it and stopped
		// before the catalog recorded it, or the catalog was restored from
		// an older backup. Adopt it if it names what this one would.
		next, adopted, err := p.adoptManifests(ctx, tenant, seq, digest)
		if err != nil || adopted {
			return err
		}
		seq = next
	}
	return errors.New("manifest: every number tried was taken")
}

// writeManifestBody writes the body of the tenant's manifest to a spool
// file and returns it with its digest: the files sorted by path, then the
// live versions in id order, read a page at a time.
func (p *Packer) writeManifestBody(ctx context.Context, tenant ids.ID, files []catalog.PackFile) (*os.File, []byte, error) {
	tmp, err := os.CreateTemp(p.opt.SpoolDir, spoolPrefix+"manifest-*.json")
	if err != nil {
		return nil, nil, fmt.Errorf("manifest: spool: %w", err)
	}
	fail := func(err error) (*os.File, []byte, error) {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, nil, err
	}
	h := sha256.New()
	w := bufio.NewWriterSize(io.MultiWriter(tmp, h), 256<<10)
	entries := make([]ManifestFile, len(files))
	for i, f := range files {
		entries[i] = ManifestFile{Path: manifestPath(tenant, f.Key), Rows: f.Rows, Bytes: f.Bytes}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	w.WriteString(`"files":[`)
	for i, e := range entries {
		if i > 0 {
			w.WriteByte(',')
		}
		b, _ := json.Marshal(e)
		w.Write(b)
	}
	w.WriteString(`],"live":[`)
	var after ids.ID
	first := true
	for {
		page, err := p.a.Cat.LivePacked(ctx, tenant, after, livePage)
		if err != nil {
			return fail(err)
		}
		for _, id := range page {
			if !first {
				w.WriteByte(',')
			}
			first = false
			w.WriteByte('"')
			w.WriteString(id.Hex())
			w.WriteByte('"')
		}
		if len(page) < livePage {
			break
		}
		after = page[len(page)-1]
	}
	w.WriteString("]}\n")
	if err := w.Flush(); err != nil {
		return fail(fmt.Errorf("manifest: spool: %w", err))
	}
	return tmp, h.Sum(nil), nil
}

// putManifest writes manifest seq create-only: its header, then the body.
func (p *Packer) putManifest(ctx context.Context, tenant ids.ID, seq int64, body *os.File) error {
	if _, err := body.Seek(0, io.SeekStart); err != nil {
		return err
	}
	r := io.MultiReader(strings.NewReader(manifestHeader(seq)), body)
	err := objstore.Put(ctx, p.a.Objects, ManifestKey(tenant, seq), r, true)
	if err != nil && !errors.Is(err, objstore.ErrExists) {
		return wrapf("manifest: put", err)
	}
	return err
}

// adoptManifests records the tenant's manifests numbered from seq on that
// the bucket holds and the catalog does not. When the highest of them names
// what digest covers, it is adopted and nothing is written; otherwise the
// next number to try is returned.
func (p *Packer) adoptManifests(ctx context.Context, tenant ids.ID, seq int64, digest []byte) (next int64, adopted bool, err error) {
	a := p.a
	var found []int64
	err = a.Objects.List(ctx, kindPrefix(catalog.InS3, kindManifest, tenant), func(info objstore.Info) error {
		if n, ok := manifestSeq(tenant, info.Key); ok && n >= seq {
			found = append(found, n)
		}
		return nil
	})
	if err != nil {
		return 0, false, wrapf("manifest: list", err)
	}
	if len(found) == 0 {
		// Taken, yet not listed: try the next number rather than loop.
		return seq + 1, false, nil
	}
	sort.Slice(found, func(i, j int) bool { return found[i] < found[j] })
	digests := make([][]byte, len(found))
	for i, n := range found {
		if digests[i], err = p.manifestDigest(ctx, tenant, n); err != nil {
			return 0, false, err
		}
	}
	highest := len(found) - 1
	adopted = bytes.Equal(digests[highest], digest)
	err = a.Cat.Update(ctx, func(tx *catalog.Tx) error {
		for i, n := range found {
			if err := tx.RecordManifest(tenant, n, digests[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return found[highest] + 1, adopted, nil
}

// manifestDigest reads a manifest from the bucket and returns the digest
// of its body; a manifest not in this server's layout gets the digest of
// all its bytes, which no body of this server's has.
func (p *Packer) manifestDigest(ctx context.Context, tenant ids.ID, seq int64) ([]byte, error) {
	rc, err := p.a.Objects.Get(ctx, ManifestKey(tenant, seq))
	if err != nil {
		return nil, wrapf("manifest: read", err)
	}
	defer rc.Close()
	header := manifestHeader(seq)
	head := make([]byte, len(header))
	n, err := io.ReadFull(rc, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, wrapf("manifest: read", err)
	}
	h := sha256.New()
	if string(head[:n]) != header {
		h.Write(head[:n])
	}
	if _, err := io.Copy(h, rc); err != nil {
		return nil, wrapf("manifest: read", err)
	}
	return h.Sum(nil), nil
}
