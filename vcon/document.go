package vcon

import (
	"fmt"
	"io"

	"github.com/vcon-server/vcon-server/vcon/lawfulbasis"
)

// One pass over a document: readDoc walks the top-level object once and
// keeps, capped, the members any of the three forms needs (members.go
// lists them); meta.go then decides the form and checks it.

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
	headerIndex     int   // its i; -1 for the flattened form's header.uuid
	flatUUID        value // the flattened form's header.uuid
	unprotectedUUID value

	payload    *doc  // a signed vCon's payload, read; nil when it could not be
	payloadErr error // why it could not

	dup string // the first member read twice in one object, by its path

	critical []string // the extensions critical names (MaxCritical at most)

	// The flattened JWS form's one signature (docs/signatures.md).
	flat       Signature
	hasFlatSig bool

	lawful    []lawfulbasis.Attachment // the lawful-basis attachments read
	lawfulErr error                    // the first malformed one's *lawfulbasis.Error
}

type docOptions struct {
	gz      bool // the document is a gzip body's inflated text
	payload bool // the document is a signed vCon's payload
	// sig keeps the signatures and spools the payload (InspectSigned);
	// nil for Inspect.
	sig *sigCapture
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
		case "attachments":
			err = d.readAttachments(s)
		case "payload":
			d.hasPayload = true
			if opt.payload {
				// A payload is an unsigned vCon; one holding another
				// payload is not, and is not unwrapped further.
				return s.skip()
			}
			err = d.readPayload(s, limit, opt.sig)
		case "signatures":
			d.hasSignatures = true
			err = d.readSignatures(s, opt.sig)
		case "signature":
			d.hasFlatSig = true
			err = d.readSignature(s, opt.sig, key, &d.flat, &d.flatUUID, "signature")
		case "protected", "header":
			err = d.readSignature(s, opt.sig, key, &d.flat, &d.flatUUID, "the flattened JWS")
		case "critical":
			d.critical, err = readCritical(s)
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
	if d.hasFlatSig && !d.hasSignatures {
		if opt.sig != nil {
			opt.sig.add(0, d.flat)
		}
		if d.flatUUID.present() {
			d.headerUUID, d.headerIndex = d.flatUUID, -1
		}
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
	return arrayItems(s, func(int) error { return s.skip() })
}

// arrayItems reads the next value with fn for each item, given its index,
// if it is an array, and skips it if not. It returns how many items it
// read: 0 for any other value.
func arrayItems(s *scanner, fn func(i int) error) (int, error) {
	c, err := s.valueStart()
	if err != nil {
		return 0, err
	}
	if c != '[' {
		return 0, s.skip()
	}
	i := -1
	return s.array(func() error {
		i++
		return fn(i)
	})
}

func (d *doc) readParties(s *scanner) error {
	d.parties, d.partyCount = nil, 0
	var err error
	d.partyCount, err = arrayItems(s, func(i int) error {
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
func (d *doc) readSignatures(s *scanner, c *sigCapture) error {
	d.headerUUID, d.headerIndex = value{}, 0
	_, err := arrayItems(s, func(i int) error {
		var uuid value
		var sig Signature
		var seen uint32
		name := fmt.Sprintf("signatures[%d]", i)
		if err := objectMembers(s, func(key []byte) error {
			d.once(&seen, signatureMembers, key, func() string { return name + "." + string(key) })
			return d.readSignature(s, c, key, &sig, &uuid, name)
		}); err != nil {
			return err
		}
		if c != nil {
			c.add(i, sig)
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
func (d *doc) readPayload(s *scanner, limit int64, sc *sigCapture) error {
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
	var content io.Reader = sr
	if sc != nil && sc.spool != nil {
		content = io.TeeReader(sr, sc.spool)
	}
	d.payload, d.payloadErr = decodePayload(content, limit)
	if content != io.Reader(sr) {
		// Every character goes to the spool, also those the decoding left
		// unread; an error is the document's, which finish returns.
		io.Copy(io.Discard, content)
	}
	// An error of the enclosing document (a read error, a broken string)
	// is the document's, whatever the payload's decoding made of it.
	if err := sr.finish(); err != nil {
		d.payload, d.payloadErr = nil, nil
		return err
	}
	return nil
}
