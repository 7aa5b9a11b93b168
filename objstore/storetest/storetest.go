// Package storetest is the conformance suite of objstore.Store: every back
// end (the data directory, each S3 server) runs the same tests, so the code
// above the interface can rely on its written contracts alone.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vcon-server/vcon-server/objstore"
)

// Run runs the suite. open returns a fresh, empty store for each subtest
// (for a bucket: a prefix no other run uses) and cleans it up through t.
func Run(t *testing.T, open func(t *testing.T) objstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"WriteRead", testWriteRead},
		{"InvisibleBeforeCommit", testInvisibleBeforeCommit},
		{"Abort", testAbort},
		{"Overwrite", testOverwrite},
		{"CreateOnly", testCreateOnly},
		{"CreateOnlyRace", testCreateOnlyRace},
		{"Range", testRange},
		{"Missing", testMissing},
		{"Delete", testDelete},
		{"ListPrefix", testListPrefix},
		{"ListMany", testListMany},
		{"ListOddKeys", testListOddKeys},
		{"ListStops", testListStops},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func put(t *testing.T, s objstore.Store, key string, data []byte, createOnly bool) error {
	t.Helper()
	return objstore.Put(t.Context(), s, key, bytes.NewReader(data), createOnly)
}

func mustPut(t *testing.T, s objstore.Store, key string, data []byte) {
	t.Helper()
	if err := put(t, s, key, data, false); err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
}

func readAll(t *testing.T, rc io.ReadCloser, err error) []byte {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func get(t *testing.T, s objstore.Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return readAll(t, rc, nil)
}

func wantMissing(t *testing.T, s objstore.Store, key string) {
	t.Helper()
	if _, err := s.Stat(t.Context(), key); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("stat %q: got %v, want ErrNotFound", key, err)
	}
}

// list returns what List gives for prefix, failing on a key seen twice.
func list(t *testing.T, s objstore.Store, prefix string) []objstore.Info {
	t.Helper()
	var infos []objstore.Info
	seen := map[string]bool{}
	err := s.List(t.Context(), prefix, func(i objstore.Info) error {
		if seen[i.Key] {
			t.Errorf("list %q: key %q twice", prefix, i.Key)
		}
		seen[i.Key] = true
		infos = append(infos, i)
		return nil
	})
	if err != nil {
		t.Fatalf("list %q: %v", prefix, err)
	}
	return infos
}

func keys(infos []objstore.Info) []string {
	var ks []string
	for _, i := range infos {
		ks = append(ks, i.Key)
	}
	return ks
}

func testWriteRead(t *testing.T, s objstore.Store) {
	for _, n := range []int{0, 1, 1 << 20} {
		key := fmt.Sprintf("objects/t/size-%d", n)
		data := randomBytes(t, n)
		mustPut(t, s, key, data)
		if got := get(t, s, key); !bytes.Equal(got, data) {
			t.Errorf("%d bytes: read back %d different bytes", n, len(got))
		}
		info, err := s.Stat(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if info.Key != key || info.Size != int64(n) || info.Modified.IsZero() {
			t.Errorf("stat %q: got %+v, want size %d and a time", key, info, n)
		}
	}
}

func testInvisibleBeforeCommit(t *testing.T, s objstore.Store) {
	key := "objects/t/pending"
	u, err := s.Upload(t.Context(), key, false)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Abort()
	if _, err := u.Write([]byte("not yet")); err != nil {
		t.Fatal(err)
	}
	wantMissing(t, s, key)
	if _, err := s.Get(t.Context(), key); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("get before commit: got %v, want ErrNotFound", err)
	}
	if got := list(t, s, ""); len(got) != 0 {
		t.Errorf("list before commit: %v", keys(got))
	}
	if err := u.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, key); string(got) != "not yet" {
		t.Errorf("after commit: %q", got)
	}
	// Abort after Commit does nothing, so `defer u.Abort()` is safe.
	u.Abort()
	if got := get(t, s, key); string(got) != "not yet" {
		t.Errorf("after a late abort: %q", got)
	}
}

func testAbort(t *testing.T, s objstore.Store) {
	for _, createOnly := range []bool{false, true} {
		key := fmt.Sprintf("objects/t/aborted-%v", createOnly)
		u, err := s.Upload(t.Context(), key, createOnly)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := u.Write(randomBytes(t, 1000)); err != nil {
			t.Fatal(err)
		}
		u.Abort()
		u.Abort()
		if err := u.Commit(); err == nil {
			t.Error("commit after abort succeeded")
		}
		wantMissing(t, s, key)
		// The name stays free for a create-only upload.
		if err := put(t, s, key, []byte("later"), true); err != nil {
			t.Errorf("create-only after abort: %v", err)
		}
	}
	if got := keys(list(t, s, "")); len(got) != 2 {
		t.Errorf("after aborts: list %v, want the 2 later objects only", got)
	}
}

