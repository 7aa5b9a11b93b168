package vcon

import (
	"fmt"
	"io"

	"github.com/vcon-server/vcon-server/internal/vocab"
)

// Signatures of a signed vCon, captured for a tenant that verifies them
// (docs/signatures.md): InspectSigned keeps each signature's members as
// sent, bounded, and copies the payload's characters to a spool as they
// stream by, for the signing input (RFC 7515, section 5.2) to be read
// again once the whole document is in: the payload may come before or
// after the signatures. Inspect keeps none of it.

// Bounds of what is kept of the signatures (docs/signatures.md).
const (
	MaxSignatures = 1000
	// MaxProtected is the most base64url characters of one protected
	// header: 8 KiB of JSON.
	MaxProtected = (8<<10*4 + 2) / 3
	// MaxHeader is the most bytes of one unprotected header's JSON.
	MaxHeader = 64 << 10
	// maxSignature is the most base64url characters of one signature
	// value: an RSA-8192 signature is 1,366.
	maxSignature = 2 << 10
	// maxSignaturesBytes is the most bytes kept of all of them together.
	maxSignaturesBytes = 8 << 20
)

// Signature is one signature of a signed vCon, as sent: the General JSON
// Serialization's signatures[i], or the flattened form's top-level
// members.
type Signature struct {
	Protected string // BASE64URL(UTF8(JWS Protected Header)); "" when absent
	Header    []byte // the unprotected header's JSON text; nil when absent
	Value     string // BASE64URL(JWS Signature)
}

// SignaturesError is a signed vCon whose signatures pass a bound: a
// verifying tenant refuses it (422).
type SignaturesError struct{ Reason string }

func (e *SignaturesError) Error() string { return e.Reason }

// sigCapture is what InspectSigned keeps while the document streams.
type sigCapture struct {
	spool io.Writer
	sigs  []Signature
	kept  int
	err   *SignaturesError // the first bound passed
}

func (c *sigCapture) refuse(format string, args ...any) {
	if c.err == nil {
		c.err = &SignaturesError{Reason: fmt.Sprintf(format, args...)}
	}
	c.sigs = nil
}

// add keeps one signature, unless a bound is passed.
func (c *sigCapture) add(i int, sig Signature) {
	switch {
	case c.err != nil:
		return
	case i >= MaxSignatures:
		c.refuse("more than %d signatures", MaxSignatures)
		return
	case len(sig.Protected) > MaxProtected:
		c.refuse("signatures[%d].protected is over 8 KiB", i)
		return
	case len(sig.Value) > maxSignature:
		c.refuse("signatures[%d].signature is over %d characters", i, maxSignature)
		return
	}
	if c.kept += len(sig.Protected) + len(sig.Header) + len(sig.Value); c.kept > maxSignaturesBytes {
		c.refuse("the signatures hold more than %d MiB", maxSignaturesBytes>>20)
		return
	}
	c.sigs = append(c.sigs, sig)
}

// readSignature reads the members of one signature object (name is its
// path, for the errors), the uuid of its unprotected header into uuid,
// and keeps it in c when c is set.
func (d *doc) readSignature(s *scanner, c *sigCapture, key []byte, sig *Signature, uuid *value, name string) error {
	switch string(key) {
	case "header":
		if c != nil {
			s.startRecord(MaxHeader)
		}
		err := d.readHeaderUUID(s, uuid, name)
		if c != nil {
			raw, whole := s.stopRecord()
			if !whole {
				c.refuse("%s.header is over %d KiB", name, MaxHeader>>10)
			}
			sig.Header = append([]byte(nil), raw...)
		}
		return err
	case "protected":
		if c == nil {
			return s.skip()
		}
		return captureString(s, &sig.Protected, MaxProtected+1)
	case "signature":
		if c == nil {
			return s.skip()
		}
		return captureString(s, &sig.Value, maxSignature+1)
	}
	return s.skip()
}

// readHeaderUUID reads an unprotected header, keeping its uuid.
func (d *doc) readHeaderUUID(s *scanner, uuid *value, name string) error {
	*uuid = value{}
	var seen uint32
	return objectMembers(s, func(key []byte) error {
		d.once(&seen, uuidMember, key, func() string { return name + ".header.uuid" })
		if string(key) != "uuid" {
			return s.skip()
		}
		var err error
		*uuid, err = capture(s, maxShort)
		return err
	})
}

// InspectSigned is Inspect that also keeps a signed vCon's signatures
// (Meta.Signatures, or a *SignaturesError past a bound) and writes its
// payload's characters to spool as they pass. The spool holds nothing
// for another form.
func InspectSigned(r io.Reader, gz bool, limit int64, spool io.Writer) (*Meta, error) {
	c := &sigCapture{spool: spool}
	m, err := inspect(r, gz, limit, c)
	if err != nil {
		return nil, err
	}
	if m.Form == vocab.FormSigned {
		if c.err != nil {
			return m, c.err
		}
		m.Signatures = c.sigs
	}
	return m, nil
}

// MaxCritical is the most names of critical a vCon may list.
const MaxCritical = 64

// readCritical reads the critical member: the names of the extensions a
// receiver must know to process the vCon (draft-ietf-vcon-vcon-core).
// What is not an array of strings is kept as one name that no extension
// has, so that a tenant that checks refuses it.
func readCritical(s *scanner) ([]string, error) {
	var names []string
	bad := false
	n, err := arrayItems(s, func(i int) error {
		v, err := capture(s, maxShort)
		switch {
		case v.kind != '"' || v.s == "":
			bad = true
		case i < MaxCritical:
			names = append(names, v.s)
		}
		return err
	})
	if bad || n > MaxCritical {
		names = append(names, "")
	}
	return names, err
}
