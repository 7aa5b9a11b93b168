package search_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/search"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/vcon"
)

func vconWith(uuid string, parties string) []byte {
	return []byte(fmt.Sprintf(`{"vcon":"0.4.0","uuid":%q,"subject":"Quarterly billing dispute","parties":[%s],"dialog":[]}`, uuid, parties))
}

func find(t *testing.T, e *testenv.Env, token, query string) []string {
	t.Helper()
	r := e.Do("GET", "/vcons?"+query, token, nil)
	if r.Status != 200 {
		t.Fatalf("search %s: %d %s", query, r.Status, r.Body)
	}
	var page struct {
		UUIDs    []string
		Complete bool
	}
	r.JSON(t, &page)
	if !page.Complete {
		t.Fatalf("search %s: index not complete", query)
	}
	sort.Strings(page.UUIDs)
	return page.UUIDs
}

func sorted(s ...string) []string {
	sort.Strings(s)
	return s
}

func TestSearch(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	acme := e.Tenant("acme")
	globex := e.Tenant("globex")
	k := e.NewKey(acme, "write", "read", "delete")
	kg := e.NewKey(globex, "write", "read")
	ct := []string{"Content-Type", "application/vcon"}
	a, b, c, d := ids.NewRandom().String(), ids.NewRandom().String(), ids.NewRandom().String(), ids.NewRandom().String()

	post := func(token string, body []byte) {
		t.Helper()
		if r := e.Do("POST", "/vcons", token, body, ct...); r.Status != 201 {
			t.Fatalf("POST: %d %s", r.Status, r.Body)
		}
	}
	// Stored before search is on: the background indexer must find it.
	post(k.Token, vconWith(a, `{"tel":"+1 555 555 0101","name":"Ada  Lovelace"}`))
	if r := e.Do("GET", "/vcons?tel=%2B15555550101", k.Token, nil); r.Status != 409 {
		t.Fatalf("search while off: %d", r.Status)
	}
	e.CLI("tenant", "set-search", "acme", "parties")
	e.CLI("tenant", "set-search", "globex", "parties")
	e.Daemon.IndexSearch(t.Context())
	// Stored after: indexed in the store's own transaction.
	post(k.Token, vconWith(b, `{"tel":"tel:+15555550101","mailto":"mailto:Ada@Example.com"}`))
	post(k.Token, vconWith(c, `{"tel":"+15555550102","name":"Charles Babbage"}`))
	post(kg.Token, vconWith(d, `{"tel":"+15555550101","name":"Ada Lovelace"}`))
	for _, f := range apitest.Fixtures(t) {
		if r := e.Do("PUT", "/vcons/"+f.UUID, k.Token, f.Body, "Content-Type", f.ContentType, "Content-Encoding", f.Encoding); r.Status >= 300 {
			t.Fatalf("PUT %s: %d", f.Name, r.Status)
		}
	}

	for q, want := range map[string][]string{
		"tel=%2B1+555+555+0101":                     sorted(a, b),
		"tel=15555550101":                           sorted(a, b),
		"tel=tel:%2B15555550101":                    sorted(a, b),
		"name=ada+lovelace":                         {a},
		"name=ADA%20%20LOVELACE":                    {a},
		"mailto=ada@example.com":                    {b},
		"tel=%2B15555550101&mailto=ada@example.com": {b},
		"tel=%2B15555550102&name=ada+lovelace":      nil,
		"tel=%2B19995550000":                        nil,
	} {
		if got := find(t, e, k.Token, q); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: got %v, want %v", q, got, want)
		}
	}
	if got := find(t, e, kg.Token, "tel=%2B15555550101"); strings.Join(got, " ") != d {
		t.Errorf("globex finds %v, want only its own %s", got, d)
	}
	// Every party of the project's fixtures is found, except in encrypted
	// vCons, which the server cannot read.
	for _, f := range apitest.Fixtures(t) {
		m, _ := vcon.Inspect(bytes.NewReader(f.Body), f.Encoding == "gzip" || f.ContentType == "application/vcon+gzip", 64<<20)
		for _, p := range m.Parties {
			if search.Normalize("tel", p.Tel) == "" {
				continue
			}
			got := find(t, e, k.Token, "tel="+strings.ReplaceAll(p.Tel, "+", "%2B"))
			cur := e.Do("GET", "/vcons/"+f.UUID, k.Token, nil)
			hit := false
			for _, u := range got {
				hit = hit || u == f.UUID
			}
			// The uuid's current version is the last fixture PUT; only
			// when that is this fixture's body must it match.
			if bytes.Equal(cur.Body, f.Body) && hit == (m.Form == vocab.FormEncrypted) {
				t.Errorf("%s (%s): tel %s found=%v", f.Name, m.Form, p.Tel, hit)
			}
		}
	}

	// A hidden version stops matching; a purged one leaves no token.
	if r := e.Do("DELETE", "/vcons/"+b, k.Token, nil); r.Status != 204 {
		t.Fatalf("DELETE: %d", r.Status)
	}
	if got := find(t, e, k.Token, "tel=15555550101"); strings.Join(got, " ") != a {
		t.Errorf("after deleting b: %v", got)
	}
	e.CLI("tenant", "set-retention", "acme", "0d")
	if r := e.Do("DELETE", "/vcons/"+a, k.Token, nil); r.Status != 204 {
		t.Fatalf("DELETE: %d", r.Status)
	}
	e.Daemon.Sweep(t.Context())
	var left int
	e.Daemon.Cat.DB().QueryRow(`SELECT count(*) FROM search_tokens s JOIN versions v ON v.id = s.version JOIN vcons c ON c.tenant = v.tenant AND c.uuid = v.uuid WHERE c.uuid = ?`, ids.MustParse(a).String()).Scan(&left)
	var orphans int
	e.Daemon.Cat.DB().QueryRow(`SELECT count(*) FROM search_tokens s WHERE NOT EXISTS (SELECT 1 FROM versions v WHERE v.id = s.version AND v.purge = 0)`).Scan(&orphans)
	if orphans != 0 {
		t.Errorf("%d tokens of purged versions left", orphans)
	}
	if got := find(t, e, k.Token, "tel=15555550101"); len(got) != 0 {
		t.Errorf("after purging: %v", got)
	}

	// The audit record names the filters, never their values.
	audit := e.CLI("audit", "export", "--tenant", "acme")
	if !strings.Contains(audit, `"action":"list","target":"filters=tel,mailto"`) || strings.Contains(audit, "5555550101") {
		t.Errorf("audit:\n%s", audit)
	}

	// No tel, mailto or name in clear in the catalog's files.
	e.Stop()
	for _, name := range []string{"catalog.db", "catalog.db-wal", "catalog.db-shm"} {
		raw, _ := os.ReadFile(filepath.Join(e.Config.DataDir, name))
		for _, s := range []string{"15555550101", "5555550102", "ada@example.com", "Ada@Example.com", "ada lovelace", "Lovelace", "Babbage"} {
			if bytes.Contains(raw, []byte(s)) {
				t.Errorf("%s holds %q in clear", name, s)
			}
		}
	}
}

