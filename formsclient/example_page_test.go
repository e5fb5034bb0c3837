package formsclient_test

// The patterns of go-github's (items, *Response, error), with formsclient's
// page calls, each against the real handler (docs/client.md shows them).

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/ratelimit"
)

// pageExampleServer is exampleServer with the store at hand, and the
// handler's options.
func pageExampleServer(opts ...formsapi.Option) (baseURL string, s *memstore.Store, close func()) {
	ctx := context.Background()
	s = memstore.New()
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	must(s.AddForm(ctx, "acct-1", formsapi.Form{ID: "contact", Title: "Contact", CreatedAt: at}))
	for i, name := range []string{"Ada", "Grace", "Edsger"} {
		data := fmt.Sprintf(`{"name":%q}`, name)
		must(s.AddSubmission(ctx, formsapi.Submission{FormID: "contact", Data: []byte(data), CreatedAt: at.Add(time.Duration(i) * time.Hour)}, formsapi.Metadata{}))
	}
	must(s.AddKey(ctx, "demo-key", "acct-1"))
	srv := httptest.NewServer(http.StripPrefix("/api", formsapi.NewHandler(s, s, opts...)))
	return srv.URL + "/api", s, srv.Close
}

// Resume from a saved cursor: a job that reads one page a run, oldest
// first, and saves the cursor of the next page with what it did. A
// cursor stays good for as long as the server keeps its cursor secret.
func ExampleClient_SubmissionsPage() {
	baseURL, _, close := pageExampleServer()
	defer close()
	ctx := context.Background()
	c, err := formsclient.New(baseURL, "demo-key")
	if err != nil {
		fmt.Println("error:", err)
		return
	}

	saved := "" // the cursor the last run saved; "" the first time
	for run := 1; ; run++ {
		subs, resp, err := c.SubmissionsPage(ctx, "contact", formsclient.Cursor(saved), formsclient.Oldest(), formsclient.PageSize(2))
		if err != nil {
			fmt.Println("error:", err, "request", formsclient.RequestID(err))
			return
		}
		for _, s := range subs {
			fmt.Println("run", run, string(s.Data))
		}
		saved = resp.NextCursor // store it with what the run did
		if saved == "" {
			fmt.Println("run", run, "read the last page")
			break
		}
	}
	// Output:
	// run 1 {"name":"Ada"}
	// run 1 {"name":"Grace"}
	// run 2 {"name":"Edsger"}
	// run 2 read the last page
}

// A conditional refresh that costs one 304: keep the page with its
// ETag, send the tag back with IfNoneMatch, and keep the page while the
// server answers 304 Not Modified.
func ExampleIfNoneMatch() {
	baseURL, store, close := pageExampleServer()
	defer close()
	ctx := context.Background()
	c, err := formsclient.New(baseURL, "demo-key")
	if err != nil {
		fmt.Println("error:", err)
		return
	}

	page, resp, err := c.SubmissionsPage(ctx, "contact")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	etag := resp.ETag
	refresh := func() {
		subs, resp, err := c.SubmissionsPage(ctx, "contact", formsclient.IfNoneMatch(etag))
		switch {
		case formsclient.IsNotModified(err):
			fmt.Println("304: the", len(page), "submissions kept are current")
		case err != nil:
			fmt.Println("error:", err)
		default:
			page, etag = subs, resp.ETag
			fmt.Println(resp.StatusCode, "with", len(page), "submissions, newest", string(page[0].Data))
		}
	}
	refresh()
	must(store.AddSubmission(ctx, formsapi.Submission{FormID: "contact", Data: []byte(`{"name":"Barbara"}`)}, formsapi.Metadata{}))
	refresh()
	refresh()
	// Output:
	// 304: the 3 submissions kept are current
	// 200 with 4 submissions, newest {"name":"Barbara"}
	// 304: the 4 submissions kept are current
}

// A back-off driven by the RateLimit fields: pace by what is left
// (Response.RateLimit) rather than be refused, and when refused all the
// same (another program used the key's budget), wait as long as the 429
// says (RateLimited). The server here allows 2 requests a minute; its
// clock moves when the example waits, where a real program sleeps.
func ExampleRateLimited() {
	limiter := &clockLimiter{now: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
	baseURL, _, close := pageExampleServer(formsapi.WithRateLimit(ratelimit.Options{
		Limiter: limiter,
		Policy:  ratelimit.Policy{Name: "default", Quota: 2, Window: time.Minute},
	}))
	defer close()
	sleep := limiter.advance // time.Sleep in a real program
	ctx := context.Background()
	// WithRetries(1, 0, 0): no retries of the client's own; this loop waits.
	c, err := formsclient.New(baseURL, "demo-key", formsclient.WithRetries(1, 0, 0))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	c.FormsPage(ctx) // another program of the account used the budget
	c.FormsPage(ctx)

	cursor := ""
	for {
		subs, resp, err := c.SubmissionsPage(ctx, "contact", formsclient.Cursor(cursor), formsclient.Oldest(), formsclient.PageSize(1))
		if wait, ok := formsclient.RateLimited(err); ok {
			fmt.Println("429: waiting", wait)
			sleep(wait)
			continue
		}
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		for _, s := range subs {
			fmt.Println(string(s.Data))
		}
		if cursor = resp.NextCursor; cursor == "" {
			break
		}
		if rl := resp.RateLimit; rl != nil && rl.Remaining == 0 {
			fmt.Println("none left of", rl.Quota, "a", rl.Window, "window: waiting", rl.Reset)
			sleep(rl.Reset)
		}
	}
	// Output:
	// 429: waiting 30s
	// {"name":"Ada"}
	// none left of 2 a 1m0s window: waiting 1m0s
	// {"name":"Grace"}
	// {"name":"Edsger"}
}

// clockLimiter is an in-process GCRA limiter (ratelimit.Policy.GCRA) on
// a clock that moves only when told, so that an example's waits take no
// time.
type clockLimiter struct {
	mu   sync.Mutex
	now  time.Time
	tats map[string]time.Time
}

func (l *clockLimiter) Allow(ctx context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tats == nil {
		l.tats = map[string]time.Time{}
	}
	d, tat := p.GCRA(l.tats[p.Name+" "+key], l.now)
	if d.Allowed {
		l.tats[p.Name+" "+key] = tat
	}
	return d, nil
}

// advance moves the clock d ahead.
func (l *clockLimiter) advance(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.now = l.now.Add(d)
}
