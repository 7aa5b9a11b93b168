package apitest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/vcon"
)

// Fixture is one of the project's own test vCons.
type Fixture struct {
	Name        string
	Body        []byte
	UUID        string
	Form        vocab.Form
	ContentType string
	Encoding    string
}

// Fixtures reads test/testdata/vcons: each valid vCon, plain and gzip (sent
// once with Content-Encoding and once as application/vcon+gzip).
func Fixtures(t testing.TB) []Fixture {
	dir := filepath.Join(testenv.ModuleRoot(t), "test", "testdata", "vcons")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []Fixture
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "invalid") || !(strings.HasSuffix(name, ".vcon") || strings.HasSuffix(name, ".vcon.gz")) {
			continue
		}
		body, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		gz := strings.HasSuffix(name, ".gz")
		m, err := vcon.Inspect(bytes.NewReader(body), gz, 64<<20)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if gz {
			out = append(out,
				Fixture{name + " (Content-Encoding)", body, m.UUID, m.Form, "application/vcon", "gzip"},
				Fixture{name + " (vcon+gzip)", body, m.UUID, m.Form, "application/vcon+gzip", ""})
		} else {
			out = append(out, Fixture{name, body, m.UUID, m.Form, "application/vcon", ""})
		}
	}
	if len(out) < 8 {
		t.Fatalf("only %d fixtures in %s", len(out), dir)
	}
	return out
}

// NewVcon is a small unsigned vCon with a subject and one party.
func NewVcon(uuid, subject, tel string) []byte {
	return []byte(fmt.Sprintf(`{"vcon":"0.4.0","uuid":%q,"created_at":"2026-11-05T12:00:00Z","subject":%q,"parties":[{"tel":%q,"name":"Test Caller"}],"dialog":[],"attachments":[],"analysis":[]}`, uuid, subject, tel))
}

// gzipBomb is a gzip stream that inflates to n zero bytes.
func gzipBomb(t testing.TB, n int64) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write([]byte(`{"uuid":"` + ids.NewRandom().String() + `","x":"`))
	zeros := make([]byte, 1<<20)
	for i := range zeros {
		zeros[i] = 'a'
	}
	for w := int64(0); w < n; w += int64(len(zeros)) {
		zw.Write(zeros)
	}
	zw.Close()
	return buf.Bytes()
}

// WithoutProof is an erasure's answer without its audit_proof, which is
// against the newest checkpoint and so changes as the log grows.
func WithoutProof(t testing.TB, b []byte) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "audit_proof")
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
