package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/storecontract"
	"github.com/formsapi/formsapi/internal/stored"
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
			// Text no stored account, form or submission could have,
			// refused the same way by every store (a database would
			// otherwise answer with an error of its own).
			{"DeleteSubmissionMalformedFormID", formsapi.ErrInvalidInput, "", func(s writeStore) error {
				return s.DeleteSubmission(ctx, AccountA, "bad id!", ids[0])
			}},
			{"DeleteSubmissionIDWithNUL", formsapi.ErrInvalidInput, "", func(s writeStore) error {
				return s.DeleteSubmission(ctx, AccountA, FormEmpty, "s\x001")
			}},
			{"DeleteSubmissionIDNotUTF8", formsapi.ErrInvalidInput, "", func(s writeStore) error {
				return s.DeleteSubmission(ctx, AccountA, FormEmpty, "s\xff")
			}},
			{"DeleteSubmissionAccountWithNUL", formsapi.ErrInvalidInput, "", func(s writeStore) error {
				return s.DeleteSubmission(ctx, AccountA+"\x00", FormEmpty, ids[0])
			}},
			{"DeleteFormAccountNotUTF8", formsapi.ErrInvalidInput, "", func(s writeStore) error {
				return s.DeleteForm(ctx, AccountA+"\xff", FormEmpty)
			}},
			{"UpdateFormAccountWithNUL", formsapi.ErrInvalidInput, "", func(s writeStore) error {
				return s.UpdateForm(ctx, AccountA+"\x00", formsapi.Form{ID: FormSmall, Title: "x"})
			}},
			{"EraseAccountWithNUL", formsapi.ErrInvalidInput, "", func(s writeStore) error {
				_, err := s.Erase(ctx, AccountA+"\x00", "email", "p1@example.com")
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
		h := newProbe(t, s)
		viaHTTP := feedCopy{}
		token := viaHTTP.replay(t, h, FormEmpty, "start")
		p, err := fs.SyncSubmissions(ctx, AccountA, FormEmpty, 0, 4)
		if err != nil || len(p.Items) != 4 {
			t.Fatalf("first feed page: %v (%d items)", err, len(p.Items))
		}
		early := copyOf(p)
		// Deletions after that page's token: one before it, the one it
		// ends at, one after it, and the form's last submission.
		for _, i := range []int{1, 3, 5, 9} {
			if err := s.DeleteSubmission(ctx, AccountA, FormEmpty, ids[i]); err != nil {
				t.Fatalf("DeleteSubmission: %v", err)
			}
		}
		want := listCopy(t, s, FormEmpty)
		if len(want) != 6 {
			t.Fatalf("%d submissions left, want 6", len(want))
		}
		early.replayStore(t, fs, FormEmpty, p.Next, 2)
		if got := early.values(); !slices.Equal(got, want) {
			t.Errorf("a copy resumed from a token older than the deletions holds %v, want %v", got, want)
		}
		fresh := feedCopy{}
		fresh.replayStore(t, fs, FormEmpty, 0, 3)
		if got := fresh.values(); !slices.Equal(got, want) {
			t.Errorf("a copy read from the start holds %v, want %v", got, want)
		}
		viaHTTP.replay(t, h, FormEmpty, token)
		if got := viaHTTP.values(); !slices.Equal(got, want) {
			t.Errorf("a copy kept by refs through the handler holds %v, want %v", got, want)
		}
	})

	t.Run("FormCreatedAgain", func(t *testing.T) {
		// A form deleted and created again with the same ID is another
		// form: a cursor or sync token of the old one gets 410 (read
		// again from the start), never a page of the new one, on the
		// very next request; the new form's own cursors and tokens work.
		// Stores of this module give the form's incarnation to the
		// handler with its pages (the fast path); a store without it
		// cannot tell.
		cfg.parallel(t)
		s := open(t, seed)
		if _, ok := storecontract.Of[fastStore](s); !ok {
			t.Skip("the store has no page fast path: the handler cannot learn a form's incarnation from it")
		}
		_, feed := s.(fastFeedStore)
		const form = "created-twice"
		make := func(n int) {
			t.Helper()
			if err := s.AddForm(ctx, AccountA, formsapi.Form{ID: form}); err != nil {
				t.Fatalf("AddForm: %v", err)
			}
			addWithIDs(t, s, form, n)
		}
		make(3)
		h := newProbe(t, s)
		list := "/v1/forms/" + form + "/submissions?limit=1"
		cursor := nextOf(t, h.do(t, list, ""), "nextCursor")
		token, position, exportToken := "", "", ""
		export := "/v1/forms/" + form + "/export"
		var oldRefs []string
		if feed {
			token = nextOf(t, h.do(t, "/v1/forms/"+form+"/submissions?sync=start&limit=1", ""), "syncToken")
			position, exportToken = firstPosition(t, h, export)
			oldRefs = feedAndExportRefs(t, h, form)
		}
		incarnation := func() uint64 {
			t.Helper()
			p, err := s.(formsapi.FeedStore).SyncSubmissions(ctx, AccountA, form, 0, 1)
			if err != nil || p.Incarnation == 0 {
				t.Fatalf("the feed's first page: incarnation %#x, %v; want one", p.Incarnation, err)
			}
			return p.Incarnation
		}
		var before uint64
		if feed {
			before = incarnation()
		}
		if err := s.DeleteForm(ctx, AccountA, form); err != nil {
			t.Fatalf("DeleteForm: %v", err)
		}
		h.get(t, list+"&cursor="+url.QueryEscape(cursor), "", http.StatusNotFound) // deleted: 404, as ever
		make(5)
		if feed && incarnation() == before {
			t.Errorf("the form created again has the incarnation %#x of the deleted one", before)
		}
		if w := h.do(t, list+"&cursor="+url.QueryEscape(cursor), ""); w.Code != http.StatusGone || !strings.Contains(w.Body.String(), "cursor expired") {
			t.Errorf("a cursor of the deleted form, on the form created again: %d %.200s, want 410 cursor expired", w.Code, w.Body)
		}
		if feed {
			if w := h.do(t, "/v1/forms/"+form+"/submissions?sync="+url.QueryEscape(token), ""); w.Code != http.StatusGone || !strings.Contains(w.Body.String(), "sync token expired") {
				t.Errorf("a sync token of the deleted form, on the form created again: %d %.200s, want 410 sync token expired", w.Code, w.Body)
			}
			fresh := nextOf(t, h.do(t, "/v1/forms/"+form+"/submissions?sync=start&limit=2", ""), "syncToken")
			h.get(t, "/v1/forms/"+form+"/submissions?sync="+url.QueryEscape(fresh), "", http.StatusOK) // the new form's token works
			// An export of the old form: resumed on the new one (whose
			// feed is past the old export's as-of position), a 400
			// naming after, never the new form's lines; its Sync-Token,
			// a 410 as the feed's own.
			if w := h.do(t, export+"?after="+url.QueryEscape(position), ""); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "invalid after") {
				t.Errorf("an export's position of the deleted form, on the form created again: %d %.200s, want 400 invalid after", w.Code, w.Body)
			}
			if w := h.do(t, "/v1/forms/"+form+"/submissions?sync="+url.QueryEscape(exportToken), ""); w.Code != http.StatusGone || !strings.Contains(w.Body.String(), "sync token expired") {
				t.Errorf("an export's Sync-Token of the deleted form, on the form created again: %d %.200s, want 410 sync token expired", w.Code, w.Body)
			}
			// The new form's refs, in its feed and its export, are its
			// own: at the positions the old form had, none is the old
			// form's (RELIABILITY case 101).
			for _, ref := range feedAndExportRefs(t, h, form) {
				if slices.Contains(oldRefs, ref) {
					t.Errorf("the form created again has ref %s, a ref of the deleted form", ref)
				}
			}
			position, exportToken = firstPosition(t, h, export)
			h.get(t, export+"?after="+url.QueryEscape(position), "", http.StatusOK) // the new form's export resumes
			h.get(t, "/v1/forms/"+form+"/submissions?sync="+url.QueryEscape(exportToken), "", http.StatusOK)
		}
		again := nextOf(t, h.do(t, list, ""), "nextCursor")
		h.get(t, list+"&cursor="+url.QueryEscape(again), "", http.StatusOK) // the new form's cursor works
	})

	t.Run("FeedCopyWhileWriting", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		if _, ok := s.(formsapi.FeedStore); !ok {
			t.Skip("the store has no sync feed")
		}
		RunFeedCopy(t, s, s)
	})

	t.Run("Retention", func(t *testing.T) {
		cfg.parallel(t)
		seed := seed
		seed.Clock = newClock()
		s := open(t, seed)
		fs, ok := s.(formsapi.FeedStore)
		if !ok {
			t.Skip("the store has no sync feed")
		}
		ids := addWithIDs(t, s, FormEmpty, 6)
		h := newProbe(t, s)
		stale := feedCopy{}
		staleToken := stale.replay(t, h, FormEmpty, "start")
		staleAt := (&feedCopy{}).replayStore(t, fs, FormEmpty, 0, MaxLimit)
		del := func(i int) {
			t.Helper()
			if err := s.DeleteSubmission(ctx, AccountA, FormEmpty, ids[i]); err != nil {
				t.Fatalf("DeleteSubmission: %v", err)
			}
		}
		del(0) // at T0
		if !seed.Clock.read() {
			t.Skip("the store does not keep time by the seed's clock")
		}
		between := feedCopy{}
		betweenAt := between.replayStore(t, fs, FormEmpty, 0, MaxLimit) // after the first deletion
		keep := stored.TombstoneRetention
		seed.Clock.Advance(keep - time.Nanosecond)
		del(1) // the first deletion is not yet old enough to forget
		p, err := fs.SyncSubmissions(ctx, AccountA, FormEmpty, staleAt, MaxLimit)
		if err != nil || staleAt < p.Purged || len(p.Deleted) != 2 {
			t.Fatalf("a token older than a deletion kept for less than the retention: %v, Purged %d (token at %d), %d deletions", err, p.Purged, staleAt, len(p.Deleted))
		}
		seed.Clock.Advance(time.Nanosecond)
		del(2) // the first deletion is exactly the retention old: forgotten
		p, err = fs.SyncSubmissions(ctx, AccountA, FormEmpty, staleAt, MaxLimit)
		if err != nil || p.Purged <= staleAt {
			t.Fatalf("a token older than a forgotten deletion: %v, Purged %d (token at %d); want Purged past the token", err, p.Purged, staleAt)
		}
		w := h.do(t, "/v1/forms/"+FormEmpty+"/submissions?sync="+url.QueryEscape(staleToken), "")
		if w.Code != http.StatusGone || !strings.Contains(w.Body.String(), "sync=start") {
			t.Errorf("the handler's answer to a token past retention: %d %.200s, want 410 saying to start over", w.Code, w.Body)
		}
		// A token newer than the forgotten deletion resumes; the start
		// always works.
		want := listCopy(t, s, FormEmpty)
		between.replayStore(t, fs, FormEmpty, betweenAt, 2)
		if got := between.values(); !slices.Equal(got, want) {
			t.Errorf("a copy resumed from after the forgotten deletion holds %v, want %v", got, want)
		}
		again := feedCopy{}
		again.replay(t, h, FormEmpty, "start")
		if got := again.values(); !slices.Equal(got, want) {
			t.Errorf("a copy read again from the start holds %v, want %v", got, want)
		}
	})

	summaryClauses(t, open, cfg)
}

