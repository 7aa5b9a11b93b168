package server

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/search"
	"github.com/vcon-server/vcon-server/vcon"
)

// acceptedTypes are the media types a vCon may be sent as.
var acceptedTypes = map[string]bool{
	"application/vcon":      true,
	"application/vcon+gzip": true,
	"application/vcon+json": true,
	"application/json":      true,
}

type storedJSON struct {
	UUID     string `json:"uuid"`
	Version  string `json:"version"`
	StoredAt string `json:"stored_at"`
}

func timeText(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// store serves POST /vcons and PUT /vcons/{uuid}.
func (s *Server) store(mode catalog.StoreMode) func(http.ResponseWriter, *http.Request, catalog.Key) (int, string) {
	return func(w http.ResponseWriter, r *http.Request, k catalog.Key) (int, string) {
		// A refusal reads the rest of the body, within bounds, once it is
		// sent (server/drain.go).
		w, finish := s.refusedBodies(w, r)
		defer finish()
		if status, refused := s.refuseLowDisk(w); refused {
			return status, r.PathValue("uuid")
		}
		req := archive.StoreRequest{Tenant: *k.Tenant, Mode: mode,
			Record: &catalog.Record{Actor: actor(k), Label: k.Label, Action: storeAction(mode)}}
		target := ""
		if mode == catalog.Replace {
			id, err := ids.Parse(r.PathValue("uuid"))
			if err != nil {
				return s.fail(w, r, http.StatusNotFound, "no such vCon: "+r.PathValue("uuid")+" is not a uuid"), ""
			}
			req.UUID, target = &id, id.String()
		}
		mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || !acceptedTypes[mt] {
			return s.fail(w, r, http.StatusUnsupportedMediaType, "send the vCon as application/vcon, application/vcon+json, application/json or application/vcon+gzip"), target
		}
		req.ContentType = mime.FormatMediaType(mt, params)
		switch enc := r.Header.Get("Content-Encoding"); enc {
		case "", "identity":
		case "gzip":
			req.ContentEncoding = "gzip"
		default:
			return s.fail(w, r, http.StatusUnsupportedMediaType, "Content-Encoding "+strconv.Quote(enc)+" is not accepted; send gzip or nothing"), target
		}
		if r.ContentLength > s.MaxSize {
			return s.fail(w, r, http.StatusRequestEntityTooLarge, "the vCon is larger than max_vcon_size allows"), target
		}
		req.Body = http.MaxBytesReader(w, r.Body, s.MaxSize+1)
		res, err := s.Archive.Store(r.Context(), req)
		if err != nil {
			if !res.UUID.IsZero() {
				target = res.UUID.String()
			}
			return s.failErr(w, r, err), target
		}
		w.Header().Set("Location", "/vcons/"+res.UUID.String())
		status := http.StatusCreated
		switch {
		case res.Replayed:
			// A retry of the current version: its answer, and no store.
			w.Header().Set("Idempotent-Replayed", "true")
			writeJSON(w, http.StatusOK, storedJSON{UUID: res.UUID.String(), Version: res.Version.String(), StoredAt: timeText(res.StoredAt)})
			return http.StatusOK, res.UUID.String()
		case res.Replaced:
			status = http.StatusOK
		}
		recorded(r) // with the version (req.Record)
		if res.HasAuditIndex {
			w.Header().Set("Vcon-Audit-Index", strconv.FormatUint(res.AuditIndex, 10))
		}
		s.Metrics.stored(res.Meta.Size)
		writeJSON(w, status, storedJSON{UUID: res.UUID.String(), Version: res.Version.String(), StoredAt: timeText(res.StoredAt)})
		return status, res.UUID.String()
	}
}

// storeAction names a store in the audit log after what it did.
func storeAction(mode catalog.StoreMode) string {
	if mode == catalog.Replace {
		return "replace"
	}
	return "store"
}

func (s *Server) read(w http.ResponseWriter, r *http.Request, k catalog.Key) (int, string) {
	uuid, err := ids.Parse(r.PathValue("uuid"))
	if err != nil {
		return s.fail(w, r, http.StatusNotFound, "no such vCon"), ""
	}
	v, body, err := s.Archive.OpenIf(r.Context(), *k.Tenant, uuid, func(v catalog.Version) error { return s.decide(r, v.Lawful) })
	var denied *deniedError
	if errors.As(err, &denied) {
		return unavailable(w, denied), uuid.String()
	}
	if err != nil {
		return s.failErr(w, r, err), uuid.String()
	}
	defer body.Close()
	etag := `"` + v.ID.String() + `"`
	h := w.Header()
	h.Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return http.StatusNotModified, uuid.String()
	}
	h.Set("Content-Type", v.ContentType)
	if v.ContentEncoding != "" {
		h.Set("Content-Encoding", v.ContentEncoding)
	}
	h.Set("Content-Length", strconv.FormatInt(v.Size, 10))
	w.WriteHeader(http.StatusOK)
	n, err := io.Copy(w, body)
	s.Metrics.read(n)
	if err != nil {
		// The status line is gone: the only honest signal left is to cut
		// the connection, so the client sees a short body, never bad bytes.
		s.Log.Error("read failed part way", "error", err.Error())
		panic(http.ErrAbortHandler)
	}
	return http.StatusOK, uuid.String()
}

