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
}

// Handler returns the routes.
func (s *Server) Handler() http.Handler {
	if s.Metrics == nil {
		s.Metrics = NewMetrics(metrics.NewRegistry())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if msg := badQuery(r); msg != "" {
			writeError(w, http.StatusBadRequest, msg)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("POST /vcons", s.tenantRoute("write", storeAction(catalog.CreateOnly), s.store(catalog.CreateOnly)))
	mux.HandleFunc("PUT /vcons/{uuid}", s.tenantRoute("write", storeAction(catalog.Replace), s.store(catalog.Replace)))
	mux.HandleFunc("GET /vcons/{uuid}", s.tenantRoute("read", "read", s.read))
	mux.HandleFunc("GET /vcons/{uuid}/versions", s.tenantRoute("read", "versions", s.versions))
	mux.HandleFunc("GET /vcons", s.tenantRoute("read", "list", s.list))
	mux.HandleFunc("DELETE /vcons/{uuid}", s.tenantRoute("delete", "delete", s.delete))

	mux.HandleFunc("POST /admin/tenants", s.operatorRoute(s.createTenant))
	mux.HandleFunc("GET /admin/tenants", s.operatorRoute(s.listTenants))
	mux.HandleFunc("GET /admin/tenants/{id}", s.operatorRoute(s.showTenant))
	mux.HandleFunc("PUT /admin/tenants/{id}/metadata", s.operatorRoute(s.setMetadata))
	mux.HandleFunc("PUT /admin/tenants/{id}/retention", s.operatorRoute(s.setRetention))
	mux.HandleFunc("PUT /admin/tenants/{id}/search", s.operatorRoute(s.setSearch))
	mux.HandleFunc("GET /admin/tenants/{id}/holds", s.operatorRoute(s.listHolds))
	mux.HandleFunc("PUT /admin/tenants/{id}/holds/{uuid}", s.operatorRoute(s.hold(true)))
	mux.HandleFunc("DELETE /admin/tenants/{id}/holds/{uuid}", s.operatorRoute(s.hold(false)))
	mux.HandleFunc("GET /metrics", s.operatorRoute(s.Metrics.serve))

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
