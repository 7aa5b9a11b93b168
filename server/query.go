package server

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vcon-server/vcon-server/search"
)

// A query parameter a route does not take is refused, never ignored: a
// client that misspells a filter (?email= for ?mailto=) must not get the
// plain listing back as if it were the answer (docs/api.md, "List").

// queryParams are the query parameters of the route pattern, in the
// order its refusal lists them; a route not named here takes none.
func queryParams(pattern string) []string {
	switch pattern {
	case "GET /vcons":
		return append([]string{"limit", "after"}, search.Fields...)
	case "GET /erasures/{id}":
		return []string{"after"}
	case "GET /admin/log":
		return []string{"since", "until", "limit", "after"}
	case "GET /audit/log/proof", "GET /admin/log/proof":
		return []string{"index"}
	}
	return nil
}

// maxNameShown bounds how much of an unknown parameter's name a refusal
// repeats.
const maxNameShown = 64

// badQuery is the refusal of a query r's route does not take, or "" when
// the route takes every parameter r has.
func badQuery(r *http.Request) string {
	raw := r.URL.RawQuery
	if raw == "" {
		return ""
	}
	if _, err := url.ParseQuery(raw); err != nil {
		return "the query does not parse (" + err.Error() + "); send name=value pairs joined by &"
	}
	takes := queryParams(r.Pattern)
	// In the order sent, so the refusal names the first unknown one.
	for _, pair := range strings.Split(raw, "&") {
		if pair == "" {
			continue
		}
		name, _, _ := strings.Cut(pair, "=")
		name, _ = url.QueryUnescape(name) // ParseQuery above unescaped it already
		if slices.Contains(takes, name) {
			continue
		}
		if len(name) > maxNameShown {
			cut := maxNameShown
			for cut > 0 && !utf8.RuneStart(name[cut]) {
				cut--
			}
			name = name[:cut] + "..."
		}
		list := "no query parameters"
		if len(takes) > 0 {
			list = strings.Join(takes, ", ")
		}
		return "unknown query parameter " + strconv.Quote(name) + "; " + r.Pattern + " takes " + list
	}
	return ""
}
