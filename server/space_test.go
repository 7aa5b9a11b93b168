package server_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/reserve"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestDiskLow: below min_free (testenv's 64 MiB; free space set through
// reserve.Statfs, the one place it is read), stores and replacements are
// refused with 507, JSON and Retry-After, before their bodies are read;
// reads, deletes, holds, retention and tenant changes go on; /health is
// 503 with its reason and /metrics shows the line. With room again, stores
// resume without a restart. test/e2e/diskfull_test.go does it on a real
// file system.
func TestDiskLow(t *testing.T) {
	var mu sync.Mutex
	free := uint64(10 << 30)
	old := reserve.Statfs
	t.Cleanup(func() { reserve.Statfs = old })
	reserve.Statfs = func(string) (uint64, uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		return free, 20 << 30, nil
	}
	setFree := func(n uint64) {
		mu.Lock()
		free = n
		mu.Unlock()
		time.Sleep(150 * time.Millisecond) // past the age of a measure
	}
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read", "delete")
	ops := e.OperatorKey()
	ct := []string{"Content-Type", "application/vcon"}
	kept := ids.NewRandom().String()
	if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(kept, "kept", "+15555550100"), ct...); r.Status != 201 {
		t.Fatalf("store: %d %s", r.Status, r.Body)
	}
	gone := ids.NewRandom().String()
	if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(gone, "gone", "+15555550100"), ct...); r.Status != 201 {
		t.Fatalf("store: %d %s", r.Status, r.Body)
	}

	setFree(10 << 20)
	for _, req := range []struct{ method, path, uuid string }{{"POST", "/vcons", ids.NewRandom().String()}, {"PUT", "/vcons/" + kept, kept}} {
		r := e.Do(req.method, req.path, k.Token, apitest.NewVcon(req.uuid, "refused", "+15555550100"), ct...)
		var body struct{ Error string }
		r.JSON(t, &body)
		if r.Status != 507 || body.Error != "the server's disk is low on free space; stores are refused until an operator frees space, try again later" || r.Header.Get("Retry-After") != "60" {
			t.Errorf("%s below min_free: %d %q Retry-After %q", req.method, r.Status, body.Error, r.Header.Get("Retry-After"))
		}
	}
	if r := e.Do("GET", "/vcons/"+kept, k.Token, nil); r.Status != 200 {
		t.Errorf("a read below min_free: %d", r.Status)
	}
	if r := e.Do("PUT", "/admin/tenants/"+tenant+"/retention", ops.Token, []byte(`{"retention":"0d"}`), "Content-Type", "application/json"); r.Status != 200 {
		t.Errorf("a retention change below min_free: %d %s", r.Status, r.Body)
	}
	if r := e.Do("PUT", "/admin/tenants/"+tenant+"/holds/"+kept, ops.Token, nil); r.Status != 200 {
		t.Errorf("a hold below min_free: %d %s", r.Status, r.Body)
	}
	if r := e.Do("DELETE", "/vcons/"+gone, k.Token, nil); r.Status != 204 {
		t.Errorf("a delete below min_free: %d %s", r.Status, r.Body)
	}
	if r := e.Do("GET", "/vcons/"+gone, k.Token, nil); r.Status != 404 {
		t.Errorf("a vCon deleted with 0d below min_free reads %d", r.Status)
	}
	if _, errOut, code := e.TryCLI("tenant", "create", "globex"); code != 0 {
		t.Errorf("tenant create below min_free: %s", errOut)
	}
	r := e.Do("GET", "/health", "", nil)
	if r.Status != 503 || strings.TrimSpace(string(r.Body)) != `{"status":"degraded","reasons":["the data directory's disk has less free space than min_free"]}` {
		t.Errorf("/health below min_free: %d %s", r.Status, r.Body)
	}
	m := string(e.Do("GET", "/metrics", ops.Token, nil).Body)
	for _, want := range []string{"vcon_disk_low 1", "vcon_disk_free_bytes 1.048576e+07", "vcon_disk_min_free_bytes 6.7108864e+07", "vcon_disk_low_refusals_total 2"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	setFree(10 << 30)
	if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(ids.NewRandom().String(), "again", "+15555550100"), ct...); r.Status != 201 {
		t.Errorf("a store with room again: %d %s", r.Status, r.Body)
	}
	if r := e.Do("GET", "/health", "", nil); r.Status != 200 || strings.TrimSpace(string(r.Body)) != `{"status":"ok"}` {
		t.Errorf("/health with room again: %d %s", r.Status, r.Body)
	}
	log := e.Log.String()
	if strings.Count(log, "disk below min_free") != 1 || strings.Count(log, "disk above min_free again") != 1 {
		t.Errorf("want one WARN each way:\n%s", log)
	}
}

// TestDiskLowPausesIndexing: the background search indexing, which adds
// rows to the catalog, waits while the disk is below min_free and goes on
// once it is not.
func TestDiskLowPausesIndexing(t *testing.T) {
	var mu sync.Mutex
	free := uint64(10 << 30)
	old := reserve.Statfs
	t.Cleanup(func() { reserve.Statfs = old })
	reserve.Statfs = func(string) (uint64, uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		return free, 20 << 30, nil
	}
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	ops := e.OperatorKey()
	for i := 0; i < 3; i++ {
		if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(ids.NewRandom().String(), "indexed", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("store: %d %s", r.Status, r.Body)
		}
	}
	mu.Lock()
	free = 10 << 20
	mu.Unlock()
	time.Sleep(150 * time.Millisecond) // past the age of the stores' last measure
	if r := e.Do("PUT", "/admin/tenants/"+tenant+"/search", ops.Token, []byte(`{"search":"parties"}`), "Content-Type", "application/json"); r.Status != 200 {
		t.Fatalf("search on below min_free: %d %s", r.Status, r.Body)
	}
	complete := func() bool {
		var got struct{ Complete bool }
		e.Do("GET", "/vcons?tel=%2B15555550100", k.Token, nil).JSON(t, &got)
		return got.Complete
	}
	time.Sleep(5 * time.Second) // two of the indexer's rounds
	if complete() {
		t.Fatal("the search index was built while the disk was below min_free")
	}
	mu.Lock()
	free = 10 << 30
	mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for !complete() {
		if time.Now().After(deadline) {
			t.Fatal("the search index was not built once the disk had room")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
