package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/benchkit"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// BenchmarkPurposeReads: reads of 4 KiB vCons from the real binary, under
// a tenant that enforces purposes (docs/lawful-basis.md), by a key bound
// to customer_service, which every vCon grants, and by a key bound to
// none, whose reads are not decided: the same server, the same vCons, in
// rounds that alternate which goes first. It reports both rates and
// bound/unbound, which issue 29 wants at 0.95 or more, and the server CPU
// time a decision adds to a read. Run:
//
//	go test ./test/e2e -run '^$' -bench PurposeReads -benchtime 1x
func BenchmarkPurposeReads(b *testing.B) {
	e := testenv.Prepare(b, testenv.Options{Listen: testenv.FreePort(b)})
	tenant := e.Tenant("acme")
	writer := e.NewKey(tenant, "write")
	unbound := e.NewKey(tenant, "read")
	var bound testenv.Key
	out := e.CLI("key", "create", "--tenant", tenant, "--label", "crm", "--scope", "read", "--purpose", "customer_service")
	if err := json.Unmarshal([]byte(out), &bound); err != nil || len(bound.Purposes) != 1 {
		b.Fatalf("key create --purpose: %v %s", err, out)
	}
	e.CLI("tenant", "set-lawful-basis", "acme", "enforce")
	p := e.StartProfiled("purpose-reads")
	uuids, clients := seedReads(b, e, writer.Token, lawful4k)
	var cpu [2]time.Duration // the server's CPU time in bound reads, in unbound ones
	read := func(i int, token string, n int) float64 {
		var next atomic.Int64
		cpu0, t0 := benchkit.CPUTime(b, p.Pid()), time.Now()
		parallel(b, n, func(c int) error {
			req, _ := http.NewRequest("GET", e.BaseURL+"/vcons/"+uuids[next.Add(1)%int64(len(uuids))], nil)
			req.Header.Set("Authorization", "Bearer "+token)
			return expect(clients[c], req, 200)
		})
		rate := float64(n) / time.Since(t0).Seconds()
		cpu[i] += benchkit.CPUTime(b, p.Pid()) - cpu0
		return rate
	}
	read(0, bound.Token, 500) // warm up
	read(1, unbound.Token, 500)
	cpu = [2]time.Duration{}
	const n, rounds = 3000, 8
	b.ResetTimer()
	var on, off float64
	for r := range b.N * rounds {
		if r%2 == 0 {
			on += read(0, bound.Token, n)
			off += read(1, unbound.Token, n)
		} else {
			off += read(1, unbound.Token, n)
			on += read(0, bound.Token, n)
		}
	}
	b.StopTimer()
	k := float64(b.N * rounds)
	b.ReportMetric(on/off, "bound/unbound")
	b.ReportMetric(on/k, "reads/s-bound")
	b.ReportMetric(off/k, "reads/s-unbound")
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / (k * n) }
	b.ReportMetric(per(cpu[0])-per(cpu[1]), "added-cpu-µs/read")
	p.Stop()
	// Every read was decided as the bound key's: its records say so.
	got := e.CLI("audit", "export", "--tenant", "acme")
	if c := strings.Count(got, `"action":"read purpose=customer_service"`); c < rounds*n {
		b.Errorf("%d decided read records, want at least %d", c, rounds*n)
	}
}

// lawful4k is a vCon of 4 KiB whose lawful basis grants customer_service.
func lawful4k(uuid string) []byte {
	body := []byte(`{"vcon":"0.4.0","uuid":"` + uuid + `","parties":[{"tel":"+15555550100"}],"dialog":[],
		"attachments":[{"purpose":"lawful_basis","party":0,"dialog":0,"encoding":"json","body":{"lawful_basis":"consent","expiration":null,
		"purpose_grants":[{"purpose":"customer_service","granted":true,"granted_at":"2026-01-02T12:00:00Z"}]}}]}`)
	pad := 4096 - len(body) - len(`,"pad":""`)
	return append(body[:len(body)-1], []byte(`,"pad":"`+strings.Repeat("x", pad)+`"}`)...)
}
