package config

import (
	"reflect"
	"testing"
	"time"
)

// TestKMS: each provider's table read whole, relative files taken from the
// configuration's folder; every wrong or half-written setup refused with
// the key and what to write.
func TestKMS(t *testing.T) {
	c, err := Parse([]byte(`
[kms]
provider = "vault"
[kms.vault]
address = "https://vault.example.com:8200/"
key = "vcon-server"
token_file = "vault-token"
`), path)
	if err != nil {
		t.Fatal(err)
	}
	want := &KMS{Provider: "vault", KeyCache: 300 * time.Second, TenantKeys: "master", Vault: &Vault{Address: "https://vault.example.com:8200", Mount: "transit",
		Key: "vcon-server", TokenFile: "/etc/vcon-server/vault-token"}}
	if !reflect.DeepEqual(c.KMS, want) {
		t.Errorf("vault: %+v, want %+v", c.KMS.Vault, want.Vault)
	}
	c, err = Parse([]byte(`
[kms]
provider = "awskms"
key_cache = 5
[kms.awskms]
region = "eu-west-1"
key_id = "alias/vcon-server"
access_key_id = "AKIDEXAMPLE"
secret_access_key_file = "/etc/vcon-server/kms-secret"
`), path)
	if err != nil || c.KMS.AWSKMS == nil || c.KMS.AWSKMS.KeyID != "alias/vcon-server" || c.KMS.AWSKMS.Endpoint != "" || c.KMS.KeyCache != 5*time.Second {
		t.Errorf("awskms: %+v %v", c.KMS, err)
	}
	c, err = Parse([]byte("[kms]\nprovider = \"command\"\n[kms.command]\nwrap = [\"/usr/local/bin/hsm\", \"wrap\"]\nunwrap = [\"/usr/local/bin/hsm\", \"unwrap\"]\n"), path)
	if err != nil || !reflect.DeepEqual(c.KMS.Command, &Command{Wrap: []string{"/usr/local/bin/hsm", "wrap"}, Unwrap: []string{"/usr/local/bin/hsm", "unwrap"}}) {
		t.Errorf("command: %+v %v", c.KMS, err)
	}
	if c, err := Parse([]byte("listen = \"127.0.0.1:8443\"\n"), path); err != nil || c.KMS != nil {
		t.Errorf("no [kms]: %+v %v", c.KMS, err)
	}

	vault := "[kms]\nprovider = \"vault\"\n[kms.vault]\nkey = \"k\"\ntoken_file = \"t\"\n"
	for file, want := range map[string]string{
		"[kms]\n":                     `configuration: kms.provider must be set`,
		"[kms]\nprovider = \"gcp\"\n": `configuration: kms.provider must be one of "vault", "awskms" or "command", not "gcp"`,
		"[kms]\nprovider = \"vault\"\ntenant_keys = \"own\"\n[kms.vault]\naddress = \"https://v\"\nkey = \"k\"\ntoken_file = \"t\"\n": `configuration: kms.tenant_keys must be "kms" or "master", not "own"`,
		"[kms]\nprovider = \"command\"\ntenant_keys = \"kms\"\n[kms.command]\nwrap = [\"/bin/hsm\"]\nunwrap = [\"/bin/hsm\"]\n":       `configuration: kms.tenant_keys = "kms" needs a provider that makes keys, vault or awskms; with programs of your own, tenant keys go under the master key ("master")`,
		"[kms]\nprovider = \"vault\"\nkey_cache = 0\n[kms.vault]\naddress = \"https://v\"\nkey = \"k\"\ntoken_file = \"t\"\n":         `configuration: kms.key_cache must be more than 0`,
		"[kms]\nprovider = \"vault\"\nkey_cache = 1.5\n[kms.vault]\naddress = \"https://v\"\nkey = \"k\"\ntoken_file = \"t\"\n":       `configuration: kms.key_cache must be a whole number of seconds, not 1.5`,
		"[kms]\nprovider = \"vault\"\n":                                                                                               `configuration: kms.provider = "vault" needs a [kms.vault] table (docs/keys.md)`,
		"[kms.vault]\naddress = \"https://v\"\n":                                                                                      `configuration: kms.provider must be set`,
		vault + "address = \"http://127.0.0.1:8200\"\n":                                                                               `configuration: kms.vault.address must be an https:// URL, not "http://127.0.0.1:8200": the KMS answers with the master key, which only TLS keeps from the network`,
		vault + "address = \"https://v/v1\"\n":                                                                                        `configuration: kms.vault.address must name only the service, such as "https://kms.example.com:8200", not "https://v/v1"`,
		vault + "address = \"https://v\"\n[kms.command]\nwrap = 1\n":                                                                  `configuration: [kms.command] is set but kms.provider is "vault"; remove the table or set provider = "command"`,
		"[kms]\nprovider = \"vault\"\n[kms.vault]\naddress = \"https://v\"\nkey = \"a b\"\ntoken_file = \"t\"\n":                      `configuration: kms.vault.key may hold only letters, digits and - _ . /, not "a b"`,
		"[kms]\nprovider = \"vault\"\n[kms.vault]\naddress = \"https://v\"\nkey = \"k\"\n":                                            `configuration: kms.vault.token_file must be set`,
		"[kms]\nprovider = \"command\"\n[kms.command]\nwrap = [\"hsm\"]\nunwrap = [\"/bin/hsm\"]\n":                                   `configuration: kms.command.wrap[0] must be the program's absolute path, not "hsm"`,
		"[kms]\nprovider = \"command\"\n[kms.command]\nwrap = []\nunwrap = [\"/bin/hsm\"]\n":                                          `configuration: kms.command.wrap must be a program and its arguments, such as ["/usr/local/bin/hsm-wrap", "--key", "vcon"], not an array`,
		"[kms]\nprovider = \"command\"\n[kms.command]\nwrap = [\"/bin/hsm\"]\n":                                                       `configuration: kms.command.unwrap must be set, such as ["/usr/local/bin/hsm-wrap", "--key", "vcon"]`,
		"[kms]\nprovider = \"awskms\"\n[kms.awskms]\nregion = \"eu-west-1\"\nkey_id = \"k\"\naccess_key_id = \"a\"\nsecret = \"s\"\n": `configuration: unknown key kms.awskms.secret`,
	} {
		if _, err := Parse([]byte(file), path); err == nil || err.Error() != want {
			t.Errorf("%s\ngot  %v\nwant %s", file, err, want)
		}
	}
}

