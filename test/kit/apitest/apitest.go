// Package apitest is the HTTP suite of the store: every route, every
// refusal, deletes, retention, holds and audit records, run against a real
// server over real TLS. Each storage kind runs the same suite.
package apitest

import (
	"testing"

	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// NewEnv starts a server for one test with the given options.
type NewEnv func(t *testing.T, opts testenv.Options) *testenv.Env

// Run runs the whole suite. The cases live by what they exercise:
// vcons.go storing, reading, versions and listing; refusals.go refused
// requests and tenant isolation; deletes.go what leaves the disk (no clear
// content, deletes, retention, holds); admin.go the admin API and the audit
// log. fixtures.go holds the test vCons.
func Run(t *testing.T, newEnv NewEnv) {
	t.Run("StoreReadEveryForm", func(t *testing.T) { storeReadEveryForm(t, newEnv(t, testenv.Options{})) })
	t.Run("SharedVcons", func(t *testing.T) { sharedVcons(t, newEnv(t, testenv.Options{})) })
	t.Run("ReplaceAndVersions", func(t *testing.T) { replaceAndVersions(t, newEnv(t, testenv.Options{})) })
	t.Run("List", func(t *testing.T) { list(t, newEnv(t, testenv.Options{})) })
	t.Run("Refusals", func(t *testing.T) { refusals(t, newEnv(t, testenv.Options{MaxVconSize: "1MiB"})) })
	t.Run("NoClearContentOnDisk", func(t *testing.T) { noClearContent(t, newEnv(t, testenv.Options{})) })
	t.Run("DeleteKeepsUntilRetention", func(t *testing.T) { deleteWithRetention(t, newEnv) })
	t.Run("DeleteWithZeroRetentionPurges", func(t *testing.T) { deleteZeroRetention(t, newEnv(t, testenv.Options{Retention: "0d"})) })
	t.Run("Holds", func(t *testing.T) { holds(t, newEnv) })
	t.Run("AdminAPI", func(t *testing.T) { adminAPI(t, newEnv(t, testenv.Options{})) })
	t.Run("Audit", func(t *testing.T) { auditRecords(t, newEnv(t, testenv.Options{})) })
	t.Run("TenantIsolation", func(t *testing.T) { isolation(t, newEnv(t, testenv.Options{})) })
	t.Run("ConcurrentStores", func(t *testing.T) { concurrentStores(t, newEnv(t, testenv.Options{})) })
}

func headers(f Fixture) []string {
	h := []string{"Content-Type", f.ContentType}
	if f.Encoding != "" {
		h = append(h, "Content-Encoding", f.Encoding)
	}
	return h
}

func expect(t testing.TB, r testenv.Response, status int, what string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: status %d, want %d; body %s", what, r.Status, status, r.Body)
	}
}
