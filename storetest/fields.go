package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/wire"
)

// fieldStore is a store with a field table (formsapi.FieldStore) and the
// write side to change it.
type fieldStore interface {
	writeStore
	formsapi.FeedStore
	formsapi.FieldStore
}

// wantField is a field as the suite expects it.
type wantField struct {
	name  string
	first int64
}

// expectedFields computes a form's fields from its feed, read from the
// start: each name of each item's data (decoded as encoding/json
// decodes it), at the position of the first item that has it, up to
// upTo. Deleted submissions are gone from the feed, so a caller that
// deletes passes the fields it computed before.
func expectedFields(t *testing.T, s formsapi.FeedStore, account, form string, upTo int64) []wantField {
	t.Helper()
	var fields []wantField
	seen := map[string]bool{}
	var after int64
	for {
		p, err := s.SyncSubmissions(context.Background(), account, form, after, MaxLimit)
		if err != nil {
			t.Fatalf("SyncSubmissions: %v", err)
		}
		for i, item := range p.Items {
			if p.Positions[i] > upTo {
				return fields
			}
			for _, n := range wire.FieldNames(item.Data) {
				if !seen[n] {
					seen[n] = true
					fields = append(fields, wantField{n, p.Positions[i]})
				}
			}
		}
		after = p.Next
		if !p.More {
			return fields
		}
	}
}

// dataFields calls DataFields and checks the shape of its answer.
func dataFields(t *testing.T, s formsapi.FieldStore, account, form string, upTo int64, limit int) []wantField {
	t.Helper()
	names, first, err := s.DataFields(context.Background(), account, form, upTo, limit)
	if err != nil {
		t.Fatalf("DataFields(%s, %s, upTo %d, limit %d): %v", account, form, upTo, limit, err)
	}
	if len(names) != len(first) {
		t.Fatalf("DataFields: %d names and %d first positions", len(names), len(first))
	}
	got := make([]wantField, len(names))
	for i := range names {
		got[i] = wantField{names[i], first[i]}
	}
	return got
}

func diffFields(got, want []wantField) string {
	if slices.Equal(got, want) {
		return ""
	}
	return fmt.Sprintf("got %v,\nwant %v", got, want)
}

// fieldSubmissions are added to FormBusy by the field clauses: names
// with escapes, a name given twice, names shared with the seed, new
// names in an order that is not alphabetical, and data with no member.
var fieldSubmissions = []string{
	`{"zeta":1,"n":2,"alpha":{"nested":true}}`,
	`{"caf\u00e9":"x","\/slash":1,"dup":1,"dup":2,"tab\tname":"t"}`,
	`{}`,
	`{"message":"again","omega":[1,2],"zeta":3}`,
	`{"emoji \ud83d\ude00":1,"quote\"d":2,"comma,name":3,"=formula":4,"nul\u0000name":6}`,
}

