package export

import (
	"context"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/vcon/lawfulbasis"
)

// An export for a purpose (docs/export.md, "Export for a purpose") keeps
// the versions a read for that purpose may see, by the read's own rule
// (docs/lawful-basis.md, "Purposes at the door"): every version of a vCon,
// current or hidden, is decided on its vCon's current lawful basis, so a
// grant withdrawn by a later version withholds the earlier ones too. The
// operator named the purpose, so it is decided whatever the tenant's mode.

// withheldOf decides each version of page for the export's purpose, with
// one read of the current versions' rows, as a listing decides its page;
// the clock is the export's start, the moment it copies. A vCon with no
// current version (deleted, its versions kept) has no basis: withheld.
func (x *run) withheldOf(ctx context.Context, page []catalog.Version) ([]bool, error) {
	seen := make(map[ids.ID]bool, len(page))
	uuids := make([]ids.ID, 0, len(page))
	for _, v := range page {
		if !seen[v.UUID] {
			seen[v.UUID] = true
			uuids = append(uuids, v.UUID)
		}
	}
	bases, err := x.opt.Archive.Cat.CurrentLawful(ctx, x.opt.Tenant.ID, uuids)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(page))
	for i, v := range page {
		ok, _ := bases[v.UUID].Decide(x.opt.Purpose, x.now, x.opt.Skew)
		out[i] = !ok
	}
	return out, nil
}

// action is the export's audit action: with a purpose, it says so and how
// many versions were withheld, as a listing's record does.
func (x *run) action() string {
	if x.opt.Purpose == "" {
		return "export"
	}
	return lawfulbasis.Action("export", x.opt.Purpose, "", x.withheld, true)
}

func purposeText(p string) *string {
	if p == "" {
		return nil
	}
	return &p
}

// lawful says whether the files carry the lawful-basis columns: for a
// tenant whose lawful-basis mode is not off, and for an export for a
// purpose (docs/export.md); other files keep the columns of their level.
func (x *run) lawful() bool {
	return x.opt.Purpose != "" || (x.opt.Tenant.LawfulBasis != "" && x.opt.Tenant.LawfulBasis != vocab.LawfulOff)
}