// TestSearchSharedVcons indexes the real vCons of ../shared/vcons and finds
// every tel of each current version, and none of an encrypted one.
func TestSearchSharedVcons(t *testing.T) {
	root := testenv.Shared(t, "vcons")
	e := testenv.New(t, testenv.Options{})
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	e.CLI("tenant", "set-search", "acme", "parties")
	e.Daemon.IndexSearch(t.Context())
	last := map[string]*vcon.Meta{}
	filepath.WalkDir(root, func(path string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() || !(strings.HasSuffix(path, ".vcon") || strings.HasSuffix(path, ".json")) {
			return err
		}
		body, _ := os.ReadFile(path)
		m, err := vcon.Inspect(bytes.NewReader(body), false, 64<<20)
		if err != nil {
			return nil
		}
		if r := e.Do("PUT", "/vcons/"+m.UUID, k.Token, body, "Content-Type", "application/vcon"); r.Status >= 300 {
			t.Fatalf("%s: %d", path, r.Status)
		}
		last[m.UUID] = m
		return nil
	})
	want := map[string]map[string]bool{} // normalised tel -> uuids
	for u, m := range last {
		if m.Form == vocab.FormEncrypted {
			continue
		}
		for _, p := range m.Parties {
			if n := search.Normalize("tel", p.Tel); n != "" {
				if want[n] == nil {
					want[n] = map[string]bool{}
				}
				want[n][u] = true
			}
		}
	}
	if len(want) < 5 {
		t.Fatalf("only %d tels in the shared vCons", len(want))
	}
	for tel, uuids := range want {
		got := find(t, e, k.Token, "tel="+tel+"&limit=1000")
		if len(got) != len(uuids) {
			t.Errorf("tel %s: %d found, want %d", tel, len(got), len(uuids))
		}
		for _, u := range got {
			if !uuids[u] {
				t.Errorf("tel %s found %s", tel, u)
			}
		}
	}
}
