package catalog

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/seal"
)

func masterKey(t testing.TB, seed byte) *seal.MasterKey {
	t.Helper()
	mk, err := seal.MasterKeyFromBytes(bytes.Repeat([]byte{seed}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return mk
}

// fill stores n versions of one tenant with data keys wrapped by mk, as a
// catalog made before tenant keys holds them (its move not begun), in
// batches, and purges (key destroyed) every tenth; it returns the data
// keys by version id.
func fill(t testing.TB, c *Catalog, mk *seal.MasterKey, n int) map[ids.ID]seal.DataKey {
	t.Helper()
	ctx := context.Background()
	if _, err := c.DB().Exec(`DELETE FROM meta WHERE key = 'key_move'`); err != nil {
		t.Fatal(err)
	}
	tenant, err := c.NewTenant(ctx, "acme", CLI)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[ids.ID]seal.DataKey{}
	for done := 0; done < n; {
		err := c.Update(ctx, func(tx *Tx) error {
			for i := 0; i < 5000 && done < n; i, done = i+1, done+1 {
				dk, _ := seal.NewDataKey()
				v := Version{ID: ids.NewV7(time.Now()), Tenant: tenant.ID, UUID: ids.NewRandom(), StoredAt: time.Now(),
					ContentType: "application/vcon", Form: "unsigned", Size: 100, SealedSize: 150, Location: InDir}
				if v.WrappedKey, err = mk.Wrap(dk, v.Tenant, v.ID); err != nil {
					return err
				}
				if _, err := tx.InsertVersion(v, CreateOnly); err != nil {
					return err
				}
				if done%10 == 9 {
					if _, err := tx.DestroyKeyOf(v.ID); err != nil {
						return err
					}
					continue
				}
				keys[v.ID] = dk
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func wrappedKeys(t testing.TB, c *Catalog) map[ids.ID][]byte {
	t.Helper()
	rows, err := c.DB().Query(`SELECT id, tenant, wrapped_key FROM versions WHERE wrapped_key IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[ids.ID][]byte{}
	for rows.Next() {
		var id, tenant, w []byte
		if err := rows.Scan(&id, &tenant, &w); err != nil {
			t.Fatal(err)
		}
		var v ids.ID
		copy(v[:], id)
		out[v] = w
	}
	return out
}

func rewrapWith(oldKey, newKey *seal.MasterKey) Rewrap {
	return func(tenant, version ids.ID, wrapped []byte) ([]byte, error) {
		dk, err := oldKey.Unwrap(wrapped, tenant, version)
		if err != nil {
			return nil, err
		}
		return newKey.Wrap(dk, tenant, version)
	}
}

func rewrapTenantWith(oldKey, newKey *seal.MasterKey) Rewrap {
	return func(tenant, _ ids.ID, wrapped []byte) ([]byte, error) {
		raw, err := oldKey.UnwrapTenantKey(tenant, wrapped)
		if err != nil {
			return nil, err
		}
		return newKey.WrapTenantKey(tenant, raw)
	}
}

func resealWith(oldKey, newKey *seal.MasterKey) Reseal {
	return func(tenant ids.ID, sealed []byte) ([]byte, error) {
		secret, err := oldKey.OpenSecret(tenant, sealed)
		if err != nil {
			return nil, err
		}
		return newKey.SealSecret(tenant, secret)
	}
}

func rotation(oldKey, newKey *seal.MasterKey) Rotation {
	return Rotation{Check: newKey.CheckValue(), TenantKey: rewrapTenantWith(oldKey, newKey),
		SigningKey: rewrapWith(oldKey, newKey), Secret: resealWith(oldKey, newKey)}
}

// moveAll gives every tenant a key wrapped under mk and moves every data
// key under it, as archive.MoveToTenantKeys does; it returns the tenant
// keys and how many pages the move took.
func moveAll(t testing.TB, c *Catalog, mk *seal.MasterKey) (map[ids.ID]*seal.TenantKey, int) {
	t.Helper()
	ctx := context.Background()
	keys := tenantKeys(t, c, mk)
	pages := 0
	for {
		_, done, err := c.MoveKeysPage(ctx, moveWith(mk, keys))
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if done {
			return keys, pages
		}
	}
}

// tenantKeys makes each tenant without a key one, wrapped under mk, and
// returns every tenant's key.
func tenantKeys(t testing.TB, c *Catalog, mk *seal.MasterKey) map[ids.ID]*seal.TenantKey {
	t.Helper()
	ctx := context.Background()
	tenants, err := c.Tenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[ids.ID]*seal.TenantKey{}
	for _, tn := range tenants {
		raw, _ := seal.NewTenantKeyBytes()
		k, _ := seal.TenantKeyFromBytes(tn.ID, raw)
		w, _ := mk.WrapTenantKey(tn.ID, raw)
		row, err := c.AddTenantKey(ctx, TenantKey{Tenant: tn.ID, Wrapped: w, Check: k.CheckValue()})
		if err != nil {
			t.Fatal(err)
		}
		raw, err = mk.UnwrapTenantKey(tn.ID, row.Wrapped)
		if err != nil {
			t.Fatal(err)
		}
		keys[tn.ID], _ = seal.TenantKeyFromBytes(tn.ID, raw)
	}
	return keys
}

func moveWith(mk *seal.MasterKey, keys map[ids.ID]*seal.TenantKey) Rewrap {
	return func(tenant, version ids.ID, wrapped []byte) ([]byte, error) {
		dk, err := mk.Unwrap(wrapped, tenant, version)
		if err != nil {
			return nil, err
		}
		return keys[tenant].Wrap(dk, version)
	}
}

// TestRotateSealsWebhookSecrets: the webhook secrets move to the new
// master key in the rotation's transaction: a rotation that meets a
// secret that does not open leaves every key and secret as it was, those
// it sealed again included; one that commits leaves none under the old
// key.
func TestRotateSealsWebhookSecrets(t *testing.T) {
	ctx := context.Background()
	oldKey, newKey := masterKey(t, 1), masterKey(t, 2)
	c, _, err := Create(ctx, t.TempDir(), oldKey.CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fill(t, c, oldKey, 20)
	var tenants []ids.ID
	for _, name := range []string{"good", "bad"} {
		tn, err := c.NewTenant(ctx, name, CLI)
		if err != nil {
			t.Fatal(err)
		}
		tenants = append(tenants, tn.ID)
	}
	moveAll(t, c, oldKey)
	set := func(tenant ids.ID, mk *seal.MasterKey) {
		t.Helper()
		sealed, _ := mk.SealSecret(tenant, []byte("whsec_x"))
		if err := c.SetWebhook(ctx, Webhook{Tenant: tenant, URL: "https://example.com/h", Secret: sealed}, CLI); err != nil {
			t.Fatal(err)
		}
	}
	opens := func(tenant ids.ID, mk *seal.MasterKey) bool {
		w, err := c.Webhook(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		got, err := mk.OpenSecret(tenant, w.Secret)
		return err == nil && string(got) == "whsec_x"
	}
	set(tenants[0], oldKey)
	set(tenants[1], masterKey(t, 3))
	before := tenantKeyRows(t, c)
	if _, err := c.RotateKeys(ctx, rotation(oldKey, newKey)); err == nil {
		t.Fatal("a rotation with a secret the old key does not open committed")
	}
	if check, rotated, _ := c.KeyCheck(ctx); rotated || !bytes.Equal(check, oldKey.CheckValue()) {
		t.Fatal("a failed rotation changed the key check")
	}
	for id, w := range tenantKeyRows(t, c) {
		if !bytes.Equal(before[id], w) {
			t.Fatal("a failed rotation changed a wrapped tenant key")
		}
	}
	if !opens(tenants[0], oldKey) {
		t.Fatal("a failed rotation moved a secret")
	}
	set(tenants[1], oldKey)
	if _, err := c.RotateKeys(ctx, rotation(oldKey, newKey)); err != nil {
		t.Fatal(err)
	}
	for _, tn := range tenants {
		if !opens(tn, newKey) || opens(tn, oldKey) {
			t.Fatal("after the rotation a secret does not open with the new key only")
		}
	}
}

func tenantKeyRows(t testing.TB, c *Catalog) map[ids.ID][]byte {
	t.Helper()
	out := map[ids.ID][]byte{}
	err := eachRow(context.Background(), c.db, "tenant keys", func(r row) error {
		var id, w []byte
		if err := r.Scan(&id, &w); err != nil {
			return err
		}
		out[ids.ID(id)] = w
		return nil
	}, `SELECT tenant, wrapped FROM tenant_keys`)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMoveKeysPage moves more than two pages of data keys under their
// tenant's key, one page a call, as a move cut between pages resumes:
// every kept key opens with its tenant's key only, a purged one stays
// gone, and once done a call moves nothing.
func TestMoveKeysPage(t *testing.T) {
	ctx := context.Background()
	mk := masterKey(t, 1)
	c, _, err := Create(ctx, t.TempDir(), mk.CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys := fill(t, c, mk, 2*pageSize+17)
	if moved, err := c.KeysMoved(ctx); err != nil || moved {
		t.Fatalf("KeysMoved before the move = %v, %v", moved, err)
	}
	if _, err := c.RotateKeys(ctx, rotation(mk, masterKey(t, 2))); !errors.Is(err, ErrKeysNotMoved) {
		t.Fatalf("a rotation before the move: %v", err)
	}
	tks := tenantKeys(t, c, mk)
	// 2017 versions, of which 1816 kept: a whole page, then the rest.
	for i, want := range []int{pageSize, len(keys) - pageSize} {
		n, done, err := c.MoveKeysPage(ctx, moveWith(mk, tks))
		if err != nil || done != (i == 1) || n != want {
			t.Fatalf("page %d: moved %d (want %d), done %v, %v", i, n, want, done, err)
		}
	}
	if n, done, err := c.MoveKeysPage(ctx, moveWith(mk, tks)); n != 0 || !done || err != nil {
		t.Fatalf("a move after the end: %d %v %v", n, done, err)
	}
	if moved, _ := c.KeysMoved(ctx); !moved {
		t.Fatal("KeysMoved after the move is false")
	}
	after := wrappedKeys(t, c)
	if len(after) != len(keys) {
		t.Fatalf("%d keys after the move, want %d", len(after), len(keys))
	}
	var tenant ids.ID
	for id := range tks {
		tenant = id
	}
	for id, w := range after {
		if !seal.UnderTenantKey(w) {
			t.Fatalf("version %s is still under the master key", id)
		}
		if dk, err := tks[tenant].Unwrap(w, id); err != nil || dk != keys[id] {
			t.Fatalf("version %s: the tenant key does not give its data key back: %v", id, err)
		}
		if _, err := mk.Unwrap(w, tenant, id); err == nil {
			t.Fatalf("version %s opens with the master key", id)
		}
	}
}

// TestRotateKeys rotates the tenant keys of a moved catalog: every one
// opens with the new master key only, the data keys stay as they were,
// and the meta values and admin log changed; a rotation that fails half
// way changes nothing.
func TestRotateKeys(t *testing.T) {
	ctx := context.Background()
	c, _, err := Create(ctx, t.TempDir(), masterKey(t, 1).CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	oldKey, newKey := masterKey(t, 1), masterKey(t, 2)
	fill(t, c, oldKey, 50)
	for i := range 5 {
		if _, err := c.NewTenant(ctx, "t"+strconv.Itoa(i), CLI); err != nil {
			t.Fatal(err)
		}
	}
	tks, _ := moveAll(t, c, oldKey)
	dataKeys, before := wrappedKeys(t, c), tenantKeyRows(t, c)

	// A rewrap failing on the last tenant key rolls back every earlier one.
	calls := 0
	r := rotation(oldKey, newKey)
	r.TenantKey = func(tenant, version ids.ID, wrapped []byte) ([]byte, error) {
		calls++
		if calls == len(tks) {
			return nil, errors.New("damaged")
		}
		return rewrapTenantWith(oldKey, newKey)(tenant, version, wrapped)
	}
	if _, err := c.RotateKeys(ctx, r); err == nil || calls != len(tks) {
		t.Fatalf("failing rotation: %v after %d calls", err, calls)
	}
	for id, w := range tenantKeyRows(t, c) {
		if !bytes.Equal(before[id], w) {
			t.Fatal("a failed rotation changed a wrapped tenant key")
		}
	}
	if check, rotated, _ := c.KeyCheck(ctx); rotated || !bytes.Equal(check, oldKey.CheckValue()) {
		t.Fatal("a failed rotation changed the key check")
	}

	hookRan := false
	r = rotation(oldKey, newKey)
	r.BeforeCommit = func() { hookRan = true }
	got, err := c.RotateKeys(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if got != len(tks) || !hookRan {
		t.Fatalf("rotated %d of %d tenant keys (hook ran: %v)", got, len(tks), hookRan)
	}
	for id, w := range tenantKeyRows(t, c) {
		raw, err := newKey.UnwrapTenantKey(id, w)
		if err != nil {
			t.Fatalf("tenant %s: the new key does not open its key: %v", id, err)
		}
		if k, _ := seal.TenantKeyFromBytes(id, raw); !bytes.Equal(k.CheckValue(), tks[id].CheckValue()) {
			t.Fatalf("tenant %s has another key after the rotation", id)
		}
		if _, err := oldKey.UnwrapTenantKey(id, w); err == nil {
			t.Fatalf("tenant %s's key still opens with the old master key", id)
		}
	}
	for id, w := range wrappedKeys(t, c) {
		if !bytes.Equal(dataKeys[id], w) {
			t.Fatal("a rotation changed a data key")
		}
	}
	check, rotated, err := c.KeyCheck(ctx)
	if err != nil || !rotated || !bytes.Equal(check, newKey.CheckValue()) {
		t.Fatalf("key check after the rotation: rotated %v, err %v", rotated, err)
	}
	if at, ok, err := c.RotatedAt(ctx); err != nil || !ok || time.Since(at) > time.Minute {
		t.Fatalf("rotated_at: %v %v %v", at, ok, err)
	}
	var logged int
	c.DB().QueryRow(`SELECT count(*) FROM admin_log WHERE action = 'master_key_rotate'`).Scan(&logged)
	if logged != 1 {
		t.Fatalf("%d admin-log records of the rotation, want 1", logged)
	}
}

// TestBackupCopy checks the copy: a whole SQLite file with mode 0600,
// nothing left beside it, an existing name refused.
func TestBackupCopy(t *testing.T) {
	ctx := context.Background()
	c, _, err := Create(ctx, t.TempDir(), masterKey(t, 1).CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fill(t, c, masterKey(t, 1), 50)
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	to := filepath.Join(dir, "b.db")
	info, err := c.Backup(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	if info.Versions != 45 || info.Tenants != 1 || info.To != to {
		t.Fatalf("backup info %+v", info)
	}
	fi, err := os.Stat(to)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != info.Bytes {
		t.Fatalf("backup file: %v %v", fi, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("the folder holds %d entries after the backup", len(entries))
	}
	if _, err := c.Backup(ctx, to); !errors.Is(err, os.ErrExist) {
		t.Fatalf("a second backup to the same name: %v", err)
	}
	// The copy opens as a catalog with the same id.
	os.Rename(to, filepath.Join(dir, FileName))
	b, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.ID != c.ID {
		t.Fatal("the copy has another catalog id")
	}
}

// BenchmarkRotate rotates b.N times the master key of a catalog of
// VCON_ROTATE_N versions (default 100000), moved under tenant keys first,
// reporting the time per rotation and the heap growth. A rotation
// re-wraps one key per tenant, whatever N is.
func BenchmarkRotate(b *testing.B) {
	n := 100000
	if s := os.Getenv("VCON_ROTATE_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	keys := []*seal.MasterKey{masterKey(b, 1), masterKey(b, 2)}
	c, _, err := Create(ctx, b.TempDir(), keys[0].CheckValue())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	fill(b, c, keys[0], n)
	moveAll(b, c, keys[0])
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := rotation(keys[i%2], keys[(i+1)%2])
		r.BeforeCommit = func() {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
		rotated, err := c.RotateKeys(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Checkpoint(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(rotated), "keys")
	}
	b.ReportMetric(float64(int64(peak)-int64(base))/(1<<20), "heapMiB")
}

// BenchmarkMoveKeys moves the data keys of a catalog of VCON_ROTATE_N
// versions (default 100000) under tenant keys: the one-time cost of a
// catalog made before them.
func BenchmarkMoveKeys(b *testing.B) {
	n := 100000
	if s := os.Getenv("VCON_ROTATE_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	mk := masterKey(b, 1)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c, _, err := Create(ctx, b.TempDir(), mk.CheckValue())
		if err != nil {
			b.Fatal(err)
		}
		fill(b, c, mk, n)
		b.StartTimer()
		_, pages := moveAll(b, c, mk)
		b.StopTimer()
		b.ReportMetric(float64(pages), "pages")
		c.Close()
		b.StartTimer()
	}
}

// BenchmarkBackup copies a catalog of VCON_ROTATE_N versions (default
// 100000), reporting the copy's size.
func BenchmarkBackup(b *testing.B) {
	n := 100000
	if s := os.Getenv("VCON_ROTATE_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	c, _, err := Create(ctx, b.TempDir(), masterKey(b, 1).CheckValue())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	fill(b, c, masterKey(b, 1), n)
	dir := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		info, err := c.Backup(ctx, filepath.Join(dir, strconv.Itoa(i)+".db"))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(info.Bytes)/(1<<20), "MiB")
	}
}

// TestKeyRotatedGuard: what a server wraps under a master key the catalog
// no longer names (a rotation another process committed a moment ago) is
// refused with ErrKeyRotated, and written once it holds the new key.
func TestKeyRotatedGuard(t *testing.T) {
	ctx := context.Background()
	oldKey, newKey := masterKey(t, 1), masterKey(t, 2)
	c, _, err := Create(ctx, t.TempDir(), oldKey.CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.RotateKeys(ctx, rotation(oldKey, newKey)); err != nil {
		t.Fatal(err)
	}
	row := func(mk *seal.MasterKey, name string) (Tenant, error) {
		id := ids.NewRandom()
		raw, _ := seal.NewTenantKeyBytes()
		tk, _ := seal.TenantKeyFromBytes(id, raw)
		w, _ := mk.WrapTenantKey(id, raw)
		return c.NewTenantKeyed(ctx, name, CLI, TenantKey{Tenant: id, Wrapped: w, Check: tk.CheckValue(), MasterCheck: mk.CheckValue()})
	}
	if _, err := row(oldKey, "late"); !errors.Is(err, ErrKeyRotated) {
		t.Fatalf("a tenant key under the old master key: %v, want ErrKeyRotated", err)
	}
	if _, err := c.FindTenant(ctx, "late"); !errors.Is(err, ErrNotFound) {
		t.Fatal("the refused tenant was made")
	}
	if _, err := row(newKey, "late"); err != nil {
		t.Fatal(err)
	}
	sealed, _ := oldKey.SealSecret(ids.NewRandom(), []byte("whsec_x"))
	tn, _ := c.FindTenant(ctx, "late")
	if err := c.SetWebhook(ctx, Webhook{Tenant: tn.ID, URL: "https://example.com/h", Secret: sealed, KeyCheck: oldKey.CheckValue()}, CLI); !errors.Is(err, ErrKeyRotated) {
		t.Fatalf("a webhook secret under the old master key: %v, want ErrKeyRotated", err)
	}
}
