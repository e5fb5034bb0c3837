package formsapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/internal/testenv"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/matryer/is"
)

// TestMain runs the tests, then holds every response they recorded (see
// record in handler_test.go) to openapi.json, so the document and the
// handler cannot drift apart. A filtered run (-run) checks fewer
// responses; a fuzzing run checks none.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && !fuzzing() {
		seen.Lock()
		all := slices.Clone(seen.all)
		seen.Unlock()
		if len(all) > 0 && !checkRecorded(os.Stdout, os.Stderr, all) {
			code = 1
		}
	}
	removeSQLiteTemplates()
	pgtest.DropPooled()
	testenv.Report() // the tests skipped for PostgreSQL, in one line go test shows
	os.Exit(code)
}

// fuzzing tells whether this process is a -fuzz run or one of its workers.
func fuzzing() bool {
	for _, name := range []string{"test.fuzz", "test.fuzzworker"} {
		if f := flag.Lookup(name); f != nil {
			if v := f.Value.String(); v != "" && v != "false" {
				return true
			}
		}
	}
	return false
}

// maxReported bounds the failures printed one by one.
const maxReported = 100

// checkRecorded validates every exchange, prints each failure to errs and
// a summary line to out, and reports whether all passed.
func checkRecorded(out, errs io.Writer, all []exchange) bool {
	c, err := loadContract()
	if err != nil {
		fmt.Fprintf(errs, "openapi: %v\n", err)
		return false
	}
	statuses, kinds := map[int]int{}, map[string]int{}
	failed := 0
	// The validator compiles the schema it checks against on every call
	// (kin-openapi's JSON Schema 2020 path), so the suite's exchanges,
	// a third of them repeats, are checked once per distinct exchange.
	type verdict struct {
		kind string
		err  error
	}
	// The distinct exchanges are checked on every core: checking took
	// minutes of the package's wall time after its last test ended, on
	// one core while the other waited.
	keys := make([]string, len(all))
	first := map[string]int{} // key → index of its first exchange
	for i, ex := range all {
		keys[i] = exchangeKey(ex)
		if _, ok := first[keys[i]]; !ok {
			first[keys[i]] = i
		}
	}
	distinct := slices.Collect(maps.Values(first))
	verdicts := make([]verdict, len(all)) // at each key's first index
	// One distinct exchange in quickSample that passes is checked again by
	// kin-openapi alone, so that the quick check (openapi_quick_test.go)
	// cannot pass what kin fails unnoticed.
	kin := *c
	kin.kinOnly = true
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for n := next.Add(1) - 1; n < int64(len(distinct)); n = next.Add(1) - 1 {
				i := distinct[n]
				verdicts[i].kind, verdicts[i].err = c.checkKind(all[i])
				if n%quickSample == 0 && verdicts[i].err == nil {
					if _, err := kin.checkKind(all[i]); err != nil {
						verdicts[i].err = fmt.Errorf("the quick check passed what kin-openapi fails: %w", err)
					}
				}
			}
		})
	}
	wg.Wait()
	for i, ex := range all {
		statuses[ex.res.status]++
		v := verdicts[first[keys[i]]]
		kind, err := v.kind, v.err
		kinds[kind]++
		if err == nil {
			continue
		}
		failed++
		if failed <= maxReported {
			fmt.Fprintf(errs, "openapi: %s %s -> %d: %v\n\tbody: %q\n", ex.method, ex.target, ex.res.status, err, prefix(ex.res.body, 300))
		}
	}
	if failed > maxReported {
		fmt.Fprintf(errs, "openapi: ... and %d more failures\n", failed-maxReported)
	}
	codes := make([]int, 0, len(statuses))
	for s := range statuses {
		codes = append(codes, s)
	}
	slices.Sort(codes)
	counts := make([]string, len(codes))
	for i, s := range codes {
		counts[i] = fmt.Sprintf("%d×%d", s, statuses[s])
	}
	fmt.Fprintf(out, "openapi: validated %d responses (%d distinct status codes: %s; %d GET of a documented operation, %d HEAD, %d to an unknown path, %d with another method)\n",
		len(all), len(codes), strings.Join(counts, " "), kinds["GET"], kinds["HEAD"], kinds["unknown path"], kinds["other method"])
	if failed > 0 {
		fmt.Fprintf(errs, "openapi: %d of %d responses do not match openapi.json\n", failed, len(all))
		return false
	}
	return true
}

// quickSample: one distinct exchange in quickSample is checked by
// kin-openapi alone too.
const quickSample = 50

// requestID is the documented form of X-Request-Id (openapi.json's
// components.headers).
var requestID = regexp.MustCompile(`^[A-Za-z0-9._~:-]{1,128}$`)

// exchangeKey is everything checkKind reads of an exchange, so that two
// exchanges with one key get one verdict. The one header that differs on
// every response, X-Request-Id, enters the key as its verdict alone
// (documented form or not); every other header enters with its values.
func exchangeKey(ex exchange) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %d\n", ex.method, ex.target, ex.res.status)
	names := make([]string, 0, len(ex.res.header))
	for name := range ex.res.header {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		values := ex.res.header[name]
		if name == "X-Request-Id" && len(values) == 1 && requestID.MatchString(values[0]) {
			values = []string{"(documented form)"}
		}
		fmt.Fprintf(&b, "%s: %q\n", name, values)
	}
	b.WriteString("\n")
	b.Write(ex.res.body)
	return b.String()
}

