package parquet

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestCheckFindsAFlippedByteInAPackFile: a byte flipped inside one row's
// sealed bytes keeps the file's length, so a plain check passes it, and
// check --deep names exactly that version as damaged.
func TestCheckFindsAFlippedByteInAPackFile(t *testing.T) {
	srv := s3test.Start(t, "versitygw")
	e := testenv.New(t, testenv.Options{Storage: srv.StorageTOML(t, srv.NewBucket(t, false), "") + parquetTable(3600)})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	var uuids []string
	for i := 0; i < 3; i++ {
		u := ids.NewRandom().String()
		if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "flip", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d", r.Status)
		}
		uuids = append(uuids, u)
	}
	ctx := context.Background()
	e.Daemon.PackRun(ctx)
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
