package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
)

// lifecycleClauses checks the data lifecycle of the write side (UpdateForm,
// DeleteForm, DeleteSubmission and Erase of formsapi.Writer), one subtest
// per clause, each on a fresh store from open loaded with DefaultSeed:
// each write is seen by the very next read of the store and of a handler
// over it (lists, forms list, feed, and an ETag that must not give 304
// over the change); a cursor or sync token issued before a deletion
// still walks the rest exactly once; each refused call (what does not
// exist, another account's form, empty input) returns the documented
// error and changes nothing; an erasure removes exactly the matching
// submissions of the one account. A store that is also a
// formsapi.FeedStore has its feed checked across deletions too.
func lifecycleClauses(t *testing.T, open func(t *testing.T, seed Seed) writeStore, cfg *config) {
	seed := DefaultSeed()
	ctx := context.Background()
	all := formsapi.Query{Limit: MaxLimit, Order: formsapi.Oldest}

	t.Run("UpdateForm", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		before := walkForms(t, s, AccountA, all)
		h := newProbe(t, s)
		tag := h.get(t, "/v1/forms", "", http.StatusOK)
		f := formsapi.Form{ID: FormSmall, Title: "Renamed \u00e9", Icon: "star", NotificationEmail: "new@example.com"}
		if err := s.UpdateForm(ctx, AccountA, f); err != nil {
			t.Fatalf("UpdateForm: %v", err)
		}
		after := walkForms(t, s, AccountA, all)
		if len(after) != len(before) {
			t.Fatalf("%d forms after the update, %d before", len(after), len(before))
		}
		for i, got := range after {
			want := before[i]
			if want.ID == FormSmall {
				want.Title, want.Icon, want.NotificationEmail = f.Title, f.Icon, f.NotificationEmail
			}
			if msg := diffForm(want, got); msg != "" {
				t.Error(msg)
			}
		}
		if got := len(walkSubmissions(t, s, AccountA, FormSmall, all)); got != 3 {
			t.Errorf("the updated form has %d submissions, want its 3", got)
		}
		body := h.body(t, "/v1/forms", tag, http.StatusOK)
		if !strings.Contains(body, "Renamed") {
			t.Errorf("the handler's forms list after the update lacks the new title: %.300s", body)
		}
	})

	t.Run("DeleteForm", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		h := newProbe(t, s)
		formsTag := h.get(t, "/v1/forms", "", http.StatusOK)
		pageTag := h.get(t, "/v1/forms/"+FormSmall+"/submissions", "", http.StatusOK)
		if err := s.DeleteForm(ctx, AccountA, FormSmall); err != nil {
			t.Fatalf("DeleteForm: %v", err)
		}
		if ids := sortedFormIDs(walkForms(t, s, AccountA, all)); slices.Contains(ids, FormSmall) || len(ids) != 3 {
			t.Errorf("forms of %s after deleting %s: %v", AccountA, FormSmall, ids)
		}
		if _, err := s.ListSubmissions(ctx, AccountA, FormSmall, all); !errors.Is(err, formsapi.ErrFormNotFound) {
			t.Errorf("listing a deleted form: got %v, want ErrFormNotFound", err)
		}
		if fs, ok := s.(formsapi.FeedStore); ok {
			if _, err := fs.SyncSubmissions(ctx, AccountA, FormSmall, 0, 10); !errors.Is(err, formsapi.ErrFormNotFound) {
				t.Errorf("the feed of a deleted form: got %v, want ErrFormNotFound", err)
			}
		}
		if got := len(walkSubmissions(t, s, AccountA, FormBusy, all)); got != busyCount {
			t.Errorf("another form of the account has %d submissions, want %d", got, busyCount)
		}
		if body := h.body(t, "/v1/forms", formsTag, http.StatusOK); strings.Contains(body, FormSmall) {
			t.Errorf("the handler's forms list still names the deleted form: %.300s", body)
		}
		h.get(t, "/v1/forms/"+FormSmall+"/submissions", pageTag, http.StatusNotFound)
		// Its submissions' metadata went with it: IDs are free again in a
		// new form, and an erasure finds nothing of it.
		if n, err := s.Erase(ctx, AccountA, "plan", "pro"); err != nil || n != 0 {
			t.Errorf("erasing the deleted form's data: got (%d, %v), want (0, nil)", n, err)
		}
	})

	t.Run("DeleteSubmission", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		ids := addWithIDs(t, s, FormEmpty, 6)
		h := newProbe(t, s)
		tag := h.get(t, "/v1/forms/"+FormEmpty+"/submissions?order=asc", "", http.StatusOK)
		if err := s.DeleteSubmission(ctx, AccountA, FormEmpty, ids[2]); err != nil {
			t.Fatalf("DeleteSubmission: %v", err)
		}
		want := []string{`{"id":0}`, `{"id":1}`, `{"id":3}`, `{"id":4}`, `{"id":5}`}
		if got := submissionKeys(walkSubmissions(t, s, AccountA, FormEmpty, all)); !slices.Equal(got, want) {
			t.Errorf("after deleting one: got %v, want %v", got, want)
		}
		if body := h.body(t, "/v1/forms/"+FormEmpty+"/submissions?order=asc", tag, http.StatusOK); strings.Contains(body, `"id":2`) {
			t.Errorf("the handler still serves the deleted submission: %.300s", body)
		}
		// The ID names nothing now: deleting again is not found, and it
		// may be given to a new submission.
		if err := s.DeleteSubmission(ctx, AccountA, FormEmpty, ids[2]); !errors.Is(err, formsapi.ErrSubmissionNotFound) {
			t.Errorf("deleting twice: got %v, want ErrSubmissionNotFound", err)
		}
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: FormEmpty, Data: []byte(`{"id":"again"}`)}, formsapi.Metadata{ID: ids[2]}); err != nil {
			t.Errorf("adding a submission with a deleted one's ID: %v", err)
		}
	})

	t.Run("SubmissionIDUniqueInForm", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		ids := addWithIDs(t, s, FormEmpty, 1)
		before := snapshot(t, s)
		err := s.AddSubmission(ctx, formsapi.Submission{FormID: FormEmpty, Data: []byte(`{"dup":true}`)}, formsapi.Metadata{ID: ids[0]})
		if !errors.Is(err, formsapi.ErrInvalidInput) {
			t.Errorf("a second submission with the same ID in the form: got %v, want ErrInvalidInput", err)
		}
		if !slices.Equal(before, snapshot(t, s)) {
			t.Error("the refused submission changed the store")
		}
		// The same ID in another form is another submission.
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: FormSmall, Data: []byte(`{"dup":false}`)}, formsapi.Metadata{ID: ids[0]}); err != nil {
			t.Errorf("the same ID in another form: %v", err)
		}
		for _, id := range []string{"bad\x00id", "bad\xffid", strings.Repeat("x", 257)} {
			if err := s.AddSubmission(ctx, formsapi.Submission{FormID: FormSmall, Data: []byte(`{}`)}, formsapi.Metadata{ID: id}); !errors.Is(err, formsapi.ErrInvalidInput) {
				t.Errorf("metadata ID %q: got %v, want ErrInvalidInput", id, err)
			}
		}
	})

	t.Run("Refused", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		ids := addWithIDs(t, s, FormEmpty, 2)
		before := snapshot(t, s)
		for _, r := range []refusal{
			{"UpdateUnknownForm", formsapi.ErrFormNotFound, "", func(s writeStore) error {
				return s.UpdateForm(ctx, AccountA, formsapi.Form{ID: FormNone, Title: "x"})
			}},
			{"UpdateAnotherAccountsForm", formsapi.ErrFormNotFound, "", func(s writeStore) error {
				return s.UpdateForm(ctx, AccountA, formsapi.Form{ID: FormB, Title: "x"})
			}},
			{"UpdateTitleWithControlCharacter", formsapi.ErrInvalidInput, "", func(s writeStore) error {
				return s.UpdateForm(ctx, AccountA, formsapi.Form{ID: FormSmall, Title: "a\x01b"})
			}},
			{"UpdateBeyondMaxFormBytes", formsapi.ErrInvalidInput, "MaxFormBytes", func(s writeStore) error {
				return s.UpdateForm(ctx, AccountA, formsapi.Form{ID: FormSmall, Title: strings.Repeat("t", formsapi.DefaultLimits.MaxFormBytes)})
			}},
			{"DeleteUnknownForm", formsapi.ErrFormNotFound, "", func(s writeStore) error {
				return s.DeleteForm(ctx, AccountA, FormNone)
			}},
			{"DeleteAnotherAccountsForm", formsapi.ErrFormNotFound, "", func(s writeStore) error {
				return s.DeleteForm(ctx, AccountA, FormB)
			}},
			{"DeleteMalformedFormID", formsapi.ErrInvalidInput, "", func(s writeStore) error {
				return s.DeleteForm(ctx, AccountA, "a/b")
			}},
			{"DeleteUnknownSubmission", formsapi.ErrSubmissionNotFound, "", func(s writeStore) error {
				return s.DeleteSubmission(ctx, AccountA, FormEmpty, "no-such-submission")
			}},
			{"DeleteSubmissionOfAnotherForm", formsapi.ErrSubmissionNotFound, "", func(s writeStore) error {
				return s.DeleteSubmission(ctx, AccountA, FormSmall, ids[0])
			}},
			{"DeleteSubmissionOfAnotherAccount", formsapi.ErrFormNotFound, "", func(s writeStore) error {
				return s.DeleteSubmission(ctx, AccountB, FormEmpty, ids[0])
			}},
			{"DeleteSubmissionOfUnknownForm", formsapi.ErrFormNotFound, "", func(s writeStore) error {
				return s.DeleteSubmission(ctx, AccountA, FormNone, ids[0])
			}},
			{"DeleteSubmissionWithoutID", formsapi.ErrInvalidInput, "", func(s writeStore) error {
				return s.DeleteSubmission(ctx, AccountA, FormEmpty, "")
			}},
			{"EraseEmptyField", formsapi.ErrInvalidInput, "", func(s writeStore) error {
				_, err := s.Erase(ctx, AccountA, "", "p1@example.com")
				return err
			}},
			{"EraseEmptyValue", formsapi.ErrInvalidInput, "", func(s writeStore) error {
				_, err := s.Erase(ctx, AccountA, "email", "")
				return err
			}},
			{"EraseEmptyAccount", formsapi.ErrInvalidInput, "", func(s writeStore) error {
				_, err := s.Erase(ctx, "", "email", "p1@example.com")
				return err
			}},
		} {
			err := r.write(s)
			if !errors.Is(err, r.want) {
				t.Errorf("%s: got %v, want an error wrapping %v", r.name, err, r.want)
			} else if r.says != "" && !strings.Contains(err.Error(), r.says) {
				t.Errorf("%s: error %q does not say %q", r.name, err, r.says)
			}
		}
		if !slices.Equal(before, snapshot(t, s)) {
			t.Error("a refused call changed the store")
		}
	})

	t.Run("Erase", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		const who = "erase.me@example.com"
		add := func(form, data string) {
			t.Helper()
			if err := s.AddSubmission(ctx, formsapi.Submission{FormID: form, Data: []byte(data)}, canaryMetadata(900)); err != nil {
				t.Fatalf("AddSubmission: %v", err)
			}
		}
		add(FormEmpty, `{"email":"erase.me@example.com","n":1}`)
		add(FormEmpty, `{"email":"erase.me\u0040example.com","n":2}`) // the same value, escaped
		add(FormSmall, `{"n":3,"email":"erase.me@example.com"}`)
		add(FormEmpty, `{"email":"Erase.Me@example.com","n":4}`)             // another value: exact match only
		add(FormEmpty, `{"contact":{"email":"erase.me@example.com"},"n":5}`) // not at the top level
		add(FormEmpty, `{"mail":"erase.me@example.com","n":6}`)              // another field
		add(FormB, `{"email":"erase.me@example.com","n":7}`)                 // another account
		h := newProbe(t, s)
		tag := h.get(t, "/v1/forms/"+FormEmpty+"/submissions", "", http.StatusOK)
		n, err := s.Erase(ctx, AccountA, "email", who)
		if err != nil || n != 3 {
			t.Fatalf("Erase: got (%d, %v), want (3, nil)", n, err)
		}
		var left []string
		for _, form := range []string{FormEmpty, FormSmall} {
			for _, sub := range walkSubmissions(t, s, AccountA, form, all) {
				left = append(left, Canonical(sub.Data))
			}
		}
		for _, sub := range left {
			var v struct{ N int }
			if err := json.Unmarshal([]byte(sub), &v); err != nil || v.N >= 1 && v.N <= 3 {
				t.Errorf("erased submission still listed: %s", sub)
			}
		}
		if len(left) != 3+3 { // n 4, 5, 6 and FormSmall's seed
			t.Errorf("after the erasure: %d submissions left, want 6: %v", len(left), left)
		}
		if got := len(walkSubmissions(t, s, AccountB, FormB, all)); got != 7 {
			t.Errorf("another account's form has %d submissions, want its 7", got)
		}
		if body := h.body(t, "/v1/forms/"+FormEmpty+"/submissions", tag, http.StatusOK); strings.Contains(body, `"n":1}`) || strings.Contains(body, `"n":2}`) {
			t.Errorf("the handler still serves an erased submission: %.300s", body)
		}
		if n, err := s.Erase(ctx, AccountA, "email", who); err != nil || n != 0 {
			t.Errorf("erasing again: got (%d, %v), want (0, nil)", n, err)
		}
	})

	t.Run("CursorAcrossDeletion", func(t *testing.T) {
		cfg.parallel(t)
		for _, order := range []formsapi.Order{formsapi.Oldest, formsapi.Newest} {
			s := open(t, seed)
			ids := addWithIDs(t, s, FormEmpty, 12)
			q := formsapi.Query{Limit: 4, Order: order}
			p, err := s.ListSubmissions(ctx, AccountA, FormEmpty, q)
			if err != nil || p.NextCursor == "" {
				t.Fatalf("first page: %v (cursor %q)", err, p.NextCursor)
			}
			first := submissionKeys(p.Items)
			// The cursor points at the page's last item: delete it, and
			// the one after it.
			last := idOf(t, p.Items[len(p.Items)-1])
			next := last + 1
			if order == formsapi.Newest {
				next = last - 1
			}
			for _, i := range []int{last, next} {
				if err := s.DeleteSubmission(ctx, AccountA, FormEmpty, ids[i]); err != nil {
					t.Fatalf("DeleteSubmission: %v", err)
				}
			}
			q.Cursor = p.NextCursor
			got := append(slices.Clone(first), submissionKeys(walkSubmissions(t, s, AccountA, FormEmpty, q))...)
			want := slices.Clone(first)
			for _, k := range submissionKeys(walkSubmissions(t, s, AccountA, FormEmpty, formsapi.Query{Limit: MaxLimit, Order: order})) {
				if !slices.Contains(first, k) {
					want = append(want, k)
				}
			}
			if len(want) != 11 || !slices.Equal(got, want) {
				t.Errorf("%v: a walk across deletions got %v, want %v", order, got, want)
			}
		}
	})

	t.Run("FeedAcrossDeletion", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		fs, ok := s.(formsapi.FeedStore)
		if !ok {
			t.Skip("the store has no sync feed")
		}
		ids := addWithIDs(t, s, FormEmpty, 10)
		p, err := fs.SyncSubmissions(ctx, AccountA, FormEmpty, 0, 4)
		if err != nil || len(p.Items) != 4 {
			t.Fatalf("first feed page: %v (%d items)", err, len(p.Items))
		}
		// A token older than the deletions: one before it, the one it
		// points at and one after it.
		for _, i := range []int{1, 3, 5} {
			if err := s.DeleteSubmission(ctx, AccountA, FormEmpty, ids[i]); err != nil {
				t.Fatalf("DeleteSubmission: %v", err)
			}
		}
		got := submissionKeys(walkFeed(t, fs, AccountA, FormEmpty, p.Next, 2))
		want := []string{`{"id":4}`, `{"id":6}`, `{"id":7}`, `{"id":8}`, `{"id":9}`}
		if !slices.Equal(got, want) {
			t.Errorf("resuming after deletions: got %v, want %v", got, want)
		}
		got = submissionKeys(walkFeed(t, fs, AccountA, FormEmpty, 0, 3))
		want = []string{`{"id":0}`, `{"id":2}`, `{"id":4}`, `{"id":6}`, `{"id":7}`, `{"id":8}`, `{"id":9}`}
		if !slices.Equal(got, want) {
			t.Errorf("the feed from the start after deletions: got %v, want %v", got, want)
		}
		// Only deleted positions after the last one: an empty page, no
		// more to read.
		if err := s.DeleteSubmission(ctx, AccountA, FormEmpty, ids[9]); err != nil {
			t.Fatalf("DeleteSubmission: %v", err)
		}
		last, err := fs.SyncSubmissions(ctx, AccountA, FormEmpty, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		end, err := fs.SyncSubmissions(ctx, AccountA, FormEmpty, last.Next, 100)
		if err != nil || len(end.Items) != 0 || end.More {
			t.Errorf("after the last live submission: %v, %d items, more %v", err, len(end.Items), end.More)
		}
	})
}