func prefix(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// contract is openapi.json, loaded for validating responses.
type contract struct {
	doc         *openapi3.T
	router      routers.Router
	errorSchema *openapi3.Schema
	schemaOpts  []openapi3.SchemaValidationOption
	kinOnly     bool // no quick check: kin-openapi decides every exchange
}

// loadContract reads, loads and validates openapi.json once.
var loadContract = sync.OnceValues(func() (*contract, error) {
	data, err := os.ReadFile("openapi.json")
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("load openapi.json: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi.json is not a valid OpenAPI document: %w", err)
	}
	// Match on the path alone: the handler may be mounted anywhere.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route openapi.json: %w", err)
	}
	errSchema := doc.Components.Schemas["Error"]
	if errSchema == nil || errSchema.Value == nil {
		return nil, errors.New("openapi.json has no #/components/schemas/Error")
	}
	// The schema options ValidateResponse uses for this document.
	opts := []openapi3.SchemaValidationOption{openapi3.MultiErrors(), openapi3.VisitAsResponse()}
	if doc.IsOpenAPI31OrLater() {
		opts = append(opts, openapi3.EnableJSONSchema2020())
	}
	return &contract{doc: doc, router: router, errorSchema: errSchema.Value, schemaOpts: opts}, nil
})

const (
	jsonContentType  = "application/json; charset=utf-8"
	jsonlContentType = "application/jsonl; charset=utf-8"
	csvContentType   = "text/csv; charset=utf-8; header=present"
)

// isExport reports whether a request target is an export, under any
// mount prefix.
func isExport(target string) bool {
	p, _, _ := strings.Cut(target, "?")
	return strings.HasSuffix(p, "/export") && strings.Contains(p, "/v1/forms/")
}

// The export's bodies are decoded for validation by what a client would
// do with them: every JSON Lines line must be a JSON object with a ref
// and a position, and a CSV must read as RFC 4180 with the same number
// of cells on every row.
func init() {
	openapi3filter.RegisterBodyDecoder("application/jsonl", func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(body)
		if err != nil {
			return nil, err
		}
		if len(b) > 0 && b[len(b)-1] != '\n' {
			return nil, errors.New("JSON Lines: the last line has no \\n")
		}
		for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
			if len(b) == 0 {
				break
			}
			var v struct{ Ref, Position string }
			if err := json.Unmarshal(line, &v); err != nil || v.Ref == "" || v.Position == "" {
				return nil, fmt.Errorf("JSON Lines: line %d is not an object with ref and position: %v", i+1, err)
			}
		}
		return string(b), nil
	})
	openapi3filter.RegisterBodyDecoder("text/csv", func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(body)
		if err != nil {
			return nil, err
		}
		r := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(b, []byte("\uFEFF"))))
		if _, err := r.ReadAll(); err != nil {
			return nil, fmt.Errorf("CSV: %w", err)
		}
		if len(b) > 0 && !bytes.HasSuffix(b, []byte("\r\n")) {
			return nil, errors.New("CSV: the last row does not end with CRLF")
		}
		return string(b), nil
	})
}

// mountPrefixes are the prefixes the suite mounts the handler under
// (TestMountedUnderStripPrefix, TestOpenAPIServersResolveUnderAPrefix and
// the tests of links_test.go).
// The document's server is relative to where the document is served, so
// a path under one that the document does not know as it is is looked up
// again without the prefix.
var mountPrefixes = []string{"/api", "/tenants/x/forms-api", "/public/forms", "/t%C3%A9"}

// check validates one exchange against the document and returns every
// way it fails, or nil.
func (c *contract) check(ex exchange) error {
	_, err := c.checkKind(ex)
	return err
}

// checkKind is check, and tells which way the exchange was checked.
func (c *contract) checkKind(ex exchange) (kind string, _ error) {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	res := ex.res
	ctx := context.Background()

	// Every response, documented or not; a 304 has no content to type,
	// and an export's 200 is its file.
	if got := res.header.Get("Content-Type"); got != jsonContentType && res.status != http.StatusNotModified &&
		!(res.status == http.StatusOK && isExport(ex.target) && (got == jsonlContentType || got == csvContentType)) {
		fail("Content-Type %q, want %q", got, jsonContentType)
	}
	if res.header.Get("X-Request-Id") == "" {
		fail("no X-Request-Id")
	}
	noStore := func() {
		if got := res.header.Get("Cache-Control"); got != "no-store" {
			fail("Cache-Control %q, want %q", got, "no-store")
		}
	}

	if res.header.Get("Content-Encoding") == "gzip" && len(res.body) > 0 {
		zr, err := gzip.NewReader(bytes.NewReader(res.body))
		var plain []byte
		if err == nil {
			plain, err = io.ReadAll(zr)
		}
		if err != nil {
			fail("body is not gzip: %v", err)
		} else {
			res.body = plain
		}
	}

	req := newRequest(ex.method, ex.target)
	sentPath, _, _ := strings.Cut(ex.target, "?")
	route, params, found := c.route(req, sentPath)
	switch {
	case !found:
		kind = "unknown path"
		if res.status != http.StatusNotFound {
			fail("path not in the document answered %d, want 404", res.status)
		}
		noStore()
		errs = append(errs, c.checkErrorBody(ex.method, res.body)...)

	case res.status == http.StatusNotModified && (ex.method == http.MethodGet || ex.method == http.MethodHead):
		// ValidateResponse skips 304s: their headers are checked here.
		kind = ex.method
		op := route.PathItem.GetOperation(ex.method)
		if op == nil {
			fail("the document has no %s %s", ex.method, route.Path)
			break
		}
		if len(res.body) != 0 {
			fail("304 with a %d-byte body", len(res.body))
		}
		r := op.Responses.Status(res.status)
		if r == nil || r.Value == nil {
			fail("%s %s does not document 304", ex.method, route.Path)
			break
		}
		errs = append(errs, c.checkHeaders(r.Value, res.header)...)
		for _, name := range []string{"Content-Type", "Content-Length", "Content-Encoding", "Link"} {
			if res.header.Get(name) != "" {
				fail("304 with %s", name)
			}
		}

	case ex.method == http.MethodGet:
		kind = "GET"
		// The quick check passes most exchanges; what it does not pass,
		// kin decides (openapi_quick_test.go).
		if c.kinOnly || c.quickResponse(route, res.status, res.header, res.body) != nil {
			err := openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
				RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
				Status:                 res.status,
				Header:                 res.header,
				Body:                   io.NopCloser(bytes.NewReader(res.body)),
				Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
			})
			if err != nil {
				errs = append(errs, err)
			}
		}
		if res.status == http.StatusOK && route.Path == submissionsPath {
			if err := checkPageKind(req, res.body); err != nil {
				errs = append(errs, err)
			}
		}

	case ex.method == http.MethodHead:
		kind = "HEAD"
		if len(res.body) != 0 {
			fail("HEAD answered with a %d-byte body", len(res.body))
		}
		head := route.PathItem.Head
		if head == nil {
			fail("the document has no HEAD %s", route.Path)
			break
		}
		if head.Responses.Status(res.status) == nil {
			fail("HEAD answered %d, which HEAD %s does not document", res.status, route.Path)
			break
		}
		// ValidateResponse skips a HEAD request, so the HEAD operation's
		// headers are checked through a GET request.
		headRoute := *route
		headRoute.Method, headRoute.Operation = http.MethodHead, head
		get := req.Clone(ctx)
		get.Method = http.MethodGet
		err := openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: get, PathParams: params, Route: &headRoute},
			Status:                 res.status,
			Header:                 res.header,
			Body:                   io.NopCloser(bytes.NewReader(nil)),
			Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, ExcludeResponseBody: true},
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("headers of HEAD: %w", err))
		}

	default: // a method the document does not have for this path
		kind = "other method"
		if res.status != http.StatusMethodNotAllowed {
			fail("%s on a documented path answered %d, want 405", ex.method, res.status)
		}
		if got := res.header.Get("Allow"); got != "GET, HEAD" {
			fail("Allow %q, want %q", got, "GET, HEAD")
		}
		noStore()
		if route.Operation.Responses.Status(http.StatusMethodNotAllowed) == nil {
			fail("GET %s does not document 405", route.Path)
		}
		errs = append(errs, c.checkErrorBody(ex.method, res.body)...)
	}
	if len(errs) == 0 {
		return kind, nil
	}
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = shortReason(err)
	}
	return kind, errors.New(strings.Join(msgs, "; "))
}

