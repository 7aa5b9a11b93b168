package archive

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/jws"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/vcon"
	"github.com/vcon-server/vcon-server/vcon/lawfulbasis"
)

// Signatures at the door (docs/signatures.md; docs/FORMAT.md,
// "Signatures"): under a tenant's policy verify or require, a signed
// vCon's every signature is checked after its body streamed in and
// before its object is made durable, so a refusal changes nothing.

// KnownExtensions are the extensions the server acts on: a vCon naming
// another in critical is refused by a checking policy, and its metadata
// left unread under off.
var KnownExtensions = []string{"lawful_basis"}

// SignatureRefused is a store the tenant's signature policy refuses: HTTP
// 422, Reason in the body.
type SignatureRefused struct {
	Mode   vocab.SignatureMode
	Reason string
}

func (e *SignatureRefused) Error() string {
	return "the tenant's signature policy is " + string(e.Mode) + ": " + e.Reason + "; nothing was stored"
}

// signaturePolicy is a tenant's policy with its anchors parsed.
type signaturePolicy struct {
	catalog.SignaturePolicy
	anchors    *x509.CertPool // nil without any
	chains     *jws.Chains    // the chains verified so far, by anchors
	anchorsKey string         // the tenant's anchors as they now are
}

// parsedAnchors is a tenant's anchors as parsed at AnchorsAt.
type parsedAnchors struct {
	at   int64
	pool *x509.CertPool
}

// signaturePolicy reads the tenant's policy: one row, and its anchors
// only when they changed since this process parsed them.
func (a *Archive) signaturePolicy(ctx context.Context, tenant ids.ID) (signaturePolicy, error) {
	p, err := a.Cat.SignaturePolicyOf(ctx, tenant)
	if err != nil || p.Mode == vocab.SignaturesOff || p.Mode == "" {
		return signaturePolicy{SignaturePolicy: p}, err
	}
	key := tenant.String() + "@" + strconv.FormatInt(p.AnchorsAt, 10)
	if c, ok := a.anchors.Load(tenant); ok && c.(parsedAnchors).at == p.AnchorsAt {
		return signaturePolicy{p, c.(parsedAnchors).pool, &a.chains, key}, nil
	}
	list, err := a.Cat.Anchors(ctx, tenant)
	if err != nil {
		return signaturePolicy{}, err
	}
	var pool *x509.CertPool
	for _, an := range list {
		if pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM([]byte(an.PEM)) {
			return signaturePolicy{}, fmt.Errorf("archive: the trust anchor %s does not parse", an.Fingerprint)
		}
	}
	a.anchors.Store(tenant, parsedAnchors{p.AnchorsAt, pool})
	return signaturePolicy{p, pool, &a.chains, key}, nil
}

// signed is what the policy kept of a store: the signers' JSON, and why
// the metadata was left unread.
type signed struct {
	signers string
	unread  string
}