// feedCopy is what a feed consumer keeps: each submission's data under
// its reference (a position, read from a store, or a ref, through the
// handler).
type feedCopy map[string]string

// copyOf starts a copy with one page read from a store.
func copyOf(p formsapi.FeedPage) feedCopy {
	c := feedCopy{}
	c.apply(p)
	return c
}

func (c feedCopy) apply(p formsapi.FeedPage) {
	for i, sub := range p.Items {
		c[fmt.Sprint(p.Positions[i])] = Canonical(sub.Data)
	}
	for _, pos := range p.Deleted {
		delete(c, fmt.Sprint(pos))
	}
}

// replayStore reads the store's feed of form from after to its end with
// limit, applying each page, and returns the last page's Next. A reader
// from the start takes the first page's Purged as its floor, as the
// handler does; one resuming has none.
func (c feedCopy) replayStore(t *testing.T, fs formsapi.FeedStore, form string, after int64, limit int) int64 {
	t.Helper()
	floor := int64(0)
	for pages := 0; pages < 10_000; pages++ {
		p, err := fs.SyncSubmissions(context.Background(), AccountA, form, after, limit)
		if err != nil {
			t.Fatalf("feed after %d: %v", after, err)
		}
		if after == 0 {
			floor = p.Purged
		} else if max(after, floor) < p.Purged {
			t.Fatalf("feed after %d (floor %d): past retention (Purged %d)", after, floor, p.Purged)
		}
		checkFeedPage(t, p, after, limit)
		c.apply(p)
		after = p.Next
		if !p.More {
			return after
		}
	}
	t.Fatal("more than 10,000 pages")
	return 0
}