// submissionsPath is the document's path of a form's submissions.
const submissionsPath = "/v1/forms/{formId}/submissions"

// checkPageKind holds a 200 of a form's submissions to the page its
// request asked for, as the document's 200 describes it: a FeedPage (with
// syncToken) for a request with sync, a SubmissionsPage (without)
// otherwise. The schema's oneOf alone would accept either.
func checkPageKind(r *http.Request, body []byte) error {
	var page map[string]json.RawMessage
	if json.Unmarshal(body, &page) != nil {
		return nil // not an object: the schema check says so
	}
	_, feed := page["syncToken"]
	switch sync := r.URL.Query().Has("sync"); {
	case sync && !feed:
		return errors.New("a request with sync answered with a page that is not a FeedPage (no syncToken)")
	case !sync && feed:
		return errors.New("a request without sync answered with a FeedPage (syncToken)")
	}
	return nil
}

// checkHeaders holds h to the headers r declares: each required one
// present, each present one matching its schema.
func (c *contract) checkHeaders(r *openapi3.Response, h http.Header) []error {
	var errs []error
	for name, ref := range r.Headers {
		if ref == nil || ref.Value == nil {
			continue
		}
		vals := h.Values(name)
		if len(vals) == 0 {
			if ref.Value.Required {
				errs = append(errs, fmt.Errorf("response header %q missing", name))
			}
			continue
		}
		if s := ref.Value.Schema; s != nil && s.Value != nil {
			if err := c.validate(s.Value, strings.Join(vals, ", ")); err != nil {
				errs = append(errs, fmt.Errorf("response header %q doesn't match schema: %w", name, err))
			}
		}
	}
	return errs
}

// kinPathPrefix is the path kin puts before the JSON Schema validator's
// own "at '/path'", which names the path again.
var kinPathPrefix = regexp.MustCompile(`error at "[^"]*": (at ')`)

// shortReason is err's message on one line, without the schema and value
// dumps kin adds (the body is printed beside it) and without its
// "validation failed due to:" chains.
func shortReason(err error) string {
	var kept []string
	for _, line := range strings.Split(err.Error(), "\n") {
		switch t := strings.TrimSpace(line); {
		case t == "", t == "Schema:", t == "Value:", strings.HasPrefix(line, "  "):
			// part of a dump
		default:
			kept = append(kept, t)
		}
	}
	s := strings.Join(kept, " ")
	s = strings.ReplaceAll(s, "validation failed due to: ", "")
	return kinPathPrefix.ReplaceAllString(s, "$1")
}

// checkErrorBody holds the body of an answer the document has no operation
// for to #/components/schemas/Error; a HEAD answer has no body.
func (c *contract) checkErrorBody(method string, body []byte) []error {
	if method == http.MethodHead {
		if len(body) != 0 {
			return []error{fmt.Errorf("HEAD answered with a %d-byte body", len(body))}
		}
		return nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return []error{fmt.Errorf("body is not JSON: %w", err)}
	}
	if err := c.validate(c.errorSchema, v); err != nil {
		return []error{fmt.Errorf("body doesn't match #/components/schemas/Error: %w", err)}
	}
	return nil
}

// newRequest builds a request for a recorded method and target, which may
// be deliberately odd (lower-case method, %00, %FF, "..", "//"); it never
// panics.
func newRequest(method, target string) *http.Request {
	r, err := http.NewRequest(method, "http://example.test"+target, nil)
	if err != nil {
		r, err = http.NewRequest(http.MethodGet, "http://example.test/", nil)
		if err != nil {
			panic(err) // a constant URL
		}
		r.Method = method
		p, q, _ := strings.Cut(target, "?")
		r.URL.Path, r.URL.RawPath, r.URL.RawQuery = p, "", q
	}
	return r
}

