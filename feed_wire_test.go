package formsapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// feedPage is a sync feed page as a client decodes it.
type feedPage struct {
	Submissions []struct {
		Data json.RawMessage `json:"data"`
	} `json:"submissions"`
	SyncToken string `json:"syncToken"`
	HasMore   bool   `json:"hasMore"`
}

// pollFeed reads the feed from token until hasMore is false and returns
// the data of every item, in order, and the token to resume from.
func pollFeed(t *testing.T, h http.Handler, form, key, token string) ([]string, string) {
	t.Helper()
	var seen []string
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatal("the feed never reports the end")
		}
		res := do(t, h, "GET", "/v1/forms/"+form+"/submissions?limit=7&sync="+url.QueryEscape(token), "Authorization", "Bearer "+key)
		if res.status != http.StatusOK {
			t.Fatalf("sync=%s: %d %s", token, res.status, res.body)
		}
		var p feedPage
		if err := json.Unmarshal(res.body, &p); err != nil {
			t.Fatal(err)
		}
		if p.SyncToken == "" {
			t.Fatalf("a feed page without a syncToken: %s", res.body)
		}
		for _, s := range p.Submissions {
			seen = append(seen, string(s.Data))
		}
		token = p.SyncToken
		if !p.HasMore {
			return seen, token
		}
	}
}

// TestSyncFeedOverHTTP has writers add submissions whose createdAt goes
// back in time, in a random order, while a poller reads the feed and
// resumes from the token it stored after every poll. At the end the
// poller has seen every submission of the form exactly once, including
// those whose createdAt is earlier than ones it saw before: what
// order=asc&since=<last createdAt seen> would have lost.
func TestSyncFeedOverHTTP(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) interface {
		formsapi.Store
		formsapi.KeyResolver
		formsapi.Writer
	}{
		"memstore": func(t *testing.T) interface {
			formsapi.Store
			formsapi.KeyResolver
			formsapi.Writer
		} {
			return memstore.New()
		},
		"sqlitestore": func(t *testing.T) interface {
			formsapi.Store
			formsapi.KeyResolver
			formsapi.Writer
		} {
			s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "feed.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := open(t)
			if err := storetest.Load(ctx, s, storetest.DefaultSeed()); err != nil {
				t.Fatal(err)
			}
			h := formsapi.NewHandler(s, s)
			want := map[string]bool{}
			for _, sub := range storetest.DefaultSeed().Submissions {
				if sub.Submission.FormID == storetest.FormSmall {
					want[storetest.Canonical(sub.Submission.Data)] = true
				}
			}
			base := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
			var mu sync.Mutex
			var wg sync.WaitGroup
			for w := 0; w < 3; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(w), 7))
					for i := 0; i < 40; i++ {
						data := fmt.Sprintf(`{"writer":%d,"i":%d}`, w, i)
						// Later writes carry earlier times.
						at := base.Add(-time.Duration(i)*time.Minute - time.Duration(r.IntN(1000))*time.Millisecond)
						if err := s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(data), CreatedAt: at}, formsapi.Metadata{}); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						want[storetest.Canonical([]byte(data))] = true
						mu.Unlock()
					}
				}()
			}
			seen := map[string]int{}
			token := "start"
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			for polling := true; polling; {
				select {
				case <-done:
					polling = false // one last poll after the writers stopped
				default:
				}
				items, next := pollFeed(t, h, storetest.FormSmall, storetest.KeyA, token)
				for _, d := range items {
					seen[storetest.Canonical([]byte(d))]++
				}
				token = next
			}
			for d, n := range seen {
				if n != 1 {
					t.Errorf("%s seen %d times", d, n)
				}
				if !want[d] {
					t.Errorf("%s seen but never stored", d)
				}
			}
			for d := range want {
				if seen[d] == 0 {
					t.Errorf("%s stored but never seen", d)
				}
			}
			// The last token reads nothing new, and says so.
			if items, _ := pollFeed(t, h, storetest.FormSmall, storetest.KeyA, token); len(items) != 0 {
				t.Errorf("the last token read %d items again", len(items))
			}
		})
	}
}

