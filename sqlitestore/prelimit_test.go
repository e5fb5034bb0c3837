package sqlitestore_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
)

// checkedOnly hides the store's fast path from the handler.
type checkedOnly struct{ formsapi.Store }

// deepObject is an object nested depth levels deep, the object itself
// being level 1.
func deepObject(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + `{}` + strings.Repeat(`}`, depth-1)
}

// TestDataStoredBeforeTheLimits puts what the write side refuses today
// into a file, as an older release stored it, by raw SQL: data nested
// 10,000 levels (the attack of issue 12) and 9,998 levels, which a
// response would carry past encoding/json's limit of 10,000, beside data
// nested 9,997 levels, which a response still carries within it. On both
// read paths, every page is a 200 that encoding/json decodes: the too-deep
// rows are left out and logged by position with the reason, and every
// item after them is served.
func TestDataStoredBeforeTheLimits(t *testing.T) {
	t.Parallel()
	s := mustOpen(t, dbPath(t))
	key, _ := formsapi.NewKey()
	if err := s.AddKey(ctx, key, "acct"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddForm(ctx, "acct", formsapi.Form{ID: "old"}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	depths := map[int]int{1: 10000, 3: 9998, 5: 9997} // by item, oldest first
	for i := range 8 {
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: "old", Data: []byte(fmt.Sprintf(`{"i":%d}`, i)), CreatedAt: at.Add(time.Duration(i) * time.Second)}, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, depth := range depths {
		data := `{"i":` + fmt.Sprint(i) + `,"deep":` + deepObject(depth-1) + `}`
		encoded := `{"formId":"old","data":` + data + `,"attachments":[],"createdAt":"` + at.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano) + `"}`
		if _, err := sqlitestore.WriteDB(s).Exec(`UPDATE formsapi_submissions SET data = ?, json = ? WHERE created_at = ?`,
			data, []byte(encoded), at.Add(time.Duration(i)*time.Second).UnixNano()); err != nil {
			t.Fatalf("store pre-limit data: %v", err)
		}
	}
	for _, path := range []struct {
		name  string
		store formsapi.Store
	}{{"fast path", s}, {"checked path", checkedOnly{s}}} {
		for _, limit := range []int{2, 1000} {
			var logs bytes.Buffer
			h := formsapi.NewHandler(path.store, s, formsapi.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
			var served []int
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 8 {
					t.Fatalf("%s, limit %d: the walk does not end", path.name, limit)
				}
				target := fmt.Sprintf("/v1/forms/old/submissions?order=asc&limit=%d", limit)
				if cursor != "" {
					target += "&cursor=" + url.QueryEscape(cursor)
				}
				r := httptest.NewRequest("GET", target, nil)
				r.Header.Set("Authorization", "Bearer "+key)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					t.Fatalf("%s, limit %d, page %d: status %d, want 200 for the rest of the page", path.name, limit, pages, w.Code)
				}
				var page struct {
					Submissions []struct{ Data struct{ I int } }
					NextCursor  string
				}
				if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil {
					t.Fatalf("%s, limit %d, page %d: encoding/json cannot decode the page: %.100v", path.name, limit, pages, err)
				}
				for _, sub := range page.Submissions {
					served = append(served, sub.Data.I)
				}
				if cursor = page.NextCursor; cursor == "" {
					break
				}
			}
			if want := []int{0, 2, 4, 5, 6, 7}; fmt.Sprint(served) != fmt.Sprint(want) {
				t.Errorf("%s, limit %d: served items %v, want %v (all but the two too deep)", path.name, limit, served, want)
			}
			if n := strings.Count(logs.String(), "too deep"); n != 2 {
				t.Errorf("%s, limit %d: %d log lines give the depth as the reason, want 2:\n%.2000s", path.name, limit, n, logs.String())
			}
			if strings.Contains(logs.String(), `{"a":{"a":`) {
				t.Errorf("%s, limit %d: the log holds stored data", path.name, limit)
			}
		}
	}
}

// TestFormsAndSubmissionsStoredBeforeTheSizeLimits puts what the size
// limits refuse today into a file by raw SQL, as an older release stored
// it: a form title of 10,000 "<" (60,000 bytes as sent) under an account
// ID of 1,000 bytes, and a submission of 5 MiB as sent. The read side
// does not re-check the write-side limits: the form and, on both read
// paths, the submission are served byte for byte as stored, the
// submission alone on its page since it passes the page budget (4 MiB).
func TestFormsAndSubmissionsStoredBeforeTheSizeLimits(t *testing.T) {
	t.Parallel()
	s := mustOpen(t, dbPath(t))
	key, _ := formsapi.NewKey()
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.AddKey(ctx, key, "acct"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddForm(ctx, "acct", formsapi.Form{ID: "old", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		sub := formsapi.Submission{FormID: "old", Data: []byte(fmt.Sprintf(`{"i":%d}`, i)), CreatedAt: at.Add(time.Duration(i) * time.Second)}
		if err := s.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	account := strings.Repeat("a", 1000)
	form := formsapi.Form{ID: "old", Title: strings.Repeat("<", 10000), CreatedAt: at}
	big := formsapi.Submission{FormID: "old", Data: []byte(`{"i":0,"pad":"` + strings.Repeat("x", 5<<20) + `"}`), CreatedAt: at}
	encoded, err := formsapi.AppendSubmissionJSON(nil, big)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`UPDATE formsapi_forms SET title = ?, account_id = ? WHERE id = 'old'`, []any{form.Title, account}},
		{`UPDATE formsapi_keys SET account_id = ?`, []any{account}},
		{`UPDATE formsapi_submissions SET data = ?, json = ? WHERE created_at = ?`, []any{string(big.Data), encoded, at.UnixNano()}},
	} {
		if _, err := sqlitestore.WriteDB(s).Exec(q.sql, q.args...); err != nil {
			t.Fatalf("store pre-limit data: %v", err)
		}
	}
	if f := formsapi.DefaultLimits; len(encoded) <= formsapi.DefaultPageBytes || len(account) <= f.MaxAccountIDBytes {
		t.Fatalf("the stored data is within today's limits")
	}
	get := func(h http.Handler, target string) []byte {
		t.Helper()
		r := httptest.NewRequest("GET", target, nil)
		r.Header.Set("Authorization", "Bearer "+key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: status %d: %.200s", target, w.Code, w.Body)
		}
		return w.Body.Bytes()
	}
	var forms struct{ Forms []json.RawMessage }
	if err := json.Unmarshal(get(formsapi.NewHandler(s, s), "/v1/forms"), &forms); err != nil {
		t.Fatal(err)
	}
	if want, _ := json.Marshal(form); len(forms.Forms) != 1 || !bytes.Equal(forms.Forms[0], want) {
		t.Errorf("GET /v1/forms: %d forms, want the stored one, %d bytes, byte for byte", len(forms.Forms), len(want))
	}
	for _, path := range []struct {
		name  string
		store formsapi.Store
	}{{"fast path", s}, {"checked path", checkedOnly{s}}} {
		var page struct {
			Submissions []json.RawMessage
			NextCursor  string
		}
		if err := json.Unmarshal(get(formsapi.NewHandler(path.store, s), "/v1/forms/old/submissions?order=asc"), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Submissions) != 1 || !bytes.Equal(page.Submissions[0], encoded) || page.NextCursor == "" {
			t.Errorf("%s: the first page holds %d submissions (cursor %t), want the stored one of %d bytes alone, byte for byte", path.name, len(page.Submissions), page.NextCursor != "", len(encoded))
		}
	}
}
