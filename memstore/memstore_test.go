package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

func open(t *testing.T, seed storetest.Seed) *memstore.Store {
	s := memstore.New()
	if err := storetest.Load(context.Background(), s, seed); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, seed storetest.Seed) formsapi.Store { return open(t, seed) })
}

func TestKeyContract(t *testing.T) {
	storetest.RunKeys(t, func(t *testing.T, seed storetest.Seed) formsapi.KeyResolver { return open(t, seed) })
}

func TestBadWritesChangeNothing(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := open(t, storetest.DefaultSeed())
	before, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormBusy, formsapi.Query{Limit: 1000})
	is.NoErr(err) // list before

	cases := []struct {
		name string
		err  error
		want error
	}{
		{"duplicate form in the same account", s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: storetest.FormBusy}), formsapi.ErrFormExists},
		{"duplicate form in another account", s.AddForm(ctx, storetest.AccountB, formsapi.Form{ID: storetest.FormBusy}), formsapi.ErrFormExists},
		{"form without account", s.AddForm(ctx, "", formsapi.Form{ID: "x"}), formsapi.ErrInvalidInput},
		{"form ID with a slash", s.AddForm(ctx, "a", formsapi.Form{ID: "a/b"}), formsapi.ErrInvalidInput},
		{"form ID ..", s.AddForm(ctx, "a", formsapi.Form{ID: ".."}), formsapi.ErrInvalidInput},
		{"form in year 3000", s.AddForm(ctx, "a", formsapi.Form{ID: "future", CreatedAt: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}), formsapi.ErrInvalidInput},
		{"submission to unknown form", s.AddSubmission(ctx, formsapi.Submission{FormID: "nope", Data: []byte(`{}`)}, formsapi.Metadata{}), formsapi.ErrFormNotFound},
		{"array data", s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: []byte(`[1]`)}, formsapi.Metadata{}), formsapi.ErrInvalidInput},
		{"broken data", s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: []byte(`{"a":`)}, formsapi.Metadata{}), formsapi.ErrInvalidInput},
		{"no data", s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy}, formsapi.Metadata{}), formsapi.ErrInvalidInput},
		{"invalid UTF-8 data", s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: []byte("{\"a\":\"\xff\"}")}, formsapi.Metadata{}), formsapi.ErrInvalidInput},
		{"negative file size", s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: []byte(`{}`), Attachments: []formsapi.Attachment{{FileSize: -1}}}, formsapi.Metadata{}), formsapi.ErrInvalidInput},
		{"broken geo", s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: []byte(`{}`)}, formsapi.Metadata{Geo: []byte(`{`)}), formsapi.ErrInvalidInput},
		{"empty key", s.AddKey(ctx, "", "a"), formsapi.ErrInvalidInput},
		{"key with a space", s.AddKey(ctx, "a b", "a"), formsapi.ErrInvalidInput},
		{"key with our prefix and a bad checksum", s.AddKey(ctx, formsapi.KeyPrefix+"00000000000000000000000000000000000000", "a"), formsapi.ErrInvalidInput},
		{"key without account", s.AddKey(ctx, "fine-key", ""), formsapi.ErrInvalidInput},
		{"duplicate key", s.AddKey(ctx, storetest.KeyA, storetest.AccountB), formsapi.ErrKeyExists},
		{"revoke unknown key", s.RevokeKey(ctx, "never-added"), formsapi.ErrInvalidKey},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.err, c.want)
		}
	}

	after, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormBusy, formsapi.Query{Limit: 1000})
	is.NoErr(err)                                 // list after
	is.Equal(len(after.Items), len(before.Items)) // no submission added
	forms, err := s.ListForms(ctx, "a", formsapi.Query{Limit: 10})
	is.NoErr(err)                 // list forms of account a
	is.Equal(len(forms.Items), 0) // no form added
	account, err := s.ResolveKey(ctx, storetest.KeyA)
	is.NoErr(err)                         // KeyA still resolves
	is.Equal(account, storetest.AccountA) // to its own account
	_, err = s.ResolveKey(ctx, "fine-key")
	is.True(errors.Is(err, formsapi.ErrInvalidKey)) // the key without account was not added
}

func TestZeroTimeMeansNow(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := memstore.New()
	start := time.Now()
	is.NoErr(s.AddForm(ctx, "a", formsapi.Form{ID: "f"}))                                                     // add form
	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "f", Data: []byte(`{}`)}, formsapi.Metadata{})) // add submission
	p, err := s.ListSubmissions(ctx, "a", "f", formsapi.Query{Limit: 1})
	is.NoErr(err)                                                                    // list
	is.True(!p.Items[0].CreatedAt.Before(start.Round(0).Truncate(time.Microsecond))) // stamped now
	is.Equal(p.Items[0].CreatedAt.Location(), time.UTC)                              // in UTC
}