// TestKMSTenantTables: [kms.tenant.NAME] names the provider and
// credentials of a tenant's own key, without the key, which tenant
// set-key names.
func TestKMSTenantTables(t *testing.T) {
	base := "[kms]\nprovider = \"vault\"\n[kms.vault]\naddress = \"https://vault.example.com:8200\"\nkey = \"vcon-server\"\ntoken_file = \"vault-token\"\n"
	c, err := Parse([]byte(base+`
[kms.tenant.acme-corp]
provider = "awskms"
[kms.tenant.acme-corp.awskms]
region = "eu-west-1"
access_key_id = "AKIDACME"
secret_access_key_file = "acme.secret"
`), path)
	if err != nil {
		t.Fatal(err)
	}
	a := c.KMS.Tenants["acme-corp"]
	if a == nil || a.Provider != "awskms" || a.AWSKMS.AccessKeyID != "AKIDACME" || a.AWSKMS.KeyID != "" || a.AWSKMS.SecretAccessKeyFile != "/etc/vcon-server/acme.secret" {
		t.Fatalf("the tenant's table: %+v", a)
	}
	for text, want := range map[string]string{
		"[kms.tenant.acme]\nprovider = \"vault\"\n[kms.tenant.acme.vault]\naddress = \"https://v\"\nkey = \"k\"\ntoken_file = \"t\"\n": "configuration: kms.tenant.acme.vault.key is the tenant's own key, which tenant set-key --kms-key names: remove it here",
		"[kms.tenant.acme]\nprovider = \"vault\"\n": `configuration: kms.tenant.acme.provider = "vault" needs a [kms.tenant.acme.vault] table (docs/keys.md)`,
		"[kms.tenant.acme]\nprovider = \"vault\"\n[kms.tenant.acme.vault]\naddress = \"https://v\"\ntoken_file = \"t\"\nsecret = 1\n": "configuration: unknown key kms.tenant.acme.vault.secret",
	} {
		if _, err := Parse([]byte(base+text), path); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", text, err, want)
		}
	}
}
