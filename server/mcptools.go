package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/search"
	"github.com/vcon-server/vcon-server/vcon"
)

// The tools (docs/mcp.md, "The tools"), named as vcon-mcp names its own
// so that an assistant set up for it finds its way. Each answers what
// the matching route answers, through the route's own handler where one
// exists (the listing and search, versions, the lawful basis), so that
// what a purpose may see is decided in one place. None writes or deletes.

// mcpPage is how many uuids one search_vcons call returns at most.
const mcpPage = 100

type searchArgs struct {
	Tel         string `json:"tel,omitempty" jsonschema:"a party's telephone number, normalized as GET /vcons?tel= does"`
	Mailto      string `json:"mailto,omitempty" jsonschema:"a party's email address"`
	Name        string `json:"name,omitempty" jsonschema:"a party's name"`
	Subject     string `json:"subject,omitempty" jsonschema:"words of the subject, all of which must be in it (only where the tenant indexes subjects)"`
	StoredSince string `json:"stored_since,omitempty" jsonschema:"RFC 3339 time: only vCons whose current version was stored at or after it"`
	StoredUntil string `json:"stored_until,omitempty" jsonschema:"RFC 3339 time: only vCons whose current version was stored before it"`
	Cursor      string `json:"cursor,omitempty" jsonschema:"the cursor of the previous answer, for the next page"`
}

type searchResult struct {
	UUIDs    []string `json:"uuids"`
	Cursor   *string  `json:"cursor" jsonschema:"pass it back for the next page; null on the last"`
	Complete *bool    `json:"complete,omitempty" jsonschema:"false while the tenant's search index is still being built"`
	Withheld *int     `json:"withheld,omitempty" jsonschema:"how many of this page the key's purpose may not see"`
}

type uuidArgs struct {
	UUID string `json:"uuid" jsonschema:"the vCon's uuid"`
}

type getArgs struct {
	UUID    string `json:"uuid" jsonschema:"the vCon's uuid"`
	Version string `json:"version,omitempty" jsonschema:"a version id from list_versions; the current version without"`
}

type versionsResult struct {
	UUID     string        `json:"uuid"`
	Versions []versionJSON `json:"versions"`
}

// addTools adds the tools and the vcon:// resources to srv.
func (s *Server) addTools(srv *mcp.Server) {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(srv, &mcp.Tool{Name: "search_vcons", Annotations: readOnly,
		Description: "Find vCons by party (tel, mailto, name), subject words and the time their current version was stored. Returns at most 100 uuids and a cursor for the next page."},
		s.searchTool)
	mcp.AddTool(srv, &mcp.Tool{Name: "get_vcon", Annotations: readOnly,
		Description: "Read one vCon: its JSON as stored (a signed one's payload; an encrypted one only as its uuid and form), then what the server knows of it."},
		s.getTool)
	mcp.AddTool(srv, &mcp.Tool{Name: "list_versions", Annotations: readOnly,
		Description: "List the kept versions of a vCon, newest first."}, s.versionsTool)
	mcp.AddTool(srv, &mcp.Tool{Name: "get_lawful_basis", Annotations: readOnly,
		Description: "What the current version's lawful basis grants and refuses: why a read for a purpose is denied."}, s.lawfulTool)
	mcp.AddTool(srv, &mcp.Tool{Name: "vcon_capabilities", Annotations: readOnly,
		Description: "What this endpoint can and cannot do: its tools, its limits, what it records."}, s.capabilitiesTool)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "vcon", URITemplate: "vcon://{uuid}", MIMEType: "application/vcon+json",
		Description: "A vCon by uuid, as get_vcon reads it."}, s.readResource)
}