// checkSignatures applies the policy to what the inspection read; a
// refusal is a *SignatureRefused. Under off it only notes a vCon whose
// critical extensions it does not know, and clears its metadata, which
// it may not act on.
func checkSignatures(p signaturePolicy, m *vcon.Meta, payload func() (io.Reader, error), now time.Time) (signed, error) {
	refuse := func(format string, args ...any) (signed, error) {
		return signed{}, &SignatureRefused{Mode: p.Mode, Reason: fmt.Sprintf(format, args...)}
	}
	if unknown := unknownCritical(m.Critical); unknown != "" {
		if p.Mode != vocab.SignaturesOff {
			return refuse("critical names the extension %q, which this server does not know; a vCon naming it may not be processed", unknown)
		}
		leaveUnread(m)
		return signed{unread: fmt.Sprintf("critical names the extension %q, which this server does not know", unknown)}, nil
	}
	switch {
	case p.Mode == vocab.SignaturesOff || p.Mode == "":
		return signed{}, nil
	case m.Form == vocab.FormUnsigned && p.Mode == vocab.SignaturesRequire:
		return refuse("the vCon is not signed")
	case m.Form == vocab.FormEncrypted && p.Mode == vocab.SignaturesRequire && !p.AllowEncrypted:
		return refuse("an encrypted vCon cannot be checked; tenant set-signatures --allow-encrypted takes them unchecked")
	case m.Form == vocab.FormEncrypted:
		return signed{unread: "encrypted: its signatures could not be checked"}, nil
	case m.Form != vocab.FormSigned:
		return signed{}, nil
	case m.PayloadUUID == "":
		return refuse("its payload cannot be read as an unsigned vCon with a uuid")
	case len(m.Signatures) == 0:
		return refuse("its signatures are empty: a signed vCon needs at least one")
	}
	signers := make([]jws.Signer, 0, len(m.Signatures))
	for i, sig := range m.Signatures {
		s, err := jws.Verify(jws.Signature(sig), jws.Check{Anchors: p.anchors, Now: now, UUID: m.PayloadUUID, Payload: payload,
			Chains: p.chains, AnchorsKey: p.anchorsKey})
		var rerr *jws.ReadError
		if errors.As(err, &rerr) {
			return signed{}, wrapf("store: check a signature", err)
		}
		if err != nil {
			return refuse("signatures[%d]: %v", i, err)
		}
		signers = append(signers, s)
	}
	b, err := json.Marshal(signers)
	return signed{signers: string(b)}, err
}

// leaveUnread drops the metadata of a vCon naming an extension the
// server does not know, which it may not act on: no party for the index,
// no subject, counts or lawful basis for the columns. The store and
// every later reading of its body (inspectBody) leave it so.
func leaveUnread(m *vcon.Meta) {
	m.Parties, m.Subject, m.CreatedAt, m.UpdatedAt = nil, nil, nil, nil
	m.PartyCount, m.DialogCount = vcon.CountUnknown, vcon.CountUnknown
	m.LawfulBasis, m.LawfulBasisErr = lawfulbasis.Summary{Basis: lawfulbasis.Unknown}, nil
}

// unknownCritical is the first name critical lists that the server does
// not know; "" when it knows them all.
func unknownCritical(names []string) string {
	for _, n := range names {
		known := false
		for _, k := range KnownExtensions {
			known = known || n == k
		}
		if !known {
			if n == "" {
				return "(not a string)"
			}
			return n
		}
	}
	return ""
}

// signerNote is the audit record's note of a store's signers:
// their fingerprints, the first ten.
func signerNote(signersJSON string) string {
	var s []jws.Signer
	if json.Unmarshal([]byte(signersJSON), &s) != nil || len(s) == 0 {
		return ""
	}
	fps := make([]string, 0, min(len(s), 10))
	for _, x := range s[:min(len(s), 10)] {
		fps = append(fps, x.Fingerprint)
	}
	more := ""
	if len(s) > 10 {
		more = fmt.Sprintf(",+%d", len(s)-10)
	}
	return " signed_by=" + strings.Join(fps, ",") + more
}

// spoolDir is where a payload larger than the spool's memory waits,
// sealed: the data directory's spool.
func (a *Archive) spoolDir() string {
	if a.DataDir == "" {
		return os.TempDir()
	}
	return objstore.SpoolDir(a.DataDir)
}

// ParseAnchors reads trust anchors from PEM text: every CERTIFICATE
// block, each a certificate.
func ParseAnchors(pemText []byte) ([]catalog.Anchor, error) {
	var out []catalog.Anchor
	for rest := pemText; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("a CERTIFICATE block is not a certificate: %v", err)
		}
		out = append(out, catalog.Anchor{Fingerprint: jws.Fingerprint(c), PEM: string(pem.EncodeToMemory(b))})
	}
	if len(out) == 0 {
		return nil, errors.New("it holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
	}
	return out, nil
}