// addWithIDs adds n submissions to form, with data {"id":i} and metadata
// IDs unique to this call, at times one second apart, and returns the IDs.
func addWithIDs(t *testing.T, w formsapi.Writer, form string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	stamp := time.Now().UnixNano()
	for i := range ids {
		ids[i] = fmt.Sprintf("host-%d-%d", stamp, i)
		sub := formsapi.Submission{FormID: form, Data: []byte(fmt.Sprintf(`{"id":%d}`, i)), CreatedAt: base.Add(time.Duration(i) * time.Second)}
		if err := w.AddSubmission(context.Background(), sub, formsapi.Metadata{ID: ids[i], TraceID: Canary}); err != nil {
			t.Fatalf("AddSubmission %d: %v", i, err)
		}
	}
	return ids
}

// idOf returns the "id" of a submission addWithIDs added.
func idOf(t *testing.T, s formsapi.Submission) int {
	t.Helper()
	var v struct{ ID int }
	if _, err := fmt.Sscanf(string(s.Data), `{"id":%d}`, &v.ID); err != nil {
		t.Fatalf("not a submission of addWithIDs: %s", s.Data)
	}
	return v.ID
}

// probe sends requests to a handler over a store, as AccountA's KeyA.
type probe struct{ h http.Handler }

func newProbe(t *testing.T, s writeStore) probe {
	t.Helper()
	return probe{formsapi.NewHandler(s, s)}
}