type versionJSON struct {
	Version  string     `json:"version"`
	StoredAt string     `json:"stored_at"`
	Current  bool       `json:"current"`
	Hidden   bool       `json:"hidden"`
	HiddenAt *string    `json:"hidden_at"`
	Form     vocab.Form `json:"form"`
	Gzip     bool       `json:"gzip"`
	Size     int64      `json:"size"`
	// Signers are those its signatures were verified to, null when none
	// was checked; Unread says why its metadata was left unread
	// (docs/signatures.md).
	Signers json.RawMessage `json:"signers"`
	Unread  *string         `json:"unread,omitempty"`
}

func (s *Server) versions(w http.ResponseWriter, r *http.Request, k catalog.Key) (int, string) {
	uuid, err := ids.Parse(r.PathValue("uuid"))
	if err != nil {
		return s.fail(w, r, http.StatusNotFound, "no such vCon"), ""
	}
	vs, err := s.Archive.Versions(r.Context(), *k.Tenant, uuid)
	if err != nil {
		return s.failErr(w, r, err), uuid.String()
	}
	// Decided on the current version, from the rows just read; a vCon
	// with none current (deleted, its versions kept) has no basis.
	var cur catalog.Version
	for _, v := range vs {
		if v.Current {
			cur = v
		}
	}
	var denied *deniedError
	if errors.As(s.decide(r, cur.Lawful), &denied) {
		return unavailable(w, denied), uuid.String()
	}
	out := make([]versionJSON, 0, len(vs))
	for _, v := range vs {
		j := versionJSON{Version: v.ID.String(), StoredAt: timeText(v.StoredAt), Current: v.Current, Hidden: v.HiddenAt != nil,
			Form: v.Form, Gzip: vcon.Gzipped(v.ContentType, v.ContentEncoding), Size: v.Size, Signers: json.RawMessage("null")}
		if v.Signers != "" {
			j.Signers = json.RawMessage(v.Signers)
		}
		if v.Unread != "" {
			j.Unread = &v.Unread
		}
		if v.HiddenAt != nil {
			t := timeText(*v.HiddenAt)
			j.HiddenAt = &t
		}
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, map[string]any{"uuid": uuid.String(), "versions": out})
	return http.StatusOK, uuid.String()
}

const maxListLimit = 1000

func (s *Server) list(w http.ResponseWriter, r *http.Request, k catalog.Key) (int, string) {
	q := r.URL.Query()
	var after ids.ID
	if a := q.Get("after"); a != "" {
		var err error
		if after, err = ids.Parse(a); err != nil {
			return s.fail(w, r, http.StatusBadRequest, "after must be a uuid"), ""
		}
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxListLimit {
			return s.fail(w, r, http.StatusBadRequest, "limit must be a number from 1 to 1000"), ""
		}
		limit = n
	}
	filters := map[string]string{}
	for _, f := range search.Fields {
		if v, ok := q[f]; ok {
			if len(v) != 1 || v[0] == "" {
				return s.fail(w, r, http.StatusBadRequest, f+" must be given once, not empty"), ""
			}
			filters[f] = v[0]
		}
	}
	if len(search.Words(filters["subject"])) > search.MaxWords {
		return s.fail(w, r, http.StatusBadRequest, "subject must be at most "+strconv.Itoa(search.MaxWords)+" words"), ""
	}
	if len(filters) > 0 {
		return s.search(w, r, k, filters, after, limit)
	}
	got, err := s.Cat.ListCurrent(r.Context(), *k.Tenant, after, limit+1)
	if err != nil {
		return s.failErr(w, r, err), ""
	}
	uuids, next := page(got, limit)
	uuids, withheld, decided, err := s.withhold(r, *k.Tenant, uuids)
	if err != nil {
		return s.failErr(w, r, err), ""
	}
	answer := map[string]any{"uuids": uuids, "next": next}
	if decided {
		answer["withheld"] = withheld
	}
	writeJSON(w, http.StatusOK, answer)
	return http.StatusOK, ""
}

