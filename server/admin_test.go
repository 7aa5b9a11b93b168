package server_test

import (
	"testing"

	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestAdminBodyOneValue: an admin body is one JSON value; data after it,
// but white space, is refused with 400 and where it starts, and changes
// nothing.
func TestAdminBodyOneValue(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	ops := e.OperatorKey()
	ct := []string{"Content-Type", "application/json"}
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		error                    string
	}{
		{"trailing garbage", "PUT", "/admin/tenants/" + tenant + "/retention", `{"retention":"5d"} trailing garbage`, 400,
			"the body must be a JSON object: more data follows the object at byte 19; send one JSON value only"},
		{"a second object", "PUT", "/admin/tenants/" + tenant + "/retention", `{"retention":"5d"}{"retention":"0d"}`, 400,
			"the body must be a JSON object: more data follows the object at byte 18; send one JSON value only"},
		{"a second tenant", "POST", "/admin/tenants", "{\"name\":\"globex\"}\n{\"name\":\"initech\"}\n", 400,
			"the body must be a JSON object: more data follows the object at byte 18; send one JSON value only"},
		{"an unclosed array after", "PUT", "/admin/tenants/" + tenant + "/metadata", `{"metadata":"form"} [`, 400,
			"the body must be a JSON object: more data follows the object at byte 20; send one JSON value only"},
		{"white space after", "PUT", "/admin/tenants/" + tenant + "/metadata", "{\"metadata\":\"none\"} \r\n\t\n", 200, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.Do(c.method, c.path, ops.Token, []byte(c.body), ct...)
			var got struct{ Error string }
			r.JSON(t, &got)
			if r.Status != c.status || got.Error != c.error {
				t.Errorf("%d %q, want %d %q", r.Status, got.Error, c.status, c.error)
			}
		})
	}
	var ts []struct{ Name string }
	e.Do("GET", "/admin/tenants", ops.Token, nil).JSON(t, &ts)
	var got struct{ Retention *string }
	e.Do("GET", "/admin/tenants/"+tenant, ops.Token, nil).JSON(t, &got)
	if len(ts) != 1 || got.Retention != nil {
		t.Errorf("refused bodies changed something: tenants %v, retention %v", ts, got.Retention)
	}
}
