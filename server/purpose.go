package server

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/vcon/lawfulbasis"
)

// Purposes at the door (docs/lawful-basis.md): under a tenant's enforce
// or require mode, a read by a key bound to purposes is decided for one
// of them against the current version's lawful basis, read with the row
// the read reads anyway. The decision goes into the request's audit
// record, in its action (purposeAction), so that a record's leaf keeps
// the fields it has and audit verify recomputes it from its row.

// PurposeHeader names the purpose a request reads for, needed when its
// key has several.
const PurposeHeader = "Vcon-Purpose"

// purposeCtx holds a request's purpose note.
type purposeCtx struct{}

// purposeNote is what a request decided for its purpose, for its record.
type purposeNote struct {
	purpose  string // "" for a key bound to none: read as without a mode
	why      string // a lawfulbasis.Why word when denied
	withheld int    // what a listing left out
	counted  bool   // withheld applies (a listing decided)
}

// decidedRoute reports whether a route's reads are decided for a purpose:
// a vCon, its versions, a listing or search. GET .../lawful-basis is not:
// it answers the basis itself, and is how a caller learns why it is
// denied.
func decidedRoute(action string) bool {
	return action == "read" || action == "versions" || action == "list"
}

// enforces reports whether the tenant of k decides reads for purposes.
func enforces(k catalog.Key) bool {
	return k.LawfulMode == vocab.LawfulEnforce || k.LawfulMode == vocab.LawfulRequire
}

// resolvePurpose finds the purpose a request reads for, or the refusal:
// 400 when the key has several and the request names none (or names one
// badly), 403 when it names one the key lacks, or when the tenant
// requires a purpose and the key is bound to none.
func resolvePurpose(k catalog.Key, r *http.Request) (purpose string, status int, msg string) {
	named := r.Header.Values(PurposeHeader)
	if len(named) > 1 {
		return "", http.StatusBadRequest, "send the " + PurposeHeader + " header once, naming one purpose"
	}
	p := ""
	if len(named) == 1 {
		p = strings.TrimSpace(named[0])
		if !lawfulbasis.ValidPurpose(p) {
			return "", http.StatusBadRequest, "the " + PurposeHeader + " header must name a purpose of 1 to 64 characters of a-z, 0-9 and _"
		}
	}
	switch {
	case len(k.Purposes) == 0 && k.LawfulMode == vocab.LawfulRequire:
		return "", http.StatusForbidden, "this tenant requires every read to be for a purpose and this key is bound to none; an operator makes one with vcon-server key create --purpose"
	case p != "" && !slices.Contains(k.Purposes, p):
		return "", http.StatusForbidden, "this key is not bound to the purpose " + p + " named in " + PurposeHeader + "; it reads for: " + purposeList(k.Purposes)
	case p != "":
		return p, 0, ""
	case len(k.Purposes) == 1:
		return k.Purposes[0], 0, ""
	case len(k.Purposes) > 1:
		return "", http.StatusBadRequest, "this key reads for several purposes (" + purposeList(k.Purposes) + "): name one with the " + PurposeHeader + " header"
	}
	return "", 0, "" // a key bound to none, under enforce: read as today
}

func purposeList(ps []string) string {
	if len(ps) == 0 {
		return "none"
	}
	return strings.Join(ps, ", ")
}

// noteOf is the request's purpose note, nil when its reads are not
// decided (mode off, a route not decided, or a key bound to none).
func noteOf(r *http.Request) *purposeNote {
	n, _ := r.Context().Value(purposeCtx{}).(*purposeNote)
	if n == nil || n.purpose == "" {
		return nil
	}
	return n
}

// withPurpose holds note in r's context.
func withPurpose(r *http.Request, note *purposeNote) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), purposeCtx{}, note))
}

// purposeAction is action as the request's record names it: with the
// purpose it read for, why it was denied, and what a listing withheld,
// as words after the action (docs/keys-and-audit.md).
func purposeAction(action string, r *http.Request) string {
	n := noteOf(r)
	if n == nil {
		return action
	}
	return lawfulbasis.Action(action, n.purpose, n.why, int64(n.withheld), n.counted)
}

// baseAction is the route's action of a record's action text.
func baseAction(action string) string {
	a, _, _ := strings.Cut(action, " ")
	return a
}

// deniedError is a read a purpose may not make.
type deniedError struct{ purpose, why string }

func (e *deniedError) Error() string { return "lawful basis: denied for " + e.purpose + ": " + e.why }

// decide checks a vCon's current lawful basis for the request's purpose:
// nil when allowed or not decided, a *deniedError otherwise (noted for
// the record).
func (s *Server) decide(r *http.Request, sum lawfulbasis.Summary) error {
	n := noteOf(r)
	if n == nil {
		return nil
	}
	if ok, why := sum.Decide(n.purpose, time.Now(), s.LawfulSkew); !ok {
		n.why = why
		return &deniedError{n.purpose, why}
	}
	return nil
}

// denialText says why, for a caller, in words of what to do next.
var denialText = map[string]string{
	lawfulbasis.WhyMissing:   "the vCon has no lawful basis",
	lawfulbasis.WhyUnknown:   "the vCon's lawful basis cannot be read (it is encrypted)",
	lawfulbasis.WhyMalformed: "the vCon's lawful basis is malformed",
	lawfulbasis.WhyExpired:   "the vCon's lawful basis has expired",
	lawfulbasis.WhyRefused:   "the vCon's lawful basis refuses the purpose",
	lawfulbasis.WhyNoGrant:   "the vCon's lawful basis grants nothing for the purpose",
}

// denialMessage says why e denied a read, and that where shows the grants.
func denialMessage(e *deniedError, where string) string {
	return denialText[e.why] + ": reading for " + e.purpose + " is not allowed; " + where + " shows its grants"
}

// unavailable answers 451 for a denied read: the purpose and why, and
// where to look (GET /vcons/{uuid}/lawful-basis).
func unavailable(w http.ResponseWriter, e *deniedError) int {
	writeJSON(w, http.StatusUnavailableForLegalReasons, map[string]string{
		"error":   denialMessage(e, "GET /vcons/{uuid}/lawful-basis"),
		"purpose": e.purpose,
		"reason":  e.why,
	})
	return http.StatusUnavailableForLegalReasons
}

// withhold leaves out of uuids, a page of a listing or search, what the
// request's purpose may not see, in one read of their rows; it counts
// them in the note. Not decided, uuids come back as they are.
func (s *Server) withhold(r *http.Request, tenant ids.ID, uuids []string) ([]string, int, bool, error) {
	n := noteOf(r)
	if n == nil {
		return uuids, 0, false, nil
	}
	list := make([]ids.ID, 0, len(uuids))
	for _, u := range uuids {
		id, err := ids.Parse(u)
		if err != nil {
			return nil, 0, false, err
		}
		list = append(list, id)
	}
	bases, err := s.Cat.CurrentLawful(r.Context(), tenant, list)
	if err != nil {
		return nil, 0, false, err
	}
	now := time.Now()
	kept := uuids[:0:0]
	for i, id := range list {
		// A vCon gone since the page was read has no basis: withheld.
		if ok, _ := bases[id].Decide(n.purpose, now, s.LawfulSkew); ok {
			kept = append(kept, uuids[i])
		}
	}
	n.counted, n.withheld = true, len(uuids)-len(kept)
	return kept, n.withheld, true, nil
}
