package export_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/export"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/test/kit/duckdbtest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// deleteNow sends DELETE from any goroutine (testenv.Do may only run on
// the test's) and returns the status.
func deleteNow(e *testenv.Env, token, uuid string) int {
	req, _ := http.NewRequest("DELETE", e.BaseURL+"/vcons/"+uuid, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := e.Client.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func currentVersion(t *testing.T, want map[string]kept, uuid string) kept {
	t.Helper()
	for _, k := range want {
		if k.UUID.String() == uuid && k.Current {
			return k
		}
	}
	t.Fatalf("no current version of %s", uuid)
	return kept{}
}

func findTenant(t *testing.T, e *testenv.Env, id string) catalog.Tenant {
	t.Helper()
	tn, err := e.Daemon.Cat.FindTenant(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

// A purge that races the export is left out and counted, never
// half-written: one purged after the export listed it and before its bytes
// were read (its object is gone: a 404, then the key is found gone), and
// one purged after its bytes arrived (the key, looked up again, is gone).
func TestExportSkipsPurgesRacingIt(t *testing.T) {
	duckdbtest.Path(t)
	e := testenv.New(t, testenv.Options{})
	d := storeEveryForm(t, e, "acme", 5)
	e.CLI("tenant", "set-metadata", d.Tenant, "counts")
	e.CLI("tenant", "set-retention", d.Tenant, "0d") // a DELETE purges at once
	want := keptVersions(t, e, d.Tenant)

	a := currentVersion(t, want, d.Generated[2].UUID) // purged before its read
	b := currentVersion(t, want, d.Generated[4].UUID) // purged after its read
	var order []ids.ID
	for _, k := range want {
		order = append(order, k.ID)
	}
	sort.Slice(order, func(i, j int) bool { return bytes.Compare(order[i][:], order[j][:]) < 0 })
	before := order[slices.Index(order, a.ID)-1]

	dir := t.TempDir()
	dst, err := export.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	statuses := map[string]int{}
	res, err := export.Run(context.Background(), export.Options{
		Archive: e.Daemon.Archive, Tenant: findTenant(t, e, d.Tenant), Target: dst, To: dir,
		Workers: 1, Batch: 1, // one version at a time: the one before a is done before a is read
		AfterFetch: func(v catalog.Version) {
			var uuid string
			switch v.ID {
			case before:
				uuid = a.UUID.String()
			case b.ID:
				uuid = b.UUID.String()
			default:
				return
			}
			st := deleteNow(e, d.Key.Token, uuid)
			mu.Lock()
			statuses[uuid] = st
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if statuses[a.UUID.String()] != 204 || statuses[b.UUID.String()] != 204 {
		t.Fatalf("DELETEs during the export: %v", statuses)
	}
	for _, k := range []kept{a, b} {
		if _, err := e.Daemon.Cat.Version(context.Background(), k.ID); !errors.Is(err, catalog.ErrNotFound) {
			t.Fatalf("version %s should be purged: %v", k.ID, err)
		}
	}
	if res.Skipped != 2 || res.Rows != int64(len(want)-2) || res.Unread != 0 {
		t.Fatalf("export %+v; want 2 skipped and %d rows", res, len(want)-2)
	}
	rows := duckdbtest.Query(t, manifestFilesSQL(dir, res.Manifest)+"SELECT version::VARCHAR FROM read_parquet(getvariable('files')) ORDER BY 1")
	var got []string
	for _, r := range rows[1:] {
		got = append(got, r[0])
	}
	var wantIDs []string
	for id := range want {
		if id != a.ID.String() && id != b.ID.String() {
			wantIDs = append(wantIDs, id)
		}
	}
	sort.Strings(wantIDs)
	if !slices.Equal(got, wantIDs) {
		t.Errorf("exported versions %v, want %v", got, wantIDs)
	}
	m := readManifest(t, dir, res.Manifest)
	if slices.Contains(m.Live, a.ID.Hex()) || slices.Contains(m.Live, b.ID.Hex()) || m.Rows != res.Rows {
		t.Errorf("manifest names a purged version: %+v", m)
	}
}

// Two exports to one directory take the numbers 1 and 2, and the second
// leaves the first as it was.
func TestExportNumbersManifests(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	d := storeEveryForm(t, e, "acme", 2)
	dir := t.TempDir()
	r1 := exportCLI(t, e, "--tenant", "acme", "--to", dir)
	first, err := os.ReadFile(filepath.Join(dir, r1.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	files1 := filesUnder(t, dir)
	r2 := exportCLI(t, e, "--tenant", "acme", "--to", dir)
	if r1.Seq != 1 || r2.Seq != 2 || r2.Manifest != "tenant="+d.Tenant+"/manifest/00000000000000000002.json" || r1.Rows != r2.Rows {
		t.Fatalf("two exports: %+v then %+v", r1, r2)
	}
	again, err := os.ReadFile(filepath.Join(dir, r1.Manifest))
	if err != nil || !bytes.Equal(first, again) {
		t.Errorf("the first manifest changed: %v", err)
	}
	m2 := readManifest(t, dir, r2.Manifest)
	all := filesUnder(t, dir)
	for _, f := range files1 {
		if !slices.Contains(all, f) {
			t.Errorf("the second export removed %s", f)
		}
	}
	for _, f := range m2.Files {
		if slices.Contains(files1, f.Path) {
			t.Errorf("the second export reused the file name %s", f.Path)
		}
	}
	if len(all) != len(files1)+len(m2.Files)+1 {
		t.Errorf("files after two exports: %v", all)
	}
}

// Of two exports racing for one manifest number, the second to publish is
// refused and removes its files; the first is whole. The race is forced:
// the other export runs whole between the choice of the number and the
// write of the manifest.
func TestExportManifestRace(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	d := storeEveryForm(t, e, "acme", 2)
	dir := t.TempDir()
	dst, err := export.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	raceManifest(t, e, d, dst, func() []string { return filesUnder(t, dir) })
}

func raceManifest(t *testing.T, e *testenv.Env, d *tenantData, dst objstore.Store, list func() []string) {
	t.Helper()
	ctx := context.Background()
	tenant := findTenant(t, e, d.Tenant)
	records := exportRecords(t, e, d.Tenant)
	var other export.Result
	var otherErr error
	var mine []string
	_, err := export.Run(ctx, export.Options{
		Archive: e.Daemon.Archive, Tenant: tenant, Target: dst,
		BeforePublish: func(seq int64) {
			if seq != 1 {
				t.Errorf("first manifest number %d", seq)
			}
			mine = list()
			other, otherErr = export.Run(ctx, export.Options{Archive: e.Daemon.Archive, Tenant: tenant, Target: dst})
		},
	})
	var race *export.RaceError
	if !errors.As(err, &race) || otherErr != nil || other.Seq != 1 {
		t.Fatalf("the racing exports: %v; the other: %+v, %v", err, other, otherErr)
	}
	want := "another export published tenant=" + d.Tenant + "/manifest/00000000000000000001.json, the manifest this export was about to write, while it ran; this export removed its files: run it again"
	if err.Error() != want {
		t.Errorf("refusal %q, want %q", err, want)
	}
	if len(mine) != 1 {
		t.Fatalf("files of the refused export before its manifest: %v", mine)
	}
	left := list()
	if slices.Contains(left, mine[0]) || len(left) != other.Files+1 || !slices.Contains(left, other.Manifest) {
		t.Errorf("after the race: %v; the refused export's file was %s, the other wrote %d files and %s", left, mine[0], other.Files, other.Manifest)
	}
	if n := exportRecords(t, e, d.Tenant) - records; n != 1 {
		t.Errorf("%d new export records, want 1 (the refused export records none)", n)
	}
}

// exportRecords counts the export records of the tenant's audit log.
func exportRecords(t *testing.T, e *testenv.Env, tenant string) int {
	t.Helper()
	n := 0
	for line := range strings.SplitSeq(e.CLI("audit", "export", "--tenant", tenant), "\n") {
		if strings.Contains(line, `"action":"export"`) {
			n++
		}
	}
	return n
}

// --since and --until bound the store times, and the manifest records them.
func TestExportWindow(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	d := storeEveryForm(t, e, "acme", 3)
	ctx := context.Background()
	var stored []time.Time
	for _, k := range keptVersions(t, e, d.Tenant) {
		v, err := e.Daemon.Cat.Version(ctx, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, v.StoredAt)
	}
	sort.Slice(stored, func(i, j int) bool { return stored[i].Before(stored[j]) })
	since, until := stored[2], stored[len(stored)-2]
	dir := t.TempDir()
	r := exportCLI(t, e, "--tenant", "acme", "--to", dir,
		"--since", since.Format(time.RFC3339Nano), "--until", until.Format(time.RFC3339Nano))
	want := 0
	for _, s := range stored {
		if !s.Before(since) && s.Before(until) {
			want++
		}
	}
	if r.Rows != int64(want) || want == 0 {
		t.Fatalf("export %+v, want %d rows", r, want)
	}
	m := readManifest(t, dir, r.Manifest)
	if m.Since == nil || *m.Since != since.UTC().Format(time.RFC3339Nano) || m.Until == nil || *m.Until != until.UTC().Format(time.RFC3339Nano) {
		t.Errorf("manifest bounds %v %v, want %s and %s", m.Since, m.Until, since, until)
	}
	// A window with nothing in it is an export of no rows, with a manifest.
	dir = t.TempDir()
	r = exportCLI(t, e, "--tenant", "acme", "--to", dir, "--until", "2001-01-01T00:00:00Z")
	if r.Rows != 0 || r.Files != 0 || r.Seq != 1 {
		t.Fatalf("empty export %+v", r)
	}
	if m := readManifest(t, dir, r.Manifest); m.Rows != 0 || len(m.Files) != 0 || m.Live == nil || len(m.Live) != 0 {
		t.Errorf("empty manifest %+v", m)
	}
}