func (p probe) do(t *testing.T, target, ifNoneMatch string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", target, nil)
	r.Header.Set("Authorization", "Bearer "+KeyA)
	if ifNoneMatch != "" {
		r.Header.Set("If-None-Match", ifNoneMatch)
	}
	w := httptest.NewRecorder()
	p.h.ServeHTTP(w, r)
	return w
}

// get requests target, sending ifNoneMatch when not "", checks the status
// and returns the ETag.
func (p probe) get(t *testing.T, target, ifNoneMatch string, status int) string {
	t.Helper()
	w := p.do(t, target, ifNoneMatch)
	if w.Code != status {
		t.Fatalf("GET %s (If-None-Match %q): status %d, want %d: %.200s", target, ifNoneMatch, w.Code, status, w.Body)
	}
	return w.Header().Get("ETag")
}

// body is get returning the body, for a request whose answer must differ
// from the one tagged ifNoneMatch.
func (p probe) body(t *testing.T, target, ifNoneMatch string, status int) string {
	t.Helper()
	w := p.do(t, target, ifNoneMatch)
	if w.Code != status {
		t.Fatalf("GET %s after a change (If-None-Match %q): status %d, want %d (a 304 would hide the change)", target, ifNoneMatch, w.Code, status)
	}
	return w.Body.String()
}
