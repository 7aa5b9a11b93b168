// Package vcon inspects vCons (draft-ietf-vcon-vcon-core) as they are
// received: it tells the three forms apart (unsigned, signed, encrypted),
// checks what an archive needs and no more (a JSON object in one of the
// forms, with a uuid), and reads the metadata columns.
//
// Why streaming: the server never re-serialises a vCon. It seals the bytes
// it received while the same bytes pass through Inspect, so Inspect sees
// each byte once and keeps almost none of it. A body may be 64 MiB, most of
// it one base64 string (a recording inline), and a gzip body may inflate to
// any size. encoding/json would hold the whole document in memory (and
// json.Decoder.Token holds a whole string), so the package has its own
// scanner (scan.go): it validates every byte, captures the few values the
// metadata needs, each capped, and drops the rest as it passes. A signed
// vCon's payload is decoded the same way, base64url and gzip included,
// while its string streams by. Memory stays under a few hundred KiB
// whatever the body.
//
// Rules a caller may need (the rest is in the comments of Meta):
//   - Duplicate keys: a member this package reads (members.go lists
//     them, and where) that appears twice in one object refuses the vCon,
//     naming the member: parsers disagree on which of the two counts
//     (encoding/json and jq take the last, others the first), so the
//     server would key or index a vCon by a value its reader may not see.
//     Any other member may repeat, and is stored as sent.
//   - Strings are valid UTF-8 after capture: invalid bytes and lone \u
//     surrogates (both of which JSON syntax allows) read as U+FFFD.
//   - Byte offsets in reasons count from 0, in the JSON text: the inflated
//     body for a gzip body, the decoded payload for a payload's reasons.
package vcon

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/vcon-server/vcon-server/ids"
)

// Form is how a vCon arrived: as a plain JSON object, or wrapped in JWS
// (signed) or JWE (encrypted) General JSON serialization. An object with
// "ciphertext" and "recipients" is encrypted; else one with "payload" and
// "signatures" is signed; any other object is unsigned.
type Form string

const (
	Unsigned  Form = "unsigned"
	Signed    Form = "signed"
	Encrypted Form = "encrypted"
)

// CountUnknown is Meta.PartyCount and Meta.DialogCount when the counts
// cannot be read: an encrypted vCon, or a signed one whose payload is not a
// readable unsigned vCon.
const CountUnknown = -1

// Caps on what Meta keeps of a vCon: an archive's metadata columns need no
// more, and memory stays bounded whatever a body holds. Longer strings are
// cut at a character boundary rather than refused.
const (
	MaxParties       = 1000 // Meta.Parties keeps the first MaxParties; PartyCount counts all
	MaxSubjectLen    = 4096 // bytes of Meta.Subject
	MaxPartyFieldLen = 1024 // bytes of each of Party.Tel, Mailto and Name
)

// maxShort caps the uuid, vcon and time fields: longer ones are invalid
// anyway.
const maxShort = 64

// Party is what the metadata keeps of one entry of a vCon's parties: each
// field as written ("tel:+15555550100" stays so), "" when absent or not a
// string.
type Party struct {
	Tel    string
	Mailto string
	Name   string
}

// Meta is what an archive knows of a vCon without opening it again. For an
// encrypted vCon only Form, UUID, Gzip and Size are known. For a signed
// vCon the rest comes from its payload; when the payload cannot be read as
// an unsigned vCon (but a signature header names the uuid) the rest is
// unknown: zero values and CountUnknown.
type Meta struct {
	Form Form
	// UUID is the vCon's uuid in lowercase: the top-level uuid of an
	// unsigned vCon, the first signatures[i].header.uuid of a signed one
	// (else its payload's uuid: a header uuid wins over the payload's),
	// unprotected.uuid of an encrypted one.
	UUID string
	// Syntax is the "vcon" field ("0.4.0", "0.0.1"...) as written, "" when
	// absent or not a string. Any version is accepted.
	Syntax string
	// CreatedAt and UpdatedAt are nil when absent or not RFC 3339 (real
	// producers omit created_at, or write it without a zone).
	CreatedAt *time.Time
	UpdatedAt *time.Time
	// Subject is nil when absent or not a string.
	Subject *string
	// Parties are the first MaxParties entries of parties, in order; an
	// entry that is not an object is kept as an empty Party so that indexes
	// still match the dialogs' references. Nil when there are none.
	Parties []Party
	// PartyCount and DialogCount are the lengths of the parties and dialog
	// arrays: 0 when absent or not an array, CountUnknown when not known.
	PartyCount  int
	DialogCount int
	Gzip        bool  // the body was received, and is stored, gzip-compressed
	Size        int64 // the stored (as received) byte length
}

