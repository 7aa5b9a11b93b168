package load

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	mrand "math/rand/v2"
	"time"
)

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := fmt.Sprintf("%x", b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// newVcon is an unsigned vCon of a random size up to max, its padding
// random (so gzip cannot shrink it to nothing, and no two are alike).
func newVcon(uuid string, rnd *mrand.Rand, max int) []byte {
	n := 200 + rnd.IntN(max)
	pad := make([]byte, n*3/4)
	for i := range pad {
		pad[i] = byte(rnd.Uint32())
	}
	return fmt.Appendf(nil, `{"vcon":"0.4.0","uuid":%q,"created_at":%q,"subject":"load %d","parties":[{"tel":"+1555%07d","name":"Load Caller"}],"dialog":[],"attachments":[{"type":"pad","encoding":"base64url","body":%q}],"analysis":[]}`,
		uuid, time.Now().UTC().Format(time.RFC3339), n, rnd.IntN(10000000), base64.RawURLEncoding.EncodeToString(pad))
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}
