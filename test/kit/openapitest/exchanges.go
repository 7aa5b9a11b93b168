package openapitest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/search"
	"github.com/vcon-server/vcon-server/server"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// Exchange is one request to the server and its answer.
type Exchange struct {
	Name   string // what the request tries
	Method string
	Target string // path and query
	Header http.Header
	Body   []byte
	// Valid says the request is well formed by the document (its
	// parameters, headers and body), so a validator must accept it. A
	// request made to be refused (a body that is not a vCon, no key) is
	// not.
	Valid bool

	Status     int
	RespHeader http.Header
	RespBody   []byte
}

func (x Exchange) String() string {
	return fmt.Sprintf("%s (%s %s): %d %.200s", x.Name, x.Method, x.Target, x.Status, x.RespBody)
}

// Request is x's request, its body readable.
func (x Exchange) Request() *http.Request {
	r := httptest.NewRequest(x.Method, "https://localhost"+x.Target, bytes.NewReader(x.Body))
	r.Header = x.Header.Clone()
	return r
}

// Response is x's answer, its body readable.
func (x Exchange) Response(req *http.Request) *http.Response {
	return &http.Response{StatusCode: x.Status, Status: http.StatusText(x.Status), Header: x.RespHeader.Clone(),
		Body: io.NopCloser(bytes.NewReader(x.RespBody)), ContentLength: int64(len(x.RespBody)), Request: req,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
}

// MaxSize is the max_vcon_size of the server Exchanges runs.
const MaxSize = 64 << 10

// runner sends requests to one in-process handler, each from an address
// of its own, so that the failed authentications of one request never
// block another's (but for the requests that block on purpose).
type runner struct {
	t    *testing.T
	h    http.Handler
	addr int
	out  []Exchange
}

func (r *runner) nextAddr() string {
	r.addr++
	return fmt.Sprintf("[2001:db8:%x::1]:443", r.addr) // a /64 of its own
}

// do sends one request and records it; headers alternate name and value,
// added in order, so a name may repeat.
func (r *runner) do(name string, valid bool, method, target, token string, body []byte, headers ...string) Exchange {
	return r.from(r.nextAddr(), name, valid, method, target, token, body, headers...)
}

func (r *runner) from(addr, name string, valid bool, method, target, token string, body []byte, headers ...string) Exchange {
	r.t.Helper()
	x := Exchange{Name: name, Method: method, Target: target, Header: http.Header{}, Body: body, Valid: valid}
	if token != "" {
		x.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		x.Header.Add(headers[i], headers[i+1])
	}
	req := x.Request()
	req.RemoteAddr = addr
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, req)
	res := rec.Result()
	x.Status, x.RespHeader, x.RespBody = res.StatusCode, res.Header, rec.Body.Bytes()
	r.out = append(r.out, x)
	return x
}

// expect sends one request that must get status.
func (r *runner) expect(status int, name string, valid bool, method, target, token string, body []byte, headers ...string) Exchange {
	r.t.Helper()
	x := r.do(name, valid, method, target, token, body, headers...)
	if x.Status != status {
		r.t.Errorf("%s, want %d", x, status)
	}
	return x
}