// InvalidError is a vCon refused as not what an archive can keep. Reason is
// a short sentence for the HTTP 400 body.
type InvalidError struct {
	Reason string
	syntax bool // the body is not JSON (as encoding/json.Valid would say)
}

func (e *InvalidError) Error() string { return "invalid vCon: " + e.Reason }

func syntaxError(what string) error {
	return &InvalidError{Reason: "not valid JSON: " + what, syntax: true}
}

// ErrTooLarge is returned when the body, or its decompressed form, is over
// the limit (HTTP 413).
var ErrTooLarge = errors.New("vcon: over the size limit")

// Gzipped reports whether a body sent, and stored, with these headers is
// gzip: Content-Encoding gzip, or the type application/vcon+gzip
// (docs/api.md). It is Inspect's gz for such a body.
func Gzipped(contentType, contentEncoding string) bool {
	return contentEncoding == "gzip" || contentType == "application/vcon+gzip"
}

// Inspect reads a vCon body as it was received, detects its form, checks it
// and returns its metadata. With gz the body is gzip and is read through a
// decompressor whose output is bounded by limit: a gzip bomb returns
// ErrTooLarge as soon as its output passes limit. A body of more than limit
// bytes returns ErrTooLarge too. Other refusals are *InvalidError; any
// other error is r's own. On success r has been read to EOF and Meta.Size
// is the number of bytes read from it.
func Inspect(r io.Reader, gz bool, limit int64) (*Meta, error) {
	body := &limitReader{r: r, limit: max(limit, 0)}
	var src io.Reader = body
	if gz {
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, gzipError(body, err)
		}
		src = &limitReader{r: &gunzipReader{zr: zr, body: body}, limit: body.limit}
	}
	d, err := readDoc(src, body.limit, docOptions{gz: gz})
	if err != nil {
		return nil, err
	}
	// The JSON text ended at the end of input, and a gzip reader reads on
	// to the end of its input looking for another member: this drains
	// nothing, but says that reading r to EOF is a promise.
	if _, err := io.Copy(io.Discard, body); err != nil {
		return nil, err
	}
	m, err := d.meta()
	if err != nil {
		return nil, err
	}
	m.Gzip = gz
	m.Size = body.n
	return m, nil
}

// value is a captured JSON value: a string's (capped) text, or only the
// kind of anything else.
type value struct {
	kind byte // 0 when absent or null; '"' for a string; else the value's first byte
	s    string
}

func (v value) present() bool { return v.kind != 0 }

// doc is what one pass over a document found, for all three forms at once:
// the keys that tell the forms apart may come in any order, so the form is
// only known at the end.
type doc struct {
	hasPayload, hasSignatures, hasCiphertext, hasRecipients bool

	uuid, syntax, created, updated, subject value
	parties                                 []Party
	partyCount, dialogCount                 int

	headerUUID      value // the first signatures[i].header.uuid present
	headerIndex     int   // its i
	unprotectedUUID value

	payload    *doc  // a signed vCon's payload, read; nil when it could not be
	payloadErr error // why it could not

	dup string // the first member read twice in one object, by its path
}

type docOptions struct {
	gz      bool // the document is a gzip body's inflated text
	payload bool // the document is a signed vCon's payload
}

