package formsapi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
)

// hourly allows two requests, then one every half hour: no test runs long
// enough to earn another.
var hourly = formsapi.RateLimitPolicy{Name: "default", Quota: 2, Window: time.Hour}

const msg429 = `{"success":false,"message":"rate limit exceeded: retry after the number of seconds in Retry-After"}`

func TestRateLimit(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := seededHandler(t, formsapi.WithRateLimiter(formsapi.NewMemoryRateLimiter(hourly)))

	res := do(t, h, "GET", "/v1/forms", bearer(storetest.KeyA)...)
	is.Equal(res.status, 200)                                            // first request
	is.Equal(res.header.Get("RateLimit-Policy"), `"default";q=2;w=3600`) // the policy, in draft-11 syntax
	is.Equal(res.header.Get("RateLimit"), `"default";r=1;t=1800`)        // one left; full again in half an hour
	is.Equal(res.header.Get("Retry-After"), "")                          // only on a refusal
	res = do(t, h, "GET", "/v1/forms/"+storetest.FormBusy+"/submissions", bearer(storetest.KeyA)...)
	is.Equal(res.status, 200)                                     // second request, another route: the same budget
	is.Equal(res.header.Get("RateLimit"), `"default";r=0;t=3600`) // none left

	res = do(t, h, "GET", "/v1/forms", bearer(storetest.KeyA)...)
	is.Equal(res.status, 429)                                     // third: too many
	is.Equal(string(res.body), msg429)                            // the JSON envelope
	checkStandardHeaders(t, res)                                  // like every answer
	is.Equal(res.header.Get("Retry-After"), "1800")               // when one more fits
	is.Equal(res.header.Get("RateLimit"), `"default";r=0;t=1800`) // t is the Retry-After on a refusal
	is.Equal(res.header.Get("RateLimit-Policy"), `"default";q=2;w=3600`)

	res = do(t, h, "GET", "/v1/forms", bearer(storetest.KeyA2)...)
	is.Equal(res.status, 429) // another key of the same account shares its budget
	res = do(t, h, "GET", "/v1/forms", bearer(storetest.KeyB)...)
	is.Equal(res.status, 200) // another account has its own

	res = do(t, h, "GET", "/v1/openapi.json")
	is.Equal(res.status, 200)                 // the document needs no key and counts nothing
	is.Equal(res.header.Get("RateLimit"), "") // so no limit applies to it
}

func TestRateLimitPerKey(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := seededHandler(t, formsapi.WithRateLimiter(formsapi.NewMemoryRateLimiter(hourly)), formsapi.WithRateLimitPerKey())
	for i := 0; i < 2; i++ {
		is.Equal(do(t, h, "GET", "/v1/forms", bearer(storetest.KeyA)...).status, 200) // KeyA's budget
	}
	is.Equal(do(t, h, "GET", "/v1/forms", bearer(storetest.KeyA)...).status, 429)  // spent
	is.Equal(do(t, h, "GET", "/v1/forms", bearer(storetest.KeyA2)...).status, 200) // the account's other key has its own
}

// recordingLimiter records the keys it is asked about and can fail.
type recordingLimiter struct {
	formsapi.RateLimiter
	mu   sync.Mutex
	keys []string
	err  error
}

func (l *recordingLimiter) Allow(ctx context.Context, key string) (formsapi.RateLimitDecision, error) {
	l.mu.Lock()
	l.keys = append(l.keys, key)
	err := l.err
	l.mu.Unlock()
	if err != nil {
		return formsapi.RateLimitDecision{}, err
	}
	return l.RateLimiter.Allow(ctx, key)
}

func TestRateLimitKeys(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	byAccount := &recordingLimiter{RateLimiter: formsapi.NewMemoryRateLimiter(hourly)}
	perKey := &recordingLimiter{RateLimiter: formsapi.NewMemoryRateLimiter(hourly)}
	h1 := seededHandler(t, formsapi.WithRateLimiter(byAccount))
	h2 := seededHandler(t, formsapi.WithRateLimiter(perKey), formsapi.WithRateLimitPerKey())
	do(t, h1, "GET", "/v1/forms", bearer(storetest.KeyA)...)
	do(t, h2, "GET", "/v1/forms", bearer(storetest.KeyA)...)
	is.Equal(byAccount.keys, []string{"account:" + storetest.AccountA})      // the account
	is.Equal(perKey.keys, []string{"key:" + formsapi.KeyID(storetest.KeyA)}) // the key's hash, never the key
	is.True(!strings.Contains(perKey.keys[0], storetest.KeyA))
}

