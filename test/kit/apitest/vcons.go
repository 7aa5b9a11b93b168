package apitest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/vcon"
)

func storeReadEveryForm(t *testing.T, e *testenv.Env) {
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	for _, f := range Fixtures(t) {
		// Fixtures share uuids; PUT stores each as a new version.
		r := e.Do("PUT", "/vcons/"+f.UUID, k.Token, f.Body, headers(f)...)
		if r.Status != 201 && r.Status != 200 {
			t.Fatalf("%s: PUT status %d: %s", f.Name, r.Status, r.Body)
		}
		var st struct{ UUID, Version, StoredAt string }
		r.JSON(t, &st)
		if st.UUID != f.UUID {
			t.Fatalf("%s: uuid %s, want %s", f.Name, st.UUID, f.UUID)
		}
		got := e.Do("GET", "/vcons/"+f.UUID, k.Token, nil)
		expect(t, got, 200, f.Name+": GET")
		if !bytes.Equal(got.Body, f.Body) {
			t.Fatalf("%s: read back %d bytes differing from the %d stored", f.Name, len(got.Body), len(f.Body))
		}
		if ct := got.Header.Get("Content-Type"); ct != f.ContentType {
			t.Errorf("%s: Content-Type %q, want %q", f.Name, ct, f.ContentType)
		}
		if ce := got.Header.Get("Content-Encoding"); ce != f.Encoding {
			t.Errorf("%s: Content-Encoding %q, want %q", f.Name, ce, f.Encoding)
		}
		if et := got.Header.Get("ETag"); et != `"`+st.Version+`"` {
			t.Errorf("%s: ETag %q, want the version %s", f.Name, et, st.Version)
		}
		if nm := e.Do("GET", "/vcons/"+f.UUID, k.Token, nil, "If-None-Match", `"`+st.Version+`"`); nm.Status != 304 {
			t.Errorf("%s: If-None-Match: status %d, want 304", f.Name, nm.Status)
		}
	}
	// POST of a fresh uuid answers 201 with Location.
	body := NewVcon(ids.NewRandom().String(), "post example", "+15555550100")
	r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon+json")
	expect(t, r, 201, "POST")
	var st struct{ UUID string }
	r.JSON(t, &st)
	if loc := r.Header.Get("Location"); loc != "/vcons/"+st.UUID {
		t.Fatalf("Location %q", loc)
	}
}

func sharedVcons(t *testing.T, e *testenv.Env) {
	root := testenv.Shared(t, "vcons")
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	n := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".vcon") || strings.HasSuffix(path, ".json")) {
			return err
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		name := filepath.Base(path)
		m, ierr := vcon.Inspect(bytes.NewReader(body), false, 64<<20)
		if name == "simple-vcon.vcon" || name == "ab.vcon" {
			r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon")
			expect(t, r, 400, name)
			var msg struct{ Error string }
			r.JSON(t, &msg)
			if name == "ab.vcon" && !strings.Contains(msg.Error, "uuid") {
				t.Errorf("%s: the refusal %q does not name the uuid", name, msg.Error)
			}
			if name == "simple-vcon.vcon" && !strings.Contains(msg.Error, "JSON") {
				t.Errorf("%s: the refusal %q does not say it is not JSON", name, msg.Error)
			}
			return nil
		}
		if ierr != nil {
			t.Errorf("%s: %v", name, ierr)
			return nil
		}
		r := e.Do("PUT", "/vcons/"+m.UUID, k.Token, body, "Content-Type", "application/vcon")
		if r.Status != 201 && r.Status != 200 {
			t.Errorf("%s: PUT status %d: %s", name, r.Status, r.Body)
			return nil
		}
		got := e.Do("GET", "/vcons/"+m.UUID, k.Token, nil)
		if got.Status != 200 || !bytes.Equal(got.Body, body) {
			t.Errorf("%s: read back differs (status %d)", name, got.Status)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 50 {
		t.Fatalf("only %d shared vCons round-tripped", n)
	}
	t.Logf("%d vCons of ../shared/vcons stored and read back byte for byte", n)
}

func replaceAndVersions(t *testing.T, e *testenv.Env) {
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	uuid := ids.NewRandom().String()
	expect(t, e.Do("PUT", "/vcons/"+uuid, k.Token, NewVcon(uuid, "first", "+15555550101"), "Content-Type", "application/vcon"), 201, "first PUT")
	second := NewVcon(uuid, "second", "+15555550102")
	expect(t, e.Do("PUT", "/vcons/"+uuid, k.Token, second, "Content-Type", "application/vcon"), 200, "replacing PUT")
	// The same bytes again are a retry (200, Idempotent-Replayed); other
	// bytes under a stored uuid are a conflict (docs/api.md).
	if r := e.Do("POST", "/vcons", k.Token, second, "Content-Type", "application/vcon"); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("POST of the current version's bytes: %d %v %s", r.Status, r.Header, r.Body)
	}
	expect(t, e.Do("POST", "/vcons", k.Token, NewVcon(uuid, "third", "+15555550103"), "Content-Type", "application/vcon"), 409, "POST of a stored uuid")
	got := e.Do("GET", "/vcons/"+uuid, k.Token, nil)
	if !bytes.Equal(got.Body, second) {
		t.Fatalf("GET after replace returned %s", got.Body)
	}
	var vs struct {
		UUID     string
		Versions []struct {
			Version  string
			Current  bool
			Hidden   bool
			HiddenAt *string `json:"hidden_at"`
			Form     string
		}
	}
	e.Do("GET", "/vcons/"+uuid+"/versions", k.Token, nil).JSON(t, &vs)
	if len(vs.Versions) != 2 || !vs.Versions[0].Current || vs.Versions[0].Hidden || vs.Versions[1].Current || !vs.Versions[1].Hidden || vs.Versions[1].HiddenAt == nil {
		t.Fatalf("versions: %+v", vs)
	}
	if vs.Versions[0].Version <= vs.Versions[1].Version {
		t.Fatalf("versions not newest first: %+v", vs)
	}
}

