package kms

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/s3sig"
)

// aws is provider awskms: Encrypt and Decrypt of AWS KMS's JSON 1.1 API,
// signed with SigV4 by the project's own signer.
type aws struct {
	keyID    string
	endpoint string // https://host[:port]
	name     string
	signer   *s3sig.Signer
	client   *http.Client
	secret   []byte // for scrub only
	now      func() time.Time
}

func newAWS(c *config.AWSKMS) (*aws, error) {
	w := &aws{keyID: c.KeyID, endpoint: c.Endpoint, now: time.Now}
	if w.endpoint == "" {
		w.endpoint = "https://kms." + c.Region + ".amazonaws.com"
	}
	w.name = fmt.Sprintf("awskms key %q in %s", c.KeyID, c.Region)
	if c.Endpoint != "" {
		w.name += " at " + c.Endpoint
	}
	secret, err := readSecretFile(c.SecretAccessKeyFile)
	if err != nil {
		return nil, w.fail("read secret_access_key_file", err)
	}
	w.secret = []byte(secret)
	w.signer = &s3sig.Signer{
		Credentials:   s3sig.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: secret},
		Region:        c.Region,
		Service:       "kms",
		NormalizePath: true,
	}
	if w.client, err = newHTTPClient(c.CAFile); err != nil {
		return nil, w.fail("read ca_file", fmt.Errorf("%s %w", c.CAFile, err))
	}
	return w, nil
}

func (w *aws) String() string { return w.name }

func (w *aws) fail(op string, err error) error {
	return &Error{Provider: "awskms", Key: w.keyID, Op: op, Err: err, name: w.name}
}

func (w *aws) Wrap(ctx context.Context, plaintext []byte, c Context) ([]byte, error) {
	if err := checkPlaintext(plaintext); err != nil {
		return nil, w.fail("encrypt", err)
	}
	if err := checkAWSContext(c); err != nil {
		return nil, w.fail("encrypt", err)
	}
	in := struct {
		KeyId             string
		Plaintext         []byte
		EncryptionContext Context `json:",omitempty"`
	}{w.keyID, plaintext, c}
	var out struct{ CiphertextBlob []byte }
	if err := w.call(ctx, "Encrypt", in, &out, plaintext); err != nil {
		return nil, w.fail("encrypt", err)
	}
	if len(out.CiphertextBlob) == 0 {
		return nil, w.fail("encrypt", fmt.Errorf("the answer holds no CiphertextBlob"))
	}
	return out.CiphertextBlob, nil
}

// Unwrap sends the key id with the ciphertext, so that a ciphertext of
// another key is refused rather than opened by whichever key made it
// (AWS KMS would otherwise read the key from the ciphertext itself).
func (w *aws) Unwrap(ctx context.Context, ciphertext []byte, c Context) ([]byte, error) {
	if err := checkCiphertext(ciphertext); err != nil {
		return nil, w.fail("decrypt", err)
	}
	if err := checkAWSContext(c); err != nil {
		return nil, w.fail("decrypt", err)
	}
	in := struct {
		KeyId             string
		CiphertextBlob    []byte
		EncryptionContext Context `json:",omitempty"`
	}{w.keyID, ciphertext, c}
	var out struct{ Plaintext []byte }
	if err := w.call(ctx, "Decrypt", in, &out, ciphertext); err != nil {
		return nil, w.fail("decrypt", err)
	}
	if len(out.Plaintext) == 0 {
		return nil, w.fail("decrypt", fmt.Errorf("the answer holds no Plaintext"))
	}
	return out.Plaintext, nil
}

// NewKey makes a symmetric encryption key described by label and returns
// its id.
func (w *aws) NewKey(ctx context.Context, label string) (string, error) {
	in := map[string]string{"Description": label, "KeySpec": "SYMMETRIC_DEFAULT", "KeyUsage": "ENCRYPT_DECRYPT"}
	var out struct{ KeyMetadata struct{ KeyId string } }
	if err := w.call(ctx, "CreateKey", in, &out, nil); err != nil {
		return "", w.fail("create key", err)
	}
	if out.KeyMetadata.KeyId == "" {
		return "", w.fail("create key", fmt.Errorf("the answer holds no KeyMetadata.KeyId"))
	}
	return out.KeyMetadata.KeyId, nil
}

