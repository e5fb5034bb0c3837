package formsapi_test

// Search and filters attacked from outside (issue 42, RELIABILITY cases
// 103 and 104): data that the default limits accept, whose every
// submission is a candidate of a term it does not hold and costs its
// check as much normalization as search allows. A page of it once took
// seconds of CPU for one rate unit; its work is now bounded by bytes
// (find.MaxExaminedBytes) and charged to the rate limiter (charge.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/storetest"
)

// The attack's form: findAttackN submissions whose values hold every
// trigram of findAttackTerm and not the term, and 16 values of 2,048 é
// each (64 KiB: as much as search normalizes of one submission), so that
// each is a candidate of the term in every store, and costs its check
// 64 KiB of Unicode normalization.
const (
	findAttackForm = "attack"
	findAttackN    = 24
	findAttackTerm = "qwertz"
)

// findAttackMemstore is a memstore loaded with findAttackSeed.
func findAttackMemstore(t *testing.T) *memstore.Store {
	t.Helper()
	m := memstore.New()
	if err := storetest.Load(context.Background(), m, findAttackSeed()); err != nil {
		t.Fatal(err)
	}
	return m
}

func findAttackSeed() storetest.Seed {
	seed := storetest.DefaultSeed()
	seed.Forms = append(seed.Forms, storetest.SeedForm{AccountID: storetest.AccountA, Form: formsapi.Form{ID: findAttackForm, Title: "Attack", CreatedAt: time.Unix(1_700_000_000, 0)}})
	heavy := `"` + strings.Repeat("é", 2048) + `"`
	values := strings.Repeat(heavy+",", 15) + heavy
	for i := range findAttackN {
		data := fmt.Sprintf(`{"n":%d,"a":"qwer wertz","v":[%s]}`, i, values)
		sub := formsapi.Submission{FormID: findAttackForm, Data: json.RawMessage(data), CreatedAt: time.Unix(1_700_000_000+int64(i), 0)}
		seed.Submissions = append(seed.Submissions, storetest.SeedSubmission{Submission: sub})
	}
	return seed
}

// chargeRecorder is a ratelimit.Charger over ratelimit.Memory that
// records the units each charge took, and the bucket.
type chargeRecorder struct {
	*ratelimit.Memory
	mu      sync.Mutex
	charges []int
	buckets []string
}

func (c *chargeRecorder) Charge(ctx context.Context, key string, p ratelimit.Policy, n int) (ratelimit.Decision, error) {
	c.mu.Lock()
	c.charges = append(c.charges, n)
	c.buckets = append(c.buckets, key)
	c.mu.Unlock()
	return c.Memory.Charge(ctx, key, p, n)
}

// take returns the charges recorded since the last take.
func (c *chargeRecorder) take() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.charges
	c.charges = nil
	return got
}

var rateRemaining = regexp.MustCompile(`;r=(\d+);`)

// remaining is the r of a response's RateLimit field.
func remaining(t *testing.T, h http.Header) int {
	t.Helper()
	m := rateRemaining.FindStringSubmatch(h.Get("RateLimit"))
	if m == nil {
		t.Fatalf("RateLimit %q", h.Get("RateLimit"))
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestFindAttackPageWorkIsBoundedAndCharged: on every store (memstore,
// sqlitestore with the search index off and on, and pgstore likewise
// when FORMSAPI_TEST_POSTGRES is set), a page of q=qwertz over the
// attack's form ends once its checks come to find.MaxExaminedBytes of
// work (each candidate's 64 KiB of data and, 16 times over, the 96 KiB
// its check normalized), after 11 of the 24 candidates, with a cursor,
// and the limiter is charged one unit per started 4 MiB beyond the one
// Allow took: 3 or 4 units (16 MiB plus at most one candidate's 1.6 MiB
// of work), which the RateLimit field shows. The walk goes on from the
// cursor, finds nothing, as the term is in no submission, and each of
// its pages is bounded and charged the same way. An exact total of the
// same list stops at its own bound (find.MaxExactCountBytes, "at_least")
// and is charged too. Before, the first page checked all 24 (all 1,000
// entries it may examine), ended without a cursor and cost one unit: on
// 200 submissions of a megabyte, 4.4 to 7.8 s of CPU.
func TestFindAttackPageWorkIsBoundedAndCharged(t *testing.T) {
	t.Parallel()
	stores, _ := everyStore(t, findAttackSeed())
	// A unit comes back every 8.8 hours, not every 3.6 s as over an
	// hour: the walk may take longer than that on a loaded machine, and
	// the remaining count it checks must not move with the clock.
	policy := ratelimit.Policy{Name: "default", Quota: 1000, Window: 366 * 24 * time.Hour}
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l := &chargeRecorder{Memory: ratelimit.NewMemory()}
			h := formsapi.NewHandler(s, s.(formsapi.KeyResolver), formsapi.WithRateLimit(ratelimit.Options{Limiter: l, Policy: policy}))
			get := func(query string) (*httptest.ResponseRecorder, findPage) {
				t.Helper()
				r := httptest.NewRequest("GET", "/v1/forms/"+findAttackForm+"/submissions?"+query, nil)
				r.Header.Set("Authorization", "Bearer "+storetest.KeyA)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					t.Fatalf("?%s: %d %s", query, w.Code, w.Body)
				}
				var p findPage
				if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
					t.Fatal(err)
				}
				return w, p
			}
			query, left, pages := "q="+findAttackTerm+"&limit=100", policy.Quota, 0
			for ; ; pages++ {
				if pages == findAttackN {
					t.Fatal("the walk does not end")
				}
				w, p := get(query)
				if len(p.Submissions) != 0 {
					t.Fatalf("page %d: %d submissions hold %q", pages, len(p.Submissions), findAttackTerm)
				}
				charges := l.take()
				if p.NextCursor == nil {
					break
				}
				// A page that ends at its bound has checked at least
				// 16 MiB, and at most one candidate past it.
				if len(charges) != 1 || charges[0] < 3 || charges[0] > 4 {
					t.Fatalf("page %d ends with a cursor after charges %v, want one of 3 or 4 units", pages, charges)
				}
				left -= 1 + charges[0]
				if got := remaining(t, w.Header()); got != left {
					t.Errorf("page %d: RateLimit r=%d, want %d (one unit, and %d charged)", pages, got, left, charges[0])
				}
				query = "cursor=" + url.QueryEscape(*p.NextCursor)
			}
			if pages != 2 {
				t.Errorf("the walk took %d pages ending at their bound, want 2 (24 candidates of 1.6 MiB of work, 11 a page)", pages)
			}
			w, _ := get("q=" + findAttackTerm + "&limit=1&total=exact")
			var total struct{ Total formsapi.Total }
			if err := json.Unmarshal(w.Body.Bytes(), &total); err != nil {
				t.Fatal(err)
			}
			if total.Total != (formsapi.Total{Value: 0, Kind: "at_least"}) {
				t.Errorf("total=exact: %+v, want 0 at_least (the count's bound)", total.Total)
			}
			// The page's 16 MiB and the count's 32 MiB: 11 or 12 units.
			if charges := l.take(); len(charges) != 1 || charges[0] < 11 || charges[0] > 13 {
				t.Errorf("a page and its exact total charged %v, want 11 to 13 units", charges)
			}
		})
	}
}

