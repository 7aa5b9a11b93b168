package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/jws"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/vcon"
)

// get_vcon's read (docs/mcp.md, "get_vcon"): the version is decided for
// the call's purpose on its row before a byte is opened, as GET
// /vcons/{uuid} decides it; then at most [mcp] max_result bytes of it are
// read, so that a call never holds more than that of a vCon. An unsigned
// vCon comes back byte for byte as it was stored, a signed one as its
// payload, an encrypted one as its uuid and form only. An unsigned one over
// the bound is read again, streaming, without its dialog bodies (a
// recording inline is most of a large vCon), with a note saying so; one
// still over it, or a signed one over it, as its uuid, form and size.

// vconResult is what get_vcon says of the vCon it read.
type vconResult struct {
	UUID     string       `json:"uuid"`
	Version  string       `json:"version"`
	StoredAt string       `json:"stored_at"`
	Form     vocab.Form   `json:"form"`
	Size     int64        `json:"size" jsonschema:"bytes as stored (gzip ones compressed)"`
	SignedBy []jws.Signer `json:"signed_by" jsonschema:"who the vCon's signatures were verified to when it was stored; null when the tenant's signature policy checked none"`
	Included bool         `json:"included" jsonschema:"whether the first content block holds the vCon's JSON"`
	Note     string       `json:"note,omitempty" jsonschema:"what was left out, and why"`
}

// readVcon reads uuid (at version, when given) for c: what it says of the
// vCon, the vCon's JSON when it is included, or the refusal's text.
func (s *Server) readVcon(c *mcpCall, uuid, version string) (*vconResult, []byte, string) {
	ctx := c.req.Context()
	id, err := ids.Parse(uuid)
	if err != nil {
		c.status = http.StatusNotFound
		return nil, nil, "no such vCon: uuid must be a vCon's uuid"
	}
	c.target = id.String()
	allow := func(v catalog.Version) error { return s.decide(c.req, v.Lawful) }
	var v catalog.Version
	var body io.ReadCloser
	if version == "" {
		v, body, err = s.Archive.OpenIf(ctx, *c.key.Tenant, id, allow)
	} else {
		vid, perr := ids.Parse(version)
		if perr != nil {
			c.status = http.StatusNotFound
			return nil, nil, "no such version: version must be a version id from list_versions"
		}
		v, body, err = s.Archive.OpenKept(ctx, *c.key.Tenant, id, vid, allow)
	}
	var denied *deniedError
	if errors.As(err, &denied) {
		c.status = http.StatusUnavailableForLegalReasons
		return nil, nil, denialMessage(denied, "get_lawful_basis")
	}
	if err != nil {
		var msg string
		c.status, msg = s.logged(c, err)
		return nil, nil, msg
	}
	defer body.Close()
	meta := &vconResult{UUID: id.String(), Version: v.ID.String(), StoredAt: timeText(v.StoredAt), Form: v.Form, Size: v.Size}
	if v.Signers != "" {
		// Written by the store's check (docs/signatures.md); one that
		// does not read is left null.
		json.Unmarshal([]byte(v.Signers), &meta.SignedBy)
	}
	reopen := func() (io.ReadCloser, error) { return s.Archive.OpenVersion(ctx, v) }
	text, note, err := s.boundedJSON(v, body, reopen)
	if err != nil {
		var msg string
		c.status, msg = s.logged(c, err)
		return nil, nil, msg
	}
	c.status = http.StatusOK
	s.Metrics.read(int64(len(text)))
	meta.Included, meta.Note = text != nil, note
	return meta, text, ""
}

// boundedJSON is v's JSON as a result carries it, or nil and a note;
// reopen opens v again, for a vCon over the bound read a second time
// without its dialog bodies.
func (s *Server) boundedJSON(v catalog.Version, body io.Reader, reopen func() (io.ReadCloser, error)) ([]byte, string, error) {
	if v.Form == vocab.FormEncrypted {
		return nil, "encrypted: this server holds no key to its content, so only its uuid and form are shown", nil
	}
	limit := s.MCP.maxResult()
	tooLarge := "larger than this server's [mcp] max_result (" + strconv.FormatInt(limit, 10) +
		" bytes) even without its dialog bodies, so left out of the result whole; an operator may raise max_result, or a key with read may GET /vcons/{uuid}"
	text, err := readInflated(v, body, limit+1)
	if err != nil {
		return nil, "", err
	}
	if int64(len(text)) <= limit && v.Form != vocab.FormSigned {
		return text, "", nil
	}
	if int64(len(text)) > limit {
		if v.Form == vocab.FormSigned {
			return nil, tooLarge, nil
		}
		return s.withoutBodies(v, reopen, limit, tooLarge)
	}
	payload, err := signedPayload(text, limit)
	if errors.Is(err, errTooLarge) {
		return nil, tooLarge, nil
	}
	if err != nil {
		return nil, "signed, but its payload is not a JSON vCon this server can show (" + err.Error() + ")", nil
	}
	return payload, "signed: the payload is shown; signed_by names who its signatures were verified to when it was stored, null when nobody checked them", nil
}

