package parquet

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestErasurePacked: over real TLS on Parquet storage, an erasure takes
// packed rows: before it answers, the pack file is written again without
// them (docs/FORMAT.md, "Purge of a packed row"), and the other rows read
// back.
func TestErasurePacked(t *testing.T) {
	const party = "+15555550177"
	srv := s3test.Start(t, "versitygw")
	e := testenv.New(t, testenv.Options{Storage: srv.StorageTOML(t, srv.NewBucket(t, false), "") + parquetTable(3600)})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read", "delete")
	var uuids []string
	for i, tel := range []string{party, party, "+15555550100"} {
		u := ids.NewRandom().String()
		if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "packed "+string(rune('a'+i)), tel), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d", r.Status)
		}
		uuids = append(uuids, u)
	}
	e.Daemon.PackRun(context.Background())
	var packed int
	if err := e.Daemon.Cat.DB().QueryRow(`SELECT count(*) FROM versions WHERE location = 'packed'`).Scan(&packed); err != nil || packed != 3 {
		t.Fatalf("%d versions packed (%v), want 3", packed, err)
	}
	e.CLI("tenant", "set-search", tenant, "parties")
	deadline := time.Now().Add(time.Minute)
	for {
		var got struct{ Complete bool }
		json.Unmarshal(e.Do("GET", "/vcons?tel=1", k.Token, nil).Body, &got)
		if got.Complete {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the search index was never built")
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := e.Do("POST", "/erasures", k.Token, []byte(`{"tel":"`+party+`"}`), "Content-Type", "application/json")
	var got struct {
		State  string
		Erased []struct{ UUID string }
	}
	r.JSON(t, &got)
	if r.Status != 200 || got.State != "done" || len(got.Erased) != 2 {
		t.Fatalf("POST /erasures: %d %s", r.Status, r.Body)
	}
	// Gone before the answer: from the catalog and from the pack files.
	if n := e.Count("objects"); n != 1 {
		t.Errorf("%d versions' bytes after the erasure, want 1", n)
	}
	var rows int
	if err := e.Daemon.Cat.DB().QueryRow(`SELECT coalesce(sum(rows), 0) FROM pack_files WHERE state = 'live'`).Scan(&rows); err != nil || rows != 1 {
		t.Errorf("the live pack files hold %d rows (%v), want 1", rows, err)
	}
	for i, u := range uuids {
		want := 404
		if i == 2 {
			want = 200
		}
		if r := e.Do("GET", "/vcons/"+u, k.Token, nil); r.Status != want {
			t.Errorf("GET %s: %d, want %d", u, r.Status, want)
		}
	}
	erased := []string{got.Erased[0].UUID, got.Erased[1].UUID}
	if !slices.Contains(erased, uuids[0]) || !slices.Contains(erased, uuids[1]) {
		t.Errorf("erased %v, want %v", erased, uuids[:2])
	}
}
