package server

import "net/http"

// The mux answers two refusals on its own, in text: a path no route has
// (404) and a method the path's routes do not take (405, with Allow).
// routeErrors gives them the API's JSON error shape, as every other
// refusal has (docs/api.md). Anything else the mux might answer for an
// unmatched request (a redirect to a cleaned path, which the guard's
// refusal of such paths leaves unreachable) passes through unchanged.

// msgNoRoute refuses a path no route has, in the words of the guard's
// refusals of paths that name nothing (server/limits.go).
const msgNoRoute = "no such resource"

// msgNoMethod refuses a method the path's routes do not take.
func msgNoMethod(method, allow string) string {
	return "this route does not take " + method + "; it takes " + allow
}

// routeErrors serves next, answering in JSON when mux has no route for r.
func routeErrors(mux *http.ServeMux, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			w = &routeErrorWriter{ResponseWriter: w, method: r.Method}
		}
		next.ServeHTTP(w, r)
	})
}

// routeErrorWriter replaces the mux's text 404 and 405 with JSON, keeping
// the Allow header the mux set.
type routeErrorWriter struct {
	http.ResponseWriter
	method   string
	replaced bool
}

func (w *routeErrorWriter) WriteHeader(status int) {
	switch status {
	case http.StatusNotFound:
		w.replaced = true
		w.Header().Del("X-Content-Type-Options")
		writeError(w.ResponseWriter, status, msgNoRoute)
	case http.StatusMethodNotAllowed:
		w.replaced = true
		w.Header().Del("X-Content-Type-Options")
		writeError(w.ResponseWriter, status, msgNoMethod(w.method, w.Header().Get("Allow")))
	default:
		w.ResponseWriter.WriteHeader(status)
	}
}

func (w *routeErrorWriter) Write(b []byte) (int, error) {
	if w.replaced {
		return len(b), nil // the mux's text, already answered in JSON
	}
	return w.ResponseWriter.Write(b)
}

func (w *routeErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
