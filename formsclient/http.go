package formsclient

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// response is an answer of the server: its status and headers, and for
// a successful answer its body, read whole.
type response struct {
	status    int
	requestID string
	header    http.Header
	body      []byte // nil unless the answer is a 2xx in JSON
}

// get sends a GET for u, retrying 429 and 503 as WithRetries says, and
// returns a 2xx answer in JSON or an error: an *Error for any other
// answer (a 304 included), the context's error (wrapped) when ctx ends
// first, or the transport's error. The response is the last answer's,
// with or without an error; nil when no answer came. form says whether u
// is a form's list, whose 404 means the form is not found. inm, when not
// empty, is sent as If-None-Match. sc is memory to read the body into.
func (c *Client) get(ctx context.Context, u string, form bool, inm string, sc *scratch) (*response, error) {
	for try := 1; ; try++ {
		res, err := c.send(ctx, u, form, inm, sc)
		if err == nil {
			return res, nil
		}
		e, ok := err.(*Error)
		if !ok || (e.StatusCode != http.StatusTooManyRequests && e.StatusCode != http.StatusServiceUnavailable) {
			return res, err
		}
		if try >= c.maxTries || e.RetryAfter > c.maxWait {
			return res, e
		}
		if err := c.sleep(ctx, c.wait(try, e.RetryAfter)); err != nil {
			return res, withRequestID(fmt.Errorf("waiting to retry after %d %s: %w", e.StatusCode, http.StatusText(e.StatusCode), err), e.RequestID)
		}
	}
}

// msgNotModified is the Message of the *Error of a 304.
const msgNotModified = "not modified: the page is the one whose ETag was sent with IfNoneMatch"

