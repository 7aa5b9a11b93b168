// Package lawfulbasis reads and checks a vCon's lawful-basis attachments
// (draft-howe-vcon-lawful-basis-02): the attachments whose purpose is
// "lawful_basis", each naming the basis for processing the conversation,
// when that basis expires and, purpose by purpose, whether processing for
// it is granted. It knows nothing of the scanner that finds them in a
// streaming vCon (package vcon hands it each one's bytes), of the catalog
// that keeps what it read, or of HTTP: its errors are reasons for a 422
// body, and name no value of the vCon but its own field paths.
//
// Parse checks one attachment against every rule of the draft's "Lawful
// Basis Attachment Structure" and "Processing Requirements" sections:
// the basis is one of the six, times are RFC 3339, party and dialog
// indexes exist (CheckRefs, once the vCon's arrays are counted), a
// content_hash matches the JCS form of the body, purposes are vocabulary
// words of 1 to 64 characters of [a-z0-9_], at most MaxGrants grants.
// Summarize folds a vCon's attachments into the Summary the catalog keeps;
// Summary.Decide answers whether processing for a purpose is allowed.
package lawfulbasis

import (
	"crypto/sha256"
	"crypto/sha3"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// Limits of what is read. The draft sets none but the grants'; the others
// keep memory bounded whatever a vCon holds (a real attachment is well
// under 4 KiB).
const (
	MaxGrants         = 100      // purpose_grants in one attachment
	MaxPurposeLen     = 64       // bytes of a grant's purpose
	MaxAttachmentSize = 64 << 10 // bytes of one lawful-basis attachment as sent
	MaxAttachments    = 16       // lawful-basis attachments in one vCon
)

// Bases are the six lawful bases the draft names, in its order.
var Bases = []string{"consent", "contract", "legal_obligation", "vital_interests", "public_task", "legitimate_interests"}

// Grant is one entry of purpose_grants.
type Grant struct {
	Purpose string
	Granted bool
	At      time.Time // granted_at
}

// Attachment is what one lawful-basis attachment says.
type Attachment struct {
	Basis string
	// Expiration is nil for a basis of indefinite validity (null).
	Expiration *time.Time
	Grants     []Grant
	// Party and Dialog are the indexes the attachment names (Dialog may
	// list several), checked by CheckRefs.
	Party  int
	Dialog []int
	// Index is the attachment's position in the vCon's attachments, for
	// the caller's reasons; Parse leaves it 0.
	Index int
}

// Error is a malformed lawful-basis attachment: Reason, a sentence for the
// 422 body, says which field is wrong and what it must be.
type Error struct {
	Reason string
}

func (e *Error) Error() string { return "malformed lawful_basis attachment: " + e.Reason }

func errorf(format string, args ...any) error {
	return &Error{Reason: fmt.Sprintf(format, args...)}
}

// Parse reads one attachment object, b as it was sent, whose purpose is
// "lawful_basis", or which has no purpose and whose type is (IsLegacy).
// It returns an *Error naming the first rule b breaks.
func Parse(b []byte) (Attachment, error) {
	if len(b) > MaxAttachmentSize {
		return Attachment{}, errorf("the attachment is over %d KiB; a lawful basis needs far less", MaxAttachmentSize>>10)
	}
	v, err := decode(b)
	if err != nil {
		return Attachment{}, &Error{Reason: err.Error()}
	}
	att, ok := v.(*object)
	if !ok {
		return Attachment{}, errorf("the attachment is not a JSON object")
	}
	var a Attachment
	if enc, _ := att.get("encoding"); enc != "json" {
		return a, errorf(`encoding must be "json"`)
	}
	if err := a.readIndexes(att); err != nil {
		return a, err
	}
	if _, err := optionalTime(att, "start", "start"); err != nil {
		return a, err
	}
	body, err := bodyOf(att)
	if err != nil {
		return a, err
	}
	if err := a.readBody(body); err != nil {
		return a, err
	}
	return a, checkHash(body)
}

// IsLegacy reports whether an attachment without a purpose is a lawful
// basis by its type: the member's name before vCon 0.4, which vcon-lib's
// lawful-basis helper still writes, with neither party nor dialog.
func IsLegacy(typ string) bool { return typ == Purpose }

// Purpose is the attachment purpose the draft registers.
const Purpose = "lawful_basis"

// readIndexes reads party and dialog. A legacy attachment (IsLegacy)
// that has none applies to no specific party or dialog: the draft's 0.
func (a *Attachment) readIndexes(att *object) error {
	_, hasPurpose := att.get("purpose")
	var err error
	if _, ok := att.get("party"); ok || hasPurpose {
		if a.Party, err = index(att, "party"); err != nil {
			return err
		}
	}
	a.Dialog = []int{0}
	if _, ok := att.get("dialog"); ok || hasPurpose {
		a.Dialog, err = indexes(att, "dialog")
	}
	return err
}

// bodyOf is the body as an object. The draft carries it per the vCon's
// "json" encoding: the object itself, or a string holding its JSON text,
// as some producers write every json body.
func bodyOf(att *object) (*object, error) {
	v, ok := att.get("body")
	if s, isString := v.(string); isString {
		var err error
		if v, err = decode([]byte(s)); err != nil {
			return nil, errorf("body is a string that is not a JSON object: %v", err)
		}
	}
	o, isObject := v.(*object)
	switch {
	case !ok:
		return nil, errorf("body is missing")
	case !isObject:
		return nil, errorf("body must be a JSON object")
	}
	return o, nil
}

func (a *Attachment) readBody(body *object) error {
	basis, _ := body.get("lawful_basis")
	s, _ := basis.(string)
	if !isBasis(s) {
		return errorf("body.lawful_basis must be one of %s", strings.Join(Bases, ", "))
	}
	a.Basis = s
	exp, ok := body.get("expiration")
	if !ok {
		return errorf("body.expiration is missing: give an RFC 3339 time, or null for no expiry")
	}
	if exp != nil {
		t, err := rfc3339(exp, "body.expiration")
		if err != nil {
			return err
		}
		a.Expiration = &t
	}
	grants, ok := body.get("purpose_grants")
	list, isArray := grants.([]any)
	switch {
	case !ok:
		return errorf("body.purpose_grants is missing")
	case !isArray:
		return errorf("body.purpose_grants must be an array")
	case len(list) > MaxGrants:
		return errorf("body.purpose_grants has %d grants; at most %d are accepted", len(list), MaxGrants)
	}
	for i, g := range list {
		grant, err := readGrant(g, fmt.Sprintf("body.purpose_grants[%d]", i))
		if err != nil {
			return err
		}
		a.Grants = append(a.Grants, grant)
	}
	if err := checkProofs(body); err != nil {
		return err
	}
	return checkRegistry(body)
}

func readGrant(v any, path string) (Grant, error) {
	o, ok := v.(*object)
	if !ok {
		return Grant{}, errorf("%s must be an object", path)
	}
	p, _ := o.get("purpose")
	purpose, _ := p.(string)
	if !ValidPurpose(purpose) {
		return Grant{}, errorf("%s.purpose must be 1 to %d characters of a-z, 0-9 and _", path, MaxPurposeLen)
	}
	g, _ := o.get("granted")
	granted, ok := g.(bool)
	if !ok {
		return Grant{}, errorf("%s.granted must be true or false", path)
	}
	at, ok := o.get("granted_at")
	if !ok {
		return Grant{}, errorf("%s.granted_at is missing: give the RFC 3339 time of the grant", path)
	}
	t, err := rfc3339(at, path+".granted_at")
	if err != nil {
		return Grant{}, err
	}
	if c, ok := o.get("conditions"); ok {
		if !stringArray(c) {
			return Grant{}, errorf("%s.conditions must be an array of strings", path)
		}
	}
	return Grant{Purpose: purpose, Granted: granted, At: t}, nil
}

// checkProofs: each proof object has its three members of the draft.
func checkProofs(body *object) error {
	v, ok := body.get("proof_mechanisms")
	if !ok {
		return nil
	}
	list, isArray := v.([]any)
	if !isArray {
		return errorf("body.proof_mechanisms must be an array")
	}
	for i, p := range list {
		path := fmt.Sprintf("body.proof_mechanisms[%d]", i)
		o, ok := p.(*object)
		if !ok {
			return errorf("%s must be an object", path)
		}
		if t, _ := o.get("proof_type"); !nonEmptyString(t) {
			return errorf("%s.proof_type must be a string", path)
		}
		ts, ok := o.get("timestamp")
		if !ok {
			return errorf("%s.timestamp is missing", path)
		}
		if _, err := rfc3339(ts, path+".timestamp"); err != nil {
			return err
		}
		if d, _ := o.get("proof_data"); !isObject(d) {
			return errorf("%s.proof_data must be an object", path)
		}
	}
	return nil
}

func checkRegistry(body *object) error {
	v, ok := body.get("registry")
	if !ok {
		return nil
	}
	o, isObj := v.(*object)
	if !isObj {
		return errorf("body.registry must be an object")
	}
	for _, m := range []string{"type", "url"} {
		if s, _ := o.get(m); !nonEmptyString(s) {
			return errorf("body.registry.%s must be a string", m)
		}
	}
	return nil
}

// checkHash verifies a body's content_hash (the draft's "Content Hash
// Validation"): the hash, by the named algorithm, of the JCS form of the
// body. The hash cannot cover itself, so it is computed over the body
// without its content_hash member.
func checkHash(body *object) error {
	v, ok := body.get("content_hash")
	if !ok {
		return nil
	}
	ch, isObj := v.(*object)
	if !isObj {
		return errorf("body.content_hash must be an object")
	}
	str := func(name string) (string, error) {
		s, _ := ch.get(name)
		if !nonEmptyString(s) {
			return "", errorf("body.content_hash.%s must be a string", name)
		}
		return s.(string), nil
	}
	alg, err := str("algorithm")
	if err != nil {
		return err
	}
	canon, err := str("canonicalization")
	if err != nil {
		return err
	}
	value, err := str("value")
	if err != nil {
		return err
	}
	if canon != "jcs" {
		return errorf(`body.content_hash.canonicalization is not supported: this server knows "jcs"`)
	}
	if _, err := Digest(alg, nil); err != nil {
		return err
	}
	// All three algorithms give 256 bits.
	want, err := hex.DecodeString(value)
	if err != nil || len(want) != 32 {
		return errorf("body.content_hash.value must be 64 hexadecimal digits, a 256-bit digest")
	}
	rest := &object{}
	for i, n := range body.names {
		if n != "content_hash" {
			rest.names, rest.vals = append(rest.names, n), append(rest.vals, body.vals[i])
		}
	}
	got, err := Digest(alg, appendJCS(nil, rest))
	if err != nil {
		return err
	}
	if string(got) != string(want) {
		return errorf("body.content_hash does not match: the %s of the body's JCS (RFC 8785) form, without content_hash, is %x", alg, got)
	}
	return nil
}

// Digest hashes b by one of the draft's algorithm names.
func Digest(alg string, b []byte) ([]byte, error) {
	switch alg {
	case "sha-256":
		h := sha256.Sum256(b)
		return h[:], nil
	case "sha-3-256":
		h := sha3.Sum256(b)
		return h[:], nil
	case "blake2b-256":
		return blake2b(b, 32), nil
	}
	return nil, errorf(`body.content_hash.algorithm is not supported: use "sha-256", "sha-3-256" or "blake2b-256"`)
}

// ValidPurpose reports whether p is a purpose this server keeps: 1 to
// MaxPurposeLen characters of a-z, 0-9 and _, a vocabulary word.
func ValidPurpose(p string) bool {
	if len(p) == 0 || len(p) > MaxPurposeLen {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func isBasis(s string) bool {
	for _, b := range Bases {
		if s == b {
			return true
		}
	}
	return false
}

// CheckRefs checks the attachment's party and dialog indexes against the
// vCon's arrays (the draft's "Reference Validation"). Index 0 with an
// empty or absent array is accepted: the draft says to use 0 when no
// party or dialog applies.
func (a Attachment) CheckRefs(parties, dialogs int) error {
	if a.Party != 0 && a.Party >= parties {
		return errorf("party is %d, but the vCon has %d parties", a.Party, parties)
	}
	for _, d := range a.Dialog {
		if d != 0 && d >= dialogs {
			return errorf("dialog is %d, but the vCon has %d dialogs", d, dialogs)
		}
	}
	return nil
}

func index(o *object, name string) (int, error) {
	v, ok := o.get(name)
	if !ok {
		return 0, errorf("%s is missing: give the index it applies to, or 0 when none does", name)
	}
	n, ok := v.(number)
	if !ok || n < 0 || n != number(int(n)) || n > 1<<31 {
		return 0, errorf("%s must be a whole number from 0", name)
	}
	return int(n), nil
}

// indexes reads dialog: one index, or an array of them (the draft speaks
// of "dialog indices").
func indexes(o *object, name string) ([]int, error) {
	v, _ := o.get(name)
	list, ok := v.([]any)
	if !ok {
		i, err := index(o, name)
		return []int{i}, err
	}
	var out []int
	for _, e := range list {
		n, ok := e.(number)
		if !ok || n < 0 || n != number(int(n)) || n > 1<<31 {
			return nil, errorf("%s must be a whole number from 0, or an array of them", name)
		}
		out = append(out, int(n))
	}
	return out, nil
}

func optionalTime(o *object, name, path string) (*time.Time, error) {
	v, ok := o.get(name)
	if !ok {
		return nil, nil
	}
	t, err := rfc3339(v, path)
	return &t, err
}

func rfc3339(v any, path string) (time.Time, error) {
	s, _ := v.(string)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errorf("%s must be an RFC 3339 time such as 2025-01-02T12:15:30Z", path)
	}
	return t, nil
}

func nonEmptyString(v any) bool { s, ok := v.(string); return ok && s != "" }

func isObject(v any) bool { _, ok := v.(*object); return ok }

func stringArray(v any) bool {
	list, ok := v.([]any)
	if !ok {
		return false
	}
	for _, e := range list {
		if _, ok := e.(string); !ok {
			return false
		}
	}
	return true
}
