package load

import (
	"bytes"
	"net/http"
)

// state is one thing a vCon may be after the answers seen so far.
type state struct {
	deleted bool
	version string // the version id the store answered ("" if unknown)
	body    []byte
	gz      bool
}

// entry is one uuid a worker made.
type entry struct {
	uuid   string
	tenant int
	// states holds what the vCon may be: one when every answer was clear,
	// more after a failed request whose effect is unknown.
	states []state
	// acked are the version ids a store or replace acknowledged.
	acked []string
	// purgedMaybe: a purge may have destroyed some acked versions.
	purgedMaybe bool
}

func (e *entry) live() bool {
	for _, s := range e.states {
		if !s.deleted {
			return true
		}
	}
	return false
}

func (e *entry) certainlyDeleted() bool { return len(e.states) == 1 && e.states[0].deleted }

// match returns the index of the state the answer shows, or -1.
func match(e *entry, status int, h http.Header, body []byte) int {
	for i, st := range e.states {
		switch {
		case st.deleted && status == 404:
			return i
		case !st.deleted && status == 200 && bytes.Equal(body, st.body) &&
			(st.version == "" || h.Get("ETag") == `"`+st.version+`"`) &&
			(h.Get("Content-Encoding") == "gzip") == st.gz:
			return i
		}
	}
	return -1
}