// noFeed is a host's store without the sync feed.
type noFeed struct{ formsapi.Store }

func TestSyncFeedBadInput(t *testing.T) {
	is := is.New(t)
	s := seeded(t)
	h := formsapi.NewHandler(s, s)
	get := func(target, key string) response {
		return do(t, h, "GET", target, "Authorization", "Bearer "+key)
	}
	sub := "/v1/forms/" + storetest.FormSmall + "/submissions"
	first := get(sub+"?sync=start&limit=1", storetest.KeyA)
	is.Equal(first.status, 200) // the first page
	var p feedPage
	is.NoErr(json.Unmarshal(first.body, &p))
	is.True(p.HasMore)              // of three submissions
	is.Equal(len(p.Submissions), 1) // one at a time
	token := p.SyncToken
	again := get(sub+"?sync="+token, storetest.KeyA)
	is.Equal(again.status, 200) // the token works
	is.True(again.header.Get("ETag") != "")
	unchanged := do(t, h, "GET", sub+"?sync="+token, "Authorization", "Bearer "+storetest.KeyA, "If-None-Match", again.header.Get("ETag"))
	is.Equal(unchanged.status, 304) // a poller with nothing new gets a 304
	is.Equal(len(unchanged.body), 0)

	busy := get("/v1/forms/"+storetest.FormBusy+"/submissions?limit=1", storetest.KeyA)
	var page struct{ NextCursor string }
	is.NoErr(json.Unmarshal(busy.body, &page))
	otherForm := get("/v1/forms/"+storetest.FormBusy+"/submissions?sync=start&limit=1", storetest.KeyA)
	is.NoErr(json.Unmarshal(otherForm.body, &p))

	const bad = `invalid sync: use "start" or the syncToken of a previous page of this form's feed`
	for name, c := range map[string]struct {
		target, key, msg string
		status           int
	}{
		"forged":                  {sub + "?sync=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", storetest.KeyA, bad, 400},
		"truncated":               {sub + "?sync=" + token[:len(token)-2], storetest.KeyA, bad, 400},
		"another form's token":    {sub + "?sync=" + p.SyncToken, storetest.KeyA, bad, 400},
		"a cursor as a token":     {"/v1/forms/" + storetest.FormBusy + "/submissions?sync=" + page.NextCursor, storetest.KeyA, bad, 400},
		"a token as a cursor":     {"/v1/forms/" + storetest.FormBusy + "/submissions?cursor=" + p.SyncToken, storetest.KeyA, "invalid cursor: use the nextCursor of a previous page of this same list", 400},
		"empty":                   {sub + "?sync=", storetest.KeyA, bad, 400},
		"given twice":             {sub + "?sync=start&sync=start", storetest.KeyA, "invalid sync: the parameter is given more than once", 400},
		"with an empty order":     {sub + "?sync=start&order=&since=&until=&cursor=", storetest.KeyA, "", 200},
		"with order":              {sub + "?sync=start&order=asc", storetest.KeyA, "invalid order: it cannot be combined with sync, which reads in commit order", 400},
		"with since":              {sub + "?sync=start&since=2024-01-01T00:00:00Z", storetest.KeyA, "invalid since: it cannot be combined with sync, which reads in commit order", 400},
		"with until":              {sub + "?until=2024-01-01T00:00:00Z&sync=" + token, storetest.KeyA, "invalid until: it cannot be combined with sync, which reads in commit order", 400},
		"with a cursor":           {sub + "?sync=start&cursor=x", storetest.KeyA, "invalid cursor: it cannot be combined with sync, which reads in commit order", 400},
		"on the forms list":       {"/v1/forms?sync=start", storetest.KeyA, "invalid sync: the feed is per form, at /v1/forms/{formId}/submissions?sync=start", 400},
		"another account's token": {sub + "?sync=" + token, storetest.KeyB, bad, 400},
		"another account's form":  {sub + "?sync=start", storetest.KeyB, "form not found", 404},
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			res := get(c.target, c.key)
			is.Equal(res.status, c.status) // status
			if c.status == 200 {
				is.True(strings.Contains(string(res.body), `"syncToken":`)) // empty parameters are absent: a feed page
				return
			}
			is.Equal(string(res.body), `{"success":false,"message":`+mustJSON(c.msg)+`}`) // message
		})
	}

	plain := formsapi.NewHandler(noFeed{s}, s)
	res := do(t, plain, "GET", sub+"?sync=start", "Authorization", "Bearer "+storetest.KeyA)
	is.Equal(res.status, 501)                                       // a store without the feed
	is.True(strings.Contains(string(res.body), "has no sync feed")) // says so
}