// route runs a route's handler h for the call, as a GET of target with
// pattern and the uuid path value, and returns its status, its body and
// its record's target. The answers of these routes are small JSON
// documents.
func (s *Server) route(c *mcpCall, pattern, target, uuid string, h func(http.ResponseWriter, *http.Request, catalog.Key) (int, string)) (int, []byte, string) {
	r := c.req.Clone(c.req.Context())
	r.URL, _ = url.Parse(target)
	r.Pattern = pattern
	if uuid != "" {
		r.SetPathValue("uuid", uuid)
	}
	held := &heldAnswer{header: http.Header{}}
	status, rec := h(held, r, c.key)
	return status, held.body.Bytes(), rec
}

// routeRefusal is the error text of a route's refusal.
func routeRefusal(body []byte) string {
	var e struct{ Error string }
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return "refused"
	}
	return strings.ReplaceAll(e.Error, "GET /vcons/{uuid}/lawful-basis", "get_lawful_basis")
}

// routeTool calls a route for the call and decodes its answer into out.
func (s *Server) routeTool(ctx context.Context, pattern, target, uuid string, h func(http.ResponseWriter, *http.Request, catalog.Key) (int, string), out any) (*mcp.CallToolResult, bool) {
	c := callOf(ctx)
	status, body, rec := s.route(c, pattern, target, uuid, h)
	c.status, c.target = status, rec
	if status != http.StatusOK {
		return toolError(routeRefusal(body)), false
	}
	if err := json.Unmarshal(body, out); err != nil {
		s.Log.Error("mcp: a route's answer does not decode", "route", pattern, "error", err.Error())
		c.status = http.StatusInternalServerError
		return toolError("internal error; the server's log has the details"), false
	}
	return nil, true
}

func (s *Server) versionsTool(ctx context.Context, _ *mcp.CallToolRequest, in uuidArgs) (*mcp.CallToolResult, *versionsResult, error) {
	var out versionsResult
	if res, ok := s.routeTool(ctx, "GET /vcons/{uuid}/versions", "/vcons/"+url.PathEscape(in.UUID)+"/versions", in.UUID, s.versions, &out); !ok {
		return res, nil, nil
	}
	return nil, &out, nil
}

func (s *Server) lawfulTool(ctx context.Context, _ *mcp.CallToolRequest, in uuidArgs) (*mcp.CallToolResult, *LawfulBasisJSON, error) {
	var out LawfulBasisJSON
	if res, ok := s.routeTool(ctx, "GET /vcons/{uuid}/lawful-basis", "/vcons/"+url.PathEscape(in.UUID)+"/lawful-basis", in.UUID, s.lawfulBasis, &out); !ok {
		return res, nil, nil
	}
	return nil, &out, nil
}

// searchTool pages through GET /vcons, filtered, 100 uuids at a time; the
// stored times filter each page by its vCons' current versions, so a page
// may hold fewer than 100 and still have a cursor.
func (s *Server) searchTool(ctx context.Context, _ *mcp.CallToolRequest, in searchArgs) (*mcp.CallToolResult, *searchResult, error) {
	c := callOf(ctx)
	q := url.Values{"limit": {strconv.Itoa(mcpPage)}}
	for i, v := range []string{in.Tel, in.Mailto, in.Name, in.Subject} {
		if len(v) > vcon.MaxPartyFieldLen {
			res, _, _ := c.refuse(http.StatusBadRequest, search.Fields[i]+" must be at most "+strconv.Itoa(vcon.MaxPartyFieldLen)+" bytes: no longer value is indexed")
			return res, nil, nil
		}
		if v != "" {
			q.Set(search.Fields[i], v)
		}
	}
	if in.Cursor != "" {
		if _, err := ids.Parse(in.Cursor); err != nil {
			res, _, _ := c.refuse(http.StatusBadRequest, "cursor must be the cursor of a previous answer, as it came")
			return res, nil, nil
		}
		q.Set("after", in.Cursor)
	}
	since, until, msg := storedBounds(in.StoredSince, in.StoredUntil)
	if msg != "" {
		res, _, _ := c.refuse(http.StatusBadRequest, msg)
		return res, nil, nil
	}
	var out searchResult
	if res, ok := s.routeTool(ctx, "GET /vcons", "/vcons?"+q.Encode(), "", s.list, &struct {
		UUIDs    *[]string `json:"uuids"`
		Next     **string  `json:"next"`
		Complete **bool    `json:"complete"`
		Withheld **int     `json:"withheld"`
	}{&out.UUIDs, &out.Cursor, &out.Complete, &out.Withheld}); !ok {
		return res, nil, nil
	}
	if !since.IsZero() || !until.IsZero() {
		kept, err := s.storedWithin(ctx, c, out.UUIDs, since, until)
		if err != nil {
			res, _, _ := c.refuse(s.logged(c, err))
			return res, nil, nil
		}
		out.UUIDs = kept
	}
	c.target = joinTarget(c.target, out.UUIDs)
	return nil, &out, nil
}

