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

// fill stores n versions of one tenant with data keys wrapped by mk, in
// batches, and purges (key destroyed) every tenth; it returns the data
// keys by version id.
func fill(t testing.TB, c *Catalog, mk *seal.MasterKey, n int) map[ids.ID]seal.DataKey {
	t.Helper()
	ctx := context.Background()
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

func resealWith(oldKey, newKey *seal.MasterKey) Reseal {
	return func(tenant ids.ID, sealed []byte) ([]byte, error) {
		secret, err := oldKey.OpenSecret(tenant, sealed)
		if err != nil {
			return nil, err
		}
		return newKey.SealSecret(tenant, secret)
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
	before := wrappedKeys(t, c)
	if _, err := c.RotateKeys(ctx, newKey.CheckValue(), rewrapWith(oldKey, newKey), resealWith(oldKey, newKey), nil); err == nil {
		t.Fatal("a rotation with a secret the old key does not open committed")
	}
	if check, rotated, _ := c.KeyCheck(ctx); rotated || !bytes.Equal(check, oldKey.CheckValue()) {
		t.Fatal("a failed rotation changed the key check")
	}
	for id, w := range wrappedKeys(t, c) {
		if !bytes.Equal(before[id], w) {
			t.Fatal("a failed rotation changed a wrapped key")
		}
	}
	if !opens(tenants[0], oldKey) {
		t.Fatal("a failed rotation moved a secret")
	}
	set(tenants[1], oldKey)
	if _, err := c.RotateKeys(ctx, newKey.CheckValue(), rewrapWith(oldKey, newKey), resealWith(oldKey, newKey), nil); err != nil {
		t.Fatal(err)
	}
	for _, tn := range tenants {
		if !opens(tn, newKey) || opens(tn, oldKey) {
			t.Fatal("after the rotation a secret does not open with the new key only")
		}
	}
}

// TestRotateKeys rotates more than one page of keys and checks every key
// opens with the new master key only, purged versions stay keyless, and
// the meta values and admin log changed; then a rotation that fails half
// way changes nothing.
func TestRotateKeys(t *testing.T) {
	ctx := context.Background()
	c, _, err := Create(ctx, t.TempDir(), masterKey(t, 1).CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	oldKey, newKey := masterKey(t, 1), masterKey(t, 2)
	n := 2*pageSize + 17
	keys := fill(t, c, oldKey, n)

	// A rewrap failing on the last key rolls back every earlier one.
	before := wrappedKeys(t, c)
	calls := 0
	_, err = c.RotateKeys(ctx, newKey.CheckValue(), func(tenant, version ids.ID, wrapped []byte) ([]byte, error) {
		calls++
		if calls == len(keys) {
			return nil, errors.New("damaged")
		}
		return rewrapWith(oldKey, newKey)(tenant, version, wrapped)
	}, resealWith(oldKey, newKey), nil)
	if err == nil || calls != len(keys) {
		t.Fatalf("failing rotation: %v after %d calls", err, calls)
	}
	after := wrappedKeys(t, c)
	for id, w := range before {
		if !bytes.Equal(after[id], w) {
			t.Fatal("a failed rotation changed a wrapped key")
		}
	}
	if check, rotated, _ := c.KeyCheck(ctx); rotated || !bytes.Equal(check, oldKey.CheckValue()) {
		t.Fatal("a failed rotation changed the key check")
	}

	hookRan := false
	got, err := c.RotateKeys(ctx, newKey.CheckValue(), rewrapWith(oldKey, newKey), resealWith(oldKey, newKey), func() { hookRan = true })
	if err != nil {
		t.Fatal(err)
	}
	if got != len(keys) || !hookRan {
		t.Fatalf("rotated %d of %d keys (hook ran: %v)", got, len(keys), hookRan)
	}
	after = wrappedKeys(t, c)
	if len(after) != len(keys) {
		t.Fatalf("%d wrapped keys after the rotation, want %d", len(after), len(keys))
	}
	var tb []byte
	if err := c.DB().QueryRow(`SELECT id FROM tenants`).Scan(&tb); err != nil {
		t.Fatal(err)
	}
	var tenant ids.ID
	copy(tenant[:], tb)
	for id, w := range after {
		dk, err := newKey.Unwrap(w, tenant, id)
		if err != nil || dk != keys[id] {
			t.Fatalf("version %s: the new key does not give its data key back: %v", id, err)
		}
		if _, err := oldKey.Unwrap(w, tenant, id); err == nil {
			t.Fatalf("version %s still opens with the old key", id)
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

// BenchmarkRotate rotates b.N times the keys of a catalog of
// VCON_ROTATE_N versions (default 100000), reporting the time per
// rotation and the heap growth, which stays a page's worth whatever N is.
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
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		oldKey, newKey := keys[i%2], keys[(i+1)%2]
		rotated, err := c.RotateKeys(ctx, newKey.CheckValue(), rewrapWith(oldKey, newKey), resealWith(oldKey, newKey), func() {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		})
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
