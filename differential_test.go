package formsapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// TestDifferentialSQLiteAndPostgres writes the same random worlds (the
// property test's generator) into sqlitestore and pgstore and walks every
// list through a handler over each, page by page, for both orders,
// several limits and since/until windows: every response must be the same
// bytes, cursors aside. The handlers use different cursor secrets, so
// each walk follows its own cursors.
func TestDifferentialSQLiteAndPostgres(t *testing.T) {
	pgtest.DSN(t)
	t.Parallel()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(2024, 9))
	for iter := range 4 {
		w := newWorld(r, iter)
		lite, err := sqlitestore.Open(filepath.Join(t.TempDir(), "d.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lite.Close() })
		pg := openPostgres(t, false)
		for _, s := range []writeStore{lite, pg} {
			if err := storetest.Load(ctx, s, w.seed); err != nil {
				t.Fatalf("iteration %d: load: %v", iter, err)
			}
		}
		hl, hp := formsapi.NewHandler(lite, lite), formsapi.NewHandler(pg, pg)
		base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		walks := 0
		for _, account := range w.accounts {
			key := w.keys[account]
			lists := []string{"/v1/forms"}
			for _, id := range w.forms[account] {
				lists = append(lists, "/v1/forms/"+id+"/submissions")
			}
			lists = append(lists, "/v1/forms/"+randomID(r)+"-none/submissions")
			for _, list := range lists {
				// Forms are spread over 50 hours, submissions over 20
				// minutes: windows on that scale cut lists in the middle.
				unit := time.Minute
				if list == "/v1/forms" {
					unit = time.Hour
				}
				point := func() time.Time {
					return base.Add(time.Duration(r.IntN(22))*unit + time.Duration(r.IntN(3)-1)) // on, or a nanosecond off, a stored time
				}
				for range 6 {
					v := url.Values{}
					v.Set("limit", fmt.Sprint([]int{1, 2, 3, 7, 20, storetest.MaxLimit}[r.IntN(6)]))
					if o := []string{"", "asc", "desc"}[r.IntN(3)]; o != "" {
						v.Set("order", o)
					}
					since, until := point(), point()
					if until.Before(since) {
						since, until = until, since
					}
					switch r.IntN(4) {
					case 1:
						v.Set("since", since.Format(time.RFC3339Nano))
					case 2:
						v.Set("until", until.Format(time.RFC3339Nano))
					case 3:
						if until.After(since) {
							v.Set("since", since.Format(time.RFC3339Nano))
							v.Set("until", until.Format(time.RFC3339Nano))
						}
					}
					compareWalks(t, hl, hp, list, v, key)
					walks++
				}
			}
		}
		t.Logf("iteration %d: %d walks compared", iter, walks)
	}
}

// compareWalks walks one list through both handlers in step and fails at
// the first page whose status or body differs with cursors blanked.
func compareWalks(t *testing.T, a, b http.Handler, path string, v url.Values, key string) {
	t.Helper()
	va, vb := cloneValues(v), cloneValues(v)
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatalf("%s?%s: the walk does not end", path, v.Encode())
		}
		ra := do(t, a, "GET", path+"?"+va.Encode(), bearer(key)...)
		rb := do(t, b, "GET", path+"?"+vb.Encode(), bearer(key)...)
		ca, cb := nextCursor(t, ra.body), nextCursor(t, rb.body)
		ba := blankCursor(ra.body, ca)
		bb := blankCursor(rb.body, cb)
		if ra.status != rb.status || !bytes.Equal(ba, bb) {
			t.Fatalf("%s?%s page %d differs:\nsqlitestore %d %s\npgstore     %d %s", path, v.Encode(), page, ra.status, ba, rb.status, bb)
		}
		if ra.status != http.StatusOK || ca == "" {
			return
		}
		va.Set("cursor", ca)
		vb.Set("cursor", cb)
	}
}

func cloneValues(v url.Values) url.Values {
	c := url.Values{}
	for k, vs := range v {
		c[k] = append([]string(nil), vs...)
	}
	return c
}

func nextCursor(t *testing.T, body []byte) string {
	t.Helper()
	var p struct {
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, body)
	}
	return p.NextCursor
}

func blankCursor(body []byte, cursor string) []byte {
	if cursor == "" {
		return body
	}
	quoted, _ := json.Marshal(cursor)
	return bytes.ReplaceAll(body, quoted, []byte(`"<cursor>"`))
}
