package export_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/export"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// sqlString quotes s as a SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// generated is a vCon a test made, with the clear strings an export at a
// low level must never show.
type generated struct {
	UUID, Subject, Tel, Name, Mailto string
	ZonelessTime                     bool
}

// clear lists the strings of g that only a full export may hold.
func (g generated) clear() []string {
	u := ids.MustParse(g.UUID)
	return []string{g.UUID, u.Hex(), string(u[:]), g.Subject, g.Tel, g.Name, g.Mailto}
}

func (g generated) body() []byte {
	created := "2026-11-05T12:00:00Z"
	if g.ZonelessTime {
		// Written as many real producers do: no zone, so no time.
		created = "2026-11-05T12:00:00"
	}
	return fmt.Appendf(nil, `{"vcon":"0.4.0","uuid":%q,"created_at":%q,"subject":%q,"parties":[{"tel":%q,"name":%q},{"mailto":%q}],"dialog":[{"type":"text","body":"hello","start":"2026-11-05T12:00:00Z","parties":[0,1]}],"attachments":[],"analysis":[]}`,
		g.UUID, created, g.Subject, g.Tel, g.Name, g.Mailto)
}

// tenantData is one tenant of a test server with vCons in every form:
// current, replaced (hidden) and deleted versions.
type tenantData struct {
	e         *testenv.Env
	Tenant    string
	Key       testenv.Key
	Generated []generated
	Deleted   string // the uuid of a deleted generated vCon
}

// storeEveryForm stores the project's test vCons in every form (each
// fixture shares its uuid with others, so PUT hides the earlier versions)
// and n generated unsigned ones, and deletes one of those.
func storeEveryForm(t *testing.T, e *testenv.Env, name string, n int) *tenantData {
	t.Helper()
	d := &tenantData{e: e, Tenant: e.Tenant(name)}
	d.Key = e.NewKey(d.Tenant, "write", "read", "delete")
	for _, f := range apitest.Fixtures(t) {
		h := []string{"Content-Type", f.ContentType}
		if f.Encoding != "" {
			h = append(h, "Content-Encoding", f.Encoding)
		}
		r := e.Do("PUT", "/vcons/"+f.UUID, d.Key.Token, f.Body, h...)
		if r.Status != 201 && r.Status != 200 {
			t.Fatalf("%s: PUT status %d: %s", f.Name, r.Status, r.Body)
		}
	}
	for i := range n {
		g := generated{
			UUID:         ids.NewRandom().String(),
			Subject:      "Export subject " + ids.NewRandom().Hex()[:12],
			Tel:          fmt.Sprintf("+1555%07d", 1000000+i*7919%9000000),
			Name:         "Caller " + ids.NewRandom().Hex()[:10],
			Mailto:       "mailto:agent-" + ids.NewRandom().Hex()[:10] + "@example.com",
			ZonelessTime: i%3 == 2,
		}
		r := e.Do("POST", "/vcons", d.Key.Token, g.body(), "Content-Type", "application/vcon")
		if r.Status != 201 {
			t.Fatalf("POST status %d: %s", r.Status, r.Body)
		}
		d.Generated = append(d.Generated, g)
	}
	if n > 1 {
		d.Deleted = d.Generated[0].UUID
		if r := e.Do("DELETE", "/vcons/"+d.Deleted, d.Key.Token, nil); r.Status != 204 {
			t.Fatalf("DELETE status %d: %s", r.Status, r.Body)
		}
	}
	return d
}

// kept is a version the catalog keeps, as the test expects to see it.
type kept struct {
	ID        ids.ID
	UUID      ids.ID
	Current   bool
	Form      string
	Gzip      bool
	Size      int64
	SealedMD5 string
}

// keptVersions reads the tenant's kept versions straight from the catalog
// and their sealed bytes from the store.
func keptVersions(t *testing.T, e *testenv.Env, tenant string) map[string]kept {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, e.Config.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tid := ids.MustParse(tenant)
	rows, err := cat.DB().QueryContext(ctx, `SELECT v.id, v.uuid, c.current IS v.id, v.form, v.content_type, v.content_encoding, v.size, v.location
		FROM versions v JOIN vcons c ON c.tenant = v.tenant AND c.uuid = v.uuid WHERE v.tenant = ? AND v.purge = 0`, tid[:])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]kept{}
	loc := map[string]catalog.Location{}
	for rows.Next() {
		var id, uuid []byte
		var k kept
		var ct, ce, l string
		if err := rows.Scan(&id, &uuid, &k.Current, &k.Form, &ct, &ce, &k.Size, &l); err != nil {
			t.Fatal(err)
		}
		copy(k.ID[:], id)
		copy(k.UUID[:], uuid)
		k.Gzip = ce == "gzip" || ct == "application/vcon+gzip"
		out[k.ID.String()] = k
		loc[k.ID.String()] = catalog.Location(l)
	}
	rows.Close()
	store := e.Store()
	for id, k := range out {
		var rc io.ReadCloser
		if loc[id] == catalog.Packed {
			v, verr := cat.Version(ctx, k.ID)
			if verr != nil {
				t.Fatal(verr)
			}
			rc, err = e.Daemon.Archive.Sealed(ctx, v)
		} else {
			rc, err = store.Get(ctx, archive.ObjectKey(loc[id], tid, k.ID))
		}
		if err != nil {
			t.Fatalf("read the stored bytes of %s: %v", id, err)
		}
		h := md5.New()
		io.Copy(h, rc)
		rc.Close()
		k.SealedMD5 = hex.EncodeToString(h.Sum(nil))
		out[id] = k
	}
	return out
}

// exportCLI runs export parquet in this process and decodes its line.
func exportCLI(t *testing.T, e *testenv.Env, args ...string) export.Result {
	t.Helper()
	out := e.CLI(append([]string{"export", "parquet"}, args...)...)
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("export printed %q, want one line", out)
	}
	var r export.Result
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("export line %q: %v", out, err)
	}
	return r
}

// readManifest reads a manifest written under dir.
func readManifest(t *testing.T, dir, rel string) export.Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	var m export.Manifest
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("manifest %s: %v\n%s", rel, err, b)
	}
	return m
}

// filesUnder lists every file under dir, relative, sorted.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// grepDir returns, for each needle found, the files under dir holding it.
func grepDir(t *testing.T, dir string, needles []string) map[string][]string {
	t.Helper()
	found := map[string][]string{}
	for _, rel := range filesUnder(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range needles {
			if strings.Contains(string(b), n) {
				found[n] = append(found[n], rel)
			}
		}
	}
	return found
}

// manifestFilesSQL is seed 001's way of reading one export: the files its
// manifest names, as a DuckDB variable.
func manifestFilesSQL(root, manifest string) string {
	return fmt.Sprintf("SET VARIABLE files = (SELECT list(%s || f.path) FROM (SELECT unnest(files) AS f FROM read_json(%s)));\n",
		sqlString(root+"/"), sqlString(root+"/"+manifest))
}
