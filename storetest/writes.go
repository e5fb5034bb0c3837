package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyformat"
)

// writeClauses checks the write side: each malformed or conflicting write is
// refused with the documented error and changes nothing, each write beyond
// formsapi.DefaultLimits (which the store must enforce in AddForm,
// AddSubmission and AddKey alike) is refused with ErrInvalidInput and a
// message naming the limit, one byte over it, sizes counted as the API
// sends them, escapes included; good writes are visible at once, and
// everything accepted, right up to each limit, comes back from a handler
// over the store as a 200 that encoding/json decodes, on both of the
// handler's read paths: a submission of exactly MaxSubmissionBytes and
// forms of exactly MaxFormBytes, of an account ID of exactly
// MaxAccountIDBytes, byte for byte as they were measured.
//
// A form or submission added without a CreatedAt gets the store's time:
// exactly that of Seed.Clock on a store that keeps time by it (see
// [Clock]), else the wall clock's, within a second.
func writeClauses(t *testing.T, open func(t *testing.T, seed Seed) writeStore, cfg *config) {
	seed := DefaultSeed()
	ctx := context.Background()
	ok := []byte(`{"ok":true}`)
	future := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	refused := []refusal{
		{"DuplicateFormSameAccount", formsapi.ErrFormExists, "", func(s writeStore) error {
			return s.AddForm(ctx, AccountA, formsapi.Form{ID: FormBusy, Title: "again"})
		}},
		{"DuplicateFormOtherAccount", formsapi.ErrFormExists, "", func(s writeStore) error {
			return s.AddForm(ctx, AccountB, formsapi.Form{ID: FormBusy, Title: "again"})
		}},
		{"FormWithoutAccount", formsapi.ErrInvalidInput, "", func(s writeStore) error {
			return s.AddForm(ctx, "", formsapi.Form{ID: "new-form"})
		}},
		{"FormIDWithSlash", formsapi.ErrInvalidInput, "", func(s writeStore) error {
			return s.AddForm(ctx, AccountA, formsapi.Form{ID: "a/b"})
		}},
		{"FormIDDotDot", formsapi.ErrInvalidInput, "", func(s writeStore) error {
			return s.AddForm(ctx, AccountA, formsapi.Form{ID: ".."})
		}},
		{"FormIDEmpty", formsapi.ErrInvalidInput, "", func(s writeStore) error {
			return s.AddForm(ctx, AccountA, formsapi.Form{})
		}},
		{"FormOutOfTimeRange", formsapi.ErrInvalidInput, "", func(s writeStore) error {
			return s.AddForm(ctx, AccountA, formsapi.Form{ID: "future", CreatedAt: future})
		}},
		{"SubmissionToUnknownForm", formsapi.ErrFormNotFound, "", func(s writeStore) error {
			return s.AddSubmission(ctx, formsapi.Submission{FormID: FormNone, Data: ok}, formsapi.Metadata{})
		}},
		{"DataNotAnObject", formsapi.ErrInvalidInput, "", func(s writeStore) error {
			return s.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy, Data: []byte(`[1,2]`)}, formsapi.Metadata{})
		}},
		{"DataBrokenJSON", formsapi.ErrInvalidInput, "", func(s writeStore) error {
			return s.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy, Data: []byte(`{"a":`)}, formsapi.Metadata{})
		}},
		{"DataTwoObjects", formsapi.ErrInvalidInput, "", func(s writeStore) error {
			return s.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy, Data: []byte(`{}{}`)}, formsapi.Metadata{})
		}},
		{"DataMissing", formsapi.ErrInvalidInput, "", func(s writeStore) error {
			return s.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy}, formsapi.Metadata{})
		}},
		{"DataInvalidUTF8", formsapi.ErrInvalidInput, "", func(s writeStore) error {
			return s.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy, Data: []byte("{\"a\":\"\xff\"}")}, formsapi.Metadata{})
		}},
		{"BrokenGeo", formsapi.ErrInvalidInput, "", func(s writeStore) error {
			return s.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy, Data: ok}, formsapi.Metadata{Geo: []byte(`{`)})
		}},
		{"SubmissionOutOfTimeRange", formsapi.ErrInvalidInput, "", func(s writeStore) error {
			return s.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy, Data: ok, CreatedAt: future}, formsapi.Metadata{})
		}},
		{"EmptyKey", formsapi.ErrInvalidInput, "", func(s writeStore) error {
			return s.AddKey(ctx, "", AccountA)
		}},
		{"KeyWithSpace", formsapi.ErrInvalidInput, "", func(s writeStore) error {
			return s.AddKey(ctx, "a b", AccountA)
		}},
		{"KeyWithOurPrefixAndBadChecksum", formsapi.ErrInvalidInput, "", func(s writeStore) error {
			return s.AddKey(ctx, keyformat.Prefix+"00000000000000000000000000000000000000", AccountA)
		}},
		{"KeyWithoutAccount", formsapi.ErrInvalidInput, "", func(s writeStore) error {
			return s.AddKey(ctx, "a-fine-key", "")
		}},
		{"DuplicateKey", formsapi.ErrKeyExists, "", func(s writeStore) error {
			return s.AddKey(ctx, KeyA, AccountB)
		}},
		{"RevokeUnknownKey", formsapi.ErrInvalidKey, "", func(s writeStore) error {
			return s.RevokeKey(ctx, KeyNotAdded)
		}},
	}
	refused = append(refused, limitRefusals(ctx)...)
	// The refusals share one store, one after another: a refused write
	// changes nothing, which each checks against the snapshot taken once.
	// A refusal that fails gets a fresh store for the next, so one
	// store's wrong acceptance is reported by its own clause alone. (A
	// store and a snapshot each made the suite's most expensive clauses.)
	t.Run("Refused", func(t *testing.T) {
		cfg.parallel(t)
		var s writeStore
		var before []byte
		for _, c := range refused {
			if s == nil {
				s = open(t, seed)
				before = snapshot(t, s)
			}
			if !t.Run(c.name, func(t *testing.T) {
				err := c.write(s)
				if !errors.Is(err, c.want) {
					t.Errorf("got error %.300v, want %v", err, c.want)
				}
				if c.says != "" && !errorSays(err, c.says) {
					t.Errorf("the error %.300q does not say %q", err, c.says)
				}
				if after := snapshot(t, s); !bytes.Equal(after, before) {
					t.Errorf("a refused write changed the store:\nbefore %s\nafter  %s", before, after)
				}
			}) {
				s = nil
			}
		}
	})

	t.Run("AcceptedIsReadable", func(t *testing.T) {
		cfg.parallel(t)
		checkReadable(t, open(t, seed))
	})
	t.Run("FormsAtLimitsAreReadable", func(t *testing.T) {
		cfg.parallel(t)
		checkFormsAtLimits(t, open(t, seed))
	})
	t.Run("ZeroTimeMeansNow", func(t *testing.T) {
		cfg.parallel(t)
		seed := seed
		seed.Clock = newClock()
		s := open(t, seed)
		seed.Clock.Advance(time.Hour + 1234*time.Millisecond) // no time of the seed, nor the wall clock's
		exact := seed.Clock.read()                            // the seed's keys were added at its time
		want, start := seed.Clock.peek(), time.Now().Add(-time.Second)
		if err := s.AddForm(ctx, "acct-new", formsapi.Form{ID: "stamped"}); err != nil {
			t.Fatalf("AddForm: %v", err)
		}
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: "stamped", Data: ok}, formsapi.Metadata{}); err != nil {
			t.Fatalf("AddSubmission: %v", err)
		}
		forms := walkForms(t, s, "acct-new", formsapi.Query{Limit: 10})
		subs := walkSubmissions(t, s, "acct-new", "stamped", formsapi.Query{Limit: 10})
		if len(forms) != 1 || len(subs) != 1 {
			t.Fatalf("got %d forms and %d submissions, want 1 and 1", len(forms), len(subs))
		}
		for _, at := range []time.Time{forms[0].CreatedAt, subs[0].CreatedAt} {
			if exact && !at.Equal(want) {
				t.Errorf("createdAt %s is not the time of the store's clock at the write (%s)", at, want)
			}
			if !exact && (at.Before(start) || at.After(time.Now().Add(time.Second))) {
				t.Errorf("createdAt %s is not the time of the write (%s)", at, start)
			}
		}
	})
	t.Run("WritesVisibleAtOnce", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		at := base.Add(time.Hour).Add(time.Nanosecond).In(time.FixedZone("Z", 9*3600))
		sub := formsapi.Submission{FormID: FormEmpty, Data: []byte(`{"x": [1, {"y": "z"}]}`), CreatedAt: at,
			Attachments: []formsapi.Attachment{{FieldName: "f", FileURL: "https://x/f", FileSize: 1 << 40, MIMEType: "text/plain"}}}
		if err := s.AddSubmission(ctx, sub, canaryMetadata(0)); err != nil {
			t.Fatalf("AddSubmission: %v", err)
		}
		got := walkSubmissions(t, s, AccountA, FormEmpty, formsapi.Query{Limit: 10})
		if len(got) != 1 {
			t.Fatalf("got %d submissions, want 1", len(got))
		}
		if msg := diffSubmission(sub, got[0]); msg != "" {
			t.Error(msg)
		}
		key, _ := formsapi.NewKey()
		if err := s.AddKey(ctx, key, "acct-new"); err != nil {
			t.Fatalf("AddKey: %v", err)
		}
		if account, err := s.ResolveKey(ctx, key); err != nil || account != "acct-new" {
			t.Errorf("ResolveKey of a new key: got (%q, %v)", account, err)
		}
	})
	t.Run("RevokedKeyCannotBeAddedAgain", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		// A leaked key, once revoked, must stay dead.
		if err := s.AddKey(ctx, KeyRevoked, AccountB); !errors.Is(err, formsapi.ErrKeyExists) {
			t.Errorf("adding a revoked key again: got %v, want ErrKeyExists", err)
		}
		if account, err := s.ResolveKey(ctx, KeyRevoked); !errors.Is(err, formsapi.ErrInvalidKey) {
			t.Errorf("the revoked key resolves to %q (error %v)", account, err)
		}
	})
}

