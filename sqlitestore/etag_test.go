package sqlitestore_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
)

// TestCachedPageTagsAreExact: the ETag of a page the read cache serves
// comes from the digest of its items kept with the held page (computed
// once, wire.Page.Digests), so it must be the tag an uncached store gives
// for the same page, on every repeat, for every limit served from one
// held page (more limits than the digests it keeps), after additions
// (spliced or read again) and a deletion; and a tag a client holds is
// answered 304 only while the page is what it was.
func TestCachedPageTagsAreExact(t *testing.T) {
	db := hostDB(t, filepath.Join(t.TempDir(), "tags.db"))
	cached := mustNew(t, db, sqlitestore.WithCacheSize(1<<20))
	plain := mustNew(t, db)
	secret := formsapi.WithCursorSecret([]byte("the same secret on both handlers, 32+ bytes"))
	hc, hp := formsapi.NewHandler(cached, cached, secret), formsapi.NewHandler(plain, plain, secret)
	key, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := cached.AddKey(ctx, key, "acct"); err != nil {
		t.Fatal(err)
	}
	if err := cached.AddForm(ctx, "acct", formsapi.Form{ID: "f", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	n := 0
	add := func() {
		t.Helper()
		if err := cached.AddSubmission(ctx, formsapi.Submission{FormID: "f", Data: []byte(fmt.Sprintf(`{"n":%d}`, n)),
			CreatedAt: t0.Add(time.Duration(n) * time.Second)}, formsapi.Metadata{ID: fmt.Sprintf("s%d", n)}); err != nil {
			t.Fatal(err)
		}
		n++
	}
	for range 12 {
		add()
	}
	tag := func(h http.Handler, target, ifNoneMatch string) (int, string) {
		t.Helper()
		r := httptest.NewRequest("GET", target, nil)
		r.Header.Set("Authorization", "Bearer "+key)
		if ifNoneMatch != "" {
			r.Header.Set("If-None-Match", ifNoneMatch)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Header().Get("ETag")
	}
	check := func(when string) map[string]string {
		t.Helper()
		tags := map[string]string{}
		for _, order := range []string{"desc", "asc"} {
			for round := range 3 { // a miss, then hits
				for limit := 1; limit <= 8; limit++ {
					target := fmt.Sprintf("/v1/forms/f/submissions?order=%s&limit=%d", order, limit)
					_, want := tag(hp, target, "")
					code, got := tag(hc, target, "")
					if code != 200 || got != want {
						t.Fatalf("%s, round %d, %s: cached %d %s, want the uncached tag %s", when, round, target, code, got, want)
					}
					tags[target] = got
				}
			}
		}
		return tags
	}
	before := check("at first")
	for target, old := range before {
		if code, _ := tag(hc, target, old); code != http.StatusNotModified {
			t.Fatalf("%s with its own tag: %d, want 304", target, code)
		}
	}
	add()
	after := check("after an addition")
	for target, old := range before {
		code, _ := tag(hc, target, old)
		// Oldest-first pages of at most 8 of 13 items do not change.
		if want := map[bool]int{true: http.StatusNotModified, false: 200}[after[target] == old]; code != want {
			t.Errorf("%s with the tag from before the addition: %d, want %d", target, code, want)
		}
		if after[target] == old && target[len("/v1/forms/f/submissions?order="):][:4] == "desc" {
			t.Errorf("%s: the newest-first page kept its tag across an addition", target)
		}
	}
	if err := cached.DeleteSubmission(ctx, "acct", "f", "s12"); err != nil {
		t.Fatal(err)
	}
	check("after a deletion")
}