// replay reads the handler's feed of form from token to its end, as
// AccountA, applying each page by its refs, and returns the last token.
func (c feedCopy) replay(t *testing.T, h probe, form, token string) string {
	t.Helper()
	for pages := 0; pages < 10_000; pages++ {
		var more bool
		if token, more = c.page(t, h, form, token); !more {
			return token
		}
	}
	t.Fatal("more than 10,000 pages")
	return ""
}

// page reads one page of the handler's feed of form from token, as
// AccountA, applies it by its refs, and returns its token and hasMore.
func (c feedCopy) page(t *testing.T, h probe, form, token string) (string, bool) {
	t.Helper()
	w := h.do(t, "/v1/forms/"+form+"/submissions?limit=3&sync="+url.QueryEscape(token), "")
	if w.Code == http.StatusNotImplemented {
		// A type that embeds a store: the handler serves the feed only
		// through the interfaces it was given (see the Feed group).
		t.Skip("the handler serves no sync feed over this store")
	}
	if w.Code != http.StatusOK {
		t.Fatalf("feed from %q: status %d: %.200s", token, w.Code, w.Body)
	}
	var p struct {
		Submissions []formsapi.Submission
		Refs        []string
		Deleted     []string
		SyncToken   string
		HasMore     bool
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("feed page: %v", err)
	}
	if len(p.Refs) != len(p.Submissions) {
		t.Fatalf("feed page with %d refs for %d submissions", len(p.Refs), len(p.Submissions))
	}
	for i, sub := range p.Submissions {
		c[p.Refs[i]] = Canonical(sub.Data)
	}
	for _, ref := range p.Deleted {
		delete(c, ref)
	}
	return p.SyncToken, p.HasMore
}

