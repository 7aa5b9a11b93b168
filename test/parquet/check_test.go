package parquet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestCheckFindsAFlippedByteInAPackFile: a byte flipped inside one row's
// sealed bytes keeps the file's length, so a plain check passes it, and
// check --deep names exactly that version as damaged.
func TestCheckFindsAFlippedByteInAPackFile(t *testing.T) {
	e, tenant, uuids := packedThree(t)
	ctx := context.Background()
	v, err := e.Daemon.Cat.Current(ctx, ids.MustParse(tenant), ids.MustParse(uuids[1]))
	if err != nil || v.PackKey == "" {
		t.Fatalf("version not packed: %+v %v", v, err)
	}
	e.Stop()

	type line struct{ Damaged []string }
	check := func(args ...string) (line, int) {
		out, _, code := e.TryCLI(append([]string{"check"}, args...)...)
		var l line
		json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &l)
		return l, code
	}
	if l, code := check("--deep"); code != 0 || len(l.Damaged) != 0 {
		t.Fatalf("clean check --deep: %d %+v", code, l)
	}
	s := e.Store()
	file := get(t, s, v.PackKey)
	file[v.PackOffset+v.PackLength/2] ^= 0x01
	if err := objstore.Put(ctx, s, v.PackKey, bytes.NewReader(file), false); err != nil {
		t.Fatal(err)
	}
	if l, code := check(); code != 0 || len(l.Damaged) != 0 {
		t.Fatalf("plain check after the flip: %d %+v (the length is right: it cannot see it)", code, l)
	}
	if l, code := check("--deep"); code != 1 || strings.Join(l.Damaged, " ") != v.ID.String() {
		t.Fatalf("check --deep after the flip: %d %+v, want %s", code, l, v.ID)
	}
}

// TestCheckFindsAPackFileOfTheWrongLength: a pack file with 5 bytes more
// than the catalog recorded still holds every row within its length, yet
// no row is where the catalog says it is whole, and a purge's rewrite
// refuses it; check and check --deep both name every version of the file
// as damaged and the file among the problems, and exit 1. With the file
// put back, check passes again.
func TestCheckFindsAPackFileOfTheWrongLength(t *testing.T) {
	e, tenant, uuids := packedThree(t)
	ctx := context.Background()
	var file string
	var inFile []string
	for _, u := range uuids {
		v, err := e.Daemon.Cat.Current(ctx, ids.MustParse(tenant), ids.MustParse(u))
		if err != nil || v.PackKey == "" {
			t.Fatalf("version not packed: %+v %v", v, err)
		}
		if file == "" {
			file = v.PackKey
		}
		if v.PackKey == file {
			inFile = append(inFile, v.ID.String())
		}
	}
	slices.Sort(inFile)
	e.Stop()

	type line struct{ Damaged, Problems []string }
	check := func(args ...string) (line, string, int) {
		out, errOut, code := e.TryCLI(append([]string{"check"}, args...)...)
		var l line
		if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &l); err != nil {
			t.Fatalf("check %v: %v\n%s%s", args, err, out, errOut)
		}
		return l, errOut, code
	}
	s := e.Store()
	whole := get(t, s, file)
	longer := append(slices.Clone(whole), "12345"...)
	if err := objstore.Put(ctx, s, file, bytes.NewReader(longer), false); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {"--deep"}} {
		l, errOut, code := check(args...)
		if code != 1 || !slices.Equal(l.Damaged, inFile) {
			t.Fatalf("check %v after 5 bytes were appended: exit %d, damaged %v, want exit 1 and %v\n%s", args, code, l.Damaged, inFile, errOut)
		}
		want := fmt.Sprintf("the pack file %s holds %d bytes, and the catalog recorded %d", file, len(longer), len(whole))
		if len(l.Problems) != 1 || !strings.Contains(l.Problems[0], want) || !strings.Contains(l.Problems[0], "put the file back from a copy of the bucket") {
			t.Fatalf("check %v: problems %q, want one naming %q", args, l.Problems, want)
		}
		if !strings.Contains(errOut, fmt.Sprintf("check found %d damaged version(s) and 1 problem(s)", len(inFile))) {
			t.Fatalf("check %v: %s", args, errOut)
		}
	}
	if err := objstore.Put(ctx, s, file, bytes.NewReader(whole), false); err != nil {
		t.Fatal(err)
	}
	if l, errOut, code := check("--deep"); code != 0 || len(l.Damaged) != 0 || len(l.Problems) != 0 {
		t.Fatalf("check --deep with the file put back: exit %d %+v\n%s", code, l, errOut)
	}
}

// packedThree starts a server on Parquet storage, stores three vCons for
// one tenant and packs them into one file.
func packedThree(t *testing.T) (*testenv.Env, string, []string) {
	srv := s3test.Start(t, "versitygw")
	e := testenv.New(t, testenv.Options{Storage: srv.StorageTOML(t, srv.NewBucket(t, false), "") + parquetTable(3600)})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	var uuids []string
	for i := 0; i < 3; i++ {
		u := ids.NewRandom().String()
		if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "packed", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d", r.Status)
		}
		uuids = append(uuids, u)
	}
	e.Daemon.PackRun(context.Background())
	return e, tenant, uuids
}
