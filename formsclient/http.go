package formsclient

import (
	"bytes"
	"context"
	"encoding/json"
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

// response is a successful answer, read whole.
type response struct {
	status    int
	requestID string
	body      []byte
}

// get sends a GET for u, retrying 429 and 503 as WithRetries says, and
// returns a 2xx answer in JSON or an error: an *Error for any other
// answer, the context's error (wrapped) when ctx ends first, or the
// transport's error. form says whether u is a form's list, whose 404
// means the form is not found. sc is memory to read the body into.
func (c *Client) get(ctx context.Context, u string, form bool, sc *scratch) (*response, error) {
	for try := 1; ; try++ {
		res, err := c.send(ctx, u, form, sc)
		if err == nil {
			return res, nil
		}
		e, ok := err.(*Error)
		if !ok || (e.StatusCode != http.StatusTooManyRequests && e.StatusCode != http.StatusServiceUnavailable) {
			return nil, err
		}
		if try >= c.maxTries || e.RetryAfter > c.maxWait {
			return nil, e
		}
		if err := c.sleep(ctx, c.wait(try, e.RetryAfter)); err != nil {
			return nil, fmt.Errorf("waiting to retry after %d %s: %w", e.StatusCode, http.StatusText(e.StatusCode), err)
		}
	}
}

// scratch is memory to read a response body into, kept by a walk across
// the requests of one page.
type scratch struct{}

// send makes one request.
func (c *Client) send(ctx context.Context, u string, form bool, _ *scratch) (*response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()

	ok := 200 <= res.StatusCode && res.StatusCode < 300
	limit := int64(maxErrorBody)
	if ok {
		limit = c.maxBody
	}
	var buf bytes.Buffer
	if res.ContentLength > 0 && res.ContentLength <= limit {
		buf.Grow(int(res.ContentLength) + bytes.MinRead) // one read, no regrowth
	}
	_, err = buf.ReadFrom(io.LimitReader(res.Body, limit+1))
	body := buf.Bytes()
	if err != nil {
		return nil, fmt.Errorf("reading the %d response: %w", res.StatusCode, err)
	}
	e := &Error{StatusCode: res.StatusCode, RequestID: res.Header.Get("X-Request-Id")}
	isJSON := jsonContent(res.Header.Get("Content-Type"))
	switch {
	case ok && int64(len(body)) > limit:
		e.Message = fmt.Sprintf("the response is larger than %d bytes (see WithMaxResponseSize)", limit)
		e.tooLarge = true
		return nil, e
	case ok && !isJSON:
		e.Message = notJSON(res)
		return nil, e
	case ok:
		return &response{status: res.StatusCode, requestID: e.RequestID, body: body}, nil
	}
	if res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable {
		e.RetryAfter = retryAfter(res.Header.Get("Retry-After"), time.Now())
	}
	var env struct {
		Success *bool   `json:"success"`
		Message *string `json:"message"`
	}
	if isJSON && json.Unmarshal(body, &env) == nil && env.Success != nil && !*env.Success && env.Message != nil {
		e.Message = *env.Message
		// The API's 404 for a path it does not serve (a wrong base URL)
		// says so; any other 404 of a form's list is the form's.
		e.formNotFound = form && res.StatusCode == http.StatusNotFound && !strings.HasPrefix(e.Message, msgNoRoutePrefix)
	} else {
		e.Message = notJSON(res)
	}
	return nil, e
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
