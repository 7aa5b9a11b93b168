package catalog

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
)

// A key's purposes are kept sorted and once each, read back by every
// read of keys, and KeyByToken brings the tenant's lawful-basis mode with
// the key; purposes that are not vocabulary words, or an operator key's,
// are refused with what to do.
func TestKeyPurposes(t *testing.T) {
	ctx := context.Background()
	c, _, err := Create(ctx, t.TempDir(), masterKey(t, 1).CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tn, err := c.NewTenant(ctx, "acme", CLI)
	if err != nil {
		t.Fatal(err)
	}
	k, token, err := c.NewBoundKey(ctx, &tn.ID, []string{"read"}, []string{"marketing", "customer_service", "marketing"}, "crm", CLI)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(k.Purposes) != "[customer_service marketing]" {
		t.Errorf("created with %v", k.Purposes)
	}
	if _, err := c.SetLawfulMode(ctx, tn.ID, vocab.LawfulEnforce, CLI); err != nil {
		t.Fatal(err)
	}
	got, err := c.KeyByToken(ctx, token)
	if err != nil || fmt.Sprint(got.Purposes) != "[customer_service marketing]" || got.LawfulMode != vocab.LawfulEnforce {
		t.Errorf("by token: %+v %v", got, err)
	}
	keys, err := c.Keys(ctx, &tn.ID)
	if err != nil || len(keys) != 1 || fmt.Sprint(keys[0].Purposes) != "[customer_service marketing]" {
		t.Errorf("listed: %+v %v", keys, err)
	}
	plain, ptoken, err := c.NewKey(ctx, &tn.ID, []string{"read"}, "plain", CLI)
	if err != nil || plain.Purposes != nil {
		t.Fatalf("%+v %v", plain, err)
	}
	if got, err := c.KeyByToken(ctx, ptoken); err != nil || len(got.Purposes) != 0 {
		t.Errorf("a key bound to none: %+v %v", got, err)
	}
	for _, c := range []struct {
		tenant   *ids.ID
		purposes []string
		says     string
	}{
		{&tn.ID, []string{"Marketing"}, `purpose "Marketing" is not 1 to 64 characters`},
		{&tn.ID, []string{""}, `purpose "" is not`},
		{&tn.ID, []string{strings.Repeat("a", 65)}, "is not 1 to 64"},
		{nil, []string{"marketing"}, "an operator key reads no vCon"},
	} {
		if _, err := CheckPurposes(c.tenant, c.purposes); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v: %v, want %q", c.purposes, err, c.says)
		}
	}
	many := make([]string, MaxKeyPurposes+1)
	for i := range many {
		many[i] = fmt.Sprintf("p%d", i)
	}
	if _, err := CheckPurposes(&tn.ID, many); err == nil {
		t.Error("more than MaxKeyPurposes accepted")
	}
}