// TestRateLimitOrder: requests without a valid key are never counted and
// carry no RateLimit fields; counted requests carry them on every answer,
// 400 and 404 included; a refused request never reaches the store.
func TestRateLimitOrder(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c := &counting{store: seeded(t), keys: seeded(t)}
	h := formsapi.NewHandler(c, c, formsapi.WithRateLimiter(formsapi.NewMemoryRateLimiter(hourly)))
	for i := 0; i < 5; i++ {
		res := do(t, h, "GET", "/v1/forms", bearer(storetest.KeyNotAdded)...)
		is.Equal(res.status, 401)                 // unknown key
		is.Equal(res.header.Get("RateLimit"), "") // not counted
		res = do(t, h, "GET", "/v1/forms")
		is.Equal(res.status, 401) // no key
		is.Equal(res.header.Get("RateLimit"), "")
	}
	res := do(t, h, "GET", "/v1/forms?limit=0", bearer(storetest.KeyA)...)
	is.Equal(res.status, 400)                                     // a bad query is counted
	is.Equal(res.header.Get("RateLimit"), `"default";r=1;t=1800`) // the budget was full before it
	res = do(t, h, "GET", "/v1/forms/"+storetest.FormNone+"/submissions", bearer(storetest.KeyA)...)
	is.Equal(res.status, 404)                                     // so is a missing form
	is.Equal(res.header.Get("RateLimit"), `"default";r=0;t=3600`) // with the fields
	calls := c.calls
	res = do(t, h, "GET", "/v1/forms", bearer(storetest.KeyA)...)
	is.Equal(res.status, 429) // refused
	is.Equal(c.calls, calls)  // before any store call
}

var errLimiterDown = errors.New("limiter database unreachable")

func TestRateLimiterFailure(t *testing.T) {
	t.Parallel()
	for _, closed := range []bool{false, true} {
		t.Run(fmt.Sprintf("closed=%t", closed), func(t *testing.T) {
			is := is.New(t)
			var logs bytes.Buffer
			l := &recordingLimiter{RateLimiter: formsapi.NewMemoryRateLimiter(hourly), err: errLimiterDown}
			opts := []formsapi.Option{formsapi.WithRateLimiter(l), formsapi.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil)))}
			if closed {
				opts = append(opts, formsapi.WithRateLimitFailClosed())
			}
			h := seededHandler(t, opts...)
			res := do(t, h, "GET", "/v1/forms", bearer(storetest.KeyA)...)
			if closed {
				is.Equal(res.status, 503) // failing closed
				is.Equal(string(res.body), `{"success":false,"message":"service unavailable: the rate limiter is not answering, try again"}`)
				is.Equal(res.header.Get("Retry-After"), "1")
				is.True(strings.Contains(logs.String(), "request refused")) // logged
			} else {
				is.Equal(res.status, 200)                                            // failing open: served
				is.True(strings.Contains(logs.String(), "request served unlimited")) // and logged
			}
			is.Equal(res.header.Get("RateLimit"), "")                        // no decision, no fields
			is.True(strings.Contains(logs.String(), errLimiterDown.Error())) // with the cause
			is.True(strings.Contains(logs.String(), `"level":"ERROR"`))
			is.True(!strings.Contains(logs.String(), storetest.KeyA)) // never the key
		})
	}
}

