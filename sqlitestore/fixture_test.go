package sqlitestore_test

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// The fixture is a database file that the release at commit b022ac3 wrote
// (storetest.DefaultSeed, keys included), with the response bodies that
// release served from it, cursors blanked. A later release must migrate
// it and serve it byte for byte the same: the stored encoding is on disk,
// and this is what holds it to that (see internal/stored).
const fixture = "testdata/release-b022ac3"

var cursorValue = regexp.MustCompile(`"nextCursor":"[^"]*"`)

func TestServesAnOldReleasesFileByteIdentically(t *testing.T) {
	t.Parallel()
	var golden map[string][]string
	b, err := os.ReadFile(fixture + ".golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	copyFile(t, fixture+".db", path) // Open migrates the file in place
	s := mustOpen(t, path)
	h := formsapi.NewHandler(s, s)
	for start, want := range golden {
		var got []string
		for target := start; target != ""; {
			r := httptest.NewRequest("GET", target, nil)
			r.Header.Set("Authorization", "Bearer "+storetest.KeyA)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != 200 {
				t.Fatalf("GET %s: %d %s", target, w.Code, w.Body)
			}
			var page struct{ NextCursor string }
			if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil {
				t.Fatalf("GET %s: %v", target, err)
			}
			got = append(got, cursorValue.ReplaceAllString(w.Body.String(), `"nextCursor":"…"`))
			target = ""
			if page.NextCursor != "" {
				sep := "&"
				if !strings.Contains(start, "?") {
					sep = "?"
				}
				target = start + sep + "cursor=" + page.NextCursor
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d pages, the old release served %d", start, len(got), len(want))
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s, page %d:\n got %s\nwant %s", start, i+1, got[i], want[i])
			}
		}
	}
}

// TestReencodesStaleRowsAtOpen marks rows as written in another encoding,
// with JSON that is not what this release writes, and reopens the file:
// the store rewrites them from their source columns before serving.
func TestReencodesStaleRowsAtOpen(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	s := load(t, mustOpen(t, path), storetest.DefaultSeed())
	want := listAll(t, s)
	if _, err := sqlitestore.WriteDB(s).Exec(`UPDATE formsapi_submissions SET json = '{"stale":true}', json_version = 0`); err != nil {
		t.Fatal(err)
	}
	if got := listAll(t, s); got == want {
		t.Fatal("the damage did not show: the test proves nothing")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, path)
	if got := listAll(t, s); got != want {
		t.Errorf("after reopening:\n got %s\nwant %s", got, want)
	}
	var stale int
	if err := sqlitestore.WriteDB(s).QueryRow(`SELECT count(*) FROM formsapi_submissions WHERE json_version <> 1`).Scan(&stale); err != nil || stale != 0 {
		t.Errorf("%d rows still stale (%v)", stale, err)
	}
}

// listAll returns the fast path's answer for the busiest form.
func listAll(t *testing.T, s *sqlitestore.Store) string {
	t.Helper()
	h := formsapi.NewHandler(s, s)
	r := httptest.NewRequest("GET", "/v1/forms/"+storetest.FormBusy+"/submissions?limit=1000", nil)
	r.Header.Set("Authorization", "Bearer "+storetest.KeyA)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Body.String()
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