func testOverwrite(t *testing.T, s objstore.Store) {
	key := "objects/t/v"
	mustPut(t, s, key, []byte("first, longer"))
	mustPut(t, s, key, []byte("second"))
	if got := get(t, s, key); string(got) != "second" {
		t.Errorf("after overwrite: %q", got)
	}
	if got := list(t, s, ""); len(got) != 1 || got[0].Size != 6 {
		t.Errorf("after overwrite: list %+v", got)
	}
}

func testCreateOnly(t *testing.T, s objstore.Store) {
	key := "objects/t/once"
	if err := put(t, s, key, []byte("old"), true); err != nil {
		t.Fatalf("create-only on a fresh key: %v", err)
	}
	if err := put(t, s, key, []byte("new"), true); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("create-only on a taken key: got %v, want ErrExists", err)
	}
	if got := get(t, s, key); string(got) != "old" {
		t.Errorf("create-only replaced the object: %q", got)
	}
	if got := keys(list(t, s, "")); !slices.Equal(got, []string{key}) {
		t.Errorf("refused upload left %v", got)
	}
}

func testCreateOnlyRace(t *testing.T, s objstore.Store) {
	const n = 8
	key := "objects/t/race"
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = put(t, s, key, []byte(fmt.Sprintf("writer %d", i)), true)
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("writers %d and %d both created the key", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, objstore.ErrExists):
			t.Errorf("writer %d: got %v, want nil or ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer created the key")
	}
	if got, want := string(get(t, s, key)), fmt.Sprintf("writer %d", winner); got != want {
		t.Errorf("content %q, want the winner's %q", got, want)
	}
}

func testRange(t *testing.T, s objstore.Store) {
	data := randomBytes(t, 1000)
	mustPut(t, s, "objects/t/r", data)
	mustPut(t, s, "objects/t/empty", nil)
	for _, tt := range []struct {
		key         string
		off, n      int64
		wantOff, to int // want data[wantOff:to]
	}{
		{"objects/t/r", 0, 10, 0, 10},
		{"objects/t/r", 500, 100, 500, 600},
		{"objects/t/r", 990, 10, 990, 1000},
		{"objects/t/r", 0, 1000, 0, 1000},
		{"objects/t/r", 995, 100, 995, 1000}, // clipped at the end
		{"objects/t/r", 0, 1 << 40, 0, 1000},
		{"objects/t/r", 10, 0, 0, 0},
		{"objects/t/r", 1000, 10, 0, 0}, // at the end
		{"objects/t/r", 5000, 10, 0, 0}, // past it
		{"objects/t/empty", 0, 10, 0, 0},
	} {
		rc, err := s.GetRange(t.Context(), tt.key, tt.off, tt.n)
		got := readAll(t, rc, err)
		want := data[tt.wantOff:tt.to]
		if tt.key == "objects/t/empty" {
			want = nil
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s %d+%d: got %d bytes, want %d", tt.key, tt.off, tt.n, len(got), len(want))
		}
	}
}

func testMissing(t *testing.T, s objstore.Store) {
	mustPut(t, s, "objects/t/there", []byte("x"))
	for _, key := range []string{"objects/t/absent", "objects/u/absent", "absent", "objects/t/there/below"} {
		if _, err := s.Get(t.Context(), key); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("get %q: got %v, want ErrNotFound", key, err)
		}
		if _, err := s.GetRange(t.Context(), key, 0, 10); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("get range %q: got %v, want ErrNotFound", key, err)
		}
		wantMissing(t, s, key)
	}
}

func testDelete(t *testing.T, s objstore.Store) {
	mustPut(t, s, "objects/t/a", []byte("a"))
	mustPut(t, s, "objects/t/b", []byte("b"))
	if err := s.Delete(t.Context(), "objects/t/a"); err != nil {
		t.Fatal(err)
	}
	wantMissing(t, s, "objects/t/a")
	if _, err := s.Get(t.Context(), "objects/t/a"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("get after delete: got %v, want ErrNotFound", err)
	}
	if got := get(t, s, "objects/t/b"); string(got) != "b" {
		t.Errorf("the other object: %q", got)
	}
	for _, key := range []string{"objects/t/a", "objects/t/never", "nowhere/at/all"} {
		if err := s.Delete(t.Context(), key); err != nil {
			t.Errorf("delete missing %q: %v", key, err)
		}
	}
	if got := keys(list(t, s, "")); !slices.Equal(got, []string{"objects/t/b"}) {
		t.Errorf("after delete: list %v", got)
	}
}

