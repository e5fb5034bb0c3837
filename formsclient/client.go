// Package formsclient reads the forms and submissions of an account from a
// formsapi server, without the caller knowing about cursors:
//
//	c, err := formsclient.New("https://forms.example.com/api", key)
//	if err != nil {
//		return err // a malformed base URL, key or option
//	}
//	for s, err := range c.Submissions(ctx, "contact", formsclient.Oldest()) {
//		if err != nil {
//			return err
//		}
//		// use s
//	}
//
// # Where mistakes are reported
//
// Everything a [Client] is made with is checked once, by [New], which
// returns an error and no client for a base URL that is not an absolute
// http or https URL without query or fragment, a key that could never be
// an API key (not an RFC 6750 token, or a "fapi_" key whose checksum is
// wrong; the error wraps [formsapi.ErrInvalidKey] and never quotes the
// key), or a nil [Option] or one given a value it cannot use; the error
// names every problem found. A *Client therefore always works: a program
// with a wrong URL or key fails where it makes its client, at start-up,
// and not on its first poll hours later (New used to return a client that
// carried the error to each call, and a call that forgot to check it
// panicked). What a
// call is given (a form ID, [ListOption] values such as PageSize(0), a
// ListOption that [Client.Sync] cannot honour) is checked by that call,
// which reports it, before any request, as its first and only error. No
// option is ever ignored.
//
// # Lists
//
// The lists are iterators ([iter.Seq2]) that fetch one page at a time as
// the loop asks for more items: leaving the loop early stops fetching, and
// the response of a page is read and closed before its first item is
// yielded, so a slow loop body holds no connection. Every call of the
// iterator starts again from the first page.
//
// An error ends the iteration: it is yielded once, with a zero item, and
// the iterator returns. Answers 429 and 503 are retried (see
// [WithRetries]); other HTTP errors are an [*Error], which
// errors.Is matches with [formsapi.ErrInvalidKey] for 401 and
// [formsapi.ErrFormNotFound] for the 404 of a form's submissions. An
// answer that breaks the paging rules (a cursor returned twice, items out
// of order or outside the requested range, the same page over and over)
// ends the iteration with an error wrapping [ErrPaging] rather than loop.
//
// # Pages
//
// Each list also has a page call, on which its iterator is built:
// [Client.FormsPage], [Client.SubmissionsPage] and [Client.SyncPage]
// return one page's items and a [*Response] with what the server said
// about it: the cursor of the next page (or the sync token), the ETag,
// whether the answer was a 304 for [IfNoneMatch], the RateLimit fields,
// Retry-After, the request ID and the total asked for with [ExactTotal].
// A caller keeps a cursor to resume from later ([Cursor]), polls with
// one 304 per unchanged page, or paces itself by the rate limit. A page
// may be short or empty and still lead on (filtered and searched pages
// do bounded work): it is a page like any other, for the page calls and
// the iterators alike.
//
// The predicates [IsRetryable], [RateLimited], [IsNotModified],
// [NeedsResync], [IsUnauthorized] and [IsNotFound] say what an error
// means, and [RequestID] which answer it came from.
//
// Responses are read within [WithMaxResponseSize], counted both as sent
// (gzip-coded, which the client asks for and decodes itself) and as
// decoded, so that a hostile or broken server cannot make the client
// allocate much more than that bound, whatever it sends.
//
// The package imports only the standard library and formsapi's types.
package formsclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyformat"
)

// Client reads one account's forms and submissions through the API key it
// was made with. Make one with [New]; a Client that New did not make (a
// zero Client, a nil *Client) reports so from every call instead of
// sending anything. It is safe for concurrent use; its methods do not
// change it.
type Client struct {
	base      *url.URL // scheme, host and path prefix; nil unless made by New
	key       string
	hc        *http.Client
	userAgent string
	maxTries  int
	backoff   time.Duration
	maxWait   time.Duration
	maxBody   int64

	// sleep waits d or until ctx ends; tests replace it to record waits.
	sleep func(ctx context.Context, d time.Duration) error
}

// errNotMade is what the calls of a Client that New did not make report.
var errNotMade = errors.New("formsclient: the Client was not made by formsclient.New")

// ready reports errNotMade for a Client that New did not make.
func (c *Client) ready() error {
	if c == nil || c.base == nil {
		return errNotMade
	}
	return nil
}

// Defaults of the options.
const (
	DefaultMaxTries  = 4                      // requests per page, the first included
	DefaultBackoff   = 500 * time.Millisecond // wait before the first retry
	DefaultMaxWait   = 30 * time.Second       // longest single wait before a retry
	DefaultMaxBody   = 64 << 20               // bytes of one page's response
	DefaultUserAgent = "formsapi-formsclient/1 (+https://github.com/formsapi/formsapi)"
)