// Exchanges starts a server and sends it, for every operation d
// documents, requests meant to get each status the operation documents
// (but 500, which no request of a client causes), and returns every
// request and answer. Refusals that every route shares (no key, the
// wrong key, a header sent twice, a blocked address) are asked of every
// operation; the rest are written per route below.
func Exchanges(t *testing.T, d *Doc) []Exchange {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	writer := e.NewKey(tenant, "write").Token
	reader := e.NewKey(tenant, "read").Token
	deleter := e.NewKey(tenant, "delete").Token
	auditor := e.NewKey(tenant, "audit").Token
	assistant, otherAssistant := e.NewKey(tenant, "mcp", "read").Token, e.NewKey(tenant, "mcp", "read").Token
	ops := e.OperatorKey().Token
	// An operator key for each operator scope that holds every other one.
	lacking := map[string]string{}
	for _, sc := range catalog.OperatorScopes {
		lacking[sc] = e.OperatorKey(slices.DeleteFunc(slices.Clone(catalog.OperatorScopes), func(s string) bool { return s == sc })...).Token
	}
	s := &server.Server{Archive: e.Daemon.Archive, Cat: e.Daemon.Cat, Log: slog.New(slog.DiscardHandler), MaxSize: MaxSize,
		Limits: server.Limits{AuthFailures: 2}, Logs: e.Daemon.Logs, MCP: server.MCPSettings{Enabled: true}}
	r := &runner{t: t, h: s.Handler()}

	// What every operation answers alike.
	missing := ids.NewRandom().String()
	for _, op := range d.Sorted() {
		target := strings.NewReplacer("{uuid}", missing, "{id}", tenant, "{path}", "0/000").Replace(op.Path)
		m := op.Method
		switch op.Key {
		case "":
			r.expect(200, "no key", true, m, target, "", nil)
		case "operator":
			r.expect(401, "no key", false, m, target, "", nil)
			r.expect(403, "a tenant key", false, m, target, writer, nil)
			r.expect(403, "an operator key without the route's scope", false, m, target, lacking[op.Roles[len(op.Roles)-1]], nil)
		default:
			r.expect(401, "no key", false, m, target, "", nil)
			r.expect(403, "an operator key", false, m, target, ops, nil)
			other := map[string]string{"write": reader, "read": deleter, "delete": writer, "audit": writer, "mcp": reader}[op.Key]
			r.expect(403, "a key without the "+op.Key+" scope", false, m, target, other, nil)
		}
		r.expect(400, "a header twice", false, m, target, ops, nil, "If-None-Match", `"a"`, "If-None-Match", `"b"`)
		right := map[string]string{"": "", "operator": ops, "write": writer, "read": reader, "delete": deleter, "audit": auditor, "mcp": assistant}[op.Key]
		r.expect(400, "a query parameter the route does not take", false, m, target+"?nope=1", right, nil)
		// Two failed authentications (a wrong key: a request without one is
		// not counted) block an address (Limits above);
		// then it gets 429 without a valid key, on every route.
		addr := r.nextAddr()
		for i := 0; i < 2; i++ {
			r.from(addr, "failing authentication", false, "GET", "/vcons", "not-a-key", nil)
		}
		if x := r.from(addr, "after failed authentications", false, m, target, "", nil); x.Status != 429 || x.RespHeader.Get("Retry-After") == "" {
			t.Errorf("%s, want 429 with Retry-After", x)
		}
	}

	vcons(r, writer, reader, deleter, ops, tenant)
	purposes(r, e, writer, ops, tenant)
	admin(r, ops, tenant)
	erasures(r, writer, deleter, ops, tenant)
	auditLogs(r, auditor, ops)
	mcpExchanges(r, assistant, otherAssistant)

	// The same server with its data directory's disk below min_free.
	s.Disk, s.Degraded = lowDisk{}, func() []string { return []string{"the data directory's disk has less free space than min_free"} }
	r.h = s.Handler()
	ct := []string{"Content-Type", "application/vcon"}
	fresh := ids.NewRandom().String()
	for _, x := range []Exchange{
		r.expect(507, "a store on a low disk", true, "POST", "/vcons", writer, apitest.NewVcon(fresh, "low", "+15555550100"), ct...),
		r.expect(507, "a replacement on a low disk", true, "PUT", "/vcons/"+fresh, writer, apitest.NewVcon(fresh, "low", "+15555550100"), ct...),
	} {
		if x.RespHeader.Get("Retry-After") == "" {
			t.Errorf("%s, want Retry-After", x)
		}
	}
	r.expect(503, "a low disk", true, "GET", "/health", "", nil)

	// The same server, its disk fine again, with a catalog replica that
	// is behind: every route that changes something answers 503 before
	// it starts (max_lag 1), or holds back its answer (max_lag 0).
	s.Disk, s.Degraded = nil, nil
	s.Replica = behindReplica{maxLag: time.Second}
	r.h = s.Handler()
	replicaBehind(r, writer, deleter, ops, tenant)
	r.expect(503, "an erasure while the replica is behind", true, "POST", "/erasures", deleter, []byte(`{"uuids":["`+ids.NewRandom().String()+`"]}`), "Content-Type", "application/json")
	s.Replica = behindReplica{}
	r.h = s.Handler()
	fresh = ids.NewRandom().String()
	if x := r.expect(503, "a store the replica did not take in time", true, "POST", "/vcons", writer, apitest.NewVcon(fresh, "unsure", "+15555550100"), ct...); x.RespHeader.Get("Retry-After") == "" {
		t.Errorf("%s, want Retry-After", x)
	}
	return append(r.out, ownKey(t)...)
}