// page turns up to limit+1 uuids into one page of limit and the uuid to
// ask for the next one after (nil on the last page).
func page(got []ids.ID, limit int) ([]string, *string) {
	var next *string
	if len(got) > limit {
		got = got[:limit]
		n := got[limit-1].String()
		next = &n
	}
	uuids := make([]string, len(got))
	for i, id := range got {
		uuids[i] = id.String()
	}
	return uuids, next
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, k catalog.Key) (int, string) {
	uuid, err := ids.Parse(r.PathValue("uuid"))
	if err != nil {
		return s.fail(w, r, http.StatusNotFound, "no such vCon"), ""
	}
	if err := s.Archive.Delete(r.Context(), *k.Tenant, uuid); err != nil {
		return s.failErr(w, r, err), uuid.String()
	}
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent, uuid.String()
}

// fail answers a refusal the handler decided itself.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) int {
	writeError(w, status, msg)
	return status
}

// failErr answers err through statusOf, logging what is not the caller's
// fault.
func (s *Server) failErr(w http.ResponseWriter, r *http.Request, err error) int {
	status, msg := statusOf(err)
	if status == http.StatusInsufficientStorage {
		// A full disk or bucket quota is no bug: the log counts it once
		// per interval (internal/logline), the client is told when to retry.
		s.Log.Warn("request refused: no space", "route", r.Pattern, "error", err.Error())
		if s.Disk != nil && (r.Pattern == "POST /vcons" || r.Pattern == "PUT /vcons/{uuid}") {
			s.Disk.Refused()
		}
		return s.insufficientStorage(w)
	}
	var ownKey *archive.TenantKeyError
	switch {
	case errors.As(err, &ownKey):
		// The tenant's doing, told to the tenant: the log names neither
		// the tenant nor its key (docs/keys-and-audit.md).
		s.Log.Warn("request refused: a tenant's own key does not open", "route", r.Pattern, "status", status)
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "5")
		}
	case errors.Is(err, catalog.ErrKeyRotated):
		w.Header().Set("Retry-After", "1")
	case status >= 500:
		s.Log.Error("request failed", "route", r.Pattern, "error", err.Error())
	}
	deleteNoSpace(w, err)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		// The connection cannot serve another request: the rest of the
		// body is left unread, or read and dropped (server/drain.go).
		w.Header().Set("Connection", "close")
	}
	writeError(w, status, msg)
	return status
}

func (s *Server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.Log.Error("request failed", "route", r.Pattern, "error", err.Error())
	writeError(w, http.StatusInternalServerError, "internal error; the server's log has the details")
}

// search answers a listing filtered by party (and, for a tenant whose
// setting is parties+subject, by words of the subject): the tenant's
// blind index. The audit record names the filters, never their values.
func (s *Server) search(w http.ResponseWriter, r *http.Request, k catalog.Key, filters map[string]string, after ids.ID, limit int) (int, string) {
	names := make([]string, 0, len(filters))
	for _, f := range search.Fields {
		if _, ok := filters[f]; ok {
			names = append(names, f)
		}
	}
	target := "filters=" + strings.Join(names, ",")
	t, err := s.Cat.Tenant(r.Context(), *k.Tenant)
	if err != nil {
		return s.failErr(w, r, err), target
	}
	if t.Search == vocab.SearchOff {
		return s.fail(w, r, http.StatusConflict, "search is off for this tenant; an operator turns it on with vcon-server tenant set-search"), target
	}
	if _, ok := filters["subject"]; ok && t.Search != vocab.SearchPartiesSubject {
		return s.fail(w, r, http.StatusConflict, "this tenant's search indexes parties, not subjects; an operator indexes subjects too with vcon-server tenant set-search, setting parties+subject"), target
	}
	got, err := s.Archive.Search(r.Context(), *k.Tenant, filters, after, limit+1)
	if err != nil {
		return s.failErr(w, r, err), target
	}
	uuids, next := page(got, limit)
	uuids, withheld, decided, err := s.withhold(r, *k.Tenant, uuids)
	if err != nil {
		return s.failErr(w, r, err), target
	}
	state, err := s.Cat.SearchBacklog(r.Context())
	if err != nil {
		return s.failErr(w, r, err), target
	}
	complete := true
	for _, st := range state {
		complete = complete && st.Tenant != t.ID
	}
	answer := map[string]any{"uuids": uuids, "next": next, "complete": complete}
	if decided {
		answer["withheld"] = withheld
	}
	writeJSON(w, http.StatusOK, answer)
	return http.StatusOK, target
}
