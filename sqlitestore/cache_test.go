package sqlitestore_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

var t0 = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

// newTenant returns a store from Open with one account, its key, and
// forms f0 to f4 of 30 submissions each, {"n":0} to {"n":29}, oldest first.
func newTenant(t *testing.T) (path string, s *sqlitestore.Store, key string) {
	t.Helper()
	is := is.New(t)
	path = dbPath(t)
	s = mustOpen(t, path)
	key, err := formsapi.NewKey()
	is.NoErr(err)                        // new key
	is.NoErr(s.AddKey(ctx, key, "acct")) // add key
	for f := 0; f < 5; f++ {
		id := fmt.Sprintf("f%d", f)
		is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: id, CreatedAt: t0})) // add form
		for i := 0; i < 30; i++ {
			is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: id, Data: []byte(fmt.Sprintf(`{"n":%d}`, i)),
				CreatedAt: t0.Add(time.Duration(i) * time.Second)}, formsapi.Metadata{})) // add submission
		}
	}
	return path, s, key
}

// handlers keeps one handler per store: cursors are sealed by the handler
// that made them.
var handlers sync.Map

// get requests target through a handler over s with key and returns the
// status and the n of each submission (or each form's ID for the forms).
func get(t *testing.T, s *sqlitestore.Store, key, target string) (int, []string, string) {
	t.Helper()
	r := httptest.NewRequest("GET", target, nil)
	r.Header.Set("Authorization", "Bearer "+key)
	w := httptest.NewRecorder()
	h, _ := handlers.LoadOrStore(s, formsapi.NewHandler(s, s))
	h.(http.Handler).ServeHTTP(w, r)
	if w.Code != 200 {
		return w.Code, nil, ""
	}
	var page struct {
		Forms []struct {
			ID string `json:"formId"`
		}
		Submissions []struct{ Data map[string]any }
		NextCursor  string
	}
	if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil {
		t.Fatalf("GET %s: %v\n%s", target, err, w.Body.Bytes())
	}
	var items []string
	for _, f := range page.Forms {
		items = append(items, f.ID)
	}
	for _, sub := range page.Submissions {
		items = append(items, fmt.Sprint(sub.Data["n"]))
	}
	return w.Code, items, page.NextCursor
}

func formSeq(t *testing.T, db *sql.DB, id string) int64 {
	t.Helper()
	var seq int64
	if err := db.QueryRow("SELECT seq FROM formsapi_forms WHERE id = ?", id).Scan(&seq); err != nil {
		t.Fatalf("seq of %s: %v", id, err)
	}
	return seq
}