// route finds the operation for a path as sent (the recorded target is
// r.URL.RequestURI(), so still escaped) the way the handler's ServeMux
// does: an escaped slash stays in its segment, and only an exact match
// counts (the legacy router would forgive a trailing slash, which the
// handler answers with 404). The method does not take part: the caller
// decides what a method the document lacks must get.
func (c *contract) route(r *http.Request, escaped string) (*routers.Route, map[string]string, bool) {
	candidates := []string{escaped}
	for _, p := range mountPrefixes {
		if rest, ok := strings.CutPrefix(escaped, p); ok && strings.HasPrefix(rest, "/") {
			candidates = append(candidates, rest)
		}
	}
	for _, path := range candidates {
		rr := r.Clone(context.Background())
		rr.Method = http.MethodGet
		rr.URL.Path, rr.URL.RawPath = path, ""
		route, params, err := c.router.FindRoute(rr)
		if err != nil {
			continue
		}
		if expanded, ok := expandPath(route.Path, params); ok && expanded == path {
			return route, params, true
		}
	}
	return nil, nil, false
}

// expandPath fills a path template's {name} parts from params; every part
// must be non-empty.
func expandPath(template string, params map[string]string) (string, bool) {
	var b strings.Builder
	for {
		i := strings.IndexByte(template, '{')
		if i < 0 {
			b.WriteString(template)
			return b.String(), true
		}
		j := strings.IndexByte(template[i:], '}')
		if j < 0 {
			return "", false
		}
		v := params[template[i+1:i+j]]
		if v == "" {
			return "", false
		}
		b.WriteString(template[:i])
		b.WriteString(v)
		template = template[i+j+1:]
	}
}