// scopedStore is memstore with more forms for account A and a key scoped
// to three of them, spread through the list.
func scopedStore(t *testing.T) (*memstore.Store, string, []string) {
	t.Helper()
	s := seeded(t)
	ctx := context.Background()
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 12; i++ {
		f := formsapi.Form{ID: fmt.Sprintf("extra-%02d", i), Title: "Extra", CreatedAt: base.Add(time.Duration(i%5) * time.Hour)}
		if err := s.AddForm(ctx, storetest.AccountA, f); err != nil {
			t.Fatal(err)
		}
	}
	key, _ := formsapi.NewKey()
	scope := []string{"extra-03", storetest.FormBusy, "extra-10", "extra-07", storetest.FormB} // FormB is B's: it grants nothing
	if err := s.AddKeyWith(ctx, key, storetest.AccountA, formsapi.KeyOptions{Forms: scope}); err != nil {
		t.Fatal(err)
	}
	return s, key, scope
}

func TestScopedKeyListsOnlyItsForms(t *testing.T) {
	t.Parallel()
	s, key, scope := scopedStore(t)
	for _, pageSize := range []int{1, 2, 3, 1000} {
		// A small maximum makes the handler read the account's forms in
		// several store pages, and shorten pages that pass its end.
		h := formsapi.NewHandler(s, s, formsapi.WithPageSize(min(2, pageSize), pageSize))
		for _, order := range []string{"desc", "asc"} {
			all := walkForms(t, h, storetest.KeyA, order, pageSize)
			var want []string
			for _, id := range all {
				if slices.Contains(scope, id) {
					want = append(want, id)
				}
			}
			if len(want) != 4 {
				t.Fatalf("want 4 forms of A in scope, got %v", want)
			}
			for limit := 1; limit <= min(4, pageSize); limit++ {
				got := walkForms(t, h, key, order, limit)
				if !slices.Equal(got, want) {
					t.Errorf("max %d, order %s, limit %d: the scoped key lists %v, want %v", pageSize, order, limit, got, want)
				}
			}
		}
	}
}

// walkForms follows nextCursor from the first page to the last and
// returns the form IDs in order. A page with a nextCursor must not be
// empty, and the last page must not promise more.
func walkForms(t *testing.T, h http.Handler, key, order string, limit int) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("no end to the pages")
		}
		target := fmt.Sprintf("/v1/forms?order=%s&limit=%d", order, limit)
		if cursor != "" {
			target += "&cursor=" + cursor
		}
		res := do(t, h, "GET", target, bearer(key)...)
		if res.status != 200 {
			t.Fatalf("%s: status %d: %s", target, res.status, res.body)
		}
		body := decode(t, res.body)
		forms := body["forms"].([]any)
		if len(forms) > limit {
			t.Fatalf("%s: %d forms on a page of %d", target, len(forms), limit)
		}
		for _, f := range forms {
			ids = append(ids, f.(map[string]any)["formId"].(string))
		}
		next, _ := body["nextCursor"].(string)
		if next == "" {
			return ids
		}
		if len(forms) == 0 {
			t.Fatalf("%s: an empty page with a nextCursor", target)
		}
		cursor = next
	}
}

func TestScopedKeyGetsThe404OfAMissingForm(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s, key, _ := scopedStore(t)
	c := &counting{store: s, keys: s}
	h := formsapi.NewHandler(c, s)
	missing := do(t, h, "GET", "/v1/forms/"+storetest.FormNone+"/submissions", bearer(key)...)
	is.Equal(missing.status, 404) // a form that does not exist
	calls := c.calls
	for _, form := range []string{storetest.FormEmpty, storetest.FormSmall, "extra-04"} {
		res := do(t, h, "GET", "/v1/forms/"+form+"/submissions", bearer(key)...)
		is.Equal(res.status, 404)                        // the account's own form, out of scope
		is.Equal(string(res.body), string(missing.body)) // byte for byte the same answer
		is.Equal(res.header.Get("Content-Length"), missing.header.Get("Content-Length"))
	}
	is.Equal(c.calls, calls) // decided without asking the store
	res := do(t, h, "GET", "/v1/forms/"+storetest.FormB+"/submissions", bearer(key)...)
	is.Equal(res.status, 404)                        // in the scope, but another account's form
	is.Equal(string(res.body), string(missing.body)) // grants nothing
	res = do(t, h, "GET", "/v1/forms/"+storetest.FormBusy+"/submissions?limit=5", bearer(key)...)
	is.Equal(res.status, 200) // a form in scope
	is.True(bytes.Contains(res.body, []byte(`"formId":"`+storetest.FormBusy+`"`)))
	res = do(t, h, "GET", "/v1/forms/"+storetest.FormEmpty+"/submissions", bearer(storetest.KeyA)...)
	is.Equal(res.status, 200) // the unscoped key of the same account still reads it
}

