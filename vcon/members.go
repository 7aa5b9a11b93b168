package vcon

import "bytes"

// Duplicate members. JSON (RFC 8259) leaves a repeated member name to the
// parser: encoding/json and jq take the last, others the first or refuse.
// The server keys, indexes and describes a vCon by the members it reads, so
// one of those repeated in one object would let the server and the vCon's
// reader see different vCons: such a body is refused, naming the member.
// Members the walk does not read may repeat; the body is stored as sent.

// The members the walk reads, object by object (the same lists in a signed
// vCon's payload). Each list holds at most 32 names (see once).
var (
	topMembers        = []string{"uuid", "vcon", "created_at", "updated_at", "subject", "parties", "dialog", "payload", "signatures", "ciphertext", "recipients", "unprotected", "attachments", "critical", "protected", "header", "signature"}
	partyMembers      = []string{"tel", "mailto", "name"}
	signatureMembers  = []string{"header", "protected", "signature"}
	attachmentMembers = []string{"purpose", "type"}
	uuidMember        = []string{"uuid"} // of signatures[i].header and of unprotected
)

// once notes that the object whose members seen records has a member key;
// when key is one of names and was seen before, the first such duplicate
// of the document is kept in d.dup, named by path (called only then). The
// walk goes on: a body that is not JSON is called so before a duplicate.
func (d *doc) once(seen *uint32, names []string, key []byte, path func() string) {
	for i, n := range names {
		if string(key) != n {
			continue
		}
		if bit := uint32(1) << i; *seen&bit == 0 {
			*seen |= bit
		} else if d.dup == "" {
			d.dup = path()
		}
		return
	}
}

// dupError refuses a document with a member read twice.
func dupError(path, where string) error {
	return &InvalidError{Reason: "duplicate member " + path + where + ": it appears twice in one object, and JSON parsers disagree on which one counts; send it once"}
}

// CheckObject reads b as one JSON object and nothing after it, with the
// same scanner and the same rule as a vCon's: a member of names (at most
// 32) repeated in it is refused, naming it. Other JSON bodies the server
// takes (POST /erasures) are checked so before encoding/json decodes
// them, which would take the last of two members silently and ignore
// what follows the value. The error is an *InvalidError whose Reason
// says what is wrong.
func CheckObject(b []byte, names []string) error {
	s := newScanner(bytes.NewReader(b))
	c, err := s.valueStart()
	if err != nil {
		return err
	}
	if c != '{' {
		if err := s.skip(); err != nil {
			return err
		}
		if err := s.end(); err != nil {
			return err
		}
		return &InvalidError{Reason: "the top level is " + kindName(c) + ", not a JSON object"}
	}
	d := &doc{}
	var seen uint32
	if err := s.object(func(key []byte) error {
		d.once(&seen, names, key, func() string { return string(key) })
		return s.skip()
	}); err != nil {
		return err
	}
	if err := s.end(); err != nil {
		return err
	}
	if d.dup != "" {
		return dupError(d.dup, "")
	}
	return nil
}
