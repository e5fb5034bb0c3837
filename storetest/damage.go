package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/storecontract"
)

// damagedContent is in every damaged value the suite writes: it must
// never reach a log line.
const damagedContent = "DAMAGED-CONTENT"

// newestSmall is the data of the submission the Damage clauses damage.
const newestSmall = `{"n":102,"plan":"pro"}`

// damageCases are the ways the Damage clauses damage the newest
// submission of FormSmall (the last of the seed's three, created at
// base+2s): the one table every store is checked with.
func damageCases() []DamageCase {
	object := func(data string) []byte {
		return []byte(`{"formId":"` + FormSmall + `","data":` + data + `,"attachments":[],"createdAt":"2024-03-01T09:00:02Z"}`)
	}
	const levels = 10001 // encoding/json decodes 10,000
	deep := `{"note":"` + damagedContent + `","deep":` + strings.Repeat("[", levels) + strings.Repeat("]", levels) + `}`
	return []DamageCase{
		{Name: "Truncated", Data: []byte(`{"note":"` + damagedContent + `","n":1`),
			Object: []byte(`{"formId":"` + FormSmall + `","data":{"note":"` + damagedContent + `","n":1`)},
		{Name: "NotAnObject", Data: []byte(`["` + damagedContent + `"]`),
			Object: []byte(`["` + damagedContent + `"]`)},
		// Nothing where the JSON was; a single space for the data, since
		// empty data means {}.
		{Name: "Blank", Data: []byte(" "), Object: []byte{}},
		// Stored before the write side had Limits: a response holding it
		// would pass encoding/json's limit of 10,000 levels.
		{Name: "NestsTooDeep", Data: []byte(deep), Object: object(deep)},
		// Sent, as encoding/json would send it: U+FFFD for each bad byte.
		{Name: "InvalidUTF8", Data: []byte("{\"n\":102,\"note\":\"\xff\xfe\"}"),
			Object: object("{\"n\":102,\"note\":\"\xff\xfe\"}"), Served: true},
	}
}