func TestExpiredKeyIsRefusedLikeARevokedOne(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := seeded(t)
	key, _ := formsapi.NewKey()
	at := time.Now().Add(150 * time.Millisecond)
	is.NoErr(s.AddKeyWith(context.Background(), key, storetest.AccountA, formsapi.KeyOptions{ExpiresAt: at}))
	h := formsapi.NewHandler(s, s)
	time.Sleep(time.Until(at) + 10*time.Millisecond)
	expired := do(t, h, "GET", "/v1/forms", bearer(key)...)
	revoked := do(t, h, "GET", "/v1/forms", bearer(storetest.KeyRevoked)...)
	is.Equal(expired.status, 401) // expired
	is.Equal(string(expired.body), string(revoked.body))
	is.Equal(expired.header.Get("WWW-Authenticate"), revoked.header.Get("WWW-Authenticate")) // the same answer as revoked
}

// laxAuthorizer returns grants without checking their expiry itself.
type laxAuthorizer struct {
	formsapi.KeyResolver
	grant formsapi.Grant
}

func (l laxAuthorizer) Authorize(ctx context.Context, key string) (formsapi.Grant, error) {
	return l.grant, nil
}

func TestHandlerChecksExpiryItself(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := seeded(t)
	past := laxAuthorizer{KeyResolver: s, grant: formsapi.Grant{AccountID: storetest.AccountA, ExpiresAt: time.Now().Add(-time.Second)}}
	future := laxAuthorizer{KeyResolver: s, grant: formsapi.Grant{AccountID: storetest.AccountA, ExpiresAt: time.Now().Add(time.Hour)}}
	is.Equal(do(t, formsapi.NewHandler(s, past), "GET", "/v1/forms", bearer("any-key")...).status, 401)   // an expired grant is refused
	is.Equal(do(t, formsapi.NewHandler(s, future), "GET", "/v1/forms", bearer("any-key")...).status, 200) // a live one is served
}

func TestAuthorizerOutageIsA500(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := seeded(t)
	down := failingAuthorizer{KeyResolver: s}
	res := do(t, formsapi.NewHandler(s, down), "GET", "/v1/forms", bearer(storetest.KeyA)...)
	is.Equal(res.status, 500) // never a 401 that would make a client drop a good key
}

type failingAuthorizer struct{ formsapi.KeyResolver }

func (failingAuthorizer) Authorize(context.Context, string) (formsapi.Grant, error) {
	return formsapi.Grant{}, errors.New("key database unreachable")
}

// TestNotModifiedDoesNotCount revalidates a page again and again with a
// quota of two: every 304 gives its unit back, so the revalidations never
// run into 429 and a full GET still fits afterwards.
func TestNotModifiedDoesNotCount(t *testing.T) {
	is := is.New(t)
	policy := formsapi.RateLimitPolicy{Name: "tight", Quota: 2, Window: time.Hour}
	h := seededHandler(t, formsapi.WithRateLimiter(formsapi.NewMemoryRateLimiter(policy)))
	auth := []string{"Authorization", "Bearer " + storetest.KeyA}
	first := do(t, h, "GET", "/v1/forms", auth...)
	is.Equal(first.status, 200) // the page
	tag := first.header.Get("ETag")
	is.True(tag != "") // with a tag
	for i := 0; i < 5; i++ {
		res := do(t, h, "GET", "/v1/forms", append(auth, "If-None-Match", tag)...)
		is.Equal(res.status, 304)                                   // unchanged, and not limited
		is.Equal(res.header.Get("RateLimit"), `"tight";r=1;t=1800`) // the unit is back, and with it half the wait
	}
	is.Equal(do(t, h, "GET", "/v1/forms", auth...).status, 200) // the second unit is still there
	is.Equal(do(t, h, "GET", "/v1/forms", auth...).status, 429) // and then the quota is spent
}
