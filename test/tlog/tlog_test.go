// Package tlog_test checks the server's audit logs with golang.org/x/mod's
// sumdb/tlog and sumdb/note, which share no code with it: the checkpoint's
// signature under the served verifier key, every tile and entry bundle
// against the checkpoint's root, each inclusion proof, and a later
// checkpoint's consistency with an earlier one.
package tlog_test

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// client reads one log over HTTPS as any tlog-tiles client would.
type client struct {
	t      *testing.T
	e      *testenv.Env
	prefix string // /audit/log or /admin/log
	token  string
}

func (c client) get(path string) []byte {
	c.t.Helper()
	r := c.e.Do("GET", c.prefix+path, c.token, nil)
	if r.Status != 200 {
		c.t.Fatalf("GET %s%s: %d %s", c.prefix, path, r.Status, r.Body)
	}
	return r.Body
}

// checkpoint reads and verifies the log's checkpoint with x/mod's note,
// under the verifier key the log serves.
func (c client) checkpoint() (tlog.Tree, []byte) {
	c.t.Helper()
	vkey := strings.TrimSpace(string(c.get("/key")))
	v, err := note.NewVerifier(vkey)
	if err != nil {
		c.t.Fatalf("the verifier key %q: %v", vkey, err)
	}
	raw := c.get("/checkpoint")
	n, err := note.Open(raw, note.VerifierList(v))
	if err != nil {
		c.t.Fatalf("the checkpoint does not verify under %s: %v\n%s", vkey, err, raw)
	}
	if origin := strings.SplitN(n.Text, "\n", 2)[0]; origin != v.Name() {
		c.t.Fatalf("the checkpoint's origin %q is not its key's name %q", origin, v.Name())
	}
	tree, err := parseCheckpoint(n.Text)
	if err != nil {
		c.t.Fatal(err)
	}
	return tree, raw
}

// parseCheckpoint reads a C2SP checkpoint's text: origin, size, root.
func parseCheckpoint(text string) (tlog.Tree, error) {
	lines := strings.Split(text, "\n")
	if len(lines) < 4 {
		return tlog.Tree{}, fmt.Errorf("checkpoint %q: too few lines", text)
	}
	n, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		return tlog.Tree{}, err
	}
	h, err := tlog.ParseHash(lines[2])
	return tlog.Tree{N: n, Hash: h}, err
}

// tiles is a tlog.TileReader over the log's tile/ routes: x/mod names a
// tile tile/8/<L>/<N>, tlog-tiles tile/<L>/<N>.
type tiles struct{ c client }

func (tiles) Height() int { return 8 }
func (r tiles) ReadTiles(ts []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(ts))
	for i, t := range ts {
		out[i] = r.c.get("/tile/" + strings.TrimPrefix(t.Path(), "tile/8/"))
	}
	return out, nil
}
func (tiles) SaveTiles([]tlog.Tile, [][]byte) {}

// checkLog checks every part of the log against tree.
func checkLog(t *testing.T, c client, tree tlog.Tree) {
	hr := tlog.TileHashReader(tree, tiles{c})
	// The tree x/mod rebuilds from the tiles has the checkpoint's root
	// (TileHashReader checks each tile it reads against it).
	if h, err := tlog.TreeHash(tree.N, hr); err != nil || h != tree.Hash {
		t.Fatalf("the tiles give the root %v (%v), the checkpoint %v", h, err, tree.Hash)
	}
	// Each entry hashes to its leaf in the level-0 tiles.
	for start := int64(0); start < tree.N; start += 256 {
		w := min(256, tree.N-start)
		path := fmt.Sprintf("/tile/entries/%03d", start/256)
		if w < 256 {
			path += fmt.Sprintf(".p/%d", w)
		}
		b := c.get(path)
		for i := start; i < start+w; i++ {
			if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b)) {
				t.Fatalf("%s: the bundle ends before entry %d", path, i)
			}
			n := int(binary.BigEndian.Uint16(b))
			entry := b[2 : 2+n]
			b = b[2+n:]
			if !strings.Contains(string(entry), fmt.Sprintf(`"index":%d,`, i)) {
				t.Errorf("entry %d does not name its index: %s", i, entry)
			}
			stored, err := hr.ReadHashes([]int64{tlog.StoredHashIndex(0, i)})
			if err != nil {
				t.Fatal(err)
			}
			if tlog.RecordHash(entry) != stored[0] {
				t.Fatalf("entry %d does not hash to its leaf: %s", i, entry)
			}
			// The server's own proof for it is one x/mod accepts.
			proof := c.get(fmt.Sprintf("/proof?index=%d", i))
			p, err := parseProof(t, proof, i)
			if err != nil {
				t.Fatal(err)
			}
			if err := tlog.CheckRecord(p, tree.N, tree.Hash, i, tlog.RecordHash(entry)); err != nil {
				t.Fatalf("the proof of record %d does not verify: %v\n%s", i, err, proof)
			}
		}
		if len(b) != 0 {
			t.Fatalf("%s: %d bytes after its last entry", path, len(b))
		}
	}
}

// parseProof reads a tlog-proof@v1 of the record at index.
func parseProof(t *testing.T, b []byte, index int64) (tlog.RecordProof, error) {
	lines := strings.Split(string(b), "\n")
	if lines[0] != "c2sp.org/tlog-proof@v1" || lines[1] != "index "+strconv.FormatInt(index, 10) {
		return nil, fmt.Errorf("not a tlog-proof of record %d:\n%s", index, b)
	}
	var p tlog.RecordProof
	for _, l := range lines[2:] {
		if l == "" {
			break
		}
		h, err := tlog.ParseHash(l)
		if err != nil {
			return nil, err
		}
		p = append(p, h)
	}
	return p, nil
}

func TestLogsCheckedByXMod(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	writer := e.NewKey(tenant, "write", "read")
	auditor := e.NewKey(tenant, "audit")
	tc := client{t, e, "/audit/log", auditor.Token}
	ac := client{t, e, "/admin/log", e.OperatorKey().Token}

	store := func(n int) {
		for range n {
			uuid := ids.NewRandom().String()
			if r := e.Do("POST", "/vcons", writer.Token, apitest.NewVcon(uuid, "logged", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
				t.Fatalf("POST /vcons: %d %s", r.Status, r.Body)
			}
			e.Do("GET", "/vcons/"+uuid, writer.Token, nil)
		}
	}
	store(150)
	// Signed within a second of the records (the checkpoint loop).
	var before tlog.Tree
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if before, _ = tc.checkpoint(); before.N >= 302 || time.Now().After(deadline) {
			break
		}
	}
	if before.N < 302 {
		t.Fatalf("the checkpoint covers %d records, want the 302 of two keys and 300 requests", before.N)
	}
	checkLog(t, tc, before)
	admin, _ := ac.checkpoint()
	checkLog(t, ac, admin)

	// A later tree extends the earlier: x/mod's consistency proof, made
	// from the new tree's tiles, checks against the old root.
	store(200)
	var after tlog.Tree
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if after, _ = tc.checkpoint(); after.N >= before.N+400 || time.Now().After(deadline) {
			break
		}
	}
	if after.N < before.N+400 {
		t.Fatalf("the checkpoint covers %d records, want %d at least", after.N, before.N+400)
	}
	hr := tlog.TileHashReader(after, tiles{tc})
	proof, err := tlog.ProveTree(after.N, before.N, hr)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckTree(proof, after.N, after.Hash, before.N, before.Hash); err != nil {
		t.Fatalf("the log of %d records is not consistent with its checkpoint of %d: %v", after.N, before.N, err)
	}
	checkLog(t, tc, after)
}