// readInflated reads at most n bytes of v's JSON from body, inflated when
// v was stored gzip.
func readInflated(v catalog.Version, body io.Reader, n int64) ([]byte, error) {
	if vcon.Gzipped(v.ContentType, v.ContentEncoding) {
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, err
		}
		body = zr
	}
	return io.ReadAll(io.LimitReader(body, n))
}

// withoutBodies reads v again, streaming, and keeps it whole but for its
// dialog bodies: at most limit bytes are held, whatever v's size.
func (s *Server) withoutBodies(v catalog.Version, reopen func() (io.ReadCloser, error), limit int64, tooLarge string) ([]byte, string, error) {
	rc, err := reopen()
	if err != nil {
		return nil, "", err
	}
	defer rc.Close()
	var src io.Reader = rc
	if vcon.Gzipped(v.ContentType, v.ContentEncoding) {
		zr, err := gzip.NewReader(rc)
		if err != nil {
			return nil, "", err
		}
		src = zr
	}
	text, n, err := vcon.WithoutDialogBodies(src, limit)
	if errors.Is(err, vcon.ErrOverLimit) {
		return nil, tooLarge, nil
	}
	if err != nil {
		return nil, "", err
	}
	return text, "larger than this server's [mcp] max_result (" + strconv.FormatInt(limit, 10) + " bytes): its " +
		strconv.Itoa(n) + " dialog bodies are left out (each body is null, and white space outside strings is gone); a key with read may GET /vcons/{uuid} for the whole", nil
}

var errTooLarge = errors.New("payload over max_result")

// signedPayload decodes a JWS's payload, base64url (padding and the
// standard alphabet allowed, as the server stores them) and perhaps
// gzip, within limit bytes.
func signedPayload(jws []byte, limit int64) ([]byte, error) {
	var j struct {
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal(jws, &j); err != nil {
		return nil, errors.New("not a JWS")
	}
	p := strings.NewReplacer("+", "-", "/", "_", "=", "").Replace(j.Payload)
	raw, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return nil, errors.New("payload is not base64url")
	}
	if len(raw) >= 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, errors.New("payload is not valid gzip")
		}
		if raw, err = io.ReadAll(io.LimitReader(zr, limit+1)); err != nil {
			return nil, errors.New("payload is not valid gzip")
		}
	}
	if int64(len(raw)) > limit {
		return nil, errTooLarge
	}
	if !json.Valid(raw) {
		return nil, errors.New("payload is not JSON")
	}
	return raw, nil
}

// capabilities is vcon_capabilities' answer.
type capabilities struct {
	Server      string   `json:"server"`
	Tools       []string `json:"tools"`
	Resources   []string `json:"resources"`
	Writes      bool     `json:"writes" jsonschema:"false: no tool stores, changes or deletes a vCon in this version"`
	PageSize    int      `json:"page_size"`
	MaxResult   int64    `json:"max_result" jsonschema:"bytes of a vCon one result carries; a larger one comes without its dialog bodies, or, still larger, is left out, with a note"`
	RatePerMin  int      `json:"rate_per_minute"`
	CallTimeout int      `json:"call_timeout_seconds"`
	Purposes    []string `json:"purposes" jsonschema:"what this key reads for; name one with the Vcon-Purpose header when there are several"`
	Signatures  string   `json:"signatures"`
	Recorded    string   `json:"recorded"`
}

func (s *Server) capabilitiesTool(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, *capabilities, error) {
	c := callOf(ctx)
	c.status = http.StatusOK
	return nil, &capabilities{
		Server:      "vcon-server",
		Tools:       mcpTools,
		Resources:   []string{"vcon://{uuid}"},
		PageSize:    mcpPage,
		MaxResult:   s.MCP.maxResult(),
		RatePerMin:  s.MCP.rate(),
		CallTimeout: int(s.MCP.callTimeout().Seconds()),
		Purposes:    append([]string{}, c.key.Purposes...),
		Signatures:  "signed vCons come back as their payload; signed_by names who their signatures were verified to when stored, under the tenant's signature policy, null when it checked none",
		Recorded:    "every call, refused ones too, is a record in the tenant's audit log: mcp_call, the tool, the purpose, the uuids returned",
	}, nil
}
