package formsapi

// The routes of the API, each listed once with everything it owns. A
// route added here is served (with its method-less twin answering 405),
// authenticated before it parses anything, and held by
// TestEveryRouteHasEveryPiece to the checklist of docs/architecture.md:
// an OpenAPI operation for GET and HEAD, its query parameters, a token
// kind of its own for every token it takes, the path its Link points
// at, how the rate limiter counts it, and how it takes room for the
// bytes it holds.

import (
	"net/http"
	"strings"

	"github.com/formsapi/formsapi/internal/token"
)

// rateUnit is how the rate limiter counts a route's requests. The zero
// value is no decision, which TestEveryRouteHasEveryPiece refuses.
type rateUnit int

const (
	// rateKeyless: the route takes no key, so there is nobody to count
	// (the OpenAPI document).
	rateKeyless rateUnit = iota + 1
	// ratePerRequest: one unit per request, whatever it reads (a page is
	// bounded by its limit and byte budget).
	ratePerRequest
	// ratePerPage: one unit per request, and one more for every page's
	// worth (the default limit) of submissions it sends past the first:
	// what paging through them would cost (the export).
	ratePerPage
)

// roomUse is what a route's request takes of the handler's room for the
// bytes it holds (room.go) before it serves. The zero value is no
// decision, which TestEveryRouteHasEveryPiece refuses for a keyed route.
type roomUse int

const (
	// roomPage: the request reserves a page's byte budget before any
	// store read, and answers 503 when no room comes (reservePage).
	roomPage roomUse = iota + 1
	// roomStream: a streamed answer, which holds one page at a time and
	// a chunk of its body (the export): it reserves one page's room the
	// same way, before any store read, and keeps it for the whole stream;
	// each chunk goes under a write deadline of the stall timeout of its
	// own, past the server's WriteTimeout (export.go's chunkWriter).
	roomStream
)

// route is one endpoint: a path under the mount point, served for GET
// and HEAD.
type route struct {
	name string // for tests and messages
	// path is the ServeMux pattern's path; {formId} is the only wildcard.
	path string
	// keyed routes authenticate the request (authenticate) before parse
	// runs; the others are served as they are.
	keyed bool
	// params are the query parameters the route reads, as its OpenAPI
	// operations list them; any other is ignored.
	params []string
	// tokens names the kind of token each parameter that takes one
	// accepts: a token of any other kind, this route's others included,
	// opens as nothing (400 naming the parameter).
	tokens map[string]token.Kind
	// link is the path its next-page Link points at for the form formID
	// ("" for the forms list), or nil when it sends no Link.
	link func(formID string) string
	// whole marks a keyed route whose answer is one whole object, with
	// nothing to resume or page through (the summary): it takes no token
	// and sends no Link.
	whole bool
	// exact marks a keyed route that is not a list (the export, the
	// summary): its key is looked up exactly, never answered from a
	// following node's bounded copy (lookup; docs/fleet.md).
	exact bool
	// operations are the OpenAPI operationIds of its GET and HEAD.
	operations [2]string
	// rate is how the rate limiter counts its requests.
	rate rateUnit
	// room is what its requests take of the room for pages in flight
	// (keyed routes).
	room roomUse
	// serve reads the route's parameters and answers a request that
	// authenticate has let through (keyed routes): made by keyed from
	// the route's own parse and serve. A request that may wait (a sync
	// request's wait=, wait.go) is not answered: serve returns its wait,
	// which handle then reads and waits out; every other serve returns
	// nil.
	serve func(a *api, w http.ResponseWriter, r *http.Request, req request) *feedWait
	// static answers a request of a route without a key.
	static func(a *api) http.Handler
}

// Paths of the routes, used where a message or a Link names one.
const (
	pathForms       = "/v1/forms"
	pathSubmissions = "/v1/forms/{formId}/submissions"
	pathOpenAPI     = "/v1/openapi.json"
	pathExport      = "/v1/forms/{formId}/export"
	pathSummary     = "/v1/forms/{formId}/summary"
)