// storedBounds reads stored_since and stored_until, or says what is wrong.
func storedBounds(since, until string) (time.Time, time.Time, string) {
	var t [2]time.Time
	for i, v := range []string{since, until} {
		if v == "" {
			continue
		}
		var err error
		if t[i], err = time.Parse(time.RFC3339, v); err != nil {
			return t[0], t[1], []string{"stored_since", "stored_until"}[i] + " must be an RFC 3339 time such as 2026-01-02T15:04:05Z"
		}
	}
	return t[0], t[1], ""
}

// storedWithin keeps of uuids those whose current version was stored in
// [since, until), a zero bound being none.
func (s *Server) storedWithin(ctx context.Context, c *mcpCall, uuids []string, since, until time.Time) ([]string, error) {
	kept := uuids[:0:0]
	for _, u := range uuids {
		id, err := ids.Parse(u)
		if err != nil {
			return nil, err
		}
		v, err := s.Cat.Current(ctx, *c.key.Tenant, id)
		if err != nil {
			continue // gone since the page was read
		}
		if (since.IsZero() || !v.StoredAt.Before(since)) && (until.IsZero() || v.StoredAt.Before(until)) {
			kept = append(kept, u)
		}
	}
	return kept, nil
}

// joinTarget names the uuids a call returned in its record, after what
// the route named (the filters of a search).
func joinTarget(target string, uuids []string) string {
	if len(uuids) == 0 {
		return target
	}
	t := "uuids=" + strings.Join(uuids, ",")
	if target == "" {
		return t
	}
	return target + " " + t
}

// logged is the status and text of an unexpected error, logged in full.
func (s *Server) logged(c *mcpCall, err error) (int, string) {
	status, msg := statusOf(err)
	if status >= 500 {
		s.Log.Error("mcp call failed", "action", c.action, "error", err.Error())
	}
	return status, msg
}

func (s *Server) getTool(ctx context.Context, _ *mcp.CallToolRequest, in getArgs) (*mcp.CallToolResult, *vconResult, error) {
	c := callOf(ctx)
	meta, text, msg := s.readVcon(c, in.UUID, in.Version)
	if msg != "" {
		return toolError(msg), nil, nil
	}
	res := &mcp.CallToolResult{}
	if text != nil {
		mj, _ := json.Marshal(meta)
		res.Content = []mcp.Content{&mcp.TextContent{Text: string(text)}, &mcp.TextContent{Text: string(mj)}}
	}
	return res, meta, nil
}

// readResource serves vcon://{uuid}: get_vcon's read, as a resource.
func (s *Server) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	c := callOf(ctx)
	uri := req.Params.URI
	meta, text, msg := s.readVcon(c, strings.TrimPrefix(uri, "vcon://"), "")
	switch {
	case c.status == http.StatusNotFound:
		return nil, mcp.ResourceNotFoundError(uri)
	case msg != "":
		return nil, &jsonrpc.Error{Code: codeInvalidRequest, Message: msg}
	case text == nil:
		mj, _ := json.Marshal(meta)
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(mj)}}}, nil
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/vcon+json", Text: string(text)}}}, nil
}
