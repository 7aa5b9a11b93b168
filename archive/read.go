package archive

import (
	"context"
	"errors"
	"io"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/vcon"
)

// Open returns the current version of a vCon and a reader of its bytes as
// they were stored. The reader returns bytes only once the chunk holding
// them authenticated; a damaged version fails with an error wrapping
// ErrDamaged part way, so callers that stream it must abort the answer.
func (a *Archive) Open(ctx context.Context, tenant, uuid ids.ID) (catalog.Version, io.ReadCloser, error) {
	return a.OpenIf(ctx, tenant, uuid, nil)
}

// OpenIf is Open, with allow deciding on the current version's row before
// any byte is read: its error, returned as it is with the version, stops
// the read (a purpose's lawful basis, server/purpose.go). A nil allow
// allows all.
func (a *Archive) OpenIf(ctx context.Context, tenant, uuid ids.ID, allow func(catalog.Version) error) (catalog.Version, io.ReadCloser, error) {
	// The location is resolved in a short read, never held across I/O; a
	// version packed or moved meanwhile is looked up again (invariant 7).
	for attempt := 0; ; attempt++ {
		v, err := a.Cat.Current(ctx, tenant, uuid)
		if errors.Is(err, catalog.ErrNotFound) {
			return v, nil, ErrNotFound
		}
		if err != nil {
			return v, nil, err
		}
		if allow != nil {
			if err := allow(v); err != nil {
				return v, nil, err
			}
		}
		rc, err := a.OpenVersion(ctx, v)
		if errors.Is(err, objstore.ErrNotFound) && attempt < 3 {
			continue
		}
		return v, rc, err
	}
}

// OpenVersion opens the sealed bytes of v with its data key.
func (a *Archive) OpenVersion(ctx context.Context, v catalog.Version) (io.ReadCloser, error) {
	dk, err := a.dataKey(ctx, v)
	if err != nil {
		return nil, err
	}
	raw, err := a.Sealed(ctx, v)
	if err != nil {
		return nil, err
	}
	r, err := unseal(raw, dk, v)
	if err != nil {
		raw.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{r, raw}, nil
}

// Inspect opens sealed, the sealed bytes of v, with v's data key and reads
// the body's metadata in bounded memory: a body, or its inflated text, of
// more than max(limit, v.Size) bytes is refused. ErrNotFound when v has no
// key (it was purged); an error wrapping ErrDamaged when its key or its
// seal does not open.
func (a *Archive) Inspect(ctx context.Context, sealed io.Reader, v catalog.Version, limit int64) (*vcon.Meta, error) {
	dk, err := a.dataKey(ctx, v)
	if err != nil {
		return nil, err
	}
	r, err := unseal(sealed, dk, v)
	if err != nil {
		return nil, err
	}
	return inspectBody(r, v, limit)
}

// inspect opens a version and reads its metadata, in bounded memory.
func (a *Archive) inspect(ctx context.Context, v catalog.Version) (*vcon.Meta, error) {
	rc, err := a.OpenVersion(ctx, v)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return inspectBody(rc, v, a.MaxSize)
}

// unseal reads sealed, the sealed bytes of v, with its data key dk.
func unseal(sealed io.Reader, dk seal.DataKey, v catalog.Version) (io.Reader, error) {
	r, err := seal.NewReader(sealed, dk, v.Tenant, v.ID)
	if err != nil {
		return nil, errors.Join(ErrDamaged, err)
	}
	return r, nil
}

// inspectBody reads the metadata of v's body from r, its clear bytes, and
// reads r to the end.
func inspectBody(r io.Reader, v catalog.Version, limit int64) (*vcon.Meta, error) {
	m, err := vcon.Inspect(r, vcon.Gzipped(v.ContentType, v.ContentEncoding), max(limit, v.Size))
	if err != nil {
		return nil, err
	}
	if v.Unread != "" {
		leaveUnread(m)
	}
	_, err = io.Copy(io.Discard, r) // authenticate to the end
	return m, err
}

// Sealed streams the sealed bytes of v from wherever they are: one GET of
// the object, or one ranged GET of its row in a pack file.
func (a *Archive) Sealed(ctx context.Context, v catalog.Version) (io.ReadCloser, error) {
	switch v.Location {
	case catalog.Packed:
		if v.PackKey == "" {
			return nil, ErrDamaged
		}
		return a.Objects.GetRange(ctx, v.PackKey, v.PackOffset, v.PackLength)
	default:
		return a.Objects.Get(ctx, ObjectKey(v.Location, v.Tenant, v.ID))
	}
}

// Versions lists the kept versions of a vCon, newest first; ErrNotFound
// when the tenant has none of it.
func (a *Archive) Versions(ctx context.Context, tenant, uuid ids.ID) ([]catalog.Version, error) {
	vs, err := a.Cat.Versions(ctx, tenant, uuid)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, ErrNotFound
	}
	return vs, nil
}

// OpenKept is OpenIf for one kept version of a vCon, current or hidden:
// allow decides on the vCon's current version (the zero Version when it
// has none), as a read of its versions is decided. ErrNotFound when the
// tenant keeps no such version of it.
func (a *Archive) OpenKept(ctx context.Context, tenant, uuid, version ids.ID, allow func(current catalog.Version) error) (catalog.Version, io.ReadCloser, error) {
	for attempt := 0; ; attempt++ {
		vs, err := a.Versions(ctx, tenant, uuid)
		if err != nil {
			return catalog.Version{}, nil, err
		}
		var cur, want catalog.Version
		for _, v := range vs {
			if v.Current {
				cur = v
			}
			if v.ID == version {
				want = v
			}
		}
		if version.IsZero() || want.ID != version {
			return want, nil, ErrNotFound
		}
		if allow != nil {
			if err := allow(cur); err != nil {
				return want, nil, err
			}
		}
		// Looked up again when packed or moved meanwhile (invariant 7).
		rc, err := a.OpenVersion(ctx, want)
		if errors.Is(err, objstore.ErrNotFound) && attempt < 3 {
			continue
		}
		return want, rc, err
	}
}
