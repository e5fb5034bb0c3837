// Package storetest checks a formsapi.Store, and every optional contract
// it implements, against what the handler relies on, the way
// testing/fstest checks an fs.FS. memstore, sqlitestore and pgstore pass
// it; a host that writes its own store runs it too, in one call:
//
//	func TestMyStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, seed storetest.Seed) formsapi.Store {
//			s := mystore.New(t.TempDir(), mystore.WithClock(seed.Clock.Now))
//			if err := storetest.Load(context.Background(), s, seed); err != nil {
//				t.Fatal(err)
//			}
//			return s
//		}, storetest.WithDamage(func(t *testing.T, s formsapi.Store, accountID, formID string, c storetest.DamageCase) {
//			// write c.Data over the stored data of formID's last submission
//		}))
//	}
//
// Run learns what the store implements (formsapi.Store always;
// KeyResolver, Writer, KeyManager, FeedStore, and this module's fast
// paths) and runs every clause of each of those contracts, skipping the
// groups that do not apply and saying why. Every clause runs as its own
// parallel subtest on a fresh store made by the factory, so a failure
// names the clause that broke. No clause waits for time to pass: a
// factory whose store takes a clock gives it seed.Clock.Now (see
// [Clock]), and the clauses about time move that clock instead.
package storetest

import (
	"context"
	"fmt"
	"time"

	"github.com/formsapi/formsapi"
)

// Seed is the data a factory loads into a fresh store before a subtest,
// and the clock the store should keep time by.
type Seed struct {
	Forms       []SeedForm
	Submissions []SeedSubmission
	Keys        []SeedKey
	// Clock, when not nil, is the clock to give the store as its notion
	// of now (see [Clock]): the grant and write clauses set a fresh one
	// for each clause. DefaultSeed leaves it nil, and a nil Clock's Now is
	// time.Now.
	Clock *Clock
}

// SeedForm is a form and the account that owns it.
type SeedForm struct {
	AccountID string
	Form      formsapi.Form
}

// SeedSubmission is a submission with the internal metadata the collection
// side recorded for it. Load adds them in the order given, which is not
// their time order.
type SeedSubmission struct {
	Submission formsapi.Submission
	Metadata   formsapi.Metadata
}

// SeedKey is an API key of an account; a Revoked key is added and then
// revoked.
type SeedKey struct {
	Key, AccountID string
	Revoked        bool
}

// Load writes seed into w: forms, then submissions, then keys. The
// submissions go in one batch when w is a [formsapi.BatchWriter], one
// AddSubmission at a time otherwise, in the order given either way.
func Load(ctx context.Context, w formsapi.Writer, seed Seed) error {
	for _, f := range seed.Forms {
		if err := w.AddForm(ctx, f.AccountID, f.Form); err != nil {
			return fmt.Errorf("storetest: load form %q: %w", f.Form.ID, err)
		}
	}
	if bw, ok := w.(formsapi.BatchWriter); ok {
		if err := bw.AddSubmissions(ctx, seq(seed.Submissions)); err != nil {
			return fmt.Errorf("storetest: load submissions: %w", err)
		}
	} else {
		for i, s := range seed.Submissions {
			if err := w.AddSubmission(ctx, s.Submission, s.Metadata); err != nil {
				return fmt.Errorf("storetest: load submission %d: %w", i, err)
			}
		}
	}
	for _, k := range seed.Keys {
		if err := w.AddKey(ctx, k.Key, k.AccountID); err != nil {
			return fmt.Errorf("storetest: load key of %q: %w", k.AccountID, err)
		}
		if k.Revoked {
			if err := w.RevokeKey(ctx, k.Key); err != nil {
				return fmt.Errorf("storetest: revoke key of %q: %w", k.AccountID, err)
			}
		}
	}
	return nil
}

// MaxLimit is the largest page size the suite asks a store for: the
// handler's largest by default (formsapi.WithPageSize changes it).
const MaxLimit = 1000

// Accounts and forms of the seed that Run loads.
const (
	AccountA     = "acct-a" // four forms, many submissions
	AccountB     = "acct-b" // three forms; its data carries CanaryB
	AccountEmpty = "acct-c" // no forms at all

	FormBusy  = "contact-a"  // AccountA's form with many submissions, in groups sharing a timestamp
	FormEmpty = "survey-a"   // AccountA's form with no submissions
	FormSmall = "signup-a"   // AccountA's form with three submissions
	FormB     = "contact-b"  // AccountB's form with submissions
	FormNone  = "no-such-id" // no account has this form

	// Canary is in every piece of internal metadata of the seed; it must
	// never appear in anything a store returns.
	Canary = "CANARY-METADATA"
	// CanaryB is in the submitted data of AccountB's submissions; it must
	// never reach AccountA.
	CanaryB = "CANARY-ACCOUNT-B"

	busyCount = 23
)

var base = time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)

// Keys of the seed.
var (
	KeyA        = "key-a-host-format" // a host's own key format, for AccountA
	KeyA2       = mustNewKey()        // a NewKey key, also for AccountA
	KeyB        = mustNewKey()        // AccountB's key
	KeyRevoked  = mustNewKey()        // was AccountA's, revoked
	KeyNotAdded = mustNewKey()        // well-formed, never added
)

