// Package webhook delivers a tenant's events to its endpoint, signed as
// Standard Webhooks (standardwebhooks.com) sign them: the outbox rows the
// catalog's triggers write (docs/FORMAT.md, "Webhook outbox") are sent in
// order per vCon, retried with capped exponential backoff and jitter, and
// moved to failed after a limit (docs/webhooks.md). A delivery carries
// ids and times only, never a byte of a vCon.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
)

// SecretPrefix starts a Standard Webhooks secret; base64 of the key
// follows.
const SecretPrefix = "whsec_"

// Secret sizes the specification allows: 24 to 64 bytes of key.
const (
	minSecret = 24
	maxSecret = 64
)

// ParseSecret decodes a secret written as "whsec_" and the base64 of 24
// to 64 random bytes (white space around it ignored), returning the key.
func ParseSecret(text string) ([]byte, error) {
	s := strings.TrimSpace(text)
	if !strings.HasPrefix(s, SecretPrefix) {
		return nil, errors.New("the secret must start with whsec_ and go on with base64; make one with: echo whsec_$(head -c 32 /dev/urandom | base64)")
	}
	key, err := base64.StdEncoding.DecodeString(s[len(SecretPrefix):])
	if err != nil {
		return nil, fmt.Errorf("the secret after whsec_ is not base64: %w", err)
	}
	if len(key) < minSecret || len(key) > maxSecret {
		return nil, fmt.Errorf("the secret holds %d bytes of key; use %d to %d: echo whsec_$(head -c 32 /dev/urandom | base64)", len(key), minSecret, maxSecret)
	}
	return key, nil
}

// Sign returns the webhook-signature header of one attempt: "v1," and
// the base64 of HMAC-SHA256, keyed with the secret's key, of the message
// id, the timestamp in Unix seconds and the body, joined by dots.
func Sign(key []byte, msgID string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msgID + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Body is what a delivery sends: the event's type, its time and the ids
// it is about.
type Body struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      Data   `json:"data"`
}

// Data names what an event is about, by id only: a vCon's version, or
// an erasure (docs/webhooks.md, "The events"); an audit.checkpoint
// carries the tenant's log's checkpoint, which holds no vCon content.
type Data struct {
	Tenant  string `json:"tenant"`
	UUID    string `json:"uuid,omitempty"`
	Version string `json:"version,omitempty"`
	Erasure string `json:"erasure,omitempty"`
	// An audit.checkpoint's: the log's origin, the records it covers and
	// the signed note (C2SP tlog-checkpoint) as GET /audit/log/checkpoint
	// answers it.
	Origin     string `json:"origin,omitempty"`
	Size       uint64 `json:"size,omitempty"`
	Checkpoint string `json:"checkpoint,omitempty"`
}

// Payload is the JSON body of an event, the same bytes on every attempt.
func Payload(e catalog.Event) []byte {
	d := Data{Tenant: e.Tenant.String()}
	if e.Type == catalog.EventErased {
		d.Erasure = e.Erasure.String()
	} else {
		d.UUID, d.Version = e.UUID.String(), e.Version.String()
	}
	b, _ := json.Marshal(Body{Type: e.Type, Timestamp: e.At.UTC().Format(time.RFC3339Nano), Data: d})
	return b
}

// CheckpointPayload is the body of an audit.checkpoint event: note is the
// checkpoint of e.Size records of the log named origin.
func CheckpointPayload(e catalog.Event, origin string, note []byte) []byte {
	d := Data{Tenant: e.Tenant.String(), Origin: origin, Size: e.Size, Checkpoint: string(note)}
	b, _ := json.Marshal(Body{Type: e.Type, Timestamp: e.At.UTC().Format(time.RFC3339Nano), Data: d})
	return b
}

// Setting is a tenant's webhook as an operator gives it: the URL, the
// secret's text and the PEM certificates the endpoint's must chain to.
type Setting struct {
	URL    string
	Secret string
	CAPEM  string
}

// Check refuses a setting that could not deliver, or that the rules
// refuse, saying what to change.
func (st Setting) Check(r Rules) error {
	if err := r.CheckURL(st.URL); err != nil {
		return err
	}
	if _, err := ParseSecret(st.Secret); err != nil {
		return err
	}
	_, err := roots(st.CAPEM)
	return err
}