// maxErrorBody bounds what is read of an error response: the API's error
// bodies are a few hundred bytes, a proxy's error page may be anything.
const maxErrorBody = 64 << 10

// Option configures a Client made by [New]. An option given a value it
// cannot use makes New return an error naming it; none is ignored.
type Option func(*Client) error

// WithHTTPClient makes the client send its requests through hc (for its
// Transport, proxy settings, TLS configuration or Timeout) instead of
// [http.DefaultClient], which has no timeout: without a Timeout here or a
// deadline on the context, a server that never answers is waited for. A
// nil hc is an error; leave the option out for http.DefaultClient.
//
// The client follows redirects within the base URL's origin (its scheme,
// host and port) and from http to https of its host, then as hc's
// CheckRedirect says; a redirect elsewhere is an error, so that the API
// key goes nowhere else (http.Client alone would send it to another port
// or scheme of the host, or to a subdomain). hc itself is not changed.
//
// The client asks for gzip-coded answers and decodes them itself, so hc's
// transport passes them through as sent and [WithMaxResponseSize] bounds
// both their size on the wire and their decoded size. A transport that
// decodes answers itself is bounded on the decoded size.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("formsclient: WithHTTPClient(nil): pass an *http.Client, or leave the option out for http.DefaultClient")
		}
		c.hc = hc
		return nil
	}
}

// WithUserAgent sets the User-Agent header of every request, so that the
// server's operators can tell your program apart; [DefaultUserAgent]
// otherwise. ua must be a non-empty header value: no control characters
// other than tab, no leading or trailing space.
func WithUserAgent(ua string) Option {
	return func(c *Client) error {
		if ua == "" || strings.TrimSpace(ua) != ua || strings.IndexFunc(ua, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }) >= 0 {
			return fmt.Errorf("formsclient: WithUserAgent(%q): must be a non-empty header value without control characters or surrounding space", ua)
		}
		c.userAgent = ua
		return nil
	}
}

// WithRetries sets how answers 429 (too many requests) and 503 (service
// unavailable) are retried: at most maxTries requests per page in all (1
// turns retries off), waiting about backoff before the second, twice that
// before the third, and so on, each wait drawn at random between half and
// all of that and never longer than maxWait. A Retry-After header (seconds
// or an HTTP date) makes a wait at least that long; a Retry-After longer
// than maxWait ends the retries at once with the [*Error], whose
// RetryAfter field then says how long the server asked to wait. A
// canceled context ends any wait at once. maxTries below 1 and a negative
// backoff or maxWait are errors. Without this option: [DefaultMaxTries],
// [DefaultBackoff], [DefaultMaxWait].
func WithRetries(maxTries int, backoff, maxWait time.Duration) Option {
	return func(c *Client) error {
		var errs []error
		if maxTries < 1 {
			errs = append(errs, errors.New("maxTries must be at least 1 (1 turns retries off)"))
		}
		if backoff < 0 {
			errs = append(errs, errors.New("backoff must not be negative"))
		}
		if maxWait < 0 {
			errs = append(errs, errors.New("maxWait must not be negative"))
		}
		if len(errs) > 0 {
			return fmt.Errorf("formsclient: WithRetries(%d, %v, %v): %w", maxTries, backoff, maxWait, errors.Join(errs...))
		}
		c.maxTries, c.backoff, c.maxWait = maxTries, backoff, maxWait
		return nil
	}
}

// WithMaxResponseSize sets the largest response body, in bytes, the client
// reads for one page ([DefaultMaxBody] otherwise), so that memory stays
// bounded: the bound holds for the body as sent and, when the server
// gzip-codes it, for the decoded body too, so a small gzip body that
// inflates past n is refused after reading about n bytes of it. Reading a
// page allocates about n bytes at most, and the smaller requests that
// follow an oversized page reuse that memory.
//
// A larger page is asked for again with half as many items (from the
// server's default of 100 when no [PageSize] was given), down to one, and
// the walk (or [Client.Sync]) goes on with the smaller page size; only a
// single item larger than n ends it, with an [*Error]. n must be at least
// 1.
func WithMaxResponseSize(n int64) Option {
	return func(c *Client) error {
		if n < 1 {
			return fmt.Errorf("formsclient: WithMaxResponseSize(%d): must be at least 1 byte", n)
		}
		c.maxBody = n
		return nil
	}
}