// lowDisk is a data directory's disk below min_free.
type lowDisk struct{}

func (lowDisk) Low() bool { return true }
func (lowDisk) Refused()  {}

// behindReplica is a catalog replica whose target does not answer: with
// max_lag above 0 it refuses every write, with 0 it never acknowledges.
type behindReplica struct{ maxLag time.Duration }

func (b behindReplica) Admit(context.Context) error {
	if b.maxLag > 0 {
		return errors.New("the replica is behind")
	}
	return nil
}

func (behindReplica) Done() {}

func (b behindReplica) Acknowledge(context.Context) error {
	if b.maxLag == 0 {
		return errors.New("the replica did not take the change")
	}
	return nil
}

func (b behindReplica) MaxLag() time.Duration { return b.maxLag }

// replicaBehind sends a well-formed request to every route that changes
// something, each of which must answer 503 with Retry-After.
func replicaBehind(r *runner, writer, deleter, ops, tenant string) {
	ct := []string{"Content-Type", "application/vcon"}
	js := []string{"Content-Type", "application/json"}
	at := "/admin/tenants/" + tenant
	u := ids.NewRandom().String()
	for _, x := range []Exchange{
		r.expect(503, "a store while the replica is behind", true, "POST", "/vcons", writer, apitest.NewVcon(u, "behind", "+15555550100"), ct...),
		r.expect(503, "a replacement while the replica is behind", true, "PUT", "/vcons/"+u, writer, apitest.NewVcon(u, "behind", "+15555550100"), ct...),
		r.expect(503, "a delete while the replica is behind", true, "DELETE", "/vcons/"+u, deleter, nil),
		r.expect(503, "a tenant while the replica is behind", true, "POST", "/admin/tenants", ops, []byte(`{"name":"hooli"}`), js...),
		r.expect(503, "a metadata setting while the replica is behind", true, "PUT", at+"/metadata", ops, []byte(`{"metadata":"form"}`), js...),
		r.expect(503, "a retention setting while the replica is behind", true, "PUT", at+"/retention", ops, []byte(`{"retention":"365d"}`), js...),
		r.expect(503, "a search setting while the replica is behind", true, "PUT", at+"/search", ops, []byte(`{"search":"off"}`), js...),
		r.expect(503, "a lawful-basis setting while the replica is behind", true, "PUT", at+"/lawful-basis", ops, []byte(`{"lawful_basis":"off"}`), js...),
		r.expect(503, "a signature policy while the replica is behind", true, "PUT", at+"/signatures", ops, []byte(`{"signatures":"off"}`), js...),
		r.expect(503, "a key setting while the replica is behind", true, "PUT", at+"/key", ops, []byte(`{"kms_key":""}`), js...),
		r.expect(503, "a webhook setting while the replica is behind", true, "PUT", at+"/webhook", ops, []byte(`{"url":"off"}`), js...),
		r.expect(503, "a hold while the replica is behind", true, "PUT", at+"/holds/"+u, ops, nil),
		r.expect(503, "a release while the replica is behind", true, "DELETE", at+"/holds/"+u, ops, nil),
		r.expect(503, "a tenant's delete while the replica is behind", true, "DELETE", at, ops, []byte(`{"confirm":"acme"}`), js...),
	} {
		if x.RespHeader.Get("Retry-After") == "" {
			r.t.Errorf("%s, want Retry-After", x)
		}
	}
}

