// Package vocab is the product's vocabulary: the values a tenant's search
// setting, a version's form and a tenant's metadata level take. The
// catalog holds them in text columns, vcon reads a vCon's form, search
// and parquetstore choose fields by them; each has one type, one list
// and, where people type it, one parser whose refusal the docs quote word
// for word. It imports nothing of the module, so the packages that only
// need these words do not pull in the catalog and its SQLite driver.
package vocab

import (
	"fmt"
	"strings"
)

// SearchMode is a tenant's search setting (docs/search.md): which fields
// of its vCons the blind index holds.
type SearchMode string

const (
	// SearchOff: no index (the default).
	SearchOff SearchMode = "off"
	// SearchParties indexes each party's tel, mailto and name.
	SearchParties SearchMode = "parties"
	// SearchPartiesSubject also indexes each word of the subject.
	SearchPartiesSubject SearchMode = "parties+subject"
)

// SearchModes lists the search settings.
var SearchModes = []SearchMode{SearchOff, SearchParties, SearchPartiesSubject}

// ParseSearchMode reads a search setting by its name.
func ParseSearchMode(s string) (SearchMode, error) { return parse("search setting", SearchModes, s) }

// parse finds the setting named s among modes, or says which there are.
func parse[M ~string](what string, modes []M, s string) (M, error) {
	names := make([]string, len(modes))
	for i, m := range modes {
		if string(m) == s {
			return m, nil
		}
		names[i] = string(m)
	}
	last := len(names) - 1
	return "", fmt.Errorf("unknown %s %q: use %s or %s", what, s, strings.Join(names[:last], ", "), names[last])
}

// Form is the form a version was stored in (docs/api.md, "Store"); the
// server reads it from the vCon and never changes it.
type Form string

const (
	// FormUnsigned: a JSON object with parties and the rest.
	FormUnsigned Form = "unsigned"
	// FormSigned: JWS general serialization.
	FormSigned Form = "signed"
	// FormEncrypted: JWE general serialization.
	FormEncrypted Form = "encrypted"
)

// Level is a tenant's metadata level (docs/export.md): which clear
// columns its export files carry. Each level adds columns to the one
// before it.
type Level string

const (
	// LevelNone: version, stored_at and sealed only (the default).
	LevelNone Level = "none"
	// LevelForm adds form, gzip and size.
	LevelForm Level = "form"
	// LevelTimes adds created_at and updated_at.
	LevelTimes Level = "times"
	// LevelCounts adds party_count, dialog_count, lawful_basis and expires_at.
	LevelCounts Level = "counts"
	// LevelFull adds uuid, subject and parties.
	LevelFull Level = "full"
)

// Levels lists the metadata levels, each adding to the one before.
var Levels = []Level{LevelNone, LevelForm, LevelTimes, LevelCounts, LevelFull}

// ParseLevel reads a metadata level by its name, refusing any other text
// with the valid names.
func ParseLevel(s string) (Level, error) {
	names := make([]string, len(Levels))
	for i, l := range Levels {
		if string(l) == s {
			return l, nil
		}
		names[i] = string(l)
	}
	return "", fmt.Errorf("unknown metadata level %q: use one of %s", s, strings.Join(names, ", "))
}

// LawfulMode is a tenant's lawful-basis setting (docs/lawful-basis.md):
// what a store does with a vCon's lawful-basis attachments.
type LawfulMode string

const (
	// LawfulOff: nothing is refused; what the attachments say is still
	// recorded (the default).
	LawfulOff LawfulMode = "off"
	// LawfulEnforce refuses a vCon whose attachment is malformed.
	LawfulEnforce LawfulMode = "enforce"
	// LawfulRequire also refuses a vCon that shows no lawful basis.
	LawfulRequire LawfulMode = "require"
)

// LawfulModes lists the lawful-basis settings.
var LawfulModes = []LawfulMode{LawfulOff, LawfulEnforce, LawfulRequire}

// ParseLawfulMode reads a lawful-basis setting by its name.
func ParseLawfulMode(s string) (LawfulMode, error) {
	return parse("lawful-basis setting", LawfulModes, s)
}

// SignatureMode is a tenant's signature policy (docs/signatures.md): off
// stores signed vCons as sent; verify checks every signed one as it
// streams in; require also refuses unsigned ones.
type SignatureMode string

// The signature policies.
const (
	SignaturesOff     SignatureMode = "off"
	SignaturesVerify  SignatureMode = "verify"
	SignaturesRequire SignatureMode = "require"
)

// SignatureModes lists the signature policies.
var SignatureModes = []SignatureMode{SignaturesOff, SignaturesVerify, SignaturesRequire}

// ParseSignatureMode reads a signature policy by its name.
func ParseSignatureMode(s string) (SignatureMode, error) {
	return parse("signature policy", SignatureModes, s)
}
