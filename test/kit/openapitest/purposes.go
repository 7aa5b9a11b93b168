package openapitest

import (
	"encoding/json"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// purposes drives the reads decided for a key's purpose: Vcon-Purpose,
// 451 and a listing's withheld (docs/lawful-basis.md, "Purposes at the
// door").
func purposes(r *runner, e *testenv.Env, writer, ops, tenant string) {
	bound := func(ps ...string) string {
		args := []string{"key", "create", "--tenant", tenant, "--label", "bound", "--scope", "read"}
		for _, p := range ps {
			args = append(args, "--purpose", p)
		}
		var k testenv.Key
		if err := json.Unmarshal([]byte(e.CLI(args...)), &k); err != nil {
			r.t.Fatal(err)
		}
		return k.Token
	}
	ads, both := bound("marketing"), bound("customer_service", "marketing")
	u := ids.NewRandom().String()
	r.expect(201, "a vCon refusing marketing", true, "POST", "/vcons", writer, []byte(`{"vcon":"0.4.0","uuid":"`+u+`","parties":[],
		"attachments":[{"purpose":"lawful_basis","party":0,"dialog":0,"encoding":"json","body":{"lawful_basis":"consent","expiration":null,
		"purpose_grants":[{"purpose":"marketing","granted":false,"granted_at":"2026-01-02T12:00:00Z"}]}}]}`), "Content-Type", "application/vcon")
	js := []string{"Content-Type", "application/json"}
	lawful := "/admin/tenants/" + tenant + "/lawful-basis"
	r.expect(200, "lawful bases enforced", true, "PUT", lawful, ops, []byte(`{"lawful_basis":"enforce"}`), js...)
	r.expect(451, "a read its purpose is refused", true, "GET", "/vcons/"+u, ads, nil)
	r.expect(451, "versions its purpose is refused", true, "GET", "/vcons/"+u+"/versions", ads, nil)
	r.expect(451, "a read naming its purpose", true, "GET", "/vcons/"+u, both, nil, "Vcon-Purpose", "marketing")
	r.expect(400, "a key of several purposes naming none", true, "GET", "/vcons/"+u, both, nil)
	r.expect(403, "a purpose the key lacks", true, "GET", "/vcons/"+u, ads, nil, "Vcon-Purpose", "analytics")
	r.expect(200, "a listing that withholds", true, "GET", "/vcons", ads, nil)
	r.expect(200, "lawful bases off", true, "PUT", lawful, ops, []byte(`{"lawful_basis":"off"}`), js...)
}
