package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
)

// The batch clauses: formsapi.BatchWriter's AddSubmissions leaves what
// the same submissions written one at a time leave, writes nothing of a
// refused batch, and is seen all at once.

// batchStore is a store with the batch write, and the rest of the write
// side to compare it with.
type batchStore interface {
	writeStore
	formsapi.BatchWriter
}

// batchSeed is FindSeed with FormSearch, but for FormFindOther's
// submissions: forms whose lists, filters, searches, feeds and fields
// all have something to show, their submissions out of time order, many
// sharing a timestamp, some with a metadata ID, the forms taking turns.
func batchSeed() Seed {
	s := FindSeed()
	s.Submissions = slices.DeleteFunc(s.Submissions, func(s SeedSubmission) bool { return s.Submission.FormID == FormFindOther })
	s.Forms = append(s.Forms, SeedForm{AccountA, formsapi.Form{ID: FormSearch, Title: "Search", CreatedAt: base}})
	for j := range searchCount {
		i := j * 7 % searchCount
		s.Submissions = append(s.Submissions, SeedSubmission{Submission: formsapi.Submission{
			FormID: FormSearch, Data: []byte(searchData(i)), Attachments: searchFiles(i), CreatedAt: base.Add(time.Duration(i/2) * time.Second),
		}})
	}
	for i := range s.Submissions {
		if i%3 == 0 && s.Submissions[i].Metadata.ID == "" {
			s.Submissions[i].Metadata.ID = fmt.Sprintf("batch-%d", i)
		}
	}
	s.Submissions = interleaved(s.Submissions)
	return s
}

// interleaved returns subs with their forms taking turns (each form's
// in their order), so that a batch of them writes to several forms
// back and forth, as an import of mixed forms would.
func interleaved(subs []SeedSubmission) []SeedSubmission {
	var forms []string
	byForm := make(map[string][]SeedSubmission)
	for _, s := range subs {
		id := s.Submission.FormID
		if _, ok := byForm[id]; !ok {
			forms = append(forms, id)
		}
		byForm[id] = append(byForm[id], s)
	}
	out := make([]SeedSubmission, 0, len(subs))
	for len(out) < len(subs) {
		for _, id := range forms {
			if rest := byForm[id]; len(rest) > 0 {
				out, byForm[id] = append(out, rest[0]), rest[1:]
			}
		}
	}
	return out
}

// seq yields subs as a batch.
func seq(subs []SeedSubmission) iter.Seq2[formsapi.Submission, formsapi.Metadata] {
	return func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
		for _, s := range subs {
			if !yield(s.Submission, s.Metadata) {
				return
			}
		}
	}
}

// addAll writes subs through w, as Load writes a seed's: in one batch
// on a formsapi.BatchWriter, one at a time otherwise. It is for a
// clause's own data, which the clause reads, not for what it checks of
// the writes.
func addAll(t *testing.T, w formsapi.Writer, subs []SeedSubmission) {
	t.Helper()
	if err := Load(context.Background(), w, Seed{Submissions: subs}); err != nil {
		t.Fatal(err)
	}
}