// values returns the data the copy holds, sorted.
func (c feedCopy) values() []string {
	out := make([]string, 0, len(c))
	for _, v := range c {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// listCopy returns the data of every submission of AccountA's form, as
// the list gives them, sorted: what a copy must hold.
func listCopy(t *testing.T, s formsapi.Store, form string) []string {
	t.Helper()
	var out []string
	for _, sub := range walkSubmissions(t, s, AccountA, form, formsapi.Query{Limit: MaxLimit}) {
		out = append(out, Canonical(sub.Data))
	}
	slices.Sort(out)
	return out
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

// firstPosition exports target (JSON Lines) and returns the position of
// its first line and its Sync-Token.
func firstPosition(t *testing.T, h probe, target string) (position, syncToken string) {
	t.Helper()
	w := h.do(t, target, "")
	line, _, _ := strings.Cut(w.Body.String(), "\n")
	var l struct{ Position string }
	if w.Code != http.StatusOK || json.Unmarshal([]byte(line), &l) != nil || l.Position == "" || w.Header().Get("Sync-Token") == "" {
		t.Fatalf("GET %s: %d %.200s, want an export with a line and a Sync-Token", target, w.Code, w.Body)
	}
	return l.Position, w.Header().Get("Sync-Token")
}

// feedAndExportRefs returns the refs of form's feed, read from
// sync=start, after checking that its export gives its lines the same
// refs in the same order.
func feedAndExportRefs(t *testing.T, h probe, form string) []string {
	t.Helper()
	w := h.do(t, "/v1/forms/"+form+"/submissions?sync=start&limit=1000", "")
	var page struct{ Refs []string }
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &page) != nil {
		t.Fatalf("the feed of %s: %d %.200s", form, w.Code, w.Body)
	}
	w = h.do(t, "/v1/forms/"+form+"/export", "")
	var lines []string
	for line := range strings.Lines(w.Body.String()) {
		var l struct{ Ref string }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("an export line of %s: %v", form, err)
		}
		lines = append(lines, l.Ref)
	}
	if w.Code != http.StatusOK || !slices.Equal(lines, page.Refs) {
		t.Fatalf("the export of %s: %d, refs %v, want the feed's %v", form, w.Code, lines, page.Refs)
	}
	return page.Refs
}

func newProbe(t *testing.T, s interface {
	formsapi.Store
	formsapi.KeyResolver
}) probe {
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

// RunFeedCopy checks, as a feed consumer sees it, that the sync feed
// keeps a copy exact while writers add and delete: on reader's handler,
// a consumer polls AccountA's FormEmpty through the feed, keeping each
// submission under its ref and removing the refs each page deletes,
// while on writer three goroutines add submissions, each deleting one of
// its earlier ones now and then, and a fourth erases by a field value.
// Once the writers stop, one more poll must leave the copy exactly the
// form's submissions. writer and reader may be one store, or two nodes
// over the same data (two pgstore stores on one schema, say); both must
// be loaded with DefaultSeed. Run's Lifecycle group runs it on one store.
func RunFeedCopy(t *testing.T, writer formsapi.Writer, reader interface {
	formsapi.Store
	formsapi.KeyResolver
}) {
	t.Helper()
	ctx := context.Background()
	h := newProbe(t, reader)
	copyOf := feedCopy{}
	const adds = 60 // by each writer
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []string
			for i := range adds {
				id := fmt.Sprintf("w%d-%d", w, i)
				data := fmt.Sprintf(`{"w":%d,"i":%d,"email":"r%d@example.com"}`, w, i, i%7)
				if err := writer.AddSubmission(ctx, formsapi.Submission{FormID: FormEmpty, Data: []byte(data)}, formsapi.Metadata{ID: id}); err != nil {
					errs <- err
					return
				}
				mine = append(mine, id)
				if i%3 == 2 {
					k := (i * 7) % len(mine)
					err := writer.DeleteSubmission(ctx, AccountA, FormEmpty, mine[k])
					if err != nil && !errors.Is(err, formsapi.ErrSubmissionNotFound) { // erased meanwhile
						errs <- err
						return
					}
					mine = slices.Delete(mine, k, k+1)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 10 {
			if _, err := writer.Erase(ctx, AccountA, "email", fmt.Sprintf("r%d@example.com", 3+2*(i%2))); err != nil { // r3 and r5: the rest stay
				errs <- err
				return
			}
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// Poll one page at a time while they write, as a consumer would.
	token, polls := "start", 0
	for writing := true; writing; polls++ {
		select {
		case <-done:
			writing = false
		default:
		}
		token, _ = copyOf.page(t, h, FormEmpty, token)
	}
	close(errs)
	for err := range errs {
		t.Fatalf("a writer: %v", err)
	}
	copyOf.replay(t, h, FormEmpty, token)
	want := listCopy(t, reader, FormEmpty)
	if got := copyOf.values(); !slices.Equal(got, want) {
		t.Errorf("after %d polls, the consumer's copy holds %d submissions, the form %d:\n got %v\nwant %v", polls, len(got), len(want), got, want)
	}
	if len(want) == 0 {
		t.Error("the writers left no submission: the check proves little")
	}
}

// nextOf returns the member field of a 200 page's JSON (nextCursor,
// syncToken), failing the test unless it is there.
func nextOf(t *testing.T, w *httptest.ResponseRecorder, field string) string {
	t.Helper()
	var page map[string]any
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &page) != nil {
		t.Fatalf("status %d: %.200s", w.Code, w.Body)
	}
	v, _ := page[field].(string)
	if v == "" {
		t.Fatalf("no %s in %.200s", field, w.Body)
	}
	return v
}