// refusal is a write that must fail with want, in a message that says
// says ("" for any message).
type refusal struct {
	name  string
	want  error
	says  string
	write func(writeStore) error
}

// snapshot renders everything a store shows: every list of every seed
// account and form, and which seed keys resolve to whom.
func snapshot(t *testing.T, s writeStore) []byte {
	t.Helper()
	ctx := context.Background()
	type view struct {
		Forms       map[string][]formsapi.Form
		Submissions map[string][]formsapi.Submission
		Keys        map[string]string
	}
	v := view{Forms: map[string][]formsapi.Form{}, Submissions: map[string][]formsapi.Submission{}, Keys: map[string]string{}}
	q := formsapi.Query{Limit: MaxLimit}
	accounts := []string{AccountA, AccountB, AccountEmpty, "", "acct-new",
		accountOfSize(formsapi.DefaultLimits.MaxAccountIDBytes), accountOfSize(formsapi.DefaultLimits.MaxAccountIDBytes + 1)}
	for _, account := range append(accounts, badAccounts...) {
		v.Forms[account] = walkForms(t, s, account, q)
		for _, f := range v.Forms[account] {
			v.Submissions[f.ID] = walkSubmissions(t, s, account, f.ID, q)
		}
	}
	for _, k := range []string{KeyA, KeyA2, KeyB, KeyRevoked, KeyNotAdded, "a-fine-key"} {
		account, err := s.ResolveKey(ctx, k)
		if err != nil {
			account = "error: " + err.Error()
		}
		v.Keys[k] = account
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return b
}
