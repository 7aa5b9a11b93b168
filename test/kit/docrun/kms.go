package docrun

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
)

// KMS is a key service that speaks AWS KMS's API, as its administrator
// hands it over to the operator of a page: the address, the CA of its
// certificate, an access key and a key made for vcon-server. docs_test
// starts one (test/kit/kmstest) for the pages that name kms.example.com.
type KMS struct {
	Endpoint    string // https://127.0.0.1:PORT
	CAPEM       []byte
	Region      string
	AccessKeyID string
	Secret      string
	KeyID       string
	TenantKeyID string // a key of the service made for a tenant's own (tenant set-key)
}

// handOverKMS puts in the home folder what the page's operator is given:
// kms-ca.pem, kms.secret (the secret key of the access key) and
// kms-key-id, and tenant-kms-key-id, the key a tenant's administrator
// made for its own; the page names the service kms.example.com:4443.
func (e *Env) handOverKMS(k *KMS) error {
	u, err := url.Parse(k.Endpoint)
	if err != nil {
		return err
	}
	if e.KMSPort, err = strconv.Atoi(u.Port()); err != nil {
		return fmt.Errorf("docrun: the KMS endpoint %q has no port", k.Endpoint)
	}
	for name, data := range map[string][]byte{
		"kms-ca.pem":        k.CAPEM,
		"kms.secret":        []byte(k.Secret + "\n"),
		"kms-key-id":        []byte(k.KeyID + "\n"),
		"tenant-kms-key-id": []byte(k.TenantKeyID + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(e.Home, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
