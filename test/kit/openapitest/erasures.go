package openapitest

import (
	"encoding/json"
	"strings"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
)

// erasures drives POST /erasures, GET /erasures/{id} and the JWKS
// (docs/erasure.md).
func erasures(r *runner, writer, deleter, ops, tenant string) {
	js := []string{"Content-Type", "application/json"}
	u := ids.NewRandom().String()
	r.expect(201, "a vCon to erase", true, "POST", "/vcons", writer, apitest.NewVcon(u, "erase", "+15555550199"), "Content-Type", "application/vcon")
	x := r.expect(200, "an erasure by uuids", true, "POST", "/erasures", deleter, []byte(`{"uuids":["`+u+`"]}`), js...)
	var got struct{ Erasure string }
	json.Unmarshal(x.RespBody, &got)
	r.expect(200, "an erasure again", true, "GET", "/erasures/"+got.Erasure, deleter, nil)
	r.expect(404, "an erasure never made", true, "GET", "/erasures/"+ids.NewRandom().String(), deleter, nil)
	r.expect(404, "an erasure id that is not a uuid", false, "GET", "/erasures/nope", deleter, nil)
	r.expect(410, "a store of an erased uuid", true, "POST", "/vcons", writer, apitest.NewVcon(u, "again", "+15555550199"), "Content-Type", "application/vcon")
	r.expect(410, "a new version of an erased uuid", true, "PUT", "/vcons/"+u, writer, apitest.NewVcon(u, "again", "+15555550199"), "Content-Type", "application/vcon")
	r.expect(400, "two filters", false, "POST", "/erasures", deleter, []byte(`{"tel":"+15555550199","name":"Ada"}`), js...)
	r.expect(400, "no filter", false, "POST", "/erasures", deleter, []byte(`{}`), js...)
	r.expect(400, "a tel without digits", true, "POST", "/erasures", deleter, []byte(`{"tel":"none"}`), js...)
	r.expect(400, "a member twice", false, "POST", "/erasures", deleter, []byte(`{"uuids":["`+u+`"],"uuids":[]}`), js...)
	r.expect(400, "something after the object", false, "POST", "/erasures", deleter, []byte(`{"uuids":["`+u+`"]} {}`), js...)
	r.expect(415, "an erasure not sent as JSON", false, "POST", "/erasures", deleter, []byte(`{"uuids":["`+u+`"]}`), "Content-Type", "text/plain")
	r.expect(200, "search off", true, "PUT", "/admin/tenants/"+tenant+"/search", ops, []byte(`{"search":"off"}`), js...)
	r.expect(409, "an erasure by party while search is off", true, "POST", "/erasures", deleter, []byte(`{"tel":"+15555550199"}`), js...)
	many := make([]string, archive.MaxErasure+1)
	for i := range many {
		many[i] = `"` + ids.NewRandom().String() + `"`
	}
	r.expect(422, "more vCons than one erasure takes", true, "POST", "/erasures", deleter, []byte(`{"uuids":[`+strings.Join(many, ",")+`]}`), js...)
	// A tenant's erasures name 30,000 uuids a minute: three of 10,000
	// never stored, then a refusal until the budget refills.
	body := []byte(`{"uuids":[` + strings.Join(many[:archive.MaxErasure], ",") + `]}`)
	r.expect(200, "an erasure of uuids never stored", true, "POST", "/erasures", deleter, body, js...)
	r.expect(200, "an erasure of uuids never stored", true, "POST", "/erasures", deleter, body, js...)
	r.expect(200, "an erasure of uuids never stored", true, "POST", "/erasures", deleter, body, js...)
	r.expect(429, "a fourth erasure of 10,000 uuids within a minute", true, "POST", "/erasures", deleter, body, js...)
	r.expect(200, "the receipts' keys", true, "GET", "/.well-known/jwks.json", "", nil)
}