// New returns a client of the API at baseURL, the URL under which the
// server mounts the API without the "/v1" (for example
// "https://forms.example.com" or "https://forms.example.com/api"),
// authenticating with key. It sends no request.
//
// New returns a nil *Client and an error if baseURL is not an absolute
// http or https URL with a host and without query, fragment or user
// information; if key could never be an API key (empty, not an RFC 6750
// token of at most 256 characters, or a "fapi_" key whose checksum is
// wrong: see [formsapi.NewKey]), with an error wrapping [formsapi.ErrInvalidKey]
// that does not quote the key; or if an option is nil or was given a
// value it cannot use. The error names every problem found.
func New(baseURL, key string, opts ...Option) (*Client, error) {
	c := &Client{
		key:       key,
		hc:        http.DefaultClient,
		userAgent: DefaultUserAgent,
		maxTries:  DefaultMaxTries,
		backoff:   DefaultBackoff,
		maxWait:   DefaultMaxWait,
		maxBody:   DefaultMaxBody,
		sleep:     sleep,
	}
	var errs []error
	base, err := parseBase(baseURL)
	if err != nil {
		errs = append(errs, err)
	}
	if key == "" {
		errs = append(errs, fmt.Errorf("formsclient: no API key (the key given is empty): %w", formsapi.ErrInvalidKey))
	} else if keyformat.Problem(key) != "" {
		// The key stays out of the message: it is a secret.
		errs = append(errs, fmt.Errorf("formsclient: the API key is malformed (1 to %d characters of A-Z a-z 0-9 - . _ ~ + / and optional trailing =, checksum included): %w",
			keyformat.MaxLen, formsapi.ErrInvalidKey))
	}
	for i, o := range opts {
		if o == nil {
			errs = append(errs, fmt.Errorf("formsclient: option %d of New is nil", i+1))
			continue
		}
		if err := o(c); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c.base = base
	c.hc = keepKeyHome(c.hc)
	return c, nil
}

// maxRedirects is how many redirects a request follows, as
// http.Client's default policy.
const maxRedirects = 10

// keepKeyHome returns a copy of hc that follows a redirect only within
// the origin of the request that led to it (its scheme, host and port),
// or from http to https on the same host, then as hc's own CheckRedirect
// says: http.Client copies the Authorization header, the API key, to any
// port and scheme of the same host name and to its subdomains, so that a
// redirect from https to http, or to another service of the host, would
// send the key where the caller never pointed it. hc is not changed.
func keepKeyHome(hc *http.Client) *http.Client {
	g := *hc
	next := hc.CheckRedirect
	g.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if from := via[0].URL; !sameOrigin(from, req.URL) {
			return &redirectError{from: origin(from), to: origin(req.URL)}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
	return &g
}

// sameOrigin reports whether a request to to may carry the key of a
// request to from: the same scheme, host and port, or an upgrade from
// http to https of the same host.
func sameOrigin(from, to *url.URL) bool {
	if !strings.EqualFold(from.Hostname(), to.Hostname()) {
		return false
	}
	if from.Scheme == "http" && to.Scheme == "https" {
		return true
	}
	return from.Scheme == to.Scheme && port(from) == port(to)
}

// port is u's port, or its scheme's default.
func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// origin is u's scheme and host, for messages.
func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

// redirectError is a redirect the client does not follow: to another
// origin than the request's (keepKeyHome).
type redirectError struct{ from, to string }

func (e *redirectError) Error() string {
	return fmt.Sprintf("formsclient: the server at %s redirected to %s, another origin: not followed, so as not to send the API key there (give New the URL the API answers at)", e.from, e.to)
}

func parseBase(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("formsclient: no base URL (the URL given is empty): give the URL the API is mounted at, without /v1 (https://forms.example.com/api)")
	}
	// A URL with user information may carry a password: it is never
	// quoted, whatever else is wrong with it.
	shown := strconv.Quote(raw)
	if strings.Contains(raw, "@") {
		shown = "(not shown: it holds an @)"
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil && !strings.Contains(raw, "://"), err == nil && u.Scheme != "http" && u.Scheme != "https":
		// "127.0.0.1:8080" does not parse, "localhost:8080" parses with
		// the scheme "localhost": either way the scheme is what is missing.
		return nil, fmt.Errorf("formsclient: base URL %s: must start with https:// or http://", shown)
	case err != nil:
		return nil, fmt.Errorf("formsclient: base URL %s: cannot be parsed", shown)
	}
	switch {
	case u.User != nil:
		return nil, fmt.Errorf("formsclient: base URL: must not carry a user name or password (the API key authenticates)")
	case u.Host == "":
		return nil, fmt.Errorf("formsclient: base URL %s: has no host", shown)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("formsclient: base URL %s: must not have a query or fragment", shown)
	}
	return u, nil
}

// endpoint returns the URL of the API path below the base URL, whose
// segments are escaped by the caller, with query q.
func (c *Client) endpoint(escapedPath string, q url.Values) string {
	// The prefix is kept as given, joined with exactly one slash.
	u := c.base.Scheme + "://" + c.base.Host + strings.TrimSuffix(c.base.EscapedPath(), "/") + escapedPath
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// Error is an HTTP error answer of the server, other than one the client
// retried its way past, or an answer that is not the API's JSON (a
// proxy's HTML page, a truncated body, one over the size limit). The
// predicates ([IsRetryable], [RateLimited], [IsNotModified],
// [NeedsResync], [IsUnauthorized], [IsNotFound]) and errors.Is with
// [ErrNotModified], [ErrRateLimited], [ErrResync],
// [formsapi.ErrInvalidKey] and [formsapi.ErrFormNotFound] tell them
// apart; [RequestID] finds the request ID in any error of the package.
type Error struct {
	// StatusCode is the HTTP status of the answer, 200 included when the
	// body of a 200 is not a usable page, and 304 for a page not modified
	// since the tag given with [IfNoneMatch].
	StatusCode int
	// Message is the server's "message" when the body is the API's JSON
	// envelope; otherwise the client's description of what came back.
	Message string
	// RequestID is the answer's X-Request-Id, to quote to the server's
	// operators; "" if it had none.
	RequestID string
	// RetryAfter is the wait the server asked for with Retry-After on a
	// 429 or 503 that was not retried further; 0 if none.
	RetryAfter time.Duration

	op           string        // what the client was doing, for Error
	formNotFound bool          // the API's 404 for a form's submissions
	badToken     bool          // the API's 400 for a sync token it does not accept
	tooLarge     bool          // a 2xx body over the size limit
	reset        time.Duration // a 429's RateLimit t: the wait when it has no Retry-After
}

// Error returns what the client was doing, the status, the message and the
// request ID.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("formsclient: ")
	if e.op != "" {
		b.WriteString(e.op + ": ")
	}
	fmt.Fprintf(&b, "%d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Message)
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request ID %s)", e.RequestID)
	}
	return b.String()
}