// TestOpenAPIValidatorCatchesDrift makes sure the check TestMain runs is
// real: responses that stray from the document in a few typical ways fail
// it, and correct ones pass.
func TestOpenAPIValidatorCatchesDrift(t *testing.T) {
	is := is.New(t)
	c, err := loadContract()
	is.NoErr(err) // openapi.json loads and is valid

	headers := func(kv ...string) http.Header {
		h := http.Header{}
		h.Set("Content-Type", jsonContentType)
		h.Set("Cache-Control", "no-store")
		h.Set("X-Request-Id", "test-1")
		h.Set("X-Content-Type-Options", "nosniff")
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				h.Del(kv[i])
			} else {
				h.Set(kv[i], kv[i+1])
			}
		}
		return h
	}
	// page and doc are the headers of a page and of the document.
	page := func(kv ...string) http.Header {
		return headers(append([]string{"Cache-Control", "private, no-cache", "ETag", `W/"abc"`, "Vary", "Authorization, Accept-Encoding"}, kv...)...)
	}
	doc := func(kv ...string) http.Header {
		return headers(append([]string{"Cache-Control", "no-cache", "ETag", `W/"abc"`, "Vary", "Accept-Encoding"}, kv...)...)
	}
	ex := func(method, target string, status int, h http.Header, body string) exchange {
		return exchange{method, target, response{status, h, []byte(body)}}
	}
	const (
		form       = `{"formId":"f","title":"T","icon":"","notificationEmail":"","createdAt":"2024-03-01T10:00:00Z"}`
		submission = `{"formId":"f","data":{"ip":"x"},"attachments":[{"fieldName":"cv","fileUrl":"u","fileSize":1,"mimeType":"application/pdf"}],"createdAt":"2024-03-01T10:00:00.5Z"}`
		formsPage  = `{"success":true,"message":"forms retrieved","forms":[` + form + `],"nextCursor":"abc"}`
		subsPage   = `{"success":true,"message":"submissions retrieved","submissions":[` + submission + `]}`
		feedPage   = `{"success":true,"message":"submissions retrieved","submissions":[` + submission + `],"refs":["AAAAAAAAAAAAAAAAAAAAAA"],"deleted":["BBBBBBBBBBBBBBBBBBBBBB"],"syncToken":"tok","hasMore":false}`
		noRoute    = `{"success":false,"message":"not found"}`
		notAllowed = `{"success":false,"message":"method not allowed"}`
	)
	challenge := []string{"WWW-Authenticate", `Bearer realm="formsapi"`}

	for _, good := range []struct {
		name string
		ex   exchange
	}{
		{"forms page", ex("GET", "/v1/forms?limit=1", 200, page("Link", `<http://example.com/v1/forms?cursor=abc&limit=1>; rel="next"`), formsPage)},
		{"submissions page", ex("GET", "/v1/forms/f/submissions", 200, page(), subsPage)},
		{"feed page", ex("GET", "/v1/forms/f/submissions?sync=start&limit=5", 200, page(), feedPage)},
		{"401", ex("GET", "/v1/forms", 401, headers(challenge...), `{"success":false,"message":"invalid API key"}`)},
		{"HEAD", ex("HEAD", "/v1/forms", 401, headers(challenge...), "")},
		{"unknown path", ex("GET", "/v1/nope", 404, headers(), noRoute)},
		{"trailing slash", ex("GET", "/v1/forms/", 404, headers(), noRoute)},
		{"mounted", ex("GET", "/api/v1/forms", 200, page(), formsPage)},
		{"POST", ex("POST", "/v1/forms", 405, headers("Allow", "GET, HEAD"), notAllowed)},
		{"lower-case get", ex("get", "/v1/openapi.json", 405, headers("Allow", "GET, HEAD"), notAllowed)},
		{"escaped slash in a form ID", ex("GET", "/v1/forms/a%2Fb/submissions", 404, headers(), `{"success":false,"message":"form not found"}`)},
		{"absolute Link", ex("GET", "/v1/forms?limit=1", 200, page("Link", `<https://h.example:8443/api/v1/forms?cursor=abc&limit=1>; rel="next"`), formsPage)},
		{"IPv6 Link", ex("GET", "/v1/forms?limit=1", 200, page("Link", `<http://[::1]:8080/v1/forms?cursor=abc&limit=1>; rel="next"`), formsPage)},
		{"304", ex("GET", "/v1/forms", 304, page("Content-Type", ""), "")},
		{"HEAD 304", ex("HEAD", "/v1/forms/f/submissions", 304, page("Content-Type", ""), "")},
		{"document 304", ex("GET", "/v1/openapi.json", 304, doc("Content-Type", ""), "")},
		{"document", ex("GET", "/v1/openapi.json", 200, doc(), `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{}}`)},
		{"gzip page", ex("GET", "/v1/forms", 200, page("Content-Encoding", "gzip"), gzipped(formsPage))},
	} {
		t.Run("passes/"+good.name, func(t *testing.T) {
			is := is.New(t)
			is.NoErr(c.check(good.ex)) // a correct response passes
			if good.ex.method == "GET" && good.ex.res.status != 304 && !strings.HasPrefix(good.ex.target, "/v1/nope") && !strings.HasSuffix(good.ex.target, "/") {
				is.True(c.quickPasses(good.ex)) // and passes the quick check, not only kin's
			}
		})
	}

	// Each drifted response must fail, and for the reason named: a check
	// that failed for an unrelated reason would prove nothing.
	for _, bad := range []struct {
		name, why string
		ex        exchange
	}{
		{"extra property in a form", "additional properties 'accountId' not allowed",
			ex("GET", "/v1/forms", 200, page(), strings.Replace(formsPage, `"formId":"f"`, `"formId":"f","accountId":"acct-a"`, 1))},
		{"missing success", "missing property 'success'",
			ex("GET", "/v1/forms", 200, page(), strings.Replace(formsPage, `"success":true,`, "", 1))},
		{"text/plain 200", `response header Content-Type has unexpected value: "text/plain`,
			ex("GET", "/v1/forms", 200, page("Content-Type", "text/plain; charset=utf-8"), formsPage)},
		{"undocumented status 418", "status is not supported",
			ex("GET", "/v1/forms", 418, headers(), `{"success":false,"message":"I'm a teapot"}`)},
		{"a list page answering sync", "a request with sync answered with a page that is not a FeedPage",
			ex("GET", "/v1/forms/f/submissions?sync=start", 200, page(), strings.Replace(subsPage, `]}`, `],"nextCursor":"abc"}`, 1))},
		{"a feed page answering a list request", "a request without sync answered with a FeedPage",
			ex("GET", "/v1/forms/f/submissions?limit=5", 200, page(), feedPage)},
		{"a feed page with a nextCursor", "additional properties 'nextCursor' not allowed",
			ex("GET", "/v1/forms/f/submissions?sync=start", 200, page(), strings.Replace(feedPage, `"hasMore":false`, `"hasMore":false,"nextCursor":"abc"`, 1))},
		{"a feed page without refs", "missing property 'refs'",
			ex("GET", "/v1/forms/f/submissions?sync=start", 200, page(), strings.Replace(feedPage, `"refs":["AAAAAAAAAAAAAAAAAAAAAA"],`, ``, 1))},
		{"a feed page with a malformed ref", "does not match pattern",
			ex("GET", "/v1/forms/f/submissions?sync=start", 200, page(), strings.Replace(feedPage, `"BBBBBBBBBBBBBBBBBBBBBB"`, `"42"`, 1))},
		{"a feed page without hasMore", "missing property 'hasMore'",
			ex("GET", "/v1/forms/f/submissions?sync=start", 200, page(), strings.Replace(feedPage, `,"hasMore":false`, ``, 1))},
		{"extra field in a submission", "additional properties 'clientIp' not allowed",
			ex("GET", "/v1/forms/f/submissions", 200, page(), strings.Replace(subsPage, `"formId":"f"`, `"formId":"f","clientIp":"203.0.113.9"`, 1))},
		{"extra field in an attachment", "additional properties 'path' not allowed",
			ex("GET", "/v1/forms/f/submissions", 200, page(), strings.Replace(subsPage, `"fileSize":1`, `"fileSize":1,"path":"/srv/x"`, 1))},
		{"createdAt not a date-time", "'yesterday' is not valid date-time",
			ex("GET", "/v1/forms", 200, page(), strings.Replace(formsPage, "2024-03-01T10:00:00Z", "yesterday", 1))},
		{"success true on an error", "at '/success': value must be false",
			ex("GET", "/v1/forms", 400, headers(), `{"success":true,"message":"invalid limit"}`)},
		{"extra key in an error body", "additional properties 'formId' not allowed",
			ex("GET", "/v1/forms/f/submissions", 404, headers(), `{"success":false,"message":"form not found","formId":"f"}`)},
		{"extra key in a no-route body", "additional properties 'path' not allowed",
			ex("GET", "/v1/nope", 404, headers(), `{"success":false,"message":"not found","path":"/v1/nope"}`)},
		{"Cache-Control against its const", `response header "Cache-Control" doesn't match schema`,
			ex("GET", "/v1/forms", 200, page("Cache-Control", "private"), formsPage)},
		{"a page that may not be kept", `response header "Cache-Control" doesn't match schema`,
			ex("GET", "/v1/forms", 200, page("Cache-Control", "no-store"), formsPage)},
		{"a page shared caches may keep", `response header "Cache-Control" doesn't match schema`,
			ex("GET", "/v1/forms", 200, page("Cache-Control", "no-cache"), formsPage)},
		{"page without ETag", `response header "ETag" missing`,
			ex("GET", "/v1/forms", 200, page("ETag", ""), formsPage)},
		{"strong ETag", `response header "ETag" doesn't match schema`,
			ex("GET", "/v1/forms", 200, page("ETag", `"abc"`), formsPage)},
		{"Vary without Authorization", `response header "Vary" doesn't match schema`,
			ex("GET", "/v1/forms", 200, page("Vary", "Accept-Encoding"), formsPage)},
		{"relative Link", `response header "Link" doesn't match schema`,
			ex("GET", "/v1/forms", 200, page("Link", `<forms?cursor=abc>; rel="next"`), formsPage)},
		{"Link breaking out of <>", `response header "Link" doesn't match schema`,
			ex("GET", "/v1/forms", 200, page("Link", `<http://a>b/v1/forms?cursor=abc>; rel="next"`), formsPage)},
		{"brotli", `response header "Content-Encoding" doesn't match schema`,
			ex("GET", "/v1/forms", 200, page("Content-Encoding", "br"), formsPage)},
		{"gzip header on a plain body", "body is not gzip",
			ex("GET", "/v1/forms", 200, page("Content-Encoding", "gzip"), formsPage)},
		{"304 with a body", "304 with a 2-byte body",
			ex("GET", "/v1/forms", 304, page("Content-Type", ""), "{}")},
		{"304 without ETag", `response header "ETag" missing`,
			ex("GET", "/v1/forms", 304, page("Content-Type", "", "ETag", ""), "")},
		{"304 without Vary", `response header "Vary" missing`,
			ex("HEAD", "/v1/forms", 304, page("Content-Type", "", "Vary", ""), "")},
		{"304 with Content-Type", "304 with Content-Type",
			ex("GET", "/v1/forms", 304, page(), "")},
		{"304 with a Link", "304 with Link",
			ex("GET", "/v1/forms", 304, page("Content-Type", "", "Link", `<http://h/v1/forms?cursor=a>; rel="next"`), "")},
		{"document 304 with a page's caching", `response header "Cache-Control" doesn't match schema`,
			ex("GET", "/v1/openapi.json", 304, page("Content-Type", ""), "")},
		{"304 to another method", "answered 304, want 405",
			ex("POST", "/v1/forms", 304, headers("Content-Type", ""), "")},
		{"404 on the forms list", "status is not supported",
			ex("GET", "/v1/forms", 404, headers(), noRoute)},
		{"unknown path answered 200", "path not in the document answered 200, want 404",
			ex("GET", "/v1/nope", 200, headers(), formsPage)},
		{"405 without Allow", `Allow "", want "GET, HEAD"`,
			ex("DELETE", "/v1/forms", 405, headers(), notAllowed)},
		{"POST answered 404", "POST on a documented path answered 404, want 405",
			ex("POST", "/v1/forms", 404, headers("Allow", "GET, HEAD"), noRoute)},
		{"HEAD with a body", "HEAD answered with a",
			ex("HEAD", "/v1/forms", 200, page(), formsPage)},
		{"HEAD with an undocumented status", "HEAD answered 404, which HEAD /v1/forms does not document",
			ex("HEAD", "/v1/forms", 404, headers(), "")},
		{"HEAD without nosniff", `headers of HEAD: response header "X-Content-Type-Options" missing`,
			ex("HEAD", "/v1/forms", 200, page("X-Content-Type-Options", ""), "")},
		{"no nosniff", `response header "X-Content-Type-Options" missing`,
			ex("GET", "/v1/forms", 200, page("X-Content-Type-Options", ""), formsPage)},
		{"X-Request-Id out of shape", `response header "X-Request-Id" doesn't match schema`,
			ex("GET", "/v1/forms", 200, page("X-Request-Id", "a b"), formsPage)},
		{"form ID . in a form", "at '/forms/0/formId': '.' does not match pattern",
			ex("GET", "/v1/forms", 200, page(), strings.Replace(formsPage, `"formId":"f"`, `"formId":"."`, 1))},
		{"form ID with a slash in a submission", "at '/submissions/0/formId': 'a/b' does not match pattern",
			ex("GET", "/v1/forms/f/submissions", 200, page(), strings.Replace(subsPage, `"formId":"f"`, `"formId":"a/b"`, 1))},
		{"Link not a next link", `response header "Link" doesn't match schema`,
			ex("GET", "/v1/forms", 200, page("Link", `<forms?cursor=abc>; rel="prev"`), formsPage)},
		{"document without openapi", "missing property 'openapi'",
			ex("GET", "/v1/openapi.json", 200, doc(), `{"info":{"title":"t","version":"1"},"paths":{}}`)},
		{"document with an unknown field", "additional properties 'secret' not allowed",
			ex("GET", "/v1/openapi.json", 200, doc(), `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{},"secret":1}`)},
		{"no X-Request-Id", "no X-Request-Id",
			ex("GET", "/v1/nope", 404, headers("X-Request-Id", ""), noRoute)},
		{"cacheable", `Cache-Control "max-age=60", want "no-store"`,
			ex("GET", "/v1/nope", 404, headers("Cache-Control", "max-age=60"), noRoute)},
		{"not JSON", "body is not JSON",
			ex("GET", "/v1/nope", 404, headers(), "404 page not found\n")},
	} {
		t.Run("fails/"+bad.name, func(t *testing.T) {
			is := is.New(t)
			err := c.check(bad.ex)
			is.True(err != nil)                             // the drifted response fails validation
			is.True(strings.Contains(err.Error(), bad.why)) // for the reason named
			kin := *c
			kin.kinOnly = true
			err = kin.check(bad.ex)
			is.True(err != nil && strings.Contains(err.Error(), bad.why)) // kin-openapi alone fails it for the same reason
		})
	}

	// A 401 without its challenge header drifts too.
	err = c.check(ex("GET", "/v1/forms", 401, headers(), `{"success":false,"message":"invalid API key"}`))
	is.True(err != nil) // a 401 without WWW-Authenticate fails

	// checkRecorded gives repeats of one exchange one verdict, and no
	// other: a response that differs from a passing one in anything the
	// check reads is checked on its own, and one that differs only in a
	// documented request ID shares the verdict.
	good := ex("GET", "/v1/forms", 200, page(), formsPage)
	for _, c := range []struct {
		name string
		twin exchange
		pass bool
	}{
		{"another documented request ID", ex("GET", "/v1/forms", 200, page("X-Request-Id", "other-id"), formsPage), true},
		{"a request ID out of shape", ex("GET", "/v1/forms", 200, page("X-Request-Id", "a b"), formsPage), false},
		{"another header value", ex("GET", "/v1/forms", 200, page("Cache-Control", "public"), formsPage), false},
		{"another body", ex("GET", "/v1/forms", 200, page(), formsPage[1:]), false},
		{"another status", ex("GET", "/v1/forms", 201, page(), formsPage), false},
		{"another target", ex("GET", "/v1/nope", 200, page(), formsPage), false},
	} {
		var out, errs strings.Builder
		got := checkRecorded(&out, &errs, []exchange{good, c.twin})
		if got != c.pass {
			t.Errorf("repeat with %s: checkRecorded = %v, want %v (%s)", c.name, got, c.pass, errs.String())
		}
	}
}

