package archive

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/receipt"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/search"
)

// MaxErasure is the most vCons one erasure takes; a filter that matches
// more is refused before anything changes (docs/erasure.md).
const MaxErasure = 10000

// EraseKinds are the filters an erasure takes, one at a time.
var EraseKinds = []string{"tel", "mailto", "name", "uuids"}

// EraseRequest is one erasure for a data subject: a party's tel, mailto
// or name, looked up in the tenant's index as a search is, or uuids.
type EraseRequest struct {
	Tenant       ids.ID
	Kind         string
	Value        string   // tel, mailto, name
	UUIDs        []ids.ID // uuids
	Actor, Label string   // the key that asked, for the audit log
	// ExpiredBefore, when set, makes it an erasure at expiry
	// (EraseExpired): the vCons whose lawful basis expired before it.
	ExpiredBefore *time.Time
}

var (
	// ErrEraseNothing: a party filter that normalises to nothing, so it
	// can match nothing.
	ErrEraseNothing = errors.New("the filter holds nothing a party is indexed by")
	// ErrNoSigningKey: the catalog holds no receipt signing key; serve
	// makes one at start.
	ErrNoSigningKey = errors.New("archive: the catalog holds no receipt signing key")
)

// ErasePending is an erasure whose keys are destroyed, so that nothing it
// took can be read, but whose purges are not all done; the sweep, or the
// next start, finishes them and records the erasure done.
type ErasePending struct {
	ID  ids.ID
	Err error
	// Replica: what waits is the catalog's replica, not storage.
	Replica bool
}

func (e *ErasePending) Error() string {
	return "erasure: the purges are not all done: " + e.Err.Error()
}

func (e *ErasePending) Unwrap() error { return e.Err }

// Erase runs one erasure to its end (docs/FORMAT.md, "Erasure"): a first
// transaction records it and the batches it takes, each batch's
// transaction hides its vCons and destroys their keys whatever the
// retention, then each purge goes on as any purge does, and only once
// none is left is the erasure recorded done, with its signed receipt.
// Past the first transaction an error is an *ErasePending.
func (a *Archive) Erase(ctx context.Context, r EraseRequest) (catalog.Erasure, error) {
	cr := catalog.EraseRequest{ID: ids.NewV7(a.now()), Tenant: r.Tenant, Kind: r.Kind, Actor: r.Actor, Label: r.Label,
		UUIDs: r.UUIDs, Limit: MaxErasure, ExpiredBefore: r.ExpiredBefore}
	switch {
	case r.ExpiredBefore != nil:
		// The first transaction chooses them (catalog.Tx.BeginErasure).
	case r.Kind == "uuids":
		if len(r.UUIDs) > MaxErasure {
			return catalog.Erasure{}, &catalog.TooManyError{Matched: len(r.UUIDs), Limit: MaxErasure}
		}
		// What the tenant holds is read as the erasure starts: a uuid it
		// holds nothing of is counted, never written (docs/erasure.md).
		known, err := a.Cat.Known(ctx, r.Tenant, r.UUIDs)
		if err != nil {
			return catalog.Erasure{}, err
		}
		cr.UUIDs, cr.NotFound = known, len(r.UUIDs)-len(known)
	default:
		tk, err := a.TenantKey(ctx, r.Tenant)
		if err != nil {
			return catalog.Erasure{}, err
		}
		t, ok := search.Query(tk.IndexKey(), r.Kind, r.Value)
		if !ok {
			return catalog.Erasure{}, ErrEraseNothing
		}
		cr.Token = &t
		n, err := a.Cat.CountUnsearchable(ctx, r.Tenant)
		if err != nil {
			return catalog.Erasure{}, err
		}
		cr.Unsearchable = n
	}
	var e catalog.Erasure
	err := a.Cat.Update(ctx, func(tx *catalog.Tx) error {
		var err error
		e, err = tx.BeginErasure(cr)
		return err
	})
	if err != nil {
		return e, err
	}
	// The sweep leaves this erasure's batches to this call.
	a.erasing.Store(e.ID, true)
	defer a.erasing.Delete(e.ID)
	destroyed, err := a.Cat.RunErasure(ctx, e.ID, func() { crashpoint.Hit(crashpoint.EraseAfterBatch) })
	if err != nil {
		return e, a.erasePending(ctx, e.ID, err)
	}
	crashpoint.Hit(crashpoint.EraseAfterKeys)
	if len(destroyed) > 0 {
		if err := a.finishBatch(ctx, destroyed); err != nil {
			return e, a.erasePending(ctx, e.ID, err)
		}
	}
	return a.finishErasure(ctx, e.Tenant, e.ID)
}

