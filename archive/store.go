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
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/objstore"
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
	// AuditIndex is the index of the store's record in the tenant's
	// audit log (docs/audit-log.md); HasAuditIndex is false without one.
	AuditIndex    uint64
	HasAuditIndex bool
}

// Gzip reports whether the request's body is gzip as sent.
func (r StoreRequest) Gzip() bool { return vcon.Gzipped(r.ContentType, r.ContentEncoding) }

// Store seals the body into storage while inspecting the same bytes, then
// commits the version, in the steps of docs/FORMAT.md, "Store". The body
// is read once and never held whole: the sealed stream goes to storage,
// the clear one through a bounded inspector. Nothing is visible in
// storage until the inspection passed; the catalog row, and with it the
// wrapped key, is committed last.
func (a *Archive) Store(ctx context.Context, req StoreRequest) (Stored, error) {
	if req.Mode == catalog.CreateOnly && req.UUID != nil {
		// Refused before anything is written; step 4 asks again.
		if has, err := a.Cat.HasCurrent(ctx, req.Tenant, *req.UUID); err != nil {
			return Stored{}, err
		} else if has {
			return Stored{}, catalog.ErrExists
		}
	}
	// 1. The version id and a fresh data key. Until its row commits (or
	// its object is removed), the object of this version is no orphan,
	// whatever its id's time (Look).
	now := a.now()
	vid := ids.NewV7(now)
	defer a.rec.inFlight.storing(vid)()
	tk, err := a.TenantKey(ctx, req.Tenant)
	if err != nil {
		return Stored{}, err
	}
	dk, err := seal.NewDataKey()
	if err != nil {
		return Stored{}, err
	}
	// 2. The body streamed once: sealed into a new object, inspected, its
	// keyed hash taken. The deferred Abort removes an object never made
	// durable.
	up, err := a.Objects.Upload(ctx, ObjectKey(a.Loc, req.Tenant, vid), true)
	if err != nil {
		return Stored{}, wrapf("store: start object", err)
	}
	defer up.Abort()
	pol, err := a.signaturePolicy(ctx, req.Tenant)
	if err != nil {
		return Stored{}, wrapf("store: read the tenant's signature policy", err)
	}
	b, err := a.sealBody(req, up, tk, dk, vid, pol)
	if err != nil {
		return Stored{}, err
	}
	if req.UUID != nil && *req.UUID != b.uuid {
		return Stored{UUID: *req.UUID}, ErrUUIDMismatch
	}
	// The tenant's lawful-basis mode refuses before the object is made
	// durable, so a refusal changes nothing (docs/lawful-basis.md).
	if err := a.lawfulRefusal(ctx, req.Tenant, b.meta); err != nil {
		return Stored{UUID: b.uuid}, err
	}
	// 3. A retry of the current version answers before its object is made
	// durable; any other store makes it durable.
	ask := func(tenant, uuid ids.ID, mac []byte, ct, ce string) (catalog.Replay, error) {
		return a.Cat.ReplayOf(ctx, tenant, uuid, mac, ct, ce)
	}
	if r, err := b.retryOf(req, ask); err != nil {
		return Stored{UUID: b.uuid}, wrapf("store: look for a retry", err)
	} else if r != nil {
		return b.replayed(*r), nil
	}
	if err := up.Commit(); err != nil {
		return Stored{}, wrapf("store: write object", err)
	}
	crashpoint.Hit(crashpoint.StoreAfterObject)
	// 4. One transaction: the version, its record and its tokens, unless
	// the same question, asked again, finds a retry.
	wrapped, err := tk.Wrap(dk, vid)
	if err != nil {
		return Stored{}, err
	}
	v := catalog.Version{
		ID: vid, Tenant: req.Tenant, UUID: b.uuid, StoredAt: now,
		ContentType: req.ContentType, ContentEncoding: req.ContentEncoding,
		Form: b.meta.Form, Size: b.meta.Size, SealedSize: seal.SealedSize(b.meta.Size),
		WrappedKey: wrapped, Location: a.Loc, BodyMAC: b.mac, Lawful: b.meta.LawfulBasis,
		Signers: b.signed.signers, Unread: b.signed.unread,
	}
	replay, replaced, index, err := a.commitVersion(ctx, req, v, b, tk)
	if err != nil || replay != nil {
		// No row names the object, so its key is lost and it can never be
		// opened; remove it now rather than leaving it to recovery.
		if derr := a.Objects.Delete(context.WithoutCancel(ctx), ObjectKey(a.Loc, req.Tenant, vid)); derr != nil {
			a.logError("store: removing an object whose commit failed", derr)
		}
	}
	switch {
	case errors.Is(err, catalog.ErrExists):
		return Stored{UUID: b.uuid}, err
	case err != nil:
		return Stored{UUID: b.uuid}, wrapf("store: commit", err)
	case replay != nil:
		return b.replayed(*replay), nil
	}
	crashpoint.Hit(crashpoint.StoreAfterCommit)
	// 5. The answer: 201, or 200 for a replacement.
	return Stored{UUID: b.uuid, Version: vid, StoredAt: now, Replaced: replaced, Meta: b.meta, AuditIndex: index, HasAuditIndex: req.Record != nil}, nil
}

// storedBody is what step 2 of a store learns of its body.
type storedBody struct {
	meta   *vcon.Meta
	uuid   ids.ID
	mac    []byte // the body's keyed hash, which recognises a retry without keeping anything clear
	signed signed // what the signature policy checked (signatures.go)
}

