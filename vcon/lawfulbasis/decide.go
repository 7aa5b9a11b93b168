package lawfulbasis

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Basis values of a Summary that are not one of Bases.
const (
	// None: the vCon has no lawful-basis attachment.
	None = ""
	// Unknown: the vCon cannot be read (encrypted, or a signed one whose
	// payload is not an unsigned vCon), so neither can its lawful basis.
	Unknown = "unknown"
	// Malformed: an attachment broke a rule of Parse, and the tenant
	// stored the vCon anyway (its mode is off).
	Malformed = "malformed"
)

// Summary is what the catalog keeps of a version's lawful basis, and all
// that a decision needs: the basis, the expiry, and each purpose granted
// or refused. Nothing else of the vCon: a purpose is a vocabulary word
// (ValidPurpose), not personal data.
type Summary struct {
	// Basis is one of Bases, None, Unknown or Malformed. Attachments that
	// name different bases give them all, in their order, joined by ",".
	Basis string
	// Expires is the earliest expiration of the attachments; nil when
	// none expires.
	Expires *time.Time
	// Granted are the purposes every grant for which is true; Refused
	// those with at least one grant false. Each is sorted, and no purpose
	// is in both.
	Granted []string
	Refused []string
}

// Summarize folds a vCon's lawful-basis attachments into one Summary,
// the most restrictive reading of them all (the draft's "Granular
// Permission Evaluation", item 3): a purpose refused by any grant of any
// attachment is refused, and the earliest expiration holds for all.
func Summarize(atts []Attachment) Summary {
	var s Summary
	if len(atts) == 0 {
		return s
	}
	var bases []string
	granted := map[string]bool{}
	for _, a := range atts {
		if !slices.Contains(bases, a.Basis) {
			bases = append(bases, a.Basis)
		}
		if a.Expiration != nil && (s.Expires == nil || a.Expiration.Before(*s.Expires)) {
			t := a.Expiration.UTC()
			s.Expires = &t
		}
		for _, g := range a.Grants {
			if was, seen := granted[g.Purpose]; !seen || was {
				granted[g.Purpose] = g.Granted
			}
		}
	}
	s.Basis = strings.Join(bases, ",")
	for p, ok := range granted {
		if ok {
			s.Granted = append(s.Granted, p)
		} else {
			s.Refused = append(s.Refused, p)
		}
	}
	slices.Sort(s.Granted)
	slices.Sort(s.Refused)
	return s
}

// Why a decision denies, the words an answer and an audit record use
// (the draft's error names in its "Error Handling" section).
const (
	WhyMissing   = "no_lawful_basis" // LawfulBasisMissingError
	WhyUnknown   = "lawful_basis_unreadable"
	WhyMalformed = "lawful_basis_malformed"
	WhyExpired   = "lawful_basis_expired" // LawfulBasisExpiredError
	WhyRefused   = "purpose_refused"      // PermissionDeniedError
	WhyNoGrant   = "no_grant_for_purpose" // LawfulBasisMissingError, for the purpose
	WhyGranted   = "granted"
)

// Decide says whether processing for purpose is allowed at now, the
// draft's "Temporal Validity" and "Granular Permission Evaluation": a
// basis must exist and be readable; it must not have expired, with skew
// of tolerance for the clocks of whoever wrote the expiration; a grant
// for the purpose must exist and none may refuse it. why is one of the
// Why words.
func (s Summary) Decide(purpose string, now time.Time, skew time.Duration) (allowed bool, why string) {
	switch s.Basis {
	case None:
		return false, WhyMissing
	case Unknown:
		return false, WhyUnknown
	case Malformed:
		return false, WhyMalformed
	}
	if s.Expired(now, skew) {
		return false, WhyExpired
	}
	if _, refused := slices.BinarySearch(s.Refused, purpose); refused {
		return false, WhyRefused
	}
	if _, granted := slices.BinarySearch(s.Granted, purpose); granted {
		return true, WhyGranted
	}
	return false, WhyNoGrant
}

// Expired reports whether the basis has expired at now: later than its
// expiration by more than skew. A basis without expiration never does.
func (s Summary) Expired(now time.Time, skew time.Duration) bool {
	return s.Expires != nil && now.After(s.Expires.Add(skew))
}

// Action is an audit record's action for what was decided for purpose
// (docs/FORMAT.md, "Lawful basis"): action, then " purpose=P", then
// " denied=WHY" when why is a denial, then " withheld=N" when counted (a
// listing's or an export's count of what it left out, never which).
func Action(action, purpose, why string, withheld int64, counted bool) string {
	action += " purpose=" + purpose
	if why != "" {
		action += " denied=" + why
	}
	if counted {
		action += " withheld=" + strconv.FormatInt(withheld, 10)
	}
	return action
}
