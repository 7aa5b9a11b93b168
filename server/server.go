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
	"github.com/vcon-server/vcon-server/internal/auditlog"
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
	// Logs publishes the audit logs (server/auditlog.go); nil answers 503.
	Logs *auditlog.Logs
	// LawfulSkew is how long a lawful basis holds past its expiration
	// ([lawful_basis] skew, server/purpose.go).
	LawfulSkew time.Duration
	// MCP is the endpoint AI assistants read through (server/mcp.go).
	MCP     MCPSettings
	streams streamSet
}

// A route is a pattern the mux answers, the key it needs and its handler.
// key is keyNone, keyTenant or keyOperator; scope is the scope that key
// must hold: a tenant key's on the vCon API, an operator key's on the
// admin routes and /metrics (catalog.OperatorScopes). A new route names
// its scope here, so that no route is left to every operator key.
// docs/openapi.json describes each route with the same key and scope;
// server/openapi_test.go holds the two to each other.
type route struct {
	pattern    string
	key, scope string
	handler    http.HandlerFunc
}

// The keys a route may need.
const (
	keyNone     = ""
	keyTenant   = "tenant"
	keyOperator = "operator"
)

// roles is what the route's security requirement in docs/openapi.json
// lists: nothing for an open route, a tenant key's scope, or "operator"
// and an operator key's scope.
func (rt route) roles() []string {
	switch rt.key {
	case keyTenant:
		return []string{rt.scope}
	case keyOperator:
		return []string{keyOperator, rt.scope}
	}
	return nil
}

// routes is every route of the API (docs/api.md).
func (s *Server) routes() []route {
	open := func(pattern string, h http.HandlerFunc) route {
		return route{pattern, keyNone, "", h}
	}
	tenant := func(pattern, scope, action string, h func(http.ResponseWriter, *http.Request, catalog.Key) (int, string)) route {
		return route{pattern, keyTenant, scope, s.tenantRoute(scope, action, h)}
	}
	operator := func(pattern, scope string, h http.HandlerFunc) route {
		return route{pattern, keyOperator, scope, s.operatorRoute(scope, h)}
	}
	var mcpHandler http.Handler
	if s.MCP.Enabled {
		mcpHandler = s.newMCP()
	}
	// One SDK handler for the three: a session is started by a POST, read
	// by a GET and ended by a DELETE (server/mcp.go).
	mcpRoute := func(pattern string) route {
		return route{pattern, keyTenant, catalog.ScopeMCP, s.mcpRoute(mcpHandler)}
	}
	return []route{
		open("GET /health", s.health),
		open("GET /openapi.json", serveOpenAPI),

		tenant("POST /vcons", "write", storeAction(catalog.CreateOnly), s.store(catalog.CreateOnly)),
		tenant("PUT /vcons/{uuid}", "write", storeAction(catalog.Replace), s.store(catalog.Replace)),
		tenant("GET /vcons/{uuid}", "read", "read", s.read),
		tenant("GET /vcons/{uuid}/versions", "read", "versions", s.versions),
		tenant("GET /vcons/{uuid}/lawful-basis", "read", "lawful_basis", s.lawfulBasis),
		tenant("GET /vcons", "read", "list", s.list),
		tenant("DELETE /vcons/{uuid}", "delete", "delete", s.delete),
		tenant("POST /erasures", "delete", "erasure", s.erase(newEraseBudget(s.Limits))),
		tenant("GET /erasures/{id}", "delete", "erasure_read", s.erasure),
		open("GET /.well-known/jwks.json", s.jwks),
		tenant("GET /audit/log/checkpoint", catalog.ScopeAudit, "audit_log", s.tenantLog(s.logCheckpoint)),
		tenant("GET /audit/log/key", catalog.ScopeAudit, "audit_log", s.tenantLog(s.logKey)),
		tenant("GET /audit/log/tile/{path...}", catalog.ScopeAudit, "audit_log", s.tenantLog(s.logTile)),
		tenant("GET /audit/log/proof", catalog.ScopeAudit, "audit_log", s.tenantLog(s.logProof)),
		mcpRoute("POST /mcp"),
		mcpRoute("GET /mcp"),
		mcpRoute("DELETE /mcp"),

		operator("POST /admin/tenants", catalog.ScopeTenants, s.createTenant),
		operator("GET /admin/tenants", catalog.ScopeTenants, s.listTenants),
		operator("GET /admin/tenants/{id}", catalog.ScopeTenants, s.showTenant),
		operator("DELETE /admin/tenants/{id}", catalog.ScopeTenants, s.deleteTenant),
		operator("PUT /admin/tenants/{id}/metadata", catalog.ScopeTenants, s.setMetadata),
		operator("PUT /admin/tenants/{id}/retention", catalog.ScopeTenants, s.setRetention),
		operator("PUT /admin/tenants/{id}/search", catalog.ScopeTenants, s.setSearch),
		operator("PUT /admin/tenants/{id}/lawful-basis", catalog.ScopeTenants, s.setLawfulBasis),
		operator("PUT /admin/tenants/{id}/signatures", catalog.ScopeTenants, s.setSignatures),
		operator("PUT /admin/tenants/{id}/key", catalog.ScopeTenants, s.setKey),
		operator("PUT /admin/tenants/{id}/webhook", catalog.ScopeWebhooks, s.setWebhook),
		operator("GET /admin/tenants/{id}/holds", catalog.ScopeHolds, s.listHolds),
		operator("PUT /admin/tenants/{id}/holds/{uuid}", catalog.ScopeHolds, s.hold(true)),
		operator("DELETE /admin/tenants/{id}/holds/{uuid}", catalog.ScopeHolds, s.hold(false)),
		operator("GET /admin/log", catalog.ScopeLog, s.adminLog),
		operator("GET /admin/log/checkpoint", catalog.ScopeLog, s.adminLogRoute(s.logCheckpoint)),
		operator("GET /admin/log/key", catalog.ScopeLog, s.adminLogRoute(s.logKey)),
		operator("GET /admin/log/tile/{path...}", catalog.ScopeLog, s.adminLogRoute(s.logTile)),
		operator("GET /admin/log/proof", catalog.ScopeLog, s.adminLogRoute(s.logProof)),
		operator("GET /metrics", catalog.ScopeMetrics, s.Metrics.serve),
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