// sealBody is step 2 of a store: the body copied once into the sealing
// writer over up, the inspector and the keyed hash, and the seal closed.
// The inspector's verdict (400, 413) explains a failed copy best.
func (a *Archive) sealBody(req StoreRequest, up io.Writer, tk *seal.TenantKey, dk seal.DataKey, vid ids.ID, pol signaturePolicy) (storedBody, error) {
	sw, err := seal.NewWriter(up, dk, req.Tenant, vid)
	if err != nil {
		return storedBody{}, err
	}
	var spool *objstore.Spool
	if pol.Mode != vocab.SignaturesOff && pol.Mode != "" {
		spool = objstore.NewSpool(a.spoolDir())
		defer spool.Release()
	}
	in := startInspector(req.Gzip(), a.MaxSize, spool)
	mac := hmac.New(sha256.New, tk.BodyMACKey())
	_, copyErr := io.Copy(io.MultiWriter(sw, in, mac), req.Body)
	meta, err := in.verdict(copyErr)
	var bounds *vcon.SignaturesError
	switch {
	case errors.As(err, &bounds):
		return storedBody{}, &SignatureRefused{Mode: pol.Mode, Reason: bounds.Reason}
	case err != nil:
		return storedBody{}, err
	case copyErr != nil:
		return storedBody{}, wrapf("store: read body", copyErr)
	}
	if err := sw.Close(); err != nil {
		return storedBody{}, wrapf("store: seal", err)
	}
	uuid, err := ids.Parse(meta.UUID)
	if err != nil {
		return storedBody{}, &vcon.InvalidError{Reason: "uuid is not a UUID"}
	}
	var payload func() (io.Reader, error)
	if spool != nil {
		payload = spool.Reader
	}
	sg, err := checkSignatures(pol, meta, payload, a.now())
	if err != nil {
		return storedBody{}, err
	}
	return storedBody{meta: meta, uuid: uuid, mac: mac.Sum(nil), signed: sg}, nil
}

// replayQuery is catalog.Tx.ReplayOf, or catalog.Catalog.ReplayOf in a
// read of its own.
type replayQuery func(tenant, uuid ids.ID, mac []byte, contentType, contentEncoding string) (catalog.Replay, error)

// retryOf asks the question of steps 3 and 4 of a store: does the vCon's
// current version have this body's keyed hash, content type and encoding?
// It returns that version, or nil when the store is no retry.
func (b storedBody) retryOf(req StoreRequest, ask replayQuery) (*catalog.Replay, error) {
	r, err := ask(req.Tenant, b.uuid, b.mac, req.ContentType, req.ContentEncoding)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &r, nil
}

// replayed is the answer to a retry: the version it repeats (docs/api.md).
func (b storedBody) replayed(r catalog.Replay) Stored {
	return Stored{UUID: b.uuid, Version: r.Version, StoredAt: r.StoredAt, Replayed: true, Meta: b.meta}
}

// commitVersion is step 4 of a store: one version, its record and its
// tokens, a small write, unless the body turns out to repeat the current
// version (two retries racing): then it returns that version and writes
// nothing. replaced says whether v replaced a current version.
func (a *Archive) commitVersion(ctx context.Context, req StoreRequest, v catalog.Version, b storedBody, tk *seal.TenantKey) (replay *catalog.Replay, replaced bool, index uint64, err error) {
	err = a.Cat.UpdateSmall(ctx, func(tx *catalog.Tx) error {
		var err error
		if replay, err = b.retryOf(req, tx.ReplayOf); err != nil || replay != nil {
			return err
		}
		if replaced, err = tx.InsertVersion(v, req.Mode); err != nil {
			return err
		}
		if req.Record != nil {
			rec := *req.Record
			rec.Target, rec.Status = v.UUID.String(), http.StatusCreated
			rec.Action += signerNote(v.Signers)
			if replaced {
				rec.Status = http.StatusOK
			}
			if err := tx.Audit(req.Tenant, rec); err != nil {
				return err
			}
			index, _ = tx.AuditIndex()
		}
		return addTokens(tx, tk, v, b.meta)
	})
	return replay, replaced, index, err
}

// inspector reads, on a goroutine of its own, the clear bytes written to
// it (vcon.Inspect, bounded by the largest body): a store hands the same
// bytes to the seal and to the inspector as it reads them, once.
type inspector struct {
	pw   *io.PipeWriter
	done chan inspection
}

type inspection struct {
	meta *vcon.Meta
	err  error
}

func startInspector(gzip bool, maxSize int64, spool *objstore.Spool) *inspector {
	pr, pw := io.Pipe()
	in := &inspector{pw: pw, done: make(chan inspection, 1)}
	go func() {
		var m *vcon.Meta
		var err error
		if spool != nil {
			m, err = vcon.InspectSigned(pr, gzip, maxSize, spool)
		} else {
			m, err = vcon.Inspect(pr, gzip, maxSize)
		}
		// A verdict reached before the end fails the writes still to come
		// with it, so the copy stops there.
		pr.CloseWithError(err)
		in.done <- inspection{m, err}
	}()
	return in
}

func (in *inspector) Write(p []byte) (int, error) { return in.pw.Write(p) }

// verdict ends the bytes with the copy's error, if any, and waits for the
// inspection.
func (in *inspector) verdict(copyErr error) (*vcon.Meta, error) {
	in.pw.CloseWithError(copyErr)
	r := <-in.done
	return r.meta, r.err
}
