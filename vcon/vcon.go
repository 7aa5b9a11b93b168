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
// WithoutDialogBodies (bodies.go) reads a stored vCon out again the same
// way, holding no more than its limit: a result bounded in size (the MCP
// endpoint's, docs/mcp.md) keeps the vCon but for its dialog bodies.
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
	"io"
	"time"

	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/vcon/lawfulbasis"
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
	// Form is how the vCon arrived: as a plain JSON object, or wrapped in
	// JWS (signed) or JWE (encrypted) General JSON serialization. An
	// object with "ciphertext" and "recipients" is encrypted; else one
	// with "payload" and "signatures" is signed; any other object is
	// unsigned.
	Form vocab.Form
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
	// LawfulBasis is what the vCon's lawful-basis attachments say
	// (draft-howe-vcon-lawful-basis-02): Basis lawfulbasis.Unknown when
	// the vCon cannot be read, lawfulbasis.None without one. When one is
	// malformed, Basis is lawfulbasis.Malformed and LawfulBasisErr, a
	// *lawfulbasis.Error, says why: whether that refuses the vCon is the
	// tenant's choice, not Inspect's.
	LawfulBasis    lawfulbasis.Summary
	LawfulBasisErr error
	// Critical is the critical member of an unsigned vCon or a signed
	// one's payload: the extensions a receiver must know; "" stands for
	// a name that is not one (docs/signatures.md).
	Critical []string
	// PayloadUUID is a signed vCon's payload's uuid as written, "" when
	// it has none or cannot be read; Signatures its signatures, kept by
	// InspectSigned only.
	PayloadUUID string
	Signatures  []Signature
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
	return inspect(r, gz, limit, nil)
}

func inspect(r io.Reader, gz bool, limit int64, c *sigCapture) (*Meta, error) {
	body := &limitReader{r: r, limit: max(limit, 0)}
	var src io.Reader = body
	if gz {
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, gzipError(body, err)
		}
		src = &limitReader{r: &gunzipReader{zr: zr, body: body}, limit: body.limit}
	}
	d, err := readDoc(src, body.limit, docOptions{gz: gz, sig: c})
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
