package vcon

import (
	"errors"
	"fmt"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/vcon/lawfulbasis"
)

// From a document read (document.go) to its Meta: the form it turned out
// to be, that form's checks, and the metadata columns.

// meta checks the document as the form it turned out to be and makes its
// Meta.
func (d *doc) meta() (*Meta, error) {
	if d.dup != "" {
		return nil, dupError(d.dup, "")
	}
	m := &Meta{Form: d.form(), PartyCount: CountUnknown, DialogCount: CountUnknown,
		LawfulBasis: lawfulbasis.Summary{Basis: lawfulbasis.Unknown}}
	var err error
	switch m.Form {
	case vocab.FormEncrypted:
		if !d.unprotectedUUID.present() {
			return nil, &InvalidError{Reason: "encrypted vCon without unprotected.uuid: an encrypted vCon must name its uuid in the JWE unprotected header"}
		}
		m.UUID, err = checkUUID(d.unprotectedUUID, "unprotected.uuid")
	case vocab.FormSigned:
		if d.payload != nil && d.payload.dup != "" {
			// Whatever its form: a verifier reads the payload too.
			return nil, dupError(d.payload.dup, " in the payload")
		}
		p, why := d.payload, d.payloadErr
		if p != nil && p.form() != vocab.FormUnsigned {
			p, why = nil, fmt.Errorf("it is a %s vCon, not an unsigned one", p.form())
		}
		switch {
		case d.headerUUID.present() && d.headerIndex < 0:
			m.UUID, err = checkUUID(d.headerUUID, "header.uuid")
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
			if p.uuid.kind == '"' {
				m.PayloadUUID = p.uuid.s
			}
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
func (d *doc) form() vocab.Form {
	switch {
	case d.hasCiphertext && d.hasRecipients:
		return vocab.FormEncrypted
	case d.hasPayload && (d.hasSignatures || d.hasFlatSig):
		return vocab.FormSigned
	}
	return vocab.FormUnsigned
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
	m.LawfulBasis, m.LawfulBasisErr = d.lawfulBasis()
	m.Critical = d.critical
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