func testListPrefix(t *testing.T, s objstore.Store) {
	all := []string{
		"objects/aa/1", "objects/aa/2", "objects/ab/1", "objects/abc",
		"objects/b/1", "objectsx", "purged/aa/1",
	}
	for i, key := range all {
		mustPut(t, s, key, make([]byte, i+1))
	}
	size := func(key string) int64 { return int64(slices.Index(all, key) + 1) }
	for _, tt := range []struct {
		prefix string
		want   []string
	}{
		{"", all},
		{"objects/", all[:5]},
		{"objects/a", all[:4]}, // ends mid-name
		{"objects/ab", all[2:4]},
		{"objects/ab/", all[2:3]},
		{"objects/aa/2", all[1:2]},
		{"objects", all[:6]},
		{"purged/", all[6:]},
		{"nothing/", nil},
		{"objects/zz", nil},
	} {
		infos := list(t, s, tt.prefix)
		got := keys(infos)
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tt.want))
		if !slices.Equal(got, want) {
			t.Errorf("list %q: got %v, want %v", tt.prefix, got, want)
		}
		for _, i := range infos {
			if i.Size != size(i.Key) {
				t.Errorf("list %q: %s has size %d, want %d", tt.prefix, i.Key, i.Size, size(i.Key))
			}
		}
		checkFolderOrder(t, tt.prefix, infos)
	}
}

// checkFolderOrder checks the promise of List: lexical order of keys
// within a folder.
func checkFolderOrder(t *testing.T, prefix string, infos []objstore.Info) {
	t.Helper()
	last := map[string]string{}
	for _, i := range infos {
		folder := i.Key[:strings.LastIndexByte(i.Key, '/')+1]
		if prev, ok := last[folder]; ok && prev >= i.Key {
			t.Errorf("list %q: %q came after %q", prefix, i.Key, prev)
		}
		last[folder] = i.Key
	}
}

func testListMany(t *testing.T, s objstore.Store) {
	// More than 1,000, the largest page of ListObjectsV2, so a bucket's
	// listing must follow its continuation tokens.
	const n = 1100
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("objects/many/%05d", i)
	}
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i, key := range want {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs <- objstore.Put(t.Context(), s, key, strings.NewReader(fmt.Sprint(i)), false)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	infos := list(t, s, "objects/many/")
	if got := keys(infos); !slices.Equal(got, want) {
		t.Fatalf("list: got %d keys, want %d in order", len(got), n)
	}
	for i, info := range infos {
		if info.Size != int64(len(fmt.Sprint(i))) {
			t.Errorf("%s: size %d", info.Key, info.Size)
		}
	}
	if got := keys(list(t, s, "objects/many/01")); !slices.Equal(got, want[1000:1100]) {
		t.Errorf("list mid-name: got %d keys, want 100", len(got))
	}
}

func testListOddKeys(t *testing.T, s objstore.Store) {
	odd := []string{
		"objects/t/with space",
		"objects/t/plus+sign",
		"objects/t/equals=sign",
		"objects/t/percent%20not-a-space",
		"objects/t/percent%2Fnot-a-slash",
		"objects/t/café",
		"objects/日本/語",
		"objects/t/a&b",
		"objects/t/~tilde",
	}
	for i, key := range odd {
		mustPut(t, s, key, []byte(strings.Repeat("x", i+1)))
	}
	for i, key := range odd {
		if got := get(t, s, key); len(got) != i+1 {
			t.Errorf("get %q: %d bytes, want %d", key, len(got), i+1)
		}
		if info, err := s.Stat(t.Context(), key); err != nil || info.Size != int64(i+1) {
			t.Errorf("stat %q: %+v, %v", key, info, err)
		}
	}
	infos := list(t, s, "objects/")
	got := map[string]int64{}
	for _, i := range infos {
		got[i.Key] = i.Size
	}
	for i, key := range odd {
		if size, ok := got[key]; !ok || size != int64(i+1) {
			t.Errorf("list: %q missing or with size %d", key, size)
		}
	}
	if len(infos) != len(odd) {
		t.Errorf("list: got %v, want %d keys", keys(infos), len(odd))
	}
	checkFolderOrder(t, "objects/", infos)
	if got := keys(list(t, s, "objects/t/caf")); !slices.Equal(got, []string{"objects/t/café"}) {
		t.Errorf("list mid-name before é: %v", got)
	}
	if got := keys(list(t, s, "objects/日")); !slices.Equal(got, []string{"objects/日本/語"}) {
		t.Errorf("list mid-name in 日本: %v", got)
	}
}

func testListStops(t *testing.T, s objstore.Store) {
	for i := range 5 {
		mustPut(t, s, fmt.Sprintf("objects/t/%d", i), []byte("x"))
	}
	stop := errors.New("enough")
	calls := 0
	err := s.List(t.Context(), "objects/", func(objstore.Info) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) {
		t.Errorf("list returned %v, want the error of fn", err)
	}
	if calls != 1 {
		t.Errorf("fn called %d times after its error", calls)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.List(ctx, "objects/", func(objstore.Info) error { return nil }); err == nil {
		t.Error("list with a cancelled context succeeded")
	}
}