// Is reports whether e is the sentinel target: [formsapi.ErrInvalidKey]
// for any 401, [formsapi.ErrFormNotFound] for a 404 in the API's JSON
// answering a form's submissions (the API does not tell a missing form
// from another account's), [ErrResync] for a 410 and for the 400 of a
// sync token the server refuses, [ErrNotModified] for a 304 and
// [ErrRateLimited] for a 429. A 404 of the forms list, a 404 that is not
// the API's JSON, and the API's 404 for a path it does not serve all
// mean the base URL is wrong, and match neither 404 sentinel.
func (e *Error) Is(target error) bool {
	switch target {
	case formsapi.ErrInvalidKey:
		return e.StatusCode == http.StatusUnauthorized
	case formsapi.ErrFormNotFound:
		return e.StatusCode == http.StatusNotFound && e.formNotFound
	case ErrResync:
		return e.StatusCode == http.StatusGone || e.badToken
	case ErrNotModified:
		return e.StatusCode == http.StatusNotModified
	case ErrRateLimited:
		return e.StatusCode == http.StatusTooManyRequests
	}
	return false
}

// ErrResync is matched (errors.Is) by the *Error of a sync feed page
// that the server will not continue from the token, so that a copy kept
// from the feed cannot be brought up to date; read the feed again from
// [SyncStart] into an empty copy, and keep the token that call returns.
// There are two such answers:
//
//   - 410 Gone: the token is older than deletions the server no longer
//     keeps (its tombstone retention, 30 days by default), so a copy
//     resumed from it could keep submissions deleted since;
//   - 400 Bad Request for the sync parameter ("invalid sync: …") to a
//     token other than SyncStart: the server does not accept the token.
//     Its cursor secret changed (a host's own store restarted without
//     formsapi.WithCursorSecret, a secret rotated), which also changes
//     every Ref, so a copy kept by Ref would gain duplicates; or the
//     token was damaged or belongs to another form.
var ErrResync = errors.New("formsclient: the server no longer accepts the sync token: read again from SyncStart into an empty copy")

// ErrPaging is wrapped by the error that ends an iteration when the
// server's pages break the API's paging rules, so that the client stops
// instead of looping or returning items twice: a nextCursor returned for a
// second time, items out of the requested order or outside since/until,
// 5 empty pages in a row that each point to a next one, or 10 pages in a
// row with the same items as the page before (what a proxy that drops the
// query string produces).
var ErrPaging = errors.New("formsclient: the server's pages break the paging rules")
