package server

// RouteKeys maps every pattern Handler registers to the key it needs: ""
// for none, "operator" for an operator key, or a tenant key's scope.
func RouteKeys() map[string]string {
	out := map[string]string{}
	for _, rt := range (&Server{}).routes() {
		out[rt.pattern] = rt.key
	}
	return out
}
