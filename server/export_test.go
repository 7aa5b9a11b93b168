package server

import "strings"

// RouteKeys maps every pattern Handler registers to the roles its key
// needs, as docs/openapi.json's security requirement lists them, joined
// by a space: "" for none, a tenant key's scope ("write"), or "operator"
// and an operator key's scope ("operator tenants").
func RouteKeys() map[string]string {
	out := map[string]string{}
	for _, rt := range (&Server{}).routes() {
		out[rt.pattern] = strings.Join(rt.roles(), " ")
	}
	return out
}