// answers is everything the read side answers about the seed's forms,
// as text, one answer a line: the forms lists; each form's submissions
// in both orders, over pages; the find forms' filtered pages, their
// sorted pages by four fields both ways (or the error of a store that
// does not sort), and
// FormSearch's searches (and its counts, on a store that counts); each
// form's feed with its positions and deletions, and its fields, on a
// store with them.
func answers(t *testing.T, s formsapi.Store, seed Seed) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	line := func(what string, v any) {
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		fmt.Fprintf(&b, "%s: %s\n", what, j)
	}
	type search struct {
		name string
		q    formsapi.Query
	}
	var filters, searches []search
	for _, c := range findCases() {
		filters = append(filters, search{"filter " + c.name, formsapi.Query{Filters: c.filters}})
	}
	for _, c := range searchCases() {
		searches = append(searches, search{"search " + c.name, formsapi.Query{Search: find.Normalize(c.term), Filters: c.filters}})
	}
	for _, account := range []string{AccountA, AccountB} {
		line(account+" forms", walkForms(t, s, account, formsapi.Query{Limit: MaxLimit}))
	}
	for _, f := range seed.Forms {
		form, account := f.Form.ID, f.AccountID
		for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
			line(fmt.Sprintf("%s %s", form, o), walkSubmissions(t, s, account, form, formsapi.Query{Limit: 7, Order: o}))
		}
		var cases []search
		switch form {
		case FormFind, FormFindB:
			cases = filters
		case FormSearch:
			cases = searches
		}
		for _, c := range cases {
			// Pages of 5 newest first, one page oldest first.
			for _, q := range []formsapi.Query{{Limit: 5, Order: formsapi.Newest}, {Limit: MaxLimit, Order: formsapi.Oldest}} {
				q.Filters, q.Search = c.q.Filters, c.q.Search
				line(fmt.Sprintf("%s %s %s", form, c.name, q.Order), walkFiltered(t, s, account, form, q))
			}
			if n, ok := s.(formsapi.Counter); ok {
				q := c.q
				q.Limit = 1
				for _, exact := range []bool{true, false} {
					total, err := n.CountSubmissions(ctx, account, form, q, exact)
					if err != nil {
						t.Fatalf("%s %s: count: %v", form, c.name, err)
					}
					line(fmt.Sprintf("%s %s count, exact %t", form, c.name, exact), total)
				}
			}
		}
		if form == FormFind || form == FormFindB {
			// Sorted pages, where the store sorts (its sort index on):
			// numbers, instants, text and a field none has, both ways,
			// in pages of 4.
			if _, err := s.ListSubmissions(ctx, account, form, formsapi.Query{Limit: 1, Sort: sortFields[0]}); err != nil {
				line(form+" sorted", err.Error())
			} else {
				for _, f := range []string{"n", "when", "name", "missing"} {
					for _, sort := range []string{f, "-" + f} {
						line(fmt.Sprintf("%s sorted %s", form, sort), walkFiltered(t, s, account, form, formsapi.Query{Limit: 4, Sort: sort}))
					}
				}
			}
		}
		if fs, ok := s.(formsapi.FeedStore); ok {
			var after int64
			for {
				p, err := fs.SyncSubmissions(ctx, account, form, after, 9)
				if err != nil {
					t.Fatalf("%s feed after %d: %v", form, after, err)
				}
				line(fmt.Sprintf("%s feed after %d", form, after), []any{p.Items, p.Positions, p.Deleted, p.Next, p.More})
				if !p.More {
					if fields, ok := s.(formsapi.FieldStore); ok {
						line(form+" fields", dataFields(t, fields, account, form, p.Next, MaxLimit))
					}
					break
				}
				after = p.Next
			}
		}
	}
	return b.String()
}

// diffLines returns the first line where got and want differ, or "".
func diffLines(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n got  %s\n want %s", i+1, gl, wl)
		}
	}
	return ""
}

// firstDiff shows where got and want, two different strings, first
// differ, with a little of each around it.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-60)
	return fmt.Sprintf("at byte %d, got …%s…, want …%s…", i, got[from:min(len(got), i+60)], want[from:min(len(want), i+60)])
}

