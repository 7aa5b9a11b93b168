package openapitest

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/server"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/kmstest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// ownKey drives a server of its own, with [kms] and a tenant whose key is
// wrapped by a key of its own (docs/keys.md): once the key service
// refuses that key, the tenant's routes that open or seal its data answer
// 403; while the service is out of reach, 503 with Retry-After.
func ownKey(t *testing.T) []Exchange {
	a := kmstest.StartLocalKMS(t)
	e := testenv.New(t, testenv.Options{Storage: strings.Replace(a.TOML(), "provider = \"awskms\"\n", "provider = \"awskms\"\nkey_cache = 1\n", 1)})
	tenant := e.Tenant("own")
	key := a.CreateKey(t)
	e.CLI("tenant", "set-key", "own", "--kms-key", key)
	e.CLI("tenant", "set-search", "own", "parties")
	writer, reader, deleter := e.NewKey(tenant, "write").Token, e.NewKey(tenant, "read").Token, e.NewKey(tenant, "delete").Token
	s := &server.Server{Archive: e.Daemon.Archive, Cat: e.Daemon.Cat, Log: slog.New(slog.DiscardHandler), MaxSize: MaxSize}
	r := &runner{t: t, h: s.Handler()}
	ct := []string{"Content-Type", "application/vcon"}
	stored := ids.NewRandom().String()
	r.expect(201, "a store of a tenant with a key of its own", true, "POST", "/vcons", writer, apitest.NewVcon(stored, "own", "+15555550100"), ct...)

	refused := func(status int, why string) {
		u := ids.NewRandom().String()
		for _, x := range []Exchange{
			r.expect(status, "a store "+why, true, "POST", "/vcons", writer, apitest.NewVcon(u, "own", "+15555550100"), ct...),
			r.expect(status, "a replacement "+why, true, "PUT", "/vcons/"+stored, writer, apitest.NewVcon(stored, "own again", "+15555550100"), ct...),
			r.expect(status, "a read "+why, true, "GET", "/vcons/"+stored, reader, nil),
			r.expect(status, "a search "+why, true, "GET", "/vcons?tel=%2B15555550100", reader, nil),
			r.expect(status, "an erasure by party "+why, true, "POST", "/erasures", deleter, []byte(`{"tel":"+15555550100"}`), "Content-Type", "application/json"),
		} {
			if status == 503 && x.RespHeader.Get("Retry-After") == "" {
				t.Errorf("%s, want Retry-After", x)
			}
		}
	}
	a.Disable(t, key)
	time.Sleep(1100 * time.Millisecond) // past key_cache
	refused(403, "while the tenant's own key is disabled")
	a.Stop(t)
	refused(503, "while the key service is out of reach")
	return r.out
}
