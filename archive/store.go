package archive

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/ids"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/vcon"
)

// StoreRequest is one POST or PUT of a vCon.
type StoreRequest struct {
	Tenant          ids.ID
	UUID            *ids.ID // from the URL of a PUT; nil for a POST
	Mode            catalog.StoreMode
	Body            io.Reader
	ContentType     string // as it will be served back
	ContentEncoding string // "gzip" or ""
	// Record, when set, is the audit record of the store, committed in
	// the version's own transaction (a version is never kept without its
	// record, nor its record synced apart): Store sets its target to the
	// uuid and its status to 201, or 200 for a replacement. A refusal or a
	// retry (Stored.Replayed) commits no record: the caller writes it.
	Record *catalog.Record
}

// Stored is what a successful store answers. A refusal made after the
// body named its uuid still carries UUID, for the audit record.
type Stored struct {
	UUID     ids.ID
	Version  ids.ID
	StoredAt time.Time
	Replaced bool
	// Replayed: the body repeated the current version byte for byte, so
	// nothing was stored and Version names that version (docs/api.md).
	Replayed bool
	Meta     *vcon.Meta
}

// Gzip reports whether the request's body is gzip as sent.
func (r StoreRequest) Gzip() bool { return vcon.Gzipped(r.ContentType, r.ContentEncoding) }

// Store seals the body into storage while inspecting the same bytes, then
// commits the version (docs/FORMAT.md, "Store"). The body is read once and
// never held whole: the sealed stream goes to storage, the clear one through
// a bounded inspector. Nothing is visible in storage until the inspection
// passed; the catalog row, and with it the wrapped key, is committed last.
func (a *Archive) Store(ctx context.Context, req StoreRequest) (Stored, error) {
	if req.Mode == catalog.CreateOnly && req.UUID != nil {
		if has, err := a.Cat.HasCurrent(ctx, req.Tenant, *req.UUID); err != nil {
			return Stored{}, err
		} else if has {
			return Stored{}, catalog.ErrExists
		}
	}
	now := a.now()
	vid := ids.NewV7(now)
	// Until its row commits (or its object is removed), the object of this
	// version is no orphan, whatever its id's time (Look).
	defer a.rec.inFlight.storing(vid)()
	dk, err := seal.NewDataKey()
	if err != nil {
		return Stored{}, err
	}
	up, err := a.Objects.Upload(ctx, ObjectKey(a.Loc, req.Tenant, vid), true)
	if err != nil {
		return Stored{}, wrapf("store: start object", err)
	}
	defer up.Abort()
	sw, err := seal.NewWriter(up, dk, req.Tenant, vid)
	if err != nil {
		return Stored{}, err
	}

	pr, pw := io.Pipe()
	type result struct {
		meta *vcon.Meta
		err  error
	}
	inspected := make(chan result, 1)
	go func() {
		m, err := vcon.Inspect(pr, req.Gzip(), a.MaxSize)
		if err != nil {
			pr.CloseWithError(err)
		} else {
			pr.Close()
		}
		inspected <- result{m, err}
	}()
	// The body's keyed hash recognises a retried store later without
	// keeping anything clear (docs/FORMAT.md, "Store").
	mac := hmac.New(sha256.New, a.Key.BodyMACKey(req.Tenant))
	_, copyErr := io.Copy(io.MultiWriter(sw, pw, mac), req.Body)
	pw.CloseWithError(copyErr)
	res := <-inspected
	switch {
	case res.err != nil:
		// The inspector's verdict (400, 413) explains a failed copy best.
		return Stored{}, res.err
	case copyErr != nil:
		return Stored{}, wrapf("store: read body", copyErr)
	}
	if err := sw.Close(); err != nil {
		return Stored{}, wrapf("store: seal", err)
	}
	uuid, err := ids.Parse(res.meta.UUID)
	if err != nil {
		return Stored{}, &vcon.InvalidError{Reason: "uuid is not a UUID"}
	}
	if req.UUID != nil && *req.UUID != uuid {
		return Stored{UUID: *req.UUID}, ErrUUIDMismatch
	}
	sum := mac.Sum(nil)
	// A retry of the current version answers before its object is made
	// durable (the deferred Abort removes it); the commit below asks
	// again, for two retries racing.
	if r, err := a.Cat.ReplayOf(ctx, req.Tenant, uuid, sum, req.ContentType, req.ContentEncoding); err == nil {
		return Stored{UUID: uuid, Version: r.Version, StoredAt: r.StoredAt, Replayed: true, Meta: res.meta}, nil
	} else if !errors.Is(err, catalog.ErrNotFound) {
		return Stored{UUID: uuid}, wrapf("store: look for a retry", err)
	}
	if err := up.Commit(); err != nil {
		return Stored{}, wrapf("store: write object", err)
	}
	crashpoint.Hit(crashpoint.StoreAfterObject)

	wrapped, err := a.Key.Wrap(dk, req.Tenant, vid)
	if err != nil {
		return Stored{}, err
	}
	v := catalog.Version{
		ID: vid, Tenant: req.Tenant, UUID: uuid, StoredAt: now,
		ContentType: req.ContentType, ContentEncoding: req.ContentEncoding,
		Form: catalog.Form(res.meta.Form), Size: res.meta.Size, SealedSize: seal.SealedSize(res.meta.Size),
		WrappedKey: wrapped, Location: a.Loc, BodyMAC: sum,
	}
	var replaced bool
	var replay catalog.Replay
	// One version, its record and its tokens: a small write.
	err = a.Cat.UpdateSmall(ctx, func(tx *catalog.Tx) error {
		var err error
		replay, err = tx.ReplayOf(req.Tenant, uuid, sum, req.ContentType, req.ContentEncoding)
		if err == nil {
			return nil
		} else if !errors.Is(err, catalog.ErrNotFound) {
			return err
		}
		if replaced, err = tx.InsertVersion(v, req.Mode); err != nil {
			return err
		}
		if req.Record != nil {
			rec := *req.Record
			rec.Target, rec.Status = uuid.String(), http.StatusCreated
			if replaced {
				rec.Status = http.StatusOK
			}
			if err := tx.Audit(req.Tenant, rec); err != nil {
				return err
			}
		}
		return a.index(tx, v, res.meta)
	})
	if err == nil && !replay.Version.IsZero() {
		// A retry of the current version: its new object is never named.
		err = errReplayed
	}
	if err != nil {
		// No row names the object, so its key is lost and it can never be
		// opened; remove it now rather than leaving it to recovery.
		if derr := a.Objects.Delete(context.WithoutCancel(ctx), ObjectKey(a.Loc, req.Tenant, vid)); derr != nil {
			a.logError("store: removing an object whose commit failed", derr)
		}
		if errors.Is(err, errReplayed) {
			return Stored{UUID: uuid, Version: replay.Version, StoredAt: replay.StoredAt, Replayed: true, Meta: res.meta}, nil
		}
		if errors.Is(err, catalog.ErrExists) {
			return Stored{UUID: uuid}, err
		}
		return Stored{UUID: uuid}, wrapf("store: commit", err)
	}
	crashpoint.Hit(crashpoint.StoreAfterCommit)
	return Stored{UUID: uuid, Version: vid, StoredAt: now, Replaced: replaced, Meta: res.meta}, nil
}

// errReplayed makes Store remove the object of a body the current version
// already holds, as it removes one whose commit failed.
var errReplayed = errors.New("store: the body repeats the current version")
