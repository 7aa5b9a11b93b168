package vcon

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/vocab"
)

// TestByteOrderMark: a body, or a gzip body's inflated text, that starts
// with a UTF-8 byte order mark is read after it (RFC 8259, section 8.1),
// its size counting the mark as received. A signed vCon's payload is no
// body: a mark there leaves it unreadable, as anywhere else in a document
// (TestInvalidJSON has the others).
func TestByteOrderMark(t *testing.T) {
	const u = "018f6b2e-7c4a-7d1e-9b3a-2c5d8e9f0a1b"
	body := "\xef\xbb\xbf" + `{"vcon": "0.4.0", "uuid": "` + u + `", "parties": [{"tel": "+15555550100"}], "dialog": []}`
	for _, gz := range []bool{false, true} {
		data := []byte(body)
		if gz {
			data = gzipBytes(t, data)
		}
		m, err := inspectBytes(t, data, gz)
		if err != nil {
			t.Fatalf("gzip %v: %v", gz, err)
		}
		if m.UUID != u || m.Form != vocab.FormUnsigned || m.PartyCount != 1 || m.Size != int64(len(data)) {
			t.Errorf("gzip %v: %+v", gz, m)
		}
	}

	payload := base64.RawURLEncoding.EncodeToString([]byte(body))
	_, err := inspectBytes(t, []byte(`{"payload": "`+payload+`", "signatures": [{"signature": "AAAA"}]}`), false)
	if err == nil || !strings.Contains(err.Error(), "its payload cannot be read: not valid JSON: unexpected byte 0xef at byte 0") {
		t.Errorf("a payload with a byte order mark: %v", err)
	}
}
