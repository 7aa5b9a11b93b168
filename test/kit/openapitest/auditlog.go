package openapitest

import (
	"strconv"
	"strings"
)

// auditLogs asks each route of a tenant's audit log (a tenant key of
// scope audit) and of the admin log (an operator key) for what it
// documents: the checkpoint, the key, a partial tile and bundle the
// checkpoint covers, a tile far past it, a proof, and an index far past
// the tree.
func auditLogs(r *runner, auditor, ops string) {
	for _, l := range []struct{ prefix, token string }{{"/audit/log", auditor}, {"/admin/log", ops}} {
		x := r.expect(200, "the checkpoint", true, "GET", l.prefix+"/checkpoint", l.token, nil)
		r.expect(200, "the verifier key", true, "GET", l.prefix+"/key", l.token, nil)
		lines := strings.Split(string(x.RespBody), "\n")
		size := 0
		if len(lines) > 1 {
			size, _ = strconv.Atoi(lines[1])
		}
		if size < 1 || size > 255 {
			r.t.Errorf("%s: the checkpoint's size is %d, want 1 to 255 for a partial tile", l.prefix, size)
			continue
		}
		w := strconv.Itoa(size)
		r.expect(200, "a partial tile", true, "GET", l.prefix+"/tile/0/000.p/"+w, l.token, nil)
		r.expect(200, "a partial entry bundle", true, "GET", l.prefix+"/tile/entries/000.p/"+w, l.token, nil)
		// Far past: the log grows while the other requests run, and a
		// checkpoint is signed every second.
		r.expect(404, "a tile past the checkpoint", false, "GET", l.prefix+"/tile/0/x001/000", l.token, nil)
		r.expect(404, "a path that is no tile", false, "GET", l.prefix+"/tile/0/1", l.token, nil)
		r.expect(200, "a proof", true, "GET", l.prefix+"/proof?index=0", l.token, nil)
		r.expect(404, "a proof past the checkpoint", false, "GET", l.prefix+"/proof?index="+strconv.Itoa(size+1_000_000), l.token, nil)
		r.expect(400, "a proof of no index", false, "GET", l.prefix+"/proof?index=x", l.token, nil)
	}
}