// TestCacheForgetsOnlyWhatChanged writes to one form through another
// connection while the cache holds pages of several: the next request
// for that form shows the write, and the other forms' pages stay cached.
func TestCacheForgetsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	path, s, key := newTenant(t)
	other := hostDB(t, path)
	warm := func() {
		for f := 0; f < 5; f++ {
			for _, q := range []string{"limit=10", "limit=5&order=asc", "limit=3"} {
				code, items, _ := get(t, s, key, fmt.Sprintf("/v1/forms/f%d/submissions?%s", f, q))
				is.Equal(code, 200) // warm
				is.True(len(items) > 0)
			}
		}
	}
	warm()
	before := sqlitestore.CachedVersions(s)
	is.Equal(len(before), 5) // every form has pages cached

	_, err := other.Exec(`INSERT INTO formsapi_submissions (form_seq, created_at, data, attachments, json)
		SELECT seq, ?, '{"n":100}', '[]', ? FROM formsapi_forms WHERE id = 'f2'`,
		t0.Add(time.Hour).UnixNano(), []byte(`{"formId":"f2","data":{"n":100},"attachments":[],"createdAt":"2025-03-01T01:00:00Z"}`))
	is.NoErr(err) // insert through another connection

	_, items, _ := get(t, s, key, "/v1/forms/f2/submissions?limit=3")
	is.Equal(items, []string{"100", "29", "28"}) // the write, on the very next request
	_, items, _ = get(t, s, key, "/v1/forms/f2/submissions?limit=5&order=asc")
	is.Equal(items, []string{"0", "1", "2", "3", "4"}) // unchanged content, reread
	warm()
	after := sqlitestore.CachedVersions(s)
	seq2 := formSeq(t, other, "f2")
	for seq, vs := range before {
		if seq == seq2 {
			is.True(slices.Max(after[seq]) > slices.Max(vs)) // the written form's pages are newer
			continue
		}
		is.Equal(after[seq], vs) // the other forms' pages were kept, not reread
	}

	// A host updating or deleting a submission directly is seen too.
	_, err = other.Exec(`UPDATE formsapi_submissions SET json = ? WHERE data = '{"n":100}'`,
		[]byte(`{"formId":"f2","data":{"n":101},"attachments":[],"createdAt":"2025-03-01T01:00:00Z"}`))
	is.NoErr(err) // update elsewhere
	_, items, _ = get(t, s, key, "/v1/forms/f2/submissions?limit=1")
	is.Equal(items, []string{"101"}) // the update, at once
	_, err = other.Exec(`DELETE FROM formsapi_submissions WHERE data = '{"n":100}'`)
	is.NoErr(err) // delete elsewhere
	_, items, _ = get(t, s, key, "/v1/forms/f2/submissions?limit=1")
	is.Equal(items, []string{"29"}) // the deletion, at once
}

// TestCacheSurvivesReusedSeq deletes the newest form through another
// connection and makes a new one with the same ID, which SQLite gives the
// same seq: the cached pages of the old form must not be served for it.
func TestCacheSurvivesReusedSeq(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	path, s, key := newTenant(t)
	other := hostDB(t, path)
	_, items, _ := get(t, s, key, "/v1/forms/f4/submissions?limit=2")
	is.Equal(items, []string{"29", "28"}) // cached
	old := formSeq(t, other, "f4")
	_, err := other.Exec(`DELETE FROM formsapi_submissions WHERE form_seq = ?`, old)
	is.NoErr(err) // delete the submissions
	_, err = other.Exec(`DELETE FROM formsapi_forms WHERE seq = ?`, old)
	is.NoErr(err) // and the form
	_, err = other.Exec(`INSERT INTO formsapi_forms (id, account_id, title, icon, notification_email, created_at)
		VALUES ('f4', 'acct', '', '', '', 0)`)
	is.NoErr(err)                          // a new form with the same ID
	is.Equal(formSeq(t, other, "f4"), old) // and the same seq
	code, items, _ := get(t, s, key, "/v1/forms/f4/submissions?limit=2")
	is.Equal(code, 200)     // found
	is.Equal(len(items), 0) // empty, not the old form's page
}

// TestCacheLimitsShareAPage serves smaller pages from a cached bigger one
// with the right cursors, and reads again for a bigger one.
func TestCacheLimitsShareAPage(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	_, s, key := newTenant(t)
	walk := func(limit int) []string {
		var all []string
		target := fmt.Sprintf("/v1/forms/f1/submissions?limit=%d", limit)
		for {
			code, items, next := get(t, s, key, target)
			is.Equal(code, 200) // page
			all = append(all, items...)
			if next == "" {
				return all
			}
			target = fmt.Sprintf("/v1/forms/f1/submissions?limit=%d&cursor=%s", limit, url.QueryEscape(next))
		}
	}
	want := walk(100) // one page holds them all
	is.Equal(len(want), 30)
	for _, limit := range []int{1, 7, 10, 29, 30, 31, 100, storetest.MaxLimit} {
		is.Equal(walk(limit), want) // every limit walks the same items once
	}
	_, items, next := get(t, s, key, "/v1/forms/f1/submissions?limit=30")
	is.Equal(len(items), 30)
	is.Equal(next, "") // exactly the whole form: no next page
	_, items, next = get(t, s, key, "/v1/forms/f1/submissions?limit=29")
	is.Equal(len(items), 29)
	is.True(next != "") // one more follows
	code, _, _ := get(t, s, key, "/v1/forms/f1/submissions?limit=0")
	is.Equal(code, 400) // a bad limit is refused, cache or not
}