// gzipped is s gzip-coded.
func gzipped(s string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.String()
}

// TestOpenAPIDocumentIsServed checks the handler serves openapi.json as it
// is in the repository, byte for byte.
func TestOpenAPIDocumentIsServed(t *testing.T) {
	is := is.New(t)
	want, err := os.ReadFile("openapi.json")
	is.NoErr(err) // read openapi.json
	s := seeded(t)
	res := do(t, formsapi.NewHandler(s, s), "GET", "/v1/openapi.json")
	is.Equal(res.status, 200)            // the document is served
	is.True(bytes.Equal(res.body, want)) // byte for byte openapi.json
}

// newRequest must cope with every target the suite records.
func TestOpenAPINewRequestNeverPanics(t *testing.T) {
	is := is.New(t)
	for _, c := range []struct{ method, target string }{
		{"get", "/v1/forms"}, {"GET", "/v1/forms/contact-a%00/submissions"}, {"GET", "/v1/forms/%FF/submissions"},
		{"GET", "/v1/forms/x/../contact-a/submissions"}, {"GET", "/v1//forms"}, {"GET", "/v1/forms?limit=%zz"},
		{"GET", "/v1/forms/%zz/submissions"}, {"BAD METHOD", "/v1/forms"}, {"OPTIONS", "*"}, {"GET", ""},
	} {
		r := newRequest(c.method, c.target)
		is.Equal(r.Method, c.method) // the method is kept as recorded
	}
}

