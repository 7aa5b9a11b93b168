package kms_test

import (
	"context"
	"errors"
	"testing"

	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/kms"
	"github.com/vcon-server/vcon-server/test/kit/kmstest"
)

// keyAdmin makes a key with cfg's credentials, wraps and unwraps with it
// through ForKey, deletes it, and checks that it then refuses.
func keyAdmin(t *testing.T, cfg *config.KMS, label string) {
	ctx := context.Background()
	w := newWrapper(t, cfg)
	admin, ok := w.(kms.KeyAdmin)
	if !ok {
		t.Fatalf("the %s Wrapper is no KeyAdmin", cfg.Provider)
	}
	key, err := admin.NewKey(ctx, label)
	if err != nil {
		t.Fatal(err)
	}
	own, err := kms.ForKey(cfg, key)
	if err != nil {
		t.Fatal(err)
	}
	plain := randomBytes(t, 32)
	wrapped, err := own.Wrap(ctx, plain, masterContext)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := own.Unwrap(ctx, wrapped, masterContext); err != nil || string(got) != string(plain) {
		t.Fatalf("unwrap with the new key: %v", err)
	}
	if _, err := w.Unwrap(ctx, wrapped, masterContext); err == nil {
		t.Fatal("the configured key opens what the new key wrapped")
	}
	if err := admin.DeleteKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := own.Unwrap(ctx, wrapped, masterContext); !errors.Is(err, kms.ErrRefused) {
		t.Fatalf("unwrap with a deleted key: %v, want a refusal", err)
	}
}

// TestAWSKeyAdmin: a key made with [kms]'s credentials serves ForKey,
// and once its deletion is scheduled, refuses.
func TestAWSKeyAdmin(t *testing.T) {
	srv := kmstest.StartLocalKMS(t)
	keyAdmin(t, srv.Config(srv.KeyID), "vcon-server tenant test")
}

// TestVaultKeyAdmin: the same with a transit key, deleted at once; a name
// taken is refused rather than shared.
func TestVaultKeyAdmin(t *testing.T) {
	v := kmstest.StartVault(t)
	cfg := vaultConfig(v, v.Key)
	keyAdmin(t, cfg, "vcon-server-tenant-test")
	admin := newWrapper(t, cfg).(kms.KeyAdmin)
	if _, err := admin.NewKey(context.Background(), v.Key); !errors.Is(err, kms.ErrRefused) {
		t.Fatalf("a key named as an existing one: %v", err)
	}
}