// TestCacheUnderConcurrentWriter has readers request all five forms
// while another connection adds submissions to f0: every read of f0 that
// starts after a commit must show it, and the other forms never change.
func TestCacheUnderConcurrentWriter(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	path, s, key := newTenant(t)
	other := hostDB(t, path)
	var committed atomic.Int64 // the n of the newest submission committed to f0
	committed.Store(29)
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 100)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for n := 30; n < 130; n++ {
			at := t0.Add(time.Duration(n) * time.Second)
			_, err := other.Exec(`INSERT INTO formsapi_submissions (form_seq, created_at, data, attachments, json)
				SELECT seq, ?, '{}', '[]', ? FROM formsapi_forms WHERE id = 'f0'`, at.UnixNano(),
				[]byte(fmt.Sprintf(`{"formId":"f0","data":{"n":%d},"attachments":[],"createdAt":%q}`, n, at.Format(time.RFC3339))))
			if err != nil {
				errs <- err
				return
			}
			committed.Store(int64(n))
		}
	}()
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				f := i % 5
				want := committed.Load()
				_, items, _ := get(t, s, key, fmt.Sprintf("/v1/forms/f%d/submissions?limit=%d", f, []int{1, 10, 25}[i%3]))
				if len(items) == 0 {
					errs <- fmt.Errorf("f%d: empty page", f)
					return
				}
				newest, _ := strconv.Atoi(items[0])
				if f == 0 && int64(newest) < want {
					errs <- fmt.Errorf("f0: newest %d, but %d was committed before the request", newest, want)
					return
				}
				if f != 0 && newest != 29 {
					errs <- fmt.Errorf("f%d: newest %d, want 29", f, newest)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	_, items, _ := get(t, s, key, "/v1/forms/f0/submissions?limit=1")
	is.Equal(items, []string{"129"}) // the last write
}

// TestOtherProcessWrites runs this test binary again as a child process
// that writes to the file through its own store: a new submission, a new
// form, a revoked key. Each is seen on the very next request.
func TestOtherProcessWrites(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	path, s, key := newTenant(t)
	child := func(args ...string) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildWriter$")
		cmd.Env = append(os.Environ(), "FORMSAPI_CHILD_WRITE="+path, "FORMSAPI_CHILD_ARGS="+mustJSON(args))
		out, err := cmd.CombinedOutput()
		is.NoErr(err) // child process
		if err != nil {
			t.Log(string(out))
		}
	}
	_, items, _ := get(t, s, key, "/v1/forms/f3/submissions?limit=2")
	is.Equal(items, []string{"29", "28"}) // cached
	_, items, _ = get(t, s, key, "/v1/forms/f1/submissions?limit=2")
	is.Equal(items, []string{"29", "28"}) // cached

	child("submission", "f3", "500")
	_, items, _ = get(t, s, key, "/v1/forms/f3/submissions?limit=2")
	is.Equal(items, []string{"500", "29"}) // the other process's submission, at once
	_, items, _ = get(t, s, key, "/v1/forms/f1/submissions?limit=2")
	is.Equal(items, []string{"29", "28"}) // the other form is unchanged

	child("form", "f9")
	_, items, _ = get(t, s, key, "/v1/forms?limit=10")
	is.True(slices.Contains(items, "f9")) // the other process's form, at once
	code, items, _ := get(t, s, key, "/v1/forms/f9/submissions")
	is.Equal(code, 200)     // and its submissions can be listed
	is.Equal(len(items), 0) // empty

	child("revoke", key)
	code, _, _ = get(t, s, key, "/v1/forms/f1/submissions?limit=2")
	is.Equal(code, 401) // the revoked key is refused at once, though the page is cached
	_, err := s.ResolveKey(ctx, key)
	is.True(errors.Is(err, formsapi.ErrInvalidKey)) // revoked
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestChildWriter is the child process of TestOtherProcessWrites; run on
// its own, it does nothing.
func TestChildWriter(t *testing.T) {
	path := os.Getenv("FORMSAPI_CHILD_WRITE")
	if path == "" {
		return
	}
	is := is.New(t)
	var args []string
	is.NoErr(json.Unmarshal([]byte(os.Getenv("FORMSAPI_CHILD_ARGS")), &args)) // arguments
	s, err := sqlitestore.Open(path)
	is.NoErr(err) // open in the child
	defer s.Close()
	switch args[0] {
	case "submission":
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: args[1], Data: []byte(`{"n":` + args[2] + `}`),
			CreatedAt: t0.Add(time.Hour)}, formsapi.Metadata{})) // add submission
	case "form":
		is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: args[1]})) // add form
	case "revoke":
		is.NoErr(s.RevokeKey(ctx, args[1])) // revoke key
	default:
		t.Fatalf("unknown child command %q", args[0])
	}
}