// readDoc reads one JSON document to its end and collects what any form
// needs.
func readDoc(r io.Reader, limit int64, opt docOptions) (*doc, error) {
	s := newScanner(r)
	if !opt.payload {
		// RFC 8259, section 8.1, lets a parser ignore a byte order mark
		// that starts a JSON text, and some producers write one: the body
		// is stored as sent, mark included, and read after it.
		s.skipBOM()
	}
	if c, ok := s.skipSpace(); ok && c == 0x1f && !opt.gz && !opt.payload {
		return nil, syntaxError("the body starts with the gzip magic 1f 8b: send a gzip vCon as application/vcon+gzip or with Content-Encoding: gzip")
	}
	c, err := s.valueStart()
	if err != nil {
		return nil, err
	}
	if c != '{' {
		// Read it all first, so that a broken body is called broken JSON.
		if err := s.skip(); err != nil {
			return nil, err
		}
		if err := s.end(); err != nil {
			return nil, err
		}
		return nil, &InvalidError{Reason: "not a vCon: the top level is " + kindName(c) + ", a vCon is a JSON object"}
	}
	d := &doc{}
	var seen uint32
	err = s.object(func(key []byte) error {
		d.once(&seen, topMembers, key, func() string { return string(key) })
		var err error
		switch string(key) {
		case "uuid":
			d.uuid, err = capture(s, maxShort)
		case "vcon":
			d.syntax, err = capture(s, maxShort)
		case "created_at":
			d.created, err = capture(s, maxShort)
		case "updated_at":
			d.updated, err = capture(s, maxShort)
		case "subject":
			d.subject, err = capture(s, MaxSubjectLen)
		case "parties":
			err = d.readParties(s)
		case "dialog":
			d.dialogCount, err = count(s)
		case "payload":
			d.hasPayload = true
			if opt.payload {
				// A payload is an unsigned vCon; one holding another
				// payload is not, and is not unwrapped further.
				return s.skip()
			}
			err = d.readPayload(s, limit)
		case "signatures":
			d.hasSignatures = true
			err = d.readSignatures(s)
		case "ciphertext":
			d.hasCiphertext = true
			err = s.skip()
		case "recipients":
			d.hasRecipients = true
			err = s.skip()
		case "unprotected":
			err = d.readUnprotected(s)
		default:
			err = s.skip()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := s.end(); err != nil {
		return nil, err
	}
	return d, nil
}

func kindName(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// capture reads the next value, keeping the first max bytes of a string.
func capture(s *scanner, max int) (value, error) {
	c, err := s.valueStart()
	if err != nil {
		return value{}, err
	}
	switch c {
	case '"':
		str, err := s.readString(max)
		return value{kind: '"', s: str}, err
	case 'n':
		return value{}, s.skip()
	}
	return value{kind: c}, s.skip()
}

// captureString reads the next value into *dst: "" unless a string.
func captureString(s *scanner, dst *string, max int) error {
	v, err := capture(s, max)
	*dst = v.s
	return err
}

// count reads the next value and returns its length if it is an array.
func count(s *scanner) (int, error) {
	c, err := s.valueStart()
	if err != nil {
		return 0, err
	}
	if c != '[' {
		return 0, s.skip()
	}
	return s.array(s.skip)
}

func (d *doc) readParties(s *scanner) error {
	d.parties, d.partyCount = nil, 0
	c, err := s.valueStart()
	if err != nil {
		return err
	}
	if c != '[' {
		return s.skip()
	}
	i := -1
	d.partyCount, err = s.array(func() error {
		i++
		var p Party
		c, err := s.valueStart()
		if err != nil {
			return err
		}
		if c == '{' {
			var seen uint32
			err = s.object(func(key []byte) error {
				d.once(&seen, partyMembers, key, func() string { return fmt.Sprintf("parties[%d].%s", i, key) })
				switch string(key) {
				case "tel":
					return captureString(s, &p.Tel, MaxPartyFieldLen)
				case "mailto":
					return captureString(s, &p.Mailto, MaxPartyFieldLen)
				case "name":
					return captureString(s, &p.Name, MaxPartyFieldLen)
				}
				return s.skip()
			})
		} else {
			err = s.skip()
		}
		if len(d.parties) < MaxParties {
			d.parties = append(d.parties, p)
		}
		return err
	})
	return err
}

// readSignatures finds the first signatures[i].header.uuid present (not
// absent, not null).
func (d *doc) readSignatures(s *scanner) error {
	d.headerUUID, d.headerIndex = value{}, 0
	c, err := s.valueStart()
	if err != nil {
		return err
	}
	if c != '[' {
		return s.skip()
	}
	i := -1
	_, err = s.array(func() error {
		i++
		var uuid value
		var seen uint32
		if err := objectMembers(s, func(key []byte) error {
			d.once(&seen, signatureMembers, key, func() string { return fmt.Sprintf("signatures[%d].header", i) })
			if string(key) != "header" {
				return s.skip()
			}
			uuid = value{}
			var seen uint32
			return objectMembers(s, func(key []byte) error {
				d.once(&seen, uuidMember, key, func() string { return fmt.Sprintf("signatures[%d].header.uuid", i) })
				if string(key) != "uuid" {
					return s.skip()
				}
				var err error
				uuid, err = capture(s, maxShort)
				return err
			})
		}); err != nil {
			return err
		}
		if !d.headerUUID.present() && uuid.present() {
			d.headerUUID, d.headerIndex = uuid, i
		}
		return nil
	})
	return err
}

func (d *doc) readUnprotected(s *scanner) error {
	d.unprotectedUUID = value{}
	var seen uint32
	return objectMembers(s, func(key []byte) error {
		d.once(&seen, uuidMember, key, func() string { return "unprotected.uuid" })
		if string(key) != "uuid" {
			return s.skip()
		}
		var err error
		d.unprotectedUUID, err = capture(s, maxShort)
		return err
	})
}

// objectMembers reads the next value with fn for its members if it is an
// object, and skips it if not.
func objectMembers(s *scanner, fn func(key []byte) error) error {
	c, err := s.valueStart()
	if err != nil {
		return err
	}
	if c != '{' {
		return s.skip()
	}
	return s.object(fn)
}

// readPayload decodes a signed vCon's payload while its string streams by:
// base64url, then gzip when the decoded bytes start with its magic, then a
// document of its own. Whatever is wrong with the payload is kept in
// payloadErr, not returned: a signature header may still name the uuid, and
// the enclosing document must still be read to its end.
func (d *doc) readPayload(s *scanner, limit int64) error {
	d.payload, d.payloadErr = nil, nil
	c, err := s.valueStart()
	if err != nil {
		return err
	}
	if c != '"' {
		d.payloadErr = fmt.Errorf("it is %s, not a base64url string", kindName(c))
		return s.skip()
	}
	sr := s.newStringReader()
	d.payload, d.payloadErr = decodePayload(sr, limit)
	// An error of the enclosing document (a read error, a broken string)
	// is the document's, whatever the payload's decoding made of it.
	if err := sr.finish(); err != nil {
		d.payload, d.payloadErr = nil, nil
		return err
	}
	return nil
}

// meta checks the document as the form it turned out to be and makes its
// Meta.
func (d *doc) meta() (*Meta, error) {
	if d.dup != "" {
		return nil, dupError(d.dup, "")
	}
	m := &Meta{Form: d.form(), PartyCount: CountUnknown, DialogCount: CountUnknown}
	var err error
	switch m.Form {
	case Encrypted:
		if !d.unprotectedUUID.present() {
			return nil, &InvalidError{Reason: "encrypted vCon without unprotected.uuid: an encrypted vCon must name its uuid in the JWE unprotected header"}
		}
		m.UUID, err = checkUUID(d.unprotectedUUID, "unprotected.uuid")
	case Signed:
		if d.payload != nil && d.payload.dup != "" {
			// Whatever its form: a verifier reads the payload too.
			return nil, dupError(d.payload.dup, " in the payload")
		}
		p, why := d.payload, d.payloadErr
		if p != nil && p.form() != Unsigned {
			p, why = nil, fmt.Errorf("it is a %s vCon, not an unsigned one", p.form())
		}
		switch {
		case d.headerUUID.present():
			m.UUID, err = checkUUID(d.headerUUID, fmt.Sprintf("signatures[%d].header.uuid", d.headerIndex))
		case p != nil && p.uuid.present():
			m.UUID, err = checkUUID(p.uuid, "the payload's uuid")
		case p != nil:
			return nil, &InvalidError{Reason: "signed vCon without a uuid: no signatures[].header.uuid, and its payload has no uuid"}
		case errors.Is(why, ErrTooLarge):
			return nil, ErrTooLarge
		default:
			return nil, &InvalidError{Reason: "signed vCon without a uuid: no signatures[].header.uuid, and its payload cannot be read: " + payloadProblem(why)}
		}
		if p != nil {
			p.fill(m)
		}
	default:
		if !d.uuid.present() {
			reason := "no uuid: a vCon needs a uuid (36-character UUID text)"
			switch {
			case d.hasPayload:
				reason += "; a signed vCon needs payload and signatures (JWS General JSON)"
			case d.hasCiphertext:
				reason += "; an encrypted vCon needs ciphertext and recipients (JWE General JSON)"
			}
			return nil, &InvalidError{Reason: reason}
		}
		m.UUID, err = checkUUID(d.uuid, "uuid")
		d.fill(m)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// form: JWE and JWS General JSON are told by their required members; any
// other object is an unsigned vCon.
func (d *doc) form() Form {
	switch {
	case d.hasCiphertext && d.hasRecipients:
		return Encrypted
	case d.hasPayload && d.hasSignatures:
		return Signed
	}
	return Unsigned
}

// fill sets the metadata an unsigned vCon's own fields give.
func (d *doc) fill(m *Meta) {
	if d.syntax.kind == '"' {
		m.Syntax = d.syntax.s
	}
	m.CreatedAt = parseTime(d.created)
	m.UpdatedAt = parseTime(d.updated)
	if d.subject.kind == '"' {
		subject := d.subject.s
		m.Subject = &subject
	}
	m.Parties = d.parties
	m.PartyCount = d.partyCount
	m.DialogCount = d.dialogCount
}

func parseTime(v value) *time.Time {
	if v.kind != '"' {
		return nil
	}
	t, err := time.Parse(time.RFC3339, v.s)
	if err != nil {
		return nil
	}
	return &t
}

// checkUUID applies the one rule for a uuid: 36 characters, 8-4-4-4-12
// hexadecimal digits in either case. It returns the lowercase form.
func checkUUID(v value, name string) (string, error) {
	if v.kind != '"' {
		return "", &InvalidError{Reason: fmt.Sprintf("%s is %s: a vCon needs a uuid (36-character UUID text)", name, kindName(v.kind))}
	}
	id, err := ids.Parse(v.s)
	if err != nil {
		return "", &InvalidError{Reason: fmt.Sprintf("%s is not a UUID: want 36-character UUID text, 8-4-4-4-12 hexadecimal digits", name)}
	}
	return id.String(), nil
}