func mustJSON(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestSyncFeedByteBudget reads a feed with a limit far above what the
// byte budget allows: every page stops at the first chunk past the budget
// and says hasMore, and the walk still gives every submission once.
func TestSyncFeedByteBudget(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := memstore.New()
	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "big"}))
	is.NoErr(s.AddKey(ctx, "a-host-key", "acct"))
	for i := range 100 {
		data := fmt.Sprintf(`{"i":%d,"text":%q}`, i, strings.Repeat("x", 500))
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "big", Data: []byte(data)}, formsapi.Metadata{}))
	}
	h := formsapi.NewHandler(s, s, formsapi.WithPageBytes(2<<10))
	token, pages, total := "start", 0, 0
	for more := true; more; pages++ {
		res := do(t, h, "GET", "/v1/forms/big/submissions?limit=1000&sync="+token, "Authorization", "Bearer a-host-key")
		is.Equal(res.status, 200) // a feed page
		var p feedPage
		is.NoErr(json.Unmarshal(res.body, &p))
		is.True(len(p.Submissions) <= 16) // cut at the first chunk past 2 KiB
		is.True(len(res.body) < 16*700)   // so the body stays near the budget
		total += len(p.Submissions)
		token, more = p.SyncToken, p.HasMore
	}
	is.Equal(total, 100)     // every submission, once
	is.True(pages >= 100/16) // in several pages
}

// TestSyncTokenPastRetention: a token older than a deletion the store no
// longer keeps gets 410 Gone, with the rate-limit fields of any answer
// after the limiter; TestMain holds the answer to openapi.json.
func TestSyncTokenPastRetention(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := memstore.New(memstore.WithClock(clock.Now), memstore.WithTombstoneRetention(time.Hour))
	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "contact", Title: "Contact"}))
	for i := range 3 {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "contact", Data: []byte(`{"n":1}`)}, formsapi.Metadata{ID: fmt.Sprint("s", i)}))
	}
	key, err := formsapi.NewKey()
	is.NoErr(err)
	is.NoErr(s.AddKey(ctx, key, "acct"))
	h := formsapi.NewHandler(s, s, formsapi.WithRateLimit(ratelimit.Options{Limiter: ratelimit.NewMemory(), Policy: ratelimit.Policy{Name: "default", Quota: 600, Window: time.Minute}}))
	const feed = "/v1/forms/contact/submissions?sync="
	res := do(t, h, "GET", feed+"start", bearer(key)...)
	is.Equal(res.status, 200)
	var p feedPage
	is.NoErr(json.Unmarshal(res.body, &p))

	is.NoErr(s.DeleteSubmission(ctx, "acct", "contact", "s0"))
	clock.Advance(time.Hour)
	is.NoErr(s.DeleteSubmission(ctx, "acct", "contact", "s1")) // forgets the first deletion

	res = do(t, h, "GET", feed+url.QueryEscape(p.SyncToken), bearer(key)...)
	is.Equal(res.status, http.StatusGone)
	is.True(strings.Contains(string(res.body), "sync=start")) // says how to start over
	is.True(res.header.Get("RateLimit") != "")
	res = do(t, h, "GET", feed+"start", bearer(key)...)
	is.Equal(res.status, 200) // the start always works
}
