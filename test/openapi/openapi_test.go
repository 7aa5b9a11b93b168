// Package openapi checks docs/openapi.json with libopenapi and its
// validator (pb33f): the document against the OpenAPI 3.1 schema, and
// every request and answer of test/kit/openapitest's exchanges with a
// real server against the document.
package openapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/content"
	verrors "github.com/pb33f/libopenapi-validator/errors"

	"github.com/vcon-server/vcon-server/docs"
	"github.com/vcon-server/vcon-server/test/kit/openapitest"
)

func load(t *testing.T) validator.Validator {
	t.Helper()
	b, err := os.ReadFile(openapitest.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, docs.OpenAPI) {
		t.Fatal("docs.OpenAPI is not docs/openapi.json")
	}
	doc, err := libopenapi.NewDocument(b)
	if err != nil {
		t.Fatalf("libopenapi cannot read docs/openapi.json: %v", err)
	}
	if v := doc.GetVersion(); v != "3.1.0" {
		t.Fatalf("docs/openapi.json is OpenAPI %s, want 3.1.0", v)
	}
	v, errs := validator.NewValidator(doc, config.WithBodyDecoder("application/x-ndjson", content.DecoderFunc(jsonLines)))
	for _, err := range errs {
		t.Errorf("docs/openapi.json: %v", err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return v
}

// jsonLines reads a body of JSON lines (GET /admin/log), which the
// document describes as a string: each line must be one JSON object, and
// the value validated is the text.
func jsonLines(in *content.DecodeInput) (any, error) {
	b, err := io.ReadAll(in.Body)
	if err != nil {
		return nil, err
	}
	text := string(b)
	if text != "" && !strings.HasSuffix(text, "\n") {
		return nil, errors.New("JSON lines: the last line does not end with a newline")
	}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		var obj map[string]any
		if text != "" && json.Unmarshal([]byte(line), &obj) != nil {
			return nil, fmt.Errorf("JSON lines: line %d is not one JSON object", i+1)
		}
	}
	return text, nil
}

func report(t *testing.T, what string, errs []*verrors.ValidationError) {
	t.Helper()
	for _, e := range errs {
		msg := e.Message + ": " + e.Reason
		for _, s := range e.SchemaValidationErrors {
			msg += "\n\t" + s.FieldPath + " (" + s.KeywordLocation + "): " + s.Reason
		}
		t.Errorf("%s: %s", what, msg)
	}
}

// TestDocument: docs/openapi.json is a valid OpenAPI 3.1 document.
func TestDocument(t *testing.T) {
	v := load(t)
	if ok, errs := v.ValidateDocument(); !ok {
		report(t, "docs/openapi.json", errs)
	}
}

// TestExchanges: every answer a real server gave in openapitest's
// exchanges is one the document describes (its status, content type,
// headers and body), and every request made to be well formed is one the
// document accepts.
func TestExchanges(t *testing.T) {
	v := load(t)
	d := openapitest.Load(t, openapitest.Path(t))
	xs := openapitest.Exchanges(t, d)
	if len(xs) == 0 {
		t.Fatal("no exchanges")
	}
	for _, x := range xs {
		x = decoded(t, oneSegment(d, x))
		if x.Valid {
			if ok, errs := v.ValidateHttpRequestSync(x.Request()); !ok {
				report(t, "request "+x.String(), errs)
			}
		}
		req := x.Request()
		if ok, errs := v.ValidateHttpResponse(req, x.Response(req)); !ok {
			report(t, "answer "+x.String(), errs)
		}
	}
}

// oneSegment is x with the rest of its path escaped into one segment
// when its operation's path ends in {path}, which takes one segment or
// more (a tlog-tiles path, x001/x234/067.p/5): OpenAPI has no parameter
// of several segments, and the validator matches one.
func oneSegment(d *openapitest.Doc, x openapitest.Exchange) openapitest.Exchange {
	path, query, _ := strings.Cut(x.Target, "?")
	for _, op := range d.Ops {
		prefix, ok := strings.CutSuffix(op.Path, "{path}")
		if !ok || op.Method != x.Method || !strings.HasPrefix(path, prefix) || len(path) == len(prefix) {
			continue
		}
		x.Target = prefix + strings.ReplaceAll(path[len(prefix):], "/", "%2F")
		if query != "" {
			x.Target += "?" + query
		}
		return x
	}
	return x
}

// decoded is x with its bodies sent with Content-Encoding gzip
// decompressed: the document describes the content, not its coding.
func decoded(t *testing.T, x openapitest.Exchange) openapitest.Exchange {
	un := func(b []byte) []byte {
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", x, err)
		}
		out, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("%s: %v", x, err)
		}
		return out
	}
	if strings.EqualFold(x.Header.Get("Content-Encoding"), "gzip") && x.Valid {
		x.Body = un(x.Body)
	}
	if strings.EqualFold(x.RespHeader.Get("Content-Encoding"), "gzip") {
		x.RespBody = un(x.RespBody)
	}
	return x
}