// FinishErasures finishes every erasure not recorded done that no call
// of this process is running: the sweep's and the start's, after they
// finished the purges a crash left. An erasure a crash cut between two
// batches takes the batches left first.
func (a *Archive) FinishErasures(ctx context.Context) error {
	running, err := a.Cat.RunningErasures(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range running {
		if _, ok := a.erasing.Load(id); ok {
			continue
		}
		tenant, err := a.Cat.ErasureTenant(ctx, id)
		if err == nil {
			if _, err = a.Cat.RunErasure(ctx, id, nil); err != nil {
				err = a.erasePending(ctx, id, err)
			}
		}
		if err == nil {
			_, err = a.finishErasure(ctx, tenant, id)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// finishErasure ends the purges the erasure still waits for, whoever
// started them, then records it done with its receipt.
func (a *Archive) finishErasure(ctx context.Context, tenant, id ids.ID) (catalog.Erasure, error) {
	waiting, err := a.Cat.ErasurePurging(ctx, id)
	if err != nil {
		return catalog.Erasure{}, a.erasePending(ctx, id, err)
	}
	if len(waiting) > 0 {
		// Their keys were destroyed by an earlier transaction, maybe of an
		// earlier process: out of the log, and out of the replica, before
		// any byte goes (invariant 4).
		err := a.checkpoint(ctx)
		if err == nil {
			err = a.forget(ctx)
		}
		for _, v := range waiting {
			if err != nil {
				break
			}
			err = a.finishVersion(ctx, v)
		}
		if err != nil {
			return catalog.Erasure{}, a.erasePending(ctx, id, err)
		}
	}
	crashpoint.Hit(crashpoint.EraseAfterPurges)
	e, err := a.Cat.Erasure(ctx, tenant, id)
	if err != nil || e.DoneAt != nil {
		return e, err
	}
	key, err := a.signingKey(ctx)
	if err != nil {
		return e, a.erasePending(ctx, id, err)
	}
	items, err := a.erasedAll(ctx, id)
	if err != nil {
		return e, a.erasePending(ctx, id, err)
	}
	done := a.now().UTC()
	p := Receipt(e, items, done)
	jws, err := receipt.Sign(key, p)
	if err != nil {
		return e, a.erasePending(ctx, id, err)
	}
	var digest string
	if p.Digest != nil {
		digest = p.Digest.SHA256
	}
	var finished bool
	err = a.Cat.Update(ctx, func(tx *catalog.Tx) error {
		var err error
		finished, err = tx.FinishErasure(id, done, jws, digest, eraseRecord(e), tenant)
		if err == nil && finished {
			err = erasureCompleted(tx, e)
		}
		return err
	})
	if err != nil {
		return e, a.erasePending(ctx, id, err)
	}
	e, err = a.Cat.Erasure(ctx, tenant, id)
	if err == nil && e.DoneAt == nil {
		// A store or a sweep started a purge of one of its uuids meanwhile.
		err = a.erasePending(ctx, id, errors.New("a purge of one of its vCons started meanwhile"))
	}
	return e, err
}

// erasureCompleted runs inside the transaction that records an erasure
// done, once: it writes the erasure's erasure.completed webhook event
// (docs/webhooks.md), which goes out with that commit or not at all.
func erasureCompleted(tx *catalog.Tx, e catalog.Erasure) error {
	return tx.ErasureCompleted(e.Tenant, e.ID)
}

// erasePending records why an erasure waits, for GET /erasures/{id}, and
// returns it as an *ErasePending.
func (a *Archive) erasePending(ctx context.Context, id ids.ID, err error) error {
	a.logError("erasure: the purges wait for the sweep", err)
	msg := "a purge could not finish yet; the purge sweep retries it"
	if errors.Is(err, errForget) {
		msg = "the catalog's replica did not yet roll over to forget the destroyed keys; the purge sweep retries it"
	}
	if serr := a.Cat.SetErasureError(context.WithoutCancel(ctx), id, msg); serr != nil {
		a.logError("erasure: record why it waits", serr)
	}
	return &ErasePending{ID: id, Err: err, Replica: errors.Is(err, errForget)}
}

// eraseRecord is the audit record of a finished erasure: its counts, and
// that it overrode the retention; never the filter's value.
func eraseRecord(e catalog.Erasure) catalog.Record {
	return catalog.Record{Actor: e.Actor, Label: e.Label, Action: "erase", Status: 200,
		Target: fmt.Sprintf("erasure=%s filter=%s vcons=%d versions=%d held=%d not_found=%d unsearchable=%d retention=overridden%s",
			e.ID, e.Kind, e.Totals.Vcons, e.Totals.Versions, e.Totals.Held, e.NotFound, e.Unsearchable, reasonField(e.Reason))}
}

// reasonField is " reason=R" for an erasure the server made on its own.
func reasonField(reason string) string {
	if reason == "" {
		return ""
	}
	return " reason=" + reason
}

// ErasedPageSize is how many uuids (erased and held together) one answer
// of an erasure lists (docs/erasure.md, "Large erasures").
const ErasedPageSize = 1000

// erasedAll reads every uuid of an erasure, a page at a time.
func (a *Archive) erasedAll(ctx context.Context, id ids.ID) ([]catalog.Erased, error) {
	var all []catalog.Erased
	var after *ids.ID
	for {
		page, more, err := a.Cat.ErasedPage(ctx, id, after, ErasedPageSize)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if !more {
			return all, nil
		}
		after = &page[len(page)-1].UUID
	}
}

// Receipt is the payload of an erasure's receipt, done at done, from
// every uuid it took or found held: the lists themselves, or past
// receipt.MaxListed entries their digest.
func Receipt(e catalog.Erasure, items []catalog.Erased, done time.Time) receipt.Payload {
	p := receipt.Payload{Erasure: e.ID.String(), Tenant: e.Tenant.String(), Filter: e.Kind,
		RequestedAt: e.RequestedAt.UTC().Format(time.RFC3339Nano), DoneAt: done.UTC().Format(time.RFC3339Nano),
		NotFound: e.NotFound, Unsearchable: e.Unsearchable, Reason: e.Reason}
	erased, held := Lists(items)
	if len(erased)+len(held) > receipt.MaxListed {
		d := receipt.ListsDigest(erased, held)
		p.Digest = &d
	} else {
		p.Erased, p.Held = erased, held
	}
	return p
}

// Lists are an erasure's uuids as its answer and its receipt list them:
// those it took, and those it found held; both in uuid order, never nil.
func Lists(items []catalog.Erased) ([]receipt.Item, []string) {
	erased, held := []receipt.Item{}, []string{}
	for _, it := range items {
		if it.Held {
			held = append(held, it.UUID.String())
		} else {
			erased = append(erased, receipt.Item{UUID: it.UUID.String(), Versions: it.Versions, Whole: it.Whole})
		}
	}
	return erased, held
}

// signingKey opens the newest receipt signing key.
func (a *Archive) signingKey(ctx context.Context) (ed25519.PrivateKey, error) {
	return OpenKey(ctx, a.Cat, a.Key, catalog.PurposeReceipt)
}

// JWKS is the public half of every receipt signing key.
func (a *Archive) JWKS(ctx context.Context) (receipt.Set, error) {
	return JWKS(ctx, a.Cat)
}

// JWKS is the public half of every receipt signing key of cat.
func JWKS(ctx context.Context, cat *catalog.Catalog) (receipt.Set, error) {
	keys, err := cat.SigningKeys(ctx)
	if err != nil {
		return receipt.Set{}, err
	}
	set := receipt.Set{Keys: []receipt.JWK{}}
	for _, k := range keys {
		jwk := receipt.PublicJWK(ed25519.PublicKey(k.Public))
		jwk.Kid = k.KID // as the catalog names it, for Check to hold to the key
		set.Keys = append(set.Keys, jwk)
	}
	if err := set.Check(); err != nil {
		return receipt.Set{}, fmt.Errorf("archive: the catalog's receipt signing keys were changed outside vcon-server: %w", err)
	}
	return set, nil
}

// EnsureSigningKey makes the receipt signing key of cat unless it has
// one: init makes it, and the first start of a catalog made before
// (EnsureKey).
func EnsureSigningKey(ctx context.Context, cat *catalog.Catalog, mk *seal.MasterKey) (bool, error) {
	return EnsureKey(ctx, cat, mk, catalog.PurposeReceipt)
}

// EnsureKey makes cat's Ed25519 signing key of purpose (a receipt key,
// the audit logs' key) unless it has one. The seed is wrapped under the
// master key as a data key is, for the catalog id and the key's own id
// (docs/FORMAT.md, "Erasure"), so that a master-key rotation rewraps it
// with the others.
func EnsureKey(ctx context.Context, cat *catalog.Catalog, mk *seal.MasterKey, purpose string) (bool, error) {
	if keys, err := cat.SigningKeysFor(ctx, purpose); err != nil || len(keys) > 0 {
		return false, err
	}
	var seed seal.DataKey
	if _, err := rand.Read(seed[:]); err != nil {
		return false, fmt.Errorf("archive: make the %s signing key: %w", purpose, err)
	}
	pub := ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)
	k := catalog.SigningKey{KID: receipt.KeyID(pub), ID: ids.NewRandom(), Public: pub, Purpose: purpose}
	var err error
	if k.Wrapped, err = mk.Wrap(seed, cat.ID, k.ID); err != nil {
		return false, err
	}
	var added bool
	err = cat.Update(ctx, func(tx *catalog.Tx) error {
		var err error
		added, err = tx.AddSigningKey(k)
		return err
	})
	return added, err
}

// OpenKey opens cat's newest signing key of purpose; ErrNoSigningKey
// when it has none.
func OpenKey(ctx context.Context, cat *catalog.Catalog, mk *seal.MasterKey, purpose string) (ed25519.PrivateKey, error) {
	keys, err := cat.SigningKeysFor(ctx, purpose)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, ErrNoSigningKey
	}
	k := keys[len(keys)-1]
	seed, err := mk.Unwrap(k.Wrapped, cat.ID, k.ID)
	if err != nil {
		return nil, fmt.Errorf("archive: open the %s signing key: %w", purpose, err)
	}
	return ed25519.NewKeyFromSeed(seed[:]), nil
}