// damageClauses damages the newest submission of FormSmall one way per
// clause, on a fresh store each, and reads the form through a handler
// over the store: through ListSubmissions (the checked path, which any
// store's handler takes), through the store's own fast path when it has
// one, and through its sync feed, checked and fast, when it has one.
// Walked in one page and a page per item, the damaged submission is left
// out and logged by position, never content (or, for invalid UTF-8,
// served as valid UTF-8), and every other submission comes exactly once.
func damageClauses(t *testing.T, open Open, cfg *config) {
	for _, dc := range damageCases() {
		t.Run(dc.Name, func(t *testing.T) {
			cfg.parallel(t)
			s := open(t, DefaultSeed())
			cfg.damage(t, s, AccountA, FormSmall, dc)
			var keys formsapi.KeyResolver = formsapi.KeyResolverFunc(seedKeys)
			if r, ok := s.(formsapi.KeyResolver); ok {
				keys = r
			}
			paths := []readPath{{"ListSubmissions", checkedOnly{s}, false}}
			if _, ok := storecontract.Of[fastStore](s); ok {
				paths = append(paths, readPath{"fast path", s, false})
			}
			if f, ok := s.(formsapi.FeedStore); ok {
				paths = append(paths, readPath{"SyncSubmissions", checkedFeed{s, f}, true})
				if _, ok := storecontract.Of[fastFeedStore](s); ok {
					paths = append(paths, readPath{"feed fast path", s, true})
				}
			}
			want := []string{`{"n":101,"plan":"pro"}`, `{"n":100,"plan":"pro"}`} // the rest, newest first
			for _, p := range paths {
				logs := &syncBuffer{}
				h := formsapi.NewHandler(p.store, keys, formsapi.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
				// Each walk twice: a store that caches pages must not
				// keep one that left a row out, or the second read
				// would not log it.
				for i, limit := range []int{1, 1, MaxLimit, MaxLimit} {
					logs.Reset()
					got, damaged := walkDamaged(t, h, p.feed, limit)
					if p.feed {
						slices.Reverse(got) // the feed is oldest first
					}
					if dc.Served {
						// Where the store could not hold the damage in
						// what this path reads, the row is served intact.
						got = slices.DeleteFunc(got, func(data string) bool {
							if data == newestSmall {
								damaged = append(damaged, data)
								return true
							}
							return false
						})
					}
					what := fmt.Sprintf("%s, limit %d, read %d", p.name, limit, i%2+1)
					if !slices.Equal(got, want) {
						t.Errorf("%s: the intact submissions served are %v, want %v", what, got, want)
					}
					switch {
					case dc.Served && len(damaged) != 1:
						t.Errorf("%s: the damaged submission is served %d times, want once with its invalid UTF-8 as U+FFFD", what, len(damaged))
					case !dc.Served && len(damaged) != 0:
						t.Errorf("%s: the damaged submission is served as %.200s, want it left out", what, damaged)
					}
					logged := logs.String()
					if left := !dc.Served; left != strings.Contains(logged, `"position"`) {
						t.Errorf("%s: log %.300q; want a line with the position of the submission exactly when it is left out (%v)", what, logged, left)
					}
					if strings.Contains(logged, damagedContent) {
						t.Errorf("%s: the damaged submission's content reached the log: %.300s", what, logged)
					}
				}
			}
		})
	}
}

// readPath is a way the handler reads a store: store is what it is
// given, and feed says whether the walk is of the sync feed.
type readPath struct {
	name  string
	store formsapi.Store
	feed  bool
}

// walkDamaged walks FormSmall newest first (the feed oldest first)
// through h with KeyA, limit items a page, and returns the data of the
// seed's intact submissions it was served and that of any other,
// checking that every page is a 200 of valid UTF-8 JSON.
func walkDamaged(t *testing.T, h http.Handler, feed bool, limit int) (intact, other []string) {
	t.Helper()
	first := fmt.Sprintf("/v1/forms/%s/submissions?limit=%d", FormSmall, limit)
	next := first + "&cursor="
	if feed {
		first += "&sync=start"
		next = fmt.Sprintf("/v1/forms/%s/submissions?limit=%d&sync=", FormSmall, limit)
	}
	target := first
	for pages := 0; target != ""; pages++ {
		if pages > 10 {
			t.Fatalf("%s: the walk does not end", first)
		}
		r := httptest.NewRequest("GET", target, nil)
		r.Header.Set("Authorization", "Bearer "+KeyA)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %.300s, want 200 with the rest of the page", target, w.Code, w.Body)
		}
		if !utf8.Valid(w.Body.Bytes()) {
			t.Errorf("GET %s: the response is not valid UTF-8: %.300q", target, w.Body)
		}
		var p struct {
			Submissions []struct{ Data json.RawMessage }
			NextCursor  string
			SyncToken   string
			HasMore     bool
		}
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatalf("GET %s: %v: %.300s", target, err, w.Body)
		}
		for _, sub := range p.Submissions {
			if data := Canonical(sub.Data); strings.Contains(data, `"plan":"pro"`) {
				intact = append(intact, data)
			} else {
				other = append(other, data)
			}
		}
		switch {
		case feed && p.HasMore:
			target = next + url.QueryEscape(p.SyncToken)
		case !feed && p.NextCursor != "":
			target = next + url.QueryEscape(p.NextCursor)
		default:
			target = ""
		}
	}
	return intact, other
}

// seedKeys resolves the seed's keys of AccountA, for a store that does
// not resolve keys itself.
func seedKeys(_ context.Context, key string) (string, error) {
	if key == KeyA || key == KeyA2 {
		return AccountA, nil
	}
	return "", formsapi.ErrInvalidKey
}

// checkedFeed hides a store's fast paths from the handler but keeps its
// feed.
type checkedFeed struct {
	formsapi.Store
	formsapi.FeedStore
}

// syncBuffer is a log destination for a handler serving in parallel.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.Reset()
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