func list(t *testing.T, e *testenv.Env) {
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read", "delete")
	want := map[string]bool{}
	for i := 0; i < 25; i++ {
		u := ids.NewRandom().String()
		expect(t, e.Do("POST", "/vcons", k.Token, NewVcon(u, "list", "+15555550100"), "Content-Type", "application/vcon"), 201, "POST")
		want[u] = true
	}
	var deleted string
	for u := range want {
		deleted = u
		break
	}
	expect(t, e.Do("DELETE", "/vcons/"+deleted, k.Token, nil), 204, "DELETE")
	delete(want, deleted)
	got := map[string]bool{}
	after := ""
	for pages := 0; ; pages++ {
		path := "/vcons?limit=10"
		if after != "" {
			path += "&after=" + after
		}
		var page struct {
			UUIDs []string
			Next  *string
		}
		r := e.Do("GET", path, k.Token, nil)
		expect(t, r, 200, "list")
		r.JSON(t, &page)
		for _, u := range page.UUIDs {
			if got[u] {
				t.Fatalf("%s listed twice", u)
			}
			got[u] = true
		}
		if page.Next == nil {
			break
		}
		after = *page.Next
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d uuids, want %d", len(got), len(want))
	}
	for u := range want {
		if !got[u] {
			t.Fatalf("%s not listed", u)
		}
	}
	expect(t, e.Do("GET", "/vcons?limit=0", k.Token, nil), 400, "limit=0")
	expect(t, e.Do("GET", "/vcons?after=x", k.Token, nil), 400, "after=x")
}

func concurrentStores(t *testing.T, e *testenv.Env) {
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	stored := make(chan [2]string, 256)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				u := ids.NewRandom().String()
				body := NewVcon(u, "concurrent", "+15555550100")
				req, _ := http.NewRequest("POST", e.BaseURL+"/vcons", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+k.Token)
				req.Header.Set("Content-Type", "application/vcon")
				resp, err := e.Client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 201 {
					errs <- fmt.Errorf("status %d", resp.StatusCode)
					return
				}
				stored <- [2]string{u, string(body)}
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(stored)
	for err := range errs {
		t.Fatal(err)
	}
	n := 0
	for s := range stored {
		got := e.Do("GET", "/vcons/"+s[0], k.Token, nil)
		if string(got.Body) != s[1] {
			t.Fatalf("%s reads back differently", s[0])
		}
		n++
	}
	if n != 128 {
		t.Fatalf("%d stored", n)
	}
}