// TestOpenAPIFormIDPattern holds the document's FormId schema to
// formsapi.ValidFormID: the same strings pass, over every string of up to
// three characters from an alphabet of allowed and refused ones, and at
// the length limit.
func TestOpenAPIFormIDPattern(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c, err := loadContract()
	is.NoErr(err) // openapi.json loads
	ref := c.doc.Components.Schemas["FormId"]
	is.True(ref != nil && ref.Value != nil) // #/components/schemas/FormId exists
	s := ref.Value
	is.Equal(s.MinLength, uint64(1))                            // minLength 1
	is.True(s.MaxLength != nil && *s.MaxLength == maxFormIDLen) // maxLength is the longest form ID
	re, err := regexp.Compile(s.Pattern)
	is.NoErr(err) // the pattern is valid in Go's syntax too (no lookaround)

	matches := func(id string) bool {
		return re.MatchString(id) && len(id) >= 1 && len(id) <= maxFormIDLen
	}
	alphabet := []string{"a", "Z", "0", "-", "_", ".", "~", "/", "%", " ", "é", "+"}
	var ids []string
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		ids = append(ids, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			gen(prefix+c, n-1)
		}
	}
	gen("", 3)
	for _, n := range []int{maxFormIDLen - 1, maxFormIDLen, maxFormIDLen + 1} {
		ids = append(ids, strings.Repeat("x", n), ".."+strings.Repeat(".", n-2), "."+strings.Repeat("x", n-1))
	}
	agree := 0
	for _, id := range ids {
		if matches(id) != formsapi.ValidFormID(id) {
			t.Errorf("form ID %q: schema says %v, ValidFormID says %v", id, matches(id), formsapi.ValidFormID(id))
			continue
		}
		agree++
	}
	is.Equal(agree, len(ids)) // the schema and ValidFormID agree on every ID

	// The example sent by generated clients must be a valid ID.
	p := c.doc.Components.Parameters["formId"]
	is.True(p != nil && p.Value != nil) // #/components/parameters/formId exists
	example, _ := p.Value.Example.(string)
	is.True(formsapi.ValidFormID(example)) // the parameter's example is a valid form ID
	for _, e := range s.Examples {
		id, _ := e.(string)
		is.True(formsapi.ValidFormID(id)) // every schema example is a valid form ID
	}
}

// TestOpenAPILimitBounds: the document's limit says what a handler with
// the default WithPageSize accepts.
func TestOpenAPILimitBounds(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c, err := loadContract()
	is.NoErr(err)
	p := c.doc.Components.Parameters["limit"]
	is.True(p != nil && p.Value != nil) // #/components/parameters/limit exists
	s := p.Value.Schema.Value
	is.True(s.Min != nil && *s.Min == 1)                           // minimum 1
	is.True(s.Max != nil && *s.Max == float64(storetest.MaxLimit)) // maximum is MaxPageSize
	is.Equal(s.Default, float64(100))                              // default is DefaultPageSize
	h := seededHandler(t)
	for limit, want := range map[string]int{"1": 200, fmt.Sprint(storetest.MaxLimit): 200, "0": 400, fmt.Sprint(storetest.MaxLimit + 1): 400} {
		res := do(t, h, "GET", "/v1/forms?limit="+limit, bearer(storetest.KeyA)...)
		is.Equal(res.status, want) // the handler honours the documented bounds
	}
}

