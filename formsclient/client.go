// Package formsclient reads the forms and submissions of an account from a
// formsapi server, without the caller knowing about cursors:
//
//	c := formsclient.New("https://forms.example.com/api", key)
//	for s, err := range c.Submissions(ctx, "contact", formsclient.Oldest()) {
//		if err != nil {
//			return err
//		}
//		// use s
//	}
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
// The package imports only the standard library and formsapi's types.
package formsclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyformat"
)

// Client reads one account's forms and submissions through the API key it
// was made with. It is safe for concurrent use; its methods do not change
// it.
type Client struct {
	base      *url.URL // scheme, host and path prefix; nil if err is set
	err       error    // what was wrong with New's arguments, yielded by every list
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

// Option configures a Client made by [New].
type Option func(*Client)

// WithHTTPClient makes the client send its requests through hc (for its
// Transport, proxy settings, TLS configuration or Timeout) instead of
// [http.DefaultClient], which has no timeout: without a Timeout here or a
// deadline on the context, a server that never answers is waited for. A
// nil hc is ignored.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithUserAgent sets the User-Agent header of every request, so that the
// server's operators can tell your program apart; [DefaultUserAgent]
// otherwise. An empty ua is ignored.
func WithUserAgent(ua string) Option {
	return func(c *Client) {
		if ua != "" {
			c.userAgent = ua
		}
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
// canceled context ends any wait at once. Values below 1 (maxTries) or
// below zero (backoff, maxWait) keep the defaults: [DefaultMaxTries],
// [DefaultBackoff], [DefaultMaxWait].
func WithRetries(maxTries int, backoff, maxWait time.Duration) Option {
	return func(c *Client) {
		if maxTries >= 1 {
			c.maxTries = maxTries
		}
		if backoff >= 0 {
			c.backoff = backoff
		}
		if maxWait >= 0 {
			c.maxWait = maxWait
		}
	}
}

// WithMaxResponseSize sets the largest response body, in bytes, the client
// reads for one page ([DefaultMaxBody] otherwise), so that memory stays
// bounded. A larger page is asked for again with half as many items (from
// the server's default of 100 when no [PageSize] was given), down to one,
// and the walk goes on with the smaller page size; only a single item
// larger than n ends the iteration, with an [*Error]. Values below 1 are
// ignored.
func WithMaxResponseSize(n int64) Option {
	return func(c *Client) {
		if n >= 1 {
			c.maxBody = n
		}
	}
}

// New returns a client of the API at baseURL, the URL under which the
// server mounts the API without the "/v1" (for example
// "https://forms.example.com" or "https://forms.example.com/api"),
// authenticating with key. It sends no request. If baseURL is not an
// absolute http or https URL without query or fragment, or key could never
// be an API key, the client's lists yield that error (the latter wrapping
// [formsapi.ErrInvalidKey]) without sending anything.
func New(baseURL, key string, opts ...Option) *Client {
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
	for _, o := range opts {
		o(c)
	}
	c.base, c.err = parseBase(baseURL)
	if c.err == nil && keyformat.Problem(key) != "" {
		// The key stays out of the message: it is a secret.
		c.err = fmt.Errorf("formsclient: the API key is malformed (1 to %d characters of A-Z a-z 0-9 - . _ ~ + / and optional trailing =, checksum included): %w",
			keyformat.MaxLen, formsapi.ErrInvalidKey)
	}
	return c
}

func parseBase(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("formsclient: base URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("formsclient: base URL %q: must start with https:// or http://", raw)
	case u.Host == "":
		return nil, fmt.Errorf("formsclient: base URL %q: has no host", raw)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("formsclient: base URL %q: must not have a query or fragment", raw)
	case u.User != nil:
		return nil, fmt.Errorf("formsclient: base URL: must not carry a user name or password (the API key authenticates)")
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
// proxy's HTML page, a truncated body, one over the size limit).
type Error struct {
	// StatusCode is the HTTP status of the answer, 200 included when the
	// body of a 200 is not a usable page.
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

	op           string // what the client was doing, for Error
	formNotFound bool   // the API's 404 for a form's submissions
	tooLarge     bool   // a 2xx body over the size limit
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

// Is reports whether e is the formsapi sentinel target:
// [formsapi.ErrInvalidKey] for any 401, and [formsapi.ErrFormNotFound] for
// a 404 in the API's JSON answering a form's submissions (the API does not
// tell a missing form from another account's). A 404 of the forms list,
// a 404 that is not the API's JSON, and the API's 404 for a path it does
// not serve all mean the base URL is wrong, and match neither.
func (e *Error) Is(target error) bool {
	switch target {
	case formsapi.ErrInvalidKey:
		return e.StatusCode == http.StatusUnauthorized
	case formsapi.ErrFormNotFound:
		return e.StatusCode == http.StatusNotFound && e.formNotFound
	}
	return false
}

// ErrPaging is wrapped by the error that ends an iteration when the
// server's pages break the API's paging rules, so that the client stops
// instead of looping or returning items twice: a nextCursor returned for a
// second time, items out of the requested order or outside since/until,
// 5 empty pages in a row that each point to a next one, or 10 pages in a
// row with the same items as the page before (what a proxy that drops the
// query string produces).
var ErrPaging = errors.New("formsclient: the server's pages break the paging rules")
