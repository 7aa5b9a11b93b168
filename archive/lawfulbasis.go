package archive

import (
	"context"
	"errors"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/vcon"
	"github.com/vcon-server/vcon-server/vcon/lawfulbasis"
)

// LawfulBasisRefused is a store the tenant's lawful-basis mode refuses
// (docs/lawful-basis.md): HTTP 422, Reason in the body.
type LawfulBasisRefused struct {
	Mode   vocab.LawfulMode
	Reason string
}

func (e *LawfulBasisRefused) Error() string {
	return "the tenant's lawful-basis mode is " + string(e.Mode) + ": " + e.Reason
}

// lawfulRefusal applies the tenant's lawful-basis mode to what the
// inspection read: enforce refuses a malformed attachment, require also a
// vCon that shows no lawful basis (none, or one that cannot be read). A
// vCon with a well-formed basis costs no query: no mode refuses it.
func (a *Archive) lawfulRefusal(ctx context.Context, tenant ids.ID, m *vcon.Meta) error {
	basis := m.LawfulBasis.Basis
	if m.LawfulBasisErr == nil && basis != lawfulbasis.None && basis != lawfulbasis.Unknown {
		return nil
	}
	mode, err := a.Cat.LawfulModeOf(ctx, tenant)
	if err != nil {
		return wrapf("store: read the tenant's lawful-basis mode", err)
	}
	var malformed *lawfulbasis.Error
	switch {
	case mode == vocab.LawfulOff:
		return nil
	case errors.As(m.LawfulBasisErr, &malformed):
		return &LawfulBasisRefused{Mode: mode, Reason: malformed.Reason + "; nothing was stored"}
	case m.LawfulBasisErr != nil:
		return m.LawfulBasisErr
	case mode != vocab.LawfulRequire:
		return nil
	case basis == lawfulbasis.Unknown:
		return &LawfulBasisRefused{Mode: mode, Reason: "the vCon is " + string(m.Form) + " and its lawful basis cannot be read; send it unsigned or signed, with a lawful_basis attachment (draft-howe-vcon-lawful-basis); nothing was stored"}
	}
	return &LawfulBasisRefused{Mode: mode, Reason: `the vCon has no attachment with purpose "lawful_basis" (draft-howe-vcon-lawful-basis); add one; nothing was stored`}
}

// EraseExpired erases, a tenant at a time, the vCons whose current
// lawful basis expired more than LawfulSkew ago, under a tenant that
// enforces (docs/lawful-basis.md, "Expiry"): as POST /erasures erases
// uuids, key first, then bytes, with a receipt whose reason is
// lawful_basis_expired. A held vCon waits for its release. One erasure
// a tenant takes up to MaxErasure vCons; the next sweep takes more.
func (a *Archive) EraseExpired(ctx context.Context) error {
	before := a.now().Add(-a.LawfulSkew)
	tenants, err := a.Cat.ExpiredTenants(ctx, before)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range tenants {
		_, err := a.Erase(ctx, EraseRequest{Tenant: t, Kind: "uuids", Actor: "server", Label: "lawful_basis", ExpiredBefore: &before})
		if err != nil && !errors.Is(err, catalog.ErrNothingExpired) {
			errs = append(errs, wrapf("erase at a lawful basis's expiry", err))
		}
	}
	return errors.Join(errs...)
}