// fieldClauses checks the formsapi.FieldStore contract, one subtest per
// clause, each on a fresh store loaded with DefaultSeed.
func fieldClauses(t *testing.T, open func(t *testing.T, seed Seed) fieldStore, cfg *config) {
	seed := DefaultSeed()
	ctx := context.Background()
	// loaded is a store with the seed and fieldSubmissions, each with
	// a metadata ID field-i.
	loaded := func(t *testing.T) fieldStore {
		s := open(t, seed)
		for i, data := range fieldSubmissions {
			if err := s.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy, Data: []byte(data)}, formsapi.Metadata{ID: fmt.Sprint("field-", i)}); err != nil {
				t.Fatalf("AddSubmission %s: %v", data, err)
			}
		}
		return s
	}

	t.Run("Fields", func(t *testing.T) {
		cfg.parallel(t)
		s := loaded(t)
		for _, f := range []struct{ account, form string }{{AccountA, FormBusy}, {AccountA, FormSmall}, {AccountA, FormEmpty}, {AccountB, FormB}} {
			end := feedEnd(t, s, f.account, f.form)
			want := expectedFields(t, s, f.account, f.form, end)
			if msg := diffFields(dataFields(t, s, f.account, f.form, end, MaxLimit), want); msg != "" {
				t.Errorf("fields of %s: %s", f.form, msg)
			}
		}
		// The decoding is encoding/json's: escapes resolved, a name given
		// twice once.
		got := dataFields(t, s, AccountA, FormBusy, feedEnd(t, s, AccountA, FormBusy), MaxLimit)
		var names []string
		for _, f := range got {
			names = append(names, f.name)
		}
		for _, n := range []string{"café", "/slash", "dup", "tab\tname", "emoji 😀", `quote"d`, "comma,name", "=formula", "nul\x00name"} {
			if c := strings.Count(strings.Join(names, "\x00")+"\x00", n+"\x00"); c != 1 {
				t.Errorf("field %q: %d times in %q, want once", n, c, names)
			}
		}
	})
	t.Run("Order", func(t *testing.T) {
		cfg.parallel(t)
		s := loaded(t)
		got := dataFields(t, s, AccountA, FormBusy, feedEnd(t, s, AccountA, FormBusy), MaxLimit)
		for i := 1; i < len(got); i++ {
			if got[i].first < got[i-1].first {
				t.Fatalf("field %d (%q at %d) after %q at %d: not in first position order", i, got[i].name, got[i].first, got[i-1].name, got[i-1].first)
			}
		}
		// One submission's new names in the order its data has them.
		var first []string
		for _, f := range got {
			if strings.HasPrefix(f.name, "zeta") || f.name == "alpha" || f.name == "omega" {
				first = append(first, f.name)
			}
		}
		if want := []string{"zeta", "alpha", "omega"}; !slices.Equal(first, want) {
			t.Errorf("new names in order %v, want %v (the order of the data, then of the feed)", first, want)
		}
	})
	t.Run("Range", func(t *testing.T) {
		cfg.parallel(t)
		s := loaded(t)
		end := feedEnd(t, s, AccountA, FormBusy)
		all := expectedFields(t, s, AccountA, FormBusy, end)
		for upTo := int64(0); upTo <= end+1; upTo++ {
			want := expectedFields(t, s, AccountA, FormBusy, upTo)
			if msg := diffFields(dataFields(t, s, AccountA, FormBusy, upTo, MaxLimit), want); msg != "" {
				t.Fatalf("upTo %d: %s", upTo, msg)
			}
		}
		for limit := 1; limit <= len(all)+1; limit++ {
			want := all[:min(limit, len(all))]
			if msg := diffFields(dataFields(t, s, AccountA, FormBusy, end, limit), want); msg != "" {
				t.Fatalf("limit %d: %s", limit, msg)
			}
		}
	})
	t.Run("AsOf", func(t *testing.T) {
		cfg.parallel(t)
		s := loaded(t)
		end := feedEnd(t, s, AccountA, FormBusy)
		before := dataFields(t, s, AccountA, FormBusy, end, MaxLimit)
		// Writers add new names and known ones while a reader asks again
		// as of the same position: the answer never changes.
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 30 {
					data := fmt.Sprintf(`{"late-%d-%d":1,"n":%d,"zeta":0}`, w, i, i)
					if err := s.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy, Data: []byte(data)}, formsapi.Metadata{}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		for range 20 {
			if msg := diffFields(dataFields(t, s, AccountA, FormBusy, end, MaxLimit), before); msg != "" {
				t.Fatalf("as of %d while writers add: %s", end, msg)
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("AddSubmission: %v", err)
		}
		if msg := diffFields(dataFields(t, s, AccountA, FormBusy, end, MaxLimit), before); msg != "" {
			t.Fatalf("as of %d after the writers: %s", end, msg)
		}
		after := feedEnd(t, s, AccountA, FormBusy)
		if msg := diffFields(dataFields(t, s, AccountA, FormBusy, after, MaxLimit), expectedFields(t, s, AccountA, FormBusy, after)); msg != "" {
			t.Fatalf("all fields after the writers: %s", msg)
		}
	})
	t.Run("NeverShrunk", func(t *testing.T) {
		cfg.parallel(t)
		s := loaded(t)
		end := feedEnd(t, s, AccountA, FormBusy)
		before := dataFields(t, s, AccountA, FormBusy, end, MaxLimit)
		for i := range fieldSubmissions {
			if err := s.DeleteSubmission(ctx, AccountA, FormBusy, fmt.Sprint("field-", i)); err != nil {
				t.Fatalf("DeleteSubmission: %v", err)
			}
		}
		if _, err := s.Erase(ctx, AccountA, "n", "5"); err != nil {
			t.Fatalf("Erase: %v", err)
		}
		if _, err := s.Erase(ctx, AccountA, "plan", "pro"); err != nil {
			t.Fatalf("Erase: %v", err)
		}
		if msg := diffFields(dataFields(t, s, AccountA, FormBusy, feedEnd(t, s, AccountA, FormBusy), MaxLimit), before); msg != "" {
			t.Errorf("after deletions and an erasure: %s", msg)
		}
		if got := dataFields(t, s, AccountA, FormSmall, feedEnd(t, s, AccountA, FormSmall), MaxLimit); len(got) != 2 {
			t.Errorf("a form whose every submission was erased: fields %v, want its two", got)
		}
	})
	t.Run("FormCreatedAgain", func(t *testing.T) {
		cfg.parallel(t)
		s := loaded(t)
		if err := s.DeleteForm(ctx, AccountA, FormBusy); err != nil {
			t.Fatalf("DeleteForm: %v", err)
		}
		checkFieldsNotFound(t, s, AccountA, FormBusy)
		if err := s.AddForm(ctx, AccountA, formsapi.Form{ID: FormBusy, Title: "again"}); err != nil {
			t.Fatalf("AddForm: %v", err)
		}
		if got := dataFields(t, s, AccountA, FormBusy, 1<<40, MaxLimit); len(got) != 0 {
			t.Fatalf("fields of the form created again: %v, want none", got)
		}
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy, Data: []byte(`{"only":1,"n":2}`)}, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
		end := feedEnd(t, s, AccountA, FormBusy)
		if msg := diffFields(dataFields(t, s, AccountA, FormBusy, end, MaxLimit), []wantField{{"only", end}, {"n", end}}); msg != "" {
			t.Errorf("fields of the form created again, with one submission: %s", msg)
		}
	})
	t.Run("Isolation", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		for _, c := range []struct{ account, form string }{{AccountA, FormNone}, {AccountA, FormB}, {AccountB, FormBusy}, {AccountEmpty, FormBusy}, {"", FormBusy}} {
			checkFieldsNotFound(t, s, c.account, c.form)
		}
	})
	t.Run("Limit", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		for _, limit := range badLimits {
			names, _, err := s.DataFields(ctx, AccountA, FormBusy, 1<<40, limit)
			if err == nil {
				t.Errorf("limit %d: %d fields and no error, want an error", limit, len(names))
			}
		}
	})
	t.Run("Context", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		c, cancel := context.WithCancel(ctx)
		cancel()
		if _, _, err := s.DataFields(c, AccountA, FormBusy, 1<<40, MaxLimit); !errors.Is(err, context.Canceled) {
			t.Errorf("canceled context: error %v, want one wrapping context.Canceled", err)
		}
	})
	t.Run("NotAliased", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		end := feedEnd(t, s, AccountA, FormBusy)
		names, first, err := s.DataFields(ctx, AccountA, FormBusy, end, MaxLimit)
		if err != nil || len(names) == 0 {
			t.Fatalf("DataFields: %d fields, %v", len(names), err)
		}
		want := dataFields(t, s, AccountA, FormBusy, end, MaxLimit)
		for i := range names {
			names[i], first[i] = "changed", -1
		}
		if msg := diffFields(dataFields(t, s, AccountA, FormBusy, end, MaxLimit), want); msg != "" {
			t.Errorf("after the caller changed a result: %s", msg)
		}
	})
}

func checkFieldsNotFound(t *testing.T, s formsapi.FieldStore, account, form string) {
	t.Helper()
	names, _, err := s.DataFields(context.Background(), account, form, 1<<40, MaxLimit)
	if !errors.Is(err, formsapi.ErrFormNotFound) {
		t.Errorf("DataFields(%q, %q): error %v, want ErrFormNotFound", account, form, err)
	}
	if len(names) != 0 {
		t.Errorf("DataFields(%q, %q): %d fields with the error", account, form, len(names))
	}
}