func batchClauses(t *testing.T, open func(t *testing.T, seed Seed) batchStore, cfg *config) {
	ctx := context.Background()

	// The same submissions written one at a time and in batches (of one,
	// of seven and of the rest) leave the same answers, with the search
	// index off and, when the store has one, on.
	same := func(t *testing.T, open func(t *testing.T, seed Seed) batchStore) {
		seed := batchSeed()
		empty := Seed{Forms: seed.Forms, Keys: seed.Keys}
		one, many := open(t, empty), open(t, empty)
		for i, sub := range seed.Submissions {
			if err := one.AddSubmission(ctx, sub.Submission, sub.Metadata); err != nil {
				t.Fatalf("AddSubmission %d: %v", i, err)
			}
		}
		subs := seed.Submissions
		for _, n := range []int{1, 7, len(subs) - 8} {
			if err := many.AddSubmissions(ctx, seq(subs[:n])); err != nil {
				t.Fatalf("AddSubmissions of %d: %v", n, err)
			}
			subs = subs[n:]
		}
		if err := many.AddSubmissions(ctx, seq(nil)); err != nil {
			t.Fatalf("AddSubmissions of none: %v", err)
		}
		want := answers(t, one, seed)
		if !strings.Contains(want, `"data":{"n":0,"name":"Zoë Ünal"`) {
			t.Fatalf("the submissions written one at a time are not in the answers:\n%s", want)
		}
		if !strings.Contains(want, FormFind+" sorted -n: ") {
			t.Log("the store does not sort (its sort index off): the batches' sorted pages are not compared")
		}
		if d := diffLines(answers(t, many, seed), want); d != "" {
			t.Errorf("the batches' answers differ from those of the same submissions written one at a time, at %s", d)
		}
	}
	t.Run("SameAsOneAtATime", func(t *testing.T) {
		cfg.parallel(t)
		same(t, open)
	})
	t.Run("SameAsOneAtATime/SearchIndexOn", func(t *testing.T) {
		if cfg.indexed == nil {
			t.Skip("no storetest.WithSearchIndex option: the store has no search index to turn on")
		}
		cfg.parallel(t)
		same(t, func(t *testing.T, seed Seed) batchStore { return as[batchStore](t, cfg.indexed(t, seed)) })
	})

	t.Run("RefusedWritesNothing", func(t *testing.T) {
		cfg.parallel(t)
		seed := DefaultSeed()
		s := open(t, seed)
		stored := SeedSubmission{
			Submission: formsapi.Submission{FormID: FormSmall, Data: []byte(`{"n":"kept"}`), CreatedAt: base},
			Metadata:   formsapi.Metadata{ID: "kept"},
		}
		if err := s.AddSubmission(ctx, stored.Submission, stored.Metadata); err != nil {
			t.Fatal(err)
		}
		ends := func() string {
			var b strings.Builder
			b.WriteString(contents(t, s))
			if fs, ok := s.(formsapi.FeedStore); ok {
				for _, form := range []string{FormBusy, FormSmall, FormB} {
					account := AccountA
					if form == FormB {
						account = AccountB
					}
					fmt.Fprintf(&b, " %s:%d", form, feedEnd(t, fs, account, form))
				}
			}
			return b.String()
		}
		before := ends()
		good := func(i int) SeedSubmission {
			return SeedSubmission{Submission: formsapi.Submission{
				FormID: []string{FormBusy, FormB, FormSmall}[i%3], Data: []byte(fmt.Sprintf(`{"refused":%d}`, i)), CreatedAt: base.Add(time.Duration(i) * time.Hour),
			}}
		}
		// Each batch: three good submissions, the bad one (item 3),
		// and one more good one.
		batch := func(bad SeedSubmission) []SeedSubmission {
			return []SeedSubmission{good(0), good(1), good(2), bad, good(4)}
		}
		withID := func(form, id string) SeedSubmission {
			sub := good(3)
			sub.Submission.FormID = form
			sub.Metadata.ID = id
			return sub
		}
		repeated := batch(withID(FormSmall, "new-id"))
		repeated[1] = withID(FormSmall, "new-id")
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		for _, c := range []struct {
			name  string
			ctx   context.Context
			batch []SeedSubmission
			want  error
		}{
			{"a form not stored", ctx, batch(withID(FormNone, "")), formsapi.ErrFormNotFound},
			{"data not an object", ctx, batch(SeedSubmission{Submission: formsapi.Submission{FormID: FormBusy, Data: []byte(`[1]`), CreatedAt: base}}), formsapi.ErrInvalidInput},
			{"a submission over MaxSubmissionBytes", ctx, batch(SeedSubmission{Submission: submissionOfSize(FormBusy, base, formsapi.DefaultLimits.MaxSubmissionBytes+1)}), formsapi.ErrInvalidInput},
			{"a metadata ID the form has", ctx, batch(withID(FormSmall, stored.Metadata.ID)), formsapi.ErrInvalidInput},
			{"a metadata ID an earlier submission of the batch gave the form", ctx, repeated, formsapi.ErrInvalidInput},
			{"a canceled context", canceled, batch(good(3)), context.Canceled},
		} {
			err := s.AddSubmissions(c.ctx, seq(c.batch))
			if !errors.Is(err, c.want) {
				t.Errorf("%s: got error %v, want one wrapping %v", c.name, err, c.want)
			} else if c.want != context.Canceled && !regexp.MustCompile(`\b3\b`).MatchString(err.Error()) {
				t.Errorf("%s: the error %q does not name item 3 of the batch", c.name, err)
			}
			if after := ends(); after != before {
				t.Errorf("%s: the refused batch changed the store: %s", c.name, firstDiff(after, before))
			}
		}
		// A context canceled while the batch is iterated.
		cctx, cancel := context.WithCancel(ctx)
		err := s.AddSubmissions(cctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
			for i := range 5 {
				if i == 3 {
					cancel()
				}
				if !yield(good(i).Submission, good(i).Metadata) {
					return
				}
			}
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a context canceled while the batch is iterated: got error %v, want one wrapping context.Canceled", err)
		}
		if after := ends(); after != before {
			t.Errorf("a context canceled while the batch is iterated: the store changed: %s", firstDiff(after, before))
		}
		// The refused batches took no feed position: the next write
		// takes the one after the last.
		if fs, ok := s.(formsapi.FeedStore); ok {
			end := feedEnd(t, fs, AccountA, FormBusy)
			if err := s.AddSubmissions(ctx, seq([]SeedSubmission{withID(FormBusy, "new-id"), withID(FormSmall, "new-id")})); err != nil {
				t.Fatalf("a metadata ID given to submissions of two forms in a batch: %v (want it accepted)", err)
			}
			if got := feedEnd(t, fs, AccountA, FormBusy); got != end+1 {
				t.Errorf("after the refused batches and one more submission, the feed ends at %d, want %d", got, end+1)
			}
		}
	})

	t.Run("AllAtOnce", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, DefaultSeed())
		count := func(account, form string) int {
			return len(walkSubmissions(t, s, account, form, formsapi.Query{Limit: MaxLimit}))
		}
		busy, b := count(AccountA, FormBusy), count(AccountB, FormB)
		const n = 300
		var batch []SeedSubmission
		for i := range n {
			form := FormBusy
			if i%3 == 2 {
				form = FormB
			}
			batch = append(batch, SeedSubmission{Submission: formsapi.Submission{FormID: form, Data: []byte(fmt.Sprintf(`{"n":%d}`, i)), CreatedAt: base.Add(time.Duration(i) * time.Minute)}})
		}
		// While the batch is written, a reader sees none of it or all of it.
		// (count fails the test, which only the test's goroutine may do;
		// the reader's own count is one page of the list.)
		countPage := func(account, form string) (int, error) {
			p, err := s.ListSubmissions(ctx, account, form, formsapi.Query{Limit: MaxLimit})
			return len(p.Items), err
		}
		var seen []string
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for last := false; !last; {
				select {
				case <-done:
					last = true
				default:
				}
				gotBusy, err := countPage(AccountA, FormBusy)
				gotB, errB := countPage(AccountB, FormB)
				if err = errors.Join(err, errB); err != nil {
					seen = append(seen, err.Error())
					return
				}
				if gotBusy != busy && gotBusy != busy+n-n/3 || gotB != b && gotB != b+n/3 {
					seen = append(seen, fmt.Sprintf("%d and %d", gotBusy-busy, gotB-b))
				}
			}
		}()
		err := s.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
			for i, sub := range batch {
				if i == n/2 {
					// Half the batch is yielded: none of it is visible.
					if got := count(AccountA, FormBusy); got != busy {
						t.Errorf("half way through the batch, %d of its submissions are in the list", got-busy)
					}
				}
				if !yield(sub.Submission, sub.Metadata) {
					return
				}
			}
		})
		close(done)
		wg.Wait()
		if err != nil {
			t.Fatalf("AddSubmissions: %v", err)
		}
		if len(seen) > 0 {
			t.Errorf("a reader saw part of the batch (of its %d and %d submissions of two forms): %v", n-n/3, n/3, seen)
		}
		if gotBusy, gotB := count(AccountA, FormBusy), count(AccountB, FormB); gotBusy != busy+n-n/3 || gotB != b+n/3 {
			t.Errorf("after the batch, %d and %d of its submissions are in the lists, want %d and %d", gotBusy-busy, gotB-b, n-n/3, n/3)
		}
	})
}