// routes is the API, in the order the mux registers it.
var routes = []*route{
	{
		name:  "forms",
		path:  pathForms,
		keyed: true, rate: ratePerRequest, room: roomPage,
		params:     []string{"limit", "cursor", "order", "since", "until"},
		tokens:     map[string]token.Kind{"cursor": token.FormsCursor},
		link:       func(string) string { return pathForms },
		operations: [2]string{"listForms", "headForms"},
		serve:      keyed((*api).parseQuery, answers((*api).serveForms)),
	},
	{
		name:  "submissions",
		path:  pathSubmissions,
		keyed: true, rate: ratePerRequest, room: roomPage,
		params:     pageParams,
		tokens:     map[string]token.Kind{"cursor": token.SubmissionsCursor, "sync": token.SyncToken},
		link:       submissionsPath,
		operations: [2]string{"listSubmissions", "headSubmissions"},
		serve:      keyed((*api).parseQuery, (*api).serveSubmissions),
	},
	{
		name:  "export",
		path:  pathExport,
		keyed: true, rate: ratePerPage, room: roomStream, exact: true,
		params: exportParams,
		tokens: map[string]token.Kind{"after": token.ExportPosition},
		// Its Link is the feed to read on from its Sync-Token.
		link:       submissionsPath,
		operations: [2]string{"exportSubmissions", "headExportSubmissions"},
		serve:      keyed((*api).parseExport, answers((*api).serveExport)),
	},
	{
		name:  "summary",
		path:  pathSummary,
		keyed: true, rate: ratePerRequest, room: roomPage, exact: true,
		params:     summaryParams,
		whole:      true,
		operations: [2]string{"getSummary", "headSummary"},
		serve:      keyed((*api).parseSummary, answers((*api).serveSummary)),
	},
	{
		name:  "openapi",
		path:  pathOpenAPI,
		keyed: false, rate: rateKeyless,
		operations: [2]string{"getOpenAPI", "headOpenAPI"},
		static:     func(*api) http.Handler { return handleOpenAPI() },
	},
}

// submissionsPath is the path of formID's submissions (a valid ID needs
// no escaping).
func submissionsPath(formID string) string {
	return "/v1/forms/" + formID + "/submissions"
}

// kind returns the token kind rt takes in parameter param; 0 (which
// opens nothing) when it takes none there.
func (rt *route) kind(param string) token.Kind {
	return rt.tokens[param]
}

// handle returns the http.Handler of rt: for a keyed route,
// authentication, then the route's parameters, then its answer. A
// request that may wait (a sync request's wait=) reads and waits here,
// once serveKeyed has returned: the frames of its authentication and
// its parameters are gone from its goroutine's stack (wait.go).
func (a *api) handle(rt *route) http.Handler {
	if !rt.keyed {
		return rt.static(a)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fw := a.serveKeyed(w, r, rt); fw != nil {
			a.wait(w, r, fw)
		}
	})
}

// serveKeyed authenticates r and serves it as rt: it returns nil once
// it has answered, or the wait of a request that may wait, which takes
// the request's store context, place in flight and room with it (wait
// ends them).
func (a *api) serveKeyed(w http.ResponseWriter, r *http.Request, rt *route) (fw *feedWait) {
	req, ok := a.authenticate(w, r, rt, r.PathValue("formId"))
	if !ok {
		return nil
	}
	defer func() {
		if fw == nil {
			req.cancel()
		}
	}()
	return rt.serve(a, w, r, req)
}

// answers makes the serve of a route whose requests never wait.
func answers[R any](serve func(a *api, w http.ResponseWriter, r *http.Request, req R)) func(*api, http.ResponseWriter, *http.Request, R) *feedWait {
	return func(a *api, w http.ResponseWriter, r *http.Request, req R) *feedWait {
		serve(a, w, r, req)
		return nil
	}
}

// base returns the authenticated request a route's own request embeds.
func (req *listRequest) base() *request   { return &req.request }
func (req *exportRequest) base() *request { return &req.request }

// keyed makes a keyed route's serve from its own parse, which makes the
// route's request R from the authenticated one and the raw query string
// (or returns the message of a 400 naming the parameter), and its own
// serve, which answers it. Between them, before any store read, the
// request takes its room (room.go) as the route's room says.
func keyed[R any, P interface {
	*R
	base() *request
}](parse func(a *api, raw string, req request) (R, string), serve func(a *api, w http.ResponseWriter, r *http.Request, req R) *feedWait) func(*api, http.ResponseWriter, *http.Request, request) *feedWait {
	return func(a *api, w http.ResponseWriter, r *http.Request, base request) (fw *feedWait) {
		req, msg := parse(a, r.URL.RawQuery, base)
		if msg != "" {
			a.fail(w, r, badRequest(msg))
			return nil
		}
		if rt := base.route; rt.room == roomPage || rt.room == roomStream {
			b := P(&req).base()
			if !a.reservePage(w, r, b) {
				return nil
			}
			defer func() {
				if fw == nil { // a wait takes the room with it (feedWait)
					b.room.release()
				}
			}()
		}
		return serve(a, w, r, req)
	}
}

// noRouteMessage is the message of the 404 of a path the API does not
// serve: every route of the table, so that it stays true as routes come.
func noRouteMessage() string {
	var b strings.Builder
	b.WriteString("not found: the API serves ")
	for i, rt := range routes {
		switch {
		case i == len(routes)-1 && i > 0:
			b.WriteString(" and ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString("GET " + rt.path)
	}
	return b.String()
}