// send makes one request.
func (c *Client) send(ctx context.Context, u string, form bool, inm string, sc *scratch) (*response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	// Asked for here, gzip is not decoded by the transport but by
	// readBody, which bounds the coded and the decoded bytes alike.
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("User-Agent", c.userAgent)
	if inm != "" {
		req.Header.Set("If-None-Match", inm)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()

	meta := &response{status: res.StatusCode, requestID: res.Header.Get("X-Request-Id"), header: res.Header}
	e := newError(res)
	if res.StatusCode == http.StatusNotModified {
		// No body: keep the page whose tag was sent.
		e.Message = msgNotModified
		return meta, e
	}
	ok := 200 <= res.StatusCode && res.StatusCode < 300
	limit := int64(maxErrorBody)
	if !ok {
		sc = nil // an error body is small: no need to keep its memory
	} else {
		limit = c.maxBody
	}
	body, over, err := readBody(res, limit, sc)
	var ce *codingError
	switch {
	case errors.As(err, &ce):
		e.Message = ce.Error()
		return meta, e
	case err != nil:
		return meta, withRequestID(fmt.Errorf("reading the %d response: %w", res.StatusCode, err), meta.requestID)
	case ok && over != notOver:
		e.Message = fmt.Sprintf("%s is larger than %d bytes%s (see WithMaxResponseSize)", over.what(), limit, over.how())
		e.tooLarge = true
		return meta, e
	}
	isJSON := jsonContent(res.Header.Get("Content-Type"))
	switch {
	case ok && !isJSON:
		e.Message = notJSON(res)
		return meta, e
	case ok:
		meta.body = body
		return meta, nil
	}
	var env struct {
		Success *bool   `json:"success"`
		Message *string `json:"message"`
	}
	if isJSON && over == notOver && json.Unmarshal(body, &env) == nil && env.Success != nil && !*env.Success && env.Message != nil {
		e.Message = *env.Message
		// The API's 404 for a path it does not serve (a wrong base URL)
		// says so; any other 404 of a form's list is the form's.
		e.formNotFound = form && res.StatusCode == http.StatusNotFound && !strings.HasPrefix(e.Message, msgNoRoutePrefix)
	} else {
		e.Message = notJSON(res)
	}
	return meta, e
}

// newError is the *Error of the answer res, without its Message: its
// status, request ID, and for a 429 or 503 the wait the server asked for
// (Retry-After, or else on a 429 the t of its RateLimit field).
func newError(res *http.Response) *Error {
	e := &Error{StatusCode: res.StatusCode, RequestID: res.Header.Get("X-Request-Id")}
	if res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable {
		e.RetryAfter = retryAfter(res.Header.Get("Retry-After"), time.Now())
	}
	if res.StatusCode == http.StatusTooManyRequests {
		if rl := parseRateLimit(res.Header); rl != nil {
			e.reset = rl.Reset
		}
	}
	return e
}

// overLimit says whether and how a body was over the size limit.
type overLimit int

const (
	notOver      overLimit = iota
	overPlain              // a body sent as is
	overWire               // a gzip-coded body, as sent
	overInflated           // a gzip-coded body, once decompressed
)

func (o overLimit) what() string {
	if o == overPlain {
		return "the response"
	}
	return "the gzip-coded response"
}

func (o overLimit) how() string {
	switch o {
	case overWire:
		return " as sent"
	case overInflated:
		return " once decompressed"
	}
	return ""
}

// codingError is a body in a Content-Encoding the client did not ask for.
type codingError struct{ coding string }

func (e *codingError) Error() string {
	return fmt.Sprintf("the answer has Content-Encoding %q, which the client did not ask for and cannot decode", e.coding)
}

// scratch is the memory one response body was read into: when the body
// was over the size limit, the smaller request that follows reads into
// the same memory rather than allocating the limit again. A body that
// fits takes the memory with it, so none is kept between pages.
type scratch struct{ chunks [][]byte }

// Chunk sizes of readChunks: the first chunk is small, for the many
// small answers; each next one is twice the one before, up to maxChunk,
// so that a body of n bytes takes a few dozen chunks at most, and a body
// over the limit is refused having allocated no more than the limit.
const (
	firstChunk = 16 << 10
	maxChunk   = 4 << 20
	maxHinted  = 256 << 20 // largest first chunk sized by Content-Length
)

// readBody reads res's body into sc's memory (or new memory if sc is
// nil), decoding gzip, and returns it if it has at most limit bytes as
// sent and as decoded; otherwise it returns no body and says how the body
// was over. It allocates about limit bytes at most, whatever the server
// sends.
func readBody(res *http.Response, limit int64, sc *scratch) ([]byte, overLimit, error) {
	limit = min(limit, math.MaxInt64-1) // so that limit+1 is a count
	coding := strings.ToLower(strings.TrimSpace(res.Header.Get("Content-Encoding")))
	if res.Uncompressed || coding == "identity" {
		coding = "" // a transport that decoded it itself
	}
	if coding != "" && coding != "gzip" && coding != "x-gzip" {
		return nil, notOver, &codingError{coding}
	}
	if res.ContentLength > limit {
		if coding == "" {
			return nil, overPlain, nil
		}
		return nil, overWire, nil
	}
	if coding == "" {
		body, over, err := readChunks(res.Body, limit, res.ContentLength, sc)
		if over {
			return nil, overPlain, err
		}
		return body, notOver, err
	}
	wire := &capped{r: res.Body, left: limit}
	zr, err := gzip.NewReader(wire)
	if errors.Is(err, errOverWire) {
		return nil, overWire, nil
	}
	if err != nil {
		return nil, notOver, fmt.Errorf("decoding its gzip: %w", err)
	}
	body, over, err := readChunks(zr, limit, -1, sc)
	switch {
	case errors.Is(err, errOverWire):
		return nil, overWire, nil
	case err != nil:
		return nil, notOver, fmt.Errorf("decoding its gzip: %w", err)
	case over:
		return nil, overInflated, nil
	}
	return body, notOver, nil
}

// readChunks reads r to its end into sc's chunks, allocating more as
// needed, and returns the bytes read, or over if r has more than limit
// bytes, having read limit+1 of them. size is the number of bytes r is
// expected to hold, or -1 if unknown.
func readChunks(r io.Reader, limit, size int64, sc *scratch) (body []byte, over bool, err error) {
	if sc == nil {
		sc = new(scratch)
	}
	stop := limit + 1 // bytes read that prove r is over
	var total int64
	for i := 0; ; i++ {
		if i == len(sc.chunks) {
			n := int64(firstChunk)
			switch {
			case i == 0 && size >= 0:
				n = min(size+1, maxHinted) // the whole body and the EOF in one read
			case i > 0:
				n = min(2*int64(cap(sc.chunks[i-1])), maxChunk)
			}
			sc.chunks = append(sc.chunks, make([]byte, min(n, stop-total)))
		}
		ch := sc.chunks[i]
		ch = ch[:min(int64(cap(ch)), stop-total)]
		n, eof, err := fill(r, ch)
		total += int64(n)
		switch {
		case err != nil:
			return nil, false, err
		case eof && i == 0:
			body = ch[:n]
			sc.chunks = nil // the body is this memory now
			return body, false, nil
		case eof:
			body = make([]byte, 0, total)
			for _, c := range sc.chunks[:i+1] {
				body = append(body, c[:min(int64(len(c)), total-int64(len(body)))]...)
			}
			sc.chunks = nil // let it go
			return body, false, nil
		case total >= stop:
			return nil, true, nil
		}
	}
}

// fill reads from r until p is full or r ends, and says which.
func fill(r io.Reader, p []byte) (n int, eof bool, err error) {
	for n < len(p) {
		m, err := r.Read(p[n:])
		n += m
		if err == io.EOF {
			return n, true, nil
		}
		if err != nil {
			return n, false, err
		}
	}
	return n, false, nil
}

// errOverWire is capped's error past its bound.
var errOverWire = errors.New("formsclient: the response is over the size limit as sent")

// capped reads r, failing with errOverWire once more than left bytes
// have been read.
type capped struct {
	r    io.Reader
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, errOverWire
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n, errOverWire
	}
	return n, err
}

// msgNoRoutePrefix begins the message of the API's 404 for a path it
// does not serve.
const msgNoRoutePrefix = "not found: the API serves"

// notJSON describes an answer that is not the API's JSON, without its
// body: a proxy's error page says nothing the status does not.
func notJSON(res *http.Response) string {
	ct := res.Header.Get("Content-Type")
	if ct == "" {
		ct = "without a Content-Type"
	}
	return fmt.Sprintf("the answer is %s, not the API's JSON (a proxy or gateway in between, or a base URL that is not the API's?)", ct)
}

func jsonContent(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// retryAfter parses a Retry-After value, delay-seconds or an HTTP date
// (RFC 9110 §10.2.3), as a duration from now; 0 if absent or malformed.
// A date in the past is 0.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > uint64(math.MaxInt64/time.Second) {
			return math.MaxInt64 // longer than any wait: no retry
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// wait returns how long to wait before try+1: exponential backoff with
// jitter (between half and all of backoff·2^(try-1), at most maxWait), or
// the server's Retry-After plus a little jitter if that is longer, so that
// clients told the same time do not all come back at the same instant.
func (c *Client) wait(try int, ra time.Duration) time.Duration {
	exp := c.backoff
	for i := 1; i < try && exp < c.maxWait; i++ {
		if exp > c.maxWait/2 {
			exp = c.maxWait
			break
		}
		exp *= 2
	}
	exp = min(exp, c.maxWait)
	d := exp/2 + rand.N(exp-exp/2+1)
	if ra > d {
		d = ra + rand.N(c.backoff/2+1)
	}
	return d
}

// sleep waits d, or returns ctx's error as soon as ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
