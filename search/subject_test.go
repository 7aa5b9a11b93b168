package search_test

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

func withSubject(uuid, subject, tel string) []byte {
	return []byte(fmt.Sprintf(`{"vcon":"0.4.0","uuid":%q,"subject":%q,"parties":[{"tel":%q}],"dialog":[]}`, uuid, subject, tel))
}

// TestSearchSubject: ?subject= finds the vCons whose current subject holds
// every word of the filter, normalised as the indexer does, for a tenant
// whose setting is parties+subject; other tenants are refused as a search
// is while search is off.
func TestSearchSubject(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	ct := []string{"Content-Type", "application/vcon"}
	a, b, c, d := ids.NewRandom().String(), ids.NewRandom().String(), ids.NewRandom().String(), ids.NewRandom().String()
	put := func(uuid, subject, tel string) {
		t.Helper()
		if r := e.Do("PUT", "/vcons/"+uuid, k.Token, withSubject(uuid, subject, tel), ct...); r.Status >= 300 {
			t.Fatalf("PUT: %d %s", r.Status, r.Body)
		}
	}
	refused := func(query string, status int, want string) {
		t.Helper()
		r := e.Do("GET", "/vcons?"+query, k.Token, nil)
		if r.Status != status || string(r.Body) != `{"error":"`+want+"\"}\n" {
			t.Errorf("%s: %d %s\nwant %d %s", query, r.Status, r.Body, status, want)
		}
	}

	// Stored before subjects are indexed: the background indexer finds it.
	put(a, "Quarterly billing dispute", "+15555550101")
	refused("subject=billing", 409, "search is off for this tenant; an operator turns it on with vcon-server tenant set-search")
	e.CLI("tenant", "set-search", "acme", "parties")
	e.Daemon.IndexSearch(t.Context())
	notIndexed := "this tenant's search indexes parties, not subjects; an operator indexes subjects too with vcon-server tenant set-search, setting parties+subject"
	refused("subject=billing", 409, notIndexed)
	refused("tel=15555550101&subject=billing", 409, notIndexed)
	if got := find(t, e, k.Token, "tel=15555550101"); strings.Join(got, " ") != a {
		t.Errorf("tel with parties: %v", got)
	}
	e.CLI("tenant", "set-search", "acme", "parties+subject")
	e.Daemon.IndexSearch(t.Context())
	// Stored after: indexed in the store's own transaction.
	put(b, "Billing: March invoice (re-sent)", "+15555550102")
	put(c, "Café déjà vu", "+15555550103")
	put(d, "", "+15555550104")

	for q, want := range map[string][]string{
		"subject=billing":           sorted(a, b),
		"subject=BILLING":           sorted(a, b),
		"subject=Billing%20dispute": {a},
		"subject=dispute,quarterly": {a},
		"subject=" + url.QueryEscape("  Dispute\tBILLING  billing "): {a},
		"subject=march+billing":                        {b},
		"subject=re-sent":                              {b},
		"subject=sent":                                 {b},
		"subject=billing+invoice+dispute":              nil, // every word, in one subject
		"subject=bill":                                 nil, // whole words only
		"subject=billings":                             nil,
		"subject=" + url.QueryEscape("CAFÉ"):           {c},
		"subject=" + url.QueryEscape("déjà"):           {c},
		"subject=%21%21":                               nil, // no word: matches nothing
		"subject=billing&tel=%2B15555550102":           {b},
		"subject=billing&tel=%2B15555550103":           nil,
		"subject=billing&limit=1&after=" + maxID(a, b): nil,
	} {
		if got := find(t, e, k.Token, q); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: got %v, want %v", q, got, want)
		}
	}
	// Parties are still found.
	if got := find(t, e, k.Token, "tel=15555550101"); strings.Join(got, " ") != a {
		t.Errorf("tel with parties+subject: %v", got)
	}

	refused("subject=", 400, "subject must be given once, not empty")
	refused("subject=billing&subject=march", 400, "subject must be given once, not empty")
	refused("subject="+strings.Repeat("w+", 17), 400, "subject must be at most 16 words")
	if got := find(t, e, k.Token, "subject="+strings.Repeat("billing+", 16)); len(got) != 2 {
		t.Errorf("16 words: %v", got)
	}

	// A new version's subject replaces the old one's words at once.
	put(a, "Refund request", "+15555550101")
	if got := find(t, e, k.Token, "subject=billing"); strings.Join(got, " ") != b {
		t.Errorf("after replacing a: %v", got)
	}
	if got := find(t, e, k.Token, "subject=refund"); strings.Join(got, " ") != a {
		t.Errorf("the new subject: %v", got)
	}

	// The audit record names the filter, never its words.
	audit := e.CLI("audit", "export", "--tenant", "acme")
	if !strings.Contains(audit, `"action":"list","target":"filters=tel,subject"`) || !strings.Contains(audit, `"target":"filters=subject"`) {
		t.Errorf("audit lacks the subject filter:\n%s", audit)
	}
	for _, s := range []string{"billing", "Billing", "dispute", "Refund", "refund"} {
		if strings.Contains(audit, s) {
			t.Errorf("the audit log holds %q", s)
		}
	}

	// Back to parties: the subject tokens go, and ?subject= is refused.
	e.CLI("tenant", "set-search", "acme", "parties")
	e.Daemon.IndexSearch(t.Context())
	refused("subject=billing", 409, notIndexed)

	// No subject word in clear in the catalog's files.
	e.Stop()
	for _, name := range []string{"catalog.db", "catalog.db-wal", "catalog.db-shm"} {
		raw, _ := os.ReadFile(filepath.Join(e.Config.DataDir, name))
		for _, s := range []string{"billing", "Billing", "Quarterly", "quarterly", "invoice", "Refund"} {
			if bytes.Contains(raw, []byte(s)) {
				t.Errorf("%s holds %q in clear", name, s)
			}
		}
	}
}

func maxID(a, b string) string {
	if a > b {
		return a
	}
	return b
}
