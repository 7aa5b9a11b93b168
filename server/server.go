// Package server is the HTTPS API: the vCon routes for tenant keys, the
// admin routes and metrics for operator keys.
package server

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/metrics"
	"github.com/vcon-server/vcon-server/webhook"
)

// Server serves the API over an Archive.
type Server struct {
	Archive *archive.Archive
	Cat     *catalog.Catalog
	Log     *slog.Logger
	Metrics *Metrics
	MaxSize int64
	// Limits shape the guard in front of the routes (server/limits.go).
	Limits Limits
	// Disk refuses stores while the data directory's disk is low; nil
	// never refuses (server/space.go).
	Disk Disk
	// Degraded names what GET /health reports as degraded; nil: nothing.
	Degraded func() []string
	// Replica holds back the writes the catalog's replica cannot take in
	// time (server/replica.go); nil without [replica].
	Replica Replica
	// Webhooks are where a tenant's webhook may send (docs/webhooks.md).
	Webhooks webhook.Rules
}

// A route is a pattern the mux answers, the key it needs and its handler.
// The key is "" for none, keyOperator for an operator key, or the scope a
// tenant key must hold. docs/openapi.json describes each route with the
// same key; server/openapi_test.go holds the two to each other.
type route struct {
	pattern, key string
	handler      http.HandlerFunc
}

// keyOperator is the key of the admin routes and /metrics.
const keyOperator = "operator"

// routes is every route of the API (docs/api.md).
func (s *Server) routes() []route {
	tenant := func(pattern, scope, action string, h func(http.ResponseWriter, *http.Request, catalog.Key) (int, string)) route {
		return route{pattern, scope, s.tenantRoute(scope, action, h)}
	}
	operator := func(pattern string, h http.HandlerFunc) route {
		return route{pattern, keyOperator, s.operatorRoute(h)}
	}
	return []route{
		{"GET /health", "", s.health},
		{"GET /openapi.json", "", serveOpenAPI},

		tenant("POST /vcons", "write", storeAction(catalog.CreateOnly), s.store(catalog.CreateOnly)),
		tenant("PUT /vcons/{uuid}", "write", storeAction(catalog.Replace), s.store(catalog.Replace)),
		tenant("GET /vcons/{uuid}", "read", "read", s.read),
		tenant("GET /vcons/{uuid}/versions", "read", "versions", s.versions),
		tenant("GET /vcons", "read", "list", s.list),
		tenant("DELETE /vcons/{uuid}", "delete", "delete", s.delete),
		tenant("POST /erasures", "delete", "erasure", s.erase(newEraseBudget(s.Limits))),
		tenant("GET /erasures/{id}", "delete", "erasure_read", s.erasure),
		{"GET /.well-known/jwks.json", "", s.jwks},

		operator("POST /admin/tenants", s.createTenant),
		operator("GET /admin/tenants", s.listTenants),
		operator("GET /admin/tenants/{id}", s.showTenant),
		operator("PUT /admin/tenants/{id}/metadata", s.setMetadata),
		operator("PUT /admin/tenants/{id}/retention", s.setRetention),
		operator("PUT /admin/tenants/{id}/search", s.setSearch),
		operator("PUT /admin/tenants/{id}/webhook", s.setWebhook),
		operator("GET /admin/tenants/{id}/holds", s.listHolds),
		operator("PUT /admin/tenants/{id}/holds/{uuid}", s.hold(true)),
		operator("DELETE /admin/tenants/{id}/holds/{uuid}", s.hold(false)),
		operator("GET /metrics", s.Metrics.serve),
	}
}

// Handler returns the routes.
func (s *Server) Handler() http.Handler {
	if s.Metrics == nil {
		s.Metrics = NewMetrics(metrics.NewRegistry())
	}
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		mux.HandleFunc(rt.pattern, rt.handler)
	}
	return s.guard(routeErrors(mux, s.Metrics.instrument(mux, s.Log)))
}

// NewHTTPServer wraps a handler with the timeouts a public listener needs:
// slow clients cannot hold connections open forever.
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       10 * time.Minute, // a 64 MiB vCon over a slow link
		WriteTimeout:      10 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// TLSConfig is TLS 1.2 and later with forward-secret AEAD suites only.
func TLSConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
	}
}
