package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/receipt"
)

func init() {
	var file, jwks string
	register(&command{
		name:    "erasure verify",
		summary: "check an erasure's receipt offline against the catalog's public keys, or a saved JWK set (exit 0 valid, 1 not; docs/erasure.md)",
		flags: func(fs *flag.FlagSet) {
			file, jwks = "", ""
			fs.StringVar(&file, "receipt", "", "a file holding the receipt (the compact JWS), or the JSON answer of POST or GET /erasures")
			fs.StringVar(&jwks, "jwks", "", "a file holding the JWK set of GET /.well-known/jwks.json (default: the keys of the catalog of --config)")
		},
		run: func(e *env, _ *flag.FlagSet, _ []string) error {
			return verifyReceipt(e, file, jwks)
		},
	})
}

// verifyReceipt checks a receipt's signature and prints what it says. It
// needs no master key: the public keys are in the catalog in the clear.
func verifyReceipt(e *env, file, jwks string) error {
	if file == "" {
		return usageError{"erasure verify: name the receipt with --receipt FILE"}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read the receipt: %w", err)
	}
	token := string(b)
	var answer struct {
		Receipt *string `json:"receipt"`
	}
	if json.Unmarshal(b, &answer) == nil {
		if answer.Receipt == nil {
			return errors.New("the file is a JSON answer without a receipt (an erasure still pending has none yet)")
		}
		token = *answer.Receipt
	}
	var set receipt.Set
	if jwks != "" {
		kb, err := os.ReadFile(jwks)
		if err != nil {
			return fmt.Errorf("read the JWK set: %w", err)
		}
		if err := json.Unmarshal(kb, &set); err != nil {
			return fmt.Errorf("the file %s is not a JWK set: %v", jwks, err)
		}
	} else {
		_, cat, err := e.openCatalog()
		if err != nil {
			return err
		}
		set, err = archive.JWKS(e.ctx, cat)
		cat.Close()
		if err != nil {
			return err
		}
	}
	p, kid, err := receipt.Verify(token, set)
	if err != nil {
		return errors.New("the receipt is not valid: " + strings.TrimPrefix(err.Error(), receipt.ErrInvalid.Error()+": "))
	}
	vcons, versions, held := len(p.Erased), 0, len(p.Held)
	for _, it := range p.Erased {
		versions += it.Versions
	}
	if d := p.Digest; d != nil { // the lists' digest stands for them
		vcons, versions, held = d.Erased, d.Versions, d.Held
	}
	return e.emit(map[string]any{"valid": true, "kid": kid, "erasure": p.Erasure, "tenant": p.Tenant, "filter": p.Filter,
		"requested_at": p.RequestedAt, "done_at": p.DoneAt, "vcons": vcons, "versions": versions, "held": held, "not_found": p.NotFound})
}
