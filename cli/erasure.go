package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/internal/receipt"
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
	var set receipt.Set
	if jwks != "" {
		kb, err := os.ReadFile(jwks)
		if err != nil {
			return fmt.Errorf("read the JWK set: %w", err)
		}
		if set, err = receipt.ParseSet(kb); err != nil {
			return fmt.Errorf("the file %s is not a key set of receipts: %s; save it again from GET /.well-known/jwks.json", jwks, strings.TrimPrefix(err.Error(), receipt.ErrKeySet.Error()+": "))
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
	// A JSON object is an answer, checked whole; anything else is the
	// compact JWS alone.
	what, p, kid := "receipt", receipt.Payload{}, ""
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		what = "answer"
		p, kid, err = receipt.VerifyAnswer(b, set)
	} else {
		p, kid, err = receipt.Verify(string(b), set)
	}
	if errors.Is(err, receipt.ErrInvalid) {
		return fmt.Errorf("the %s is not valid: %s", what, strings.TrimPrefix(err.Error(), receipt.ErrInvalid.Error()+": "))
	}
	if err != nil {
		return err
	}
	vcons, versions, held := len(p.Erased), 0, len(p.Held)
	for _, it := range p.Erased {
		versions += it.Versions
	}
	if d := p.Digest; d != nil { // the lists' digest stands for them
		vcons, versions, held = d.Erased, d.Versions, d.Held
	}
	out := map[string]any{"valid": true, "kid": kid, "erasure": p.Erasure, "tenant": p.Tenant, "filter": p.Filter,
		"requested_at": p.RequestedAt, "done_at": p.DoneAt, "vcons": vcons, "versions": versions, "held": held, "not_found": p.NotFound}
	if p.Reason != "" { // an erasure the server made on its own
		out["reason"] = p.Reason
	}
	return e.emit(out)
}