// DeleteKey schedules key's deletion after the shortest window AWS KMS
// allows, 7 days, during which it refuses every use of the key.
func (w *aws) DeleteKey(ctx context.Context, key string) error {
	in := map[string]any{"KeyId": key, "PendingWindowInDays": 7}
	var out struct{ KeyId string }
	if err := w.call(ctx, "ScheduleKeyDeletion", in, &out, nil); err != nil {
		return w.fail("schedule key deletion", err)
	}
	return nil
}

// checkAWSContext holds the context to the rules canonical keeps for the
// other providers, so that a context valid for one is valid for all.
func checkAWSContext(c Context) error {
	_, err := canonical(c)
	return err
}

// call posts one JSON 1.1 request and decodes a 200's body into out.
// secret is the request's plaintext or ciphertext, kept out of errors.
func (w *aws) call(ctx context.Context, target string, in, out any, secret []byte) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	again := target == "Encrypt" || target == "Decrypt"
	a, err := post(ctx, w.client, again, func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.endpoint+"/", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "TrentService."+target)
		w.signer.Sign(req, hex.EncodeToString(sum[:]), w.now())
		return req, nil
	})
	if err != nil {
		return err
	}
	if a.status != http.StatusOK {
		return w.refusal(a, secret)
	}
	if err := json.Unmarshal(a.body, out); err != nil {
		return fmt.Errorf("the answer (200) is not the JSON of %s: %v", target, err)
	}
	return nil
}

// awsUnreachable are the error types that say to come back later.
var awsUnreachable = map[string]bool{
	"ThrottlingException":        true,
	"KMSInternalException":       true,
	"DependencyTimeoutException": true,
	"KeyUnavailableException":    true, // a custom key store's HSM is away
	"LimitExceededException":     true,
}

// awsHints say what to do about the refusals an operator meets; AWS's
// own message says what happened.
var awsHints = map[string]string{
	"AccessDeniedException":       "allow kms:Encrypt and kms:Decrypt on the key to these credentials (key policy or IAM policy)",
	"DisabledException":           "enable the key (aws kms enable-key) if it was not disabled on purpose",
	"NotFoundException":           "check kms.awskms.key_id and region",
	"KMSInvalidStateException":    "a key pending deletion comes back with aws kms cancel-key-deletion, then enable-key",
	"InvalidCiphertextException":  "the ciphertext was not made by this key under this context: the wrapped key file belongs to another catalog or was altered",
	"IncorrectKeyException":       "the ciphertext was made by another key than kms.awskms.key_id",
	"UnrecognizedClientException": "check kms.awskms.access_key_id",
	"InvalidSignatureException":   "check the secret access key file, and the clock",
}

// refusal turns an error answer into an error: 5xx and the types of
// awsUnreachable are ErrUnreachable, any other 4xx ErrRefused.
func (w *aws) refusal(a *answer, secret []byte) error {
	var e struct {
		Type     string `json:"__type"`
		Message  string `json:"message"`
		MessageM string `json:"Message"`
	}
	_ = json.Unmarshal(a.body, &e) // a body that is not JSON says nothing more than its status
	typ := e.Type
	if typ == "" {
		typ = a.header.Get("X-Amzn-Errortype")
	}
	// "com.amazonaws.kms#NotFoundException" and "NotFoundException:..."
	// are both NotFoundException.
	if i := strings.LastIndexByte(typ, '#'); i >= 0 {
		typ = typ[i+1:]
	}
	typ, _, _ = strings.Cut(typ, ":")
	msg := e.Message
	if msg == "" {
		msg = e.MessageM
	}
	text := fmt.Sprintf("%d %s", a.status, http.StatusText(a.status))
	if typ != "" {
		text = fmt.Sprintf("%d %s", a.status, scrub(typ))
	}
	if msg = strings.TrimRight(scrub(msg, secret, w.secret), "."); msg != "" {
		text += ": " + msg
	}
	if id := a.header.Get("X-Amzn-Requestid"); id != "" {
		text += " (request id " + scrub(id) + ")"
	}
	if hint := awsHints[typ]; hint != "" {
		text += ": " + hint
	}
	switch {
	case a.status >= 500 || a.status == http.StatusTooManyRequests || a.status == http.StatusRequestTimeout || awsUnreachable[typ]:
		return unreachable("%s", text)
	case a.status >= 400:
		return refused("%s", text)
	}
	return fmt.Errorf("an unexpected answer: %s", text)
}