func gz(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func vcons(r *runner, writer, reader, deleter, ops, tenant string) {
	t := r.t
	ct := []string{"Content-Type", "application/vcon"}
	u := ids.NewRandom().String()
	body := apitest.NewVcon(u, "openapi", "+15555550100")

	// POST /vcons
	r.expect(201, "a vCon", true, "POST", "/vcons", writer, body, ct...)
	r.expect(201, "a vCon as application/json", true, "POST", "/vcons", writer,
		apitest.NewVcon(ids.NewRandom().String(), "json", "+15555550101"), "Content-Type", "application/json")
	zipped := ids.NewRandom().String()
	r.expect(201, "a gzip vCon", true, "POST", "/vcons", writer,
		gz(t, apitest.NewVcon(zipped, "gzip", "+15555550102")), "Content-Type", "application/vcon+gzip")
	encoded := ids.NewRandom().String()
	r.expect(201, "a vCon sent with Content-Encoding gzip", true, "POST", "/vcons", writer,
		gz(t, apitest.NewVcon(encoded, "encoded", "+15555550103")), "Content-Type", "application/vcon+json", "Content-Encoding", "gzip")
	r.expect(200, "the same bytes again (a retry)", true, "POST", "/vcons", writer, body, ct...)
	r.expect(409, "a uuid already stored, other bytes", true, "POST", "/vcons", writer, apitest.NewVcon(u, "openapi, other", "+15555550100"), ct...)
	r.expect(400, "no uuid", false, "POST", "/vcons", writer, []byte(`{"vcon":"0.4.0","parties":[]}`), ct...)
	r.expect(400, "broken gzip", false, "POST", "/vcons", writer, []byte("\x1f\x8bnot gzip"), "Content-Type", "application/vcon+gzip")
	big := apitest.NewVcon(ids.NewRandom().String(), strings.Repeat("a", MaxSize), "+15555550104")
	r.expect(413, "too large", false, "POST", "/vcons", writer, big, ct...)
	r.expect(415, "text/plain", false, "POST", "/vcons", writer, body, "Content-Type", "text/plain")
	r.expect(415, "brotli", false, "POST", "/vcons", writer, body, "Content-Type", "application/vcon", "Content-Encoding", "br")

	// PUT /vcons/{uuid}
	r.expect(200, "a new version", true, "PUT", "/vcons/"+u, writer, apitest.NewVcon(u, "openapi, again", "+15555550100"), ct...)
	fresh := ids.NewRandom().String()
	r.expect(201, "a first version", true, "PUT", "/vcons/"+fresh, writer, apitest.NewVcon(fresh, "put", "+15555550105"), ct...)
	r.expect(400, "another uuid in the body", true, "PUT", "/vcons/"+ids.NewRandom().String(), writer, body, ct...)
	r.expect(400, "not a vCon", false, "PUT", "/vcons/"+u, writer, []byte(`[1, 2]`), ct...)
	r.expect(404, "a path that is not a uuid", false, "PUT", "/vcons/not-a-uuid", writer, body, ct...)
	r.expect(413, "too large", false, "PUT", "/vcons/"+u, writer, big, ct...)
	r.expect(415, "no Content-Type", false, "PUT", "/vcons/"+u, writer, body)

	// GET /vcons/{uuid}
	got := r.expect(200, "a read", true, "GET", "/vcons/"+u, reader, nil)
	r.expect(304, "a read of the version held", true, "GET", "/vcons/"+u, reader, nil, "If-None-Match", got.RespHeader.Get("ETag"))
	r.expect(200, "a gzip read", true, "GET", "/vcons/"+zipped, reader, nil)
	r.expect(200, "a read sent with Content-Encoding", true, "GET", "/vcons/"+encoded, reader, nil)
	r.expect(404, "a uuid never stored", true, "GET", "/vcons/"+ids.NewRandom().String(), reader, nil)

	// GET /vcons/{uuid}/lawful-basis, and the 422 of a tenant that
	// enforces lawful bases (docs/lawful-basis.md)
	r.expect(200, "a lawful basis", true, "GET", "/vcons/"+u+"/lawful-basis", reader, nil)
	r.expect(404, "the lawful basis of a uuid never stored", true, "GET", "/vcons/"+ids.NewRandom().String()+"/lawful-basis", reader, nil)
	js := []string{"Content-Type", "application/json"}
	lawful := "/admin/tenants/" + tenant + "/lawful-basis"
	r.expect(200, "lawful bases enforced", true, "PUT", lawful, ops, []byte(`{"lawful_basis":"enforce"}`), js...)
	malformed := func(uuid string) []byte {
		return []byte(`{"vcon":"0.4.0","uuid":"` + uuid + `","parties":[],"attachments":[{"purpose":"lawful_basis","party":0,"dialog":0,"encoding":"json",
			"body":{"lawful_basis":"because","expiration":null,"purpose_grants":[]}}]}`)
	}
	r.expect(422, "a malformed lawful basis", true, "POST", "/vcons", writer, malformed(ids.NewRandom().String()), ct...)
	r.expect(422, "a new version with a malformed lawful basis", true, "PUT", "/vcons/"+u, writer, malformed(u), ct...)
	r.expect(200, "lawful bases off", true, "PUT", lawful, ops, []byte(`{"lawful_basis":"off"}`), js...)

	// GET /vcons/{uuid}/versions
	r.expect(200, "versions", true, "GET", "/vcons/"+u+"/versions", reader, nil)
	r.expect(404, "versions of a uuid never stored", true, "GET", "/vcons/"+ids.NewRandom().String()+"/versions", reader, nil)

	// GET /vcons
	r.expect(200, "a list", true, "GET", "/vcons", reader, nil)
	r.expect(200, "a page", true, "GET", "/vcons?limit=2&after="+ids.NewRandom().String(), reader, nil)
	r.expect(400, "limit 0", false, "GET", "/vcons?limit=0", reader, nil)
	r.expect(400, "after, not a uuid", false, "GET", "/vcons?after=x", reader, nil)
	r.expect(400, "an empty filter", false, "GET", "/vcons?tel=", reader, nil)
	r.expect(409, "a search while search is off", true, "GET", "/vcons?tel=%2B15555550100", reader, nil)
	r.expect(200, "search on", true, "PUT", "/admin/tenants/"+tenant+"/search", ops, []byte(`{"search":"parties"}`), "Content-Type", "application/json")
	for _, f := range search.Fields {
		value := map[string]string{"tel": "%2B15555550100", "mailto": "a%40example.com", "name": "ada"}[f]
		if value == "" {
			value = "word"
		}
		status := 200
		if f == "subject" {
			status = 409 // the setting is parties, not parties+subject
		}
		r.expect(status, "a search by "+f, true, "GET", "/vcons?"+f+"="+value+"&limit=10", reader, nil)
	}
	if slices.Contains(search.Fields, "subject") {
		r.expect(200, "subjects indexed too", true, "PUT", "/admin/tenants/"+tenant+"/search", ops, []byte(`{"search":"parties+subject"}`), "Content-Type", "application/json")
		r.expect(200, "a search by subject", true, "GET", "/vcons?subject=openapi", reader, nil)
	}

	// DELETE /vcons/{uuid}
	r.expect(200, "a hold", true, "PUT", "/admin/tenants/"+tenant+"/holds/"+u, ops, nil)
	r.expect(409, "a held vCon", true, "DELETE", "/vcons/"+u, deleter, nil)
	r.expect(200, "a release", true, "DELETE", "/admin/tenants/"+tenant+"/holds/"+u, ops, nil)
	r.expect(204, "a delete", true, "DELETE", "/vcons/"+u, deleter, nil)
	r.expect(404, "a delete again", true, "DELETE", "/vcons/"+u, deleter, nil)
}

func admin(r *runner, ops, tenant string) {
	js := []string{"Content-Type", "application/json"}
	missing := "/admin/tenants/" + ids.NewRandom().String()
	at := "/admin/tenants/" + tenant

	r.expect(201, "a tenant", true, "POST", "/admin/tenants", ops, []byte(`{"name":"globex"}`), js...)
	r.expect(409, "a name taken", true, "POST", "/admin/tenants", ops, []byte(`{"name":"globex"}`), js...)
	r.expect(400, "a bad name", false, "POST", "/admin/tenants", ops, []byte(`{"name":"Globex Inc"}`), js...)
	r.expect(400, "an unknown field", false, "POST", "/admin/tenants", ops, []byte(`{"name":"initech","plan":"gold"}`), js...)
	r.expect(200, "the tenants", true, "GET", "/admin/tenants", ops, nil)
	r.expect(200, "a tenant", true, "GET", at, ops, nil)
	r.expect(404, "a tenant never made", true, "GET", missing, ops, nil)
	r.expect(404, "an id that is not a uuid", false, "GET", "/admin/tenants/acme", ops, nil)

	for _, c := range []struct{ route, good, bad string }{
		{"metadata", `{"metadata":"form"}`, `{"metadata":"everything"}`},
		{"retention", `{"retention":"365d"}`, `{"retention":"1y"}`},
		{"retention", `{"retention":null}`, `{"retention":7}`},
		{"search", `{"search":"off"}`, `{"search":"all"}`},
		{"lawful-basis", `{"lawful_basis":"off"}`, `{"lawful_basis":"strict"}`},
		{"signatures", `{"signatures":"off"}`, `{"signatures":"strict"}`},
		{"key", `{"kms_key":""}`, `{"key":"k"}`},
		{"webhook", `{"url":"https://hooks.example.com/hook","secret":"whsec_YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWE="}`, `{"url":"http://192.0.2.1/hook","secret":"whsec_YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWE="}`},
		{"webhook", `{"url":"off"}`, `{"url":"https://hooks.example.com/hook","secret":"whsec_short"}`},
	} {
		r.expect(200, "a "+c.route+" setting", true, "PUT", at+"/"+c.route, ops, []byte(c.good), js...)
		if c.route == "webhook" {
			r.expect(200, "a tenant and its webhook", true, "GET", at, ops, nil)
		}
		r.expect(400, "a bad "+c.route+" setting", false, "PUT", at+"/"+c.route, ops, []byte(c.bad), js...)
		r.expect(404, "a "+c.route+" setting of a tenant never made", true, "PUT", missing+"/"+c.route, ops, []byte(c.good), js...)
	}

	r.expect(409, "a tenant's own key on a server without [kms]", true, "PUT", at+"/key", ops, []byte(`{"kms_key":"acme-key"}`), js...)

	held := ids.NewRandom().String()
	r.expect(200, "a hold", true, "PUT", at+"/holds/"+held, ops, nil)
	r.expect(200, "the holds", true, "GET", at+"/holds", ops, nil)
	r.expect(404, "the holds of a tenant never made", true, "GET", missing+"/holds", ops, nil)
	r.expect(200, "a release", true, "DELETE", at+"/holds/"+held, ops, nil)
	for _, m := range []string{"PUT", "DELETE"} {
		r.expect(400, "a hold on what is not a uuid", false, m, at+"/holds/x", ops, nil)
		r.expect(404, "a hold at a tenant never made", true, m, missing+"/holds/"+held, ops, nil)
	}

	r.expect(200, "metrics", true, "GET", "/metrics", ops, nil)

	x := r.expect(200, "a page of the admin log", true, "GET", "/admin/log?since=2020-01-01T00:00:00Z&limit=2", ops, nil)
	r.expect(200, "the next page of the admin log", true, "GET", "/admin/log?since=2020-01-01T00:00:00Z&limit=2&after="+x.RespHeader.Get("Next-After"), ops, nil)
	r.expect(200, "an empty window of the admin log", true, "GET", "/admin/log?until=2020-01-01T00:00:00Z", ops, nil)
	r.expect(400, "the admin log since a time that is not one", false, "GET", "/admin/log?since=yesterday", ops, nil)
	r.expect(400, "the admin log after what is not a cursor", false, "GET", "/admin/log?after=x", ops, nil)
	r.expect(200, "health", true, "GET", "/health", "", nil)
	r.expect(200, "this document", true, "GET", "/openapi.json", "", nil)

	tenantDelete(r, ops, js)
}

// tenantDelete drives DELETE /admin/tenants/{id} through its answers, on a
// tenant made for it.
func tenantDelete(r *runner, ops string, js []string) {
	var made struct{ ID string }
	if err := json.Unmarshal(r.expect(201, "a tenant to delete", true, "POST", "/admin/tenants", ops, []byte(`{"name":"umbrella"}`), js...).RespBody, &made); err != nil {
		r.t.Fatal(err)
	}
	at := "/admin/tenants/" + made.ID
	u := ids.NewRandom().String()
	r.expect(400, "a tenant's delete not confirmed", false, "DELETE", at, ops, []byte(`{"confirm":"umbrell"}`), js...)
	r.expect(200, "a hold", true, "PUT", at+"/holds/"+u, ops, nil)
	r.expect(409, "a tenant's delete while a vCon is held", true, "DELETE", at, ops, []byte(`{"confirm":"umbrella"}`), js...)
	r.expect(200, "a release", true, "DELETE", at+"/holds/"+u, ops, nil)
	r.expect(200, "a tenant's delete", true, "DELETE", at, ops, []byte(`{"confirm":"umbrella"}`), js...)
	r.expect(404, "a deleted tenant", true, "GET", at, ops, nil)
	r.expect(200, "a tenant's delete again: its receipt", true, "DELETE", at, ops, []byte(`{"confirm":"umbrella"}`), js...)
	r.expect(404, "the delete of a tenant never made", true, "DELETE", "/admin/tenants/"+ids.NewRandom().String(), ops, []byte(`{"confirm":"x"}`), js...)
}