func mustNewKey() string {
	k, err := formsapi.NewKey()
	if err != nil {
		panic(err)
	}
	return k
}

// DefaultSeed returns the seed Run loads: two accounts with
// forms created at distinct and at equal times, submissions in groups that
// share a timestamp, times in a zone other than UTC, submissions with and
// without attachments, user data with fields named like metadata ("ip",
// "user_agent"), canary metadata on every submission, and live and revoked
// keys. Submissions are listed out of time order.
func DefaultSeed() Seed {
	cet := time.FixedZone("CET", 3600)
	s := Seed{
		Forms: []SeedForm{
			{AccountA, formsapi.Form{ID: FormBusy, Title: "Contact us", Icon: "mail", NotificationEmail: "owner-a@example.com", CreatedAt: base}},
			{AccountA, formsapi.Form{ID: FormEmpty, Title: "Survey", Icon: "chart", NotificationEmail: "owner-a@example.com", CreatedAt: base.Add(time.Hour)}},
			{AccountA, formsapi.Form{ID: FormSmall, Title: "Sign up", Icon: "user", NotificationEmail: "signups@example.com", CreatedAt: base.Add(time.Hour).In(cet)}},
			{AccountA, formsapi.Form{ID: "feedback-a", Title: "Feedback", Icon: "", NotificationEmail: "", CreatedAt: base.Add(-24 * time.Hour)}},
			{AccountB, formsapi.Form{ID: FormB, Title: "B " + CanaryB, Icon: "mail", NotificationEmail: "b@example.com", CreatedAt: base.Add(2 * time.Hour)}},
			{AccountB, formsapi.Form{ID: "survey-b", Title: "B survey", Icon: "chart", NotificationEmail: "b@example.com", CreatedAt: base}},
			{AccountB, formsapi.Form{ID: "orders-b", Title: "B orders", Icon: "cart", NotificationEmail: "b@example.com", CreatedAt: base.Add(30 * time.Minute)}},
		},
		Keys: []SeedKey{
			{Key: KeyA, AccountID: AccountA},
			{Key: KeyA2, AccountID: AccountA},
			{Key: KeyB, AccountID: AccountB},
			{Key: KeyRevoked, AccountID: AccountA, Revoked: true},
		},
	}
	for j := 0; j < busyCount; j++ {
		i := j * 7 % busyCount // out of time order
		at := base.Add(time.Duration(i/4) * time.Minute)
		if i == busyCount-1 {
			at = at.Add(123456789 * time.Nanosecond)
		}
		if i%2 == 1 {
			at = at.In(cet)
		}
		data := fmt.Sprintf(`{"n":%d,"name":"Person %d","email":"p%d@example.com","message":"Hello <b>%d</b> & \u00e9t\u00e9"}`, i, i, i, i)
		if i == 5 {
			data = `{"n":5,"ip":"typed by the user","user_agent":"also typed","nested":{"a":[1,2.5,true,null]}}`
		}
		var att []formsapi.Attachment
		if i%5 == 0 {
			att = []formsapi.Attachment{{FieldName: "cv", FileURL: fmt.Sprintf("https://files.example.com/%d/cv.pdf", i), FileSize: int64(1000 + i), MIMEType: "application/pdf"}}
			if i%10 == 0 {
				att = append(att, formsapi.Attachment{FieldName: "photo", FileURL: fmt.Sprintf("https://files.example.com/%d/p.png", i), FileSize: 0, MIMEType: "image/png"})
			}
		}
		s.Submissions = append(s.Submissions, SeedSubmission{
			Submission: formsapi.Submission{FormID: FormBusy, Data: []byte(data), Attachments: att, CreatedAt: at},
			Metadata:   canaryMetadata(i),
		})
	}
	for i := 0; i < 3; i++ {
		s.Submissions = append(s.Submissions, SeedSubmission{
			Submission: formsapi.Submission{FormID: FormSmall, Data: []byte(fmt.Sprintf(`{"n":%d,"plan":"pro"}`, 100+i)), CreatedAt: base.Add(time.Duration(i) * time.Second)},
			Metadata:   canaryMetadata(100 + i),
		})
	}
	for i := 0; i < 6; i++ {
		s.Submissions = append(s.Submissions, SeedSubmission{
			Submission: formsapi.Submission{FormID: FormB, Data: []byte(fmt.Sprintf(`{"n":%d,"secret":%q}`, 200+i, CanaryB)), CreatedAt: base.Add(time.Duration(i) * time.Minute)},
			Metadata:   canaryMetadata(200 + i),
		})
	}
	return s
}

func canaryMetadata(i int) formsapi.Metadata {
	return formsapi.Metadata{
		ClientIP:  fmt.Sprintf("203.0.113.%d %s", i%250, Canary),
		UserAgent: "Mozilla/5.0 " + Canary,
		Geo:       []byte(fmt.Sprintf(`{"city":%q,"lat":52.5}`, Canary)),
		TraceID:   fmt.Sprintf("trace-%d-%s", i, Canary),
	}
}