// TestOpenAPISubmissionsAnswerIsOneOfTwoPages: the 200 of a form's
// submissions is a oneOf of SubmissionsPage and FeedPage, which no body
// can match both of (FeedPage requires syncToken and hasMore, which
// SubmissionsPage does not allow), so that a generated client gets a
// union whose variant the body decides; and a real list page and a real
// feed page each match their own schema only.
func TestOpenAPISubmissionsAnswerIsOneOfTwoPages(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c, err := loadContract()
	is.NoErr(err)
	op := c.doc.Paths.Find(submissionsPath).Get
	is.True(op != nil) // GET /v1/forms/{formId}/submissions exists
	r := op.Responses.Status(http.StatusOK)
	is.True(r != nil && r.Value != nil && r.Value.Content["application/json"] != nil) // a JSON 200
	answer := r.Value.Content["application/json"].Schema.Value
	is.Equal(len(answer.AnyOf), 0) // not anyOf: a body would be free to match both
	var refs []string
	for _, v := range answer.OneOf {
		refs = append(refs, v.Ref)
	}
	is.Equal(refs, []string{"#/components/schemas/SubmissionsPage", "#/components/schemas/FeedPage"}) // oneOf the two pages

	list, feed := c.doc.Components.Schemas["SubmissionsPage"].Value, c.doc.Components.Schemas["FeedPage"].Value
	for _, name := range []string{"syncToken", "hasMore"} {
		is.True(slices.Contains(feed.Required, name)) // FeedPage requires it
		is.True(list.Properties[name] == nil)         // SubmissionsPage does not have it
	}
	is.True(feed.Properties["nextCursor"] == nil) // FeedPage has no nextCursor
	for _, s := range []*openapi3.Schema{list, feed} {
		is.True(s.AdditionalProperties.Has != nil && !*s.AdditionalProperties.Has) // and allows nothing else
		is.True(s.Description != "")                                               // says when it is the answer
	}

	h := seededHandler(t)
	for _, tc := range []struct {
		target string
		want   *openapi3.Schema
		other  *openapi3.Schema
	}{
		{"/v1/forms/" + storetest.FormBusy + "/submissions?limit=2", list, feed},
		{"/v1/forms/" + storetest.FormBusy + "/submissions?sync=start&limit=2", feed, list},
	} {
		res := do(t, h, "GET", tc.target, bearer(storetest.KeyA)...)
		is.Equal(res.status, 200) // the page is served
		var body any
		is.NoErr(json.Unmarshal(res.body, &body))                 // in JSON
		is.NoErr(tc.want.VisitJSON(body, c.schemaOpts...))        // its own schema matches
		is.True(tc.other.VisitJSON(body, c.schemaOpts...) != nil) // the other does not
	}
}

// TestOpenAPIHeadTwinsGet: every GET operation has a HEAD operation with
// the same parameters, documenting the same statuses (but 405, which
// answers other methods) with the same headers and no content.
func TestOpenAPIHeadTwinsGet(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c, err := loadContract()
	is.NoErr(err)
	for path, item := range c.doc.Paths.Map() {
		get, head := item.Get, item.Head
		is.True(get != nil)  // every path has GET
		is.True(head != nil) // and HEAD
		if get == nil || head == nil {
			continue
		}
		is.Equal(len(head.Parameters), len(get.Parameters)) // same number of parameters
		for i := range get.Parameters {
			is.Equal(head.Parameters[i].Value.Name, get.Parameters[i].Value.Name) // same parameters
		}
		is.Equal(head.Security == nil, get.Security == nil) // same security
		for code, g := range get.Responses.Map() {
			if code == "405" {
				is.True(head.Responses.Value(code) == nil) // HEAD is allowed: no 405
				continue
			}
			hr := head.Responses.Value(code)
			if hr == nil || hr.Value == nil {
				t.Errorf("%s: HEAD does not document %s", path, code)
				continue
			}
			is.Equal(len(hr.Value.Content), 0) // a HEAD response has no content
			var gh, hh []string
			for name := range g.Value.Headers {
				gh = append(gh, name)
			}
			for name := range hr.Value.Headers {
				hh = append(hh, name)
			}
			slices.Sort(gh)
			slices.Sort(hh)
			is.Equal(hh, gh) // HEAD declares the headers GET declares
		}
		for code := range head.Responses.Map() {
			is.True(get.Responses.Value(code) != nil) // HEAD documents nothing GET does not
		}
	}
}

// TestOpenAPIEveryResponseDeclaresStandardHeaders: the headers every
// answer carries are declared, required, on every documented response.
func TestOpenAPIEveryResponseDeclaresStandardHeaders(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c, err := loadContract()
	is.NoErr(err)
	n := 0
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code, r := range op.Responses.Map() {
				n++
				for _, name := range []string{"X-Request-Id", "X-Content-Type-Options", "Cache-Control"} {
					h := r.Value.Headers[name]
					if h == nil || h.Value == nil || !h.Value.Required {
						t.Errorf("%s %s %s: %s not declared as required", method, path, code, name)
					}
				}
				if code == "401" && r.Value.Headers["WWW-Authenticate"] == nil {
					t.Errorf("%s %s 401: no WWW-Authenticate", method, path)
				}
			}
		}
	}
	is.True(n > 20) // the walk saw the responses
}

// TestOpenAPIServersResolveUnderAPrefix does what a tool does with the
// served document: resolves its server URL against the URL it fetched the
// document from, drops a trailing slash, appends each path, and calls it.
// At the root and under a prefix, every operation must answer 200.
func TestOpenAPIServersResolveUnderAPrefix(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	ctx := context.Background()
	if err := s.AddForm(ctx, "acct", formsapi.Form{ID: "contact", Title: "Contact"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddKey(ctx, "test-key", "acct"); err != nil {
		t.Fatal(err)
	}
	api := formsapi.NewHandler(s, s)
	for _, prefix := range []string{"", "/api", "/tenants/x/forms-api"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			is := is.New(t)
			mux := http.NewServeMux()
			if prefix == "" {
				mux.Handle("/", api)
			} else {
				mux.Handle(prefix+"/", http.StripPrefix(prefix, api))
			}
			srv := httptest.NewServer(mux)
			defer srv.Close()

			docURL := srv.URL + prefix + "/v1/openapi.json"
			res := doHTTP(t, "GET", docURL, "")
			is.Equal(res.status, 200) // the document is served under the prefix
			doc, err := openapi3.NewLoader().LoadFromData(res.body)
			is.NoErr(err)
			is.True(len(doc.Servers) > 0) // the document names a server
			base, err := url.Parse(docURL)
			is.NoErr(err)
			ref, err := url.Parse(doc.Servers[0].URL)
			is.NoErr(err)
			server := strings.TrimSuffix(base.ResolveReference(ref).String(), "/")
			is.Equal(server, srv.URL+prefix) // the server resolves to where the API is mounted

			for path, item := range doc.Paths.Map() {
				is.True(item.Get != nil)
				target := server + strings.ReplaceAll(path, "{formId}", "contact")
				res := doHTTP(t, "GET", target, "test-key")
				is.Equal(res.status, 200) // every documented path answers at the resolved server
			}
		})
	}
}