// TestFindAttackDebtRefuses: a charge takes its units whatever is left,
// so the attack's pages spend a small quota in two requests, and the
// next is refused with 429 until the debt is paid, rather than each
// costing one unit.
func TestFindAttackDebtRefuses(t *testing.T) {
	t.Parallel()
	m := findAttackMemstore(t)
	policy := ratelimit.Policy{Name: "default", Quota: 6, Window: time.Hour}
	h := formsapi.NewHandler(m, m, formsapi.WithRateLimit(ratelimit.Options{Limiter: ratelimit.NewMemory(), Policy: policy}))
	statuses := make([]int, 3)
	for i := range statuses {
		r := httptest.NewRequest("GET", "/v1/forms/"+findAttackForm+"/submissions?q="+findAttackTerm, nil)
		r.Header.Set("Authorization", "Bearer "+storetest.KeyA)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		statuses[i] = w.Code
	}
	if statuses[0] != 200 || statuses[1] != 200 || statuses[2] != 429 {
		t.Errorf("three pages of the attack under a quota of 6: %v, want 200, 200 (in debt), 429", statuses)
	}
}

// TestFindAttackScopedKeyCharged: a scoped key's page of the attack is
// charged in both buckets its unit was taken from, its own first and
// then its account's, and its RateLimit field shows its own bucket after
// the charge, as for its unit.
func TestFindAttackScopedKeyCharged(t *testing.T) {
	t.Parallel()
	m := findAttackMemstore(t)
	key, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddKeyWith(context.Background(), key, storetest.AccountA, formsapi.KeyOptions{Forms: []string{findAttackForm}}); err != nil {
		t.Fatal(err)
	}
	l := &chargeRecorder{Memory: ratelimit.NewMemory()}
	policy := ratelimit.Policy{Name: "default", Quota: 100, Window: time.Hour} // a scoped key may take 50
	h := formsapi.NewHandler(m, m, formsapi.WithRateLimit(ratelimit.Options{Limiter: l, Policy: policy}))
	r := httptest.NewRequest("GET", "/v1/forms/"+findAttackForm+"/submissions?q="+findAttackTerm, nil)
	r.Header.Set("Authorization", "Bearer "+key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if len(l.charges) != 2 || l.charges[0] != l.charges[1] || l.charges[0] < 3 {
		t.Fatalf("charges %v, want the page's units twice", l.charges)
	}
	if want := []string{"key:" + formsapi.KeyID(key), "account:" + storetest.AccountA}; !slices.Equal(l.buckets, want) {
		t.Errorf("charged %v, want %v", l.buckets, want)
	}
	if got, want := w.Header().Get("RateLimit"), fmt.Sprintf(`"default-key";r=%d;`, 50-1-l.charges[0]); !strings.HasPrefix(got, want) {
		t.Errorf("RateLimit %q, want the key's own bucket, %s…", got, want)
	}
}