// TestCacheExtendsAShortPage caches a short page and then asks for longer
// ones: the store reads only the rest after the items it holds, and the
// pages and cursors are those of a store without the cache.
func TestCacheExtendsAShortPage(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	_, s, key := newTenant(t)
	var desc, asc []string
	for i := 29; i >= 0; i-- {
		desc = append(desc, strconv.Itoa(i))
		asc = append(asc, strconv.Itoa(29-i))
	}
	for _, c := range []struct {
		order string
		want  []string
	}{{"desc", desc}, {"asc", asc}} {
		for _, limit := range []int{3, 10, 11, 29, 30, 31, 3} {
			target := fmt.Sprintf("/v1/forms/f2/submissions?order=%s&limit=%d", c.order, limit)
			code, items, next := get(t, s, key, target)
			is.Equal(code, 200) // page
			n := min(limit, 30)
			is.Equal(items, c.want[:n])      // the first items, in order
			is.Equal(next != "", limit < 30) // a cursor while items follow
			if next == "" {
				continue
			}
			_, rest, _ := get(t, s, key, target+"&cursor="+url.QueryEscape(next))
			is.Equal(rest, c.want[n:min(30, 2*n)]) // the cursor resumes after the page
		}
	}
}

// TestNewHasACacheOnlyWhenAsked: a store on the host's handle keeps no
// cache by default and keeps one when WithCacheSize gives it one, which
// then serves pages and forgets them on the host's own writes.
func TestNewHasACacheOnlyWhenAsked(t *testing.T) {
	is := is.New(t)
	db := hostDB(t, filepath.Join(t.TempDir(), "host.db"))
	plain := load(t, mustNew(t, db), storetest.DefaultSeed())
	list := "/v1/forms/" + storetest.FormBusy + "/submissions?limit=1000"
	get(t, plain, storetest.KeyA, list)
	pages, _ := sqlitestore.CachedPages(plain)
	is.Equal(pages, 0) // no cache unless asked

	cached, err := sqlitestore.New(db, sqlitestore.WithCacheSize(1<<20))
	is.NoErr(err)
	t.Cleanup(func() { cached.Close() })
	_, before, _ := get(t, cached, storetest.KeyA, list)
	pages, _ = sqlitestore.CachedPages(cached)
	is.Equal(pages, 1) // WithCacheSize is honoured on New too
	_, err = db.Exec(`DELETE FROM formsapi_submissions WHERE rowid = (SELECT max(s.rowid)
FROM formsapi_submissions s JOIN formsapi_forms f ON f.seq = s.form_seq WHERE f.id = ?)`, storetest.FormBusy)
	is.NoErr(err)
	_, after, _ := get(t, cached, storetest.KeyA, list)
	is.Equal(len(after), len(before)-1) // the host's write through its own handle is seen at once
}
