package formsapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
)

// world is a randomly generated set of accounts, forms, submissions and
// keys, fed identically to every store.
type world struct {
	seed     storetest.Seed
	accounts []string
	keys     map[string]string   // account → key
	forms    map[string][]string // account → form IDs
	owner    map[string]string   // form ID → account
	subs     map[string][]string // form ID → canonical data of each submission
	canaries []string            // strings of metadata that must never show
}

const idChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"

func randomID(r *rand.Rand) string {
	b := make([]byte, 6+r.IntN(14))
	for i := range b {
		b[i] = idChars[r.IntN(len(idChars))]
	}
	return string(b)
}

// randomValue returns a JSON value of the kind respondents type, including
// field names that look like metadata and strings that need escaping.
func randomValue(r *rand.Rand) any {
	switch r.IntN(6) {
	case 0:
		return r.NormFloat64() * 1e6
	case 1:
		return r.IntN(2) == 0
	case 2:
		return []any{"a", r.IntN(100), nil}
	case 3:
		return "</script><b>&amp;\u2028\u2029 é 日本 🎉"
	default:
		return randomID(r)
	}
}

func newWorld(r *rand.Rand, iter int) *world {
	w := &world{keys: map[string]string{}, forms: map[string][]string{}, owner: map[string]string{}, subs: map[string][]string{}}
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for a := 0; a < 2+r.IntN(4); a++ {
		account := fmt.Sprintf("acct-%d-%s", a, randomID(r))
		w.accounts = append(w.accounts, account)
		key, _ := formsapi.NewKey()
		w.keys[account] = key
		w.seed.Keys = append(w.seed.Keys, storetest.SeedKey{Key: key, AccountID: account})
		for f := 0; f < r.IntN(21); f++ {
			id := randomID(r)
			if _, dup := w.owner[id]; dup {
				continue
			}
			w.owner[id] = account
			w.forms[account] = append(w.forms[account], id)
			w.seed.Forms = append(w.seed.Forms, storetest.SeedForm{AccountID: account, Form: formsapi.Form{
				ID: id, Title: "T " + randomID(r), Icon: randomID(r), NotificationEmail: randomID(r) + "@example.com",
				CreatedAt: base.Add(time.Duration(r.IntN(50)) * time.Hour)}})
			for s := 0; s < r.IntN(51); s++ {
				data := map[string]any{"n": s, "form": id}
				for k := 0; k < r.IntN(5); k++ {
					data[[]string{"ip", "user_agent", "name", "email", "message", "geo"}[r.IntN(6)]] = randomValue(r)
				}
				raw, _ := json.Marshal(data)
				canary := fmt.Sprintf("CANARY-%d-%s", iter, randomID(r))
				w.canaries = append(w.canaries, canary)
				var att []formsapi.Attachment
				if r.IntN(3) == 0 {
					att = []formsapi.Attachment{{FieldName: "file", FileURL: "https://x/" + randomID(r), FileSize: r.Int64N(1 << 30), MIMEType: "application/pdf"}}
				}
				w.subs[id] = append(w.subs[id], storetest.Canonical(raw))
				w.seed.Submissions = append(w.seed.Submissions, storetest.SeedSubmission{
					Submission: formsapi.Submission{FormID: id, Data: raw, Attachments: att,
						CreatedAt: base.Add(time.Duration(r.IntN(20)) * time.Minute)}, // many ties
					Metadata: formsapi.Metadata{ClientIP: canary, UserAgent: canary, Geo: []byte(`{"c":"` + canary + `"}`), TraceID: canary},
				})
			}
		}
	}
	return w
}

// writeStore is a store with the shared write side, as the property
// and differential tests fill one.
type writeStore interface {
	formsapi.Store
	formsapi.KeyResolver
	formsapi.Writer
}

// TestPropertyIsolationAndAllowList generates random worlds and checks, for
// random keys and form IDs (own, foreign, garbage), that every list holds
// exactly the key's account's items, every object has exactly the
// documented fields, no metadata canary ever appears, and a foreign or
// garbage form ID gets the same 404 as an unknown one. The same worlds go
// into memstore, sqlitestore and pgstore.
func TestPropertyIsolationAndAllowList(t *testing.T) {
	// Parallel, the three stores' runs too: each has stores of its own,
	// and run in turn they were half of the package's serial phase (57 of
	// 112 s of wall time), when one core works and the other waits.
	t.Parallel()
	stores := []struct {
		name  string
		iters int
		open  func(t *testing.T) writeStore
	}{
		{"memstore", 150, func(t *testing.T) writeStore { return memstore.New() }},
		{"sqlitestore", 12, func(t *testing.T) writeStore { return openSQLite(t, false) }},
		{"pgstore", 12, func(t *testing.T) writeStore { return openPostgres(t, false) }},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(42, 7))
			for iter := 0; iter < st.iters; iter++ {
				w := newWorld(r, iter)
				s := st.open(t)
				if err := storetest.Load(context.Background(), s, w.seed); err != nil {
					t.Fatalf("iteration %d: load: %v", iter, err)
				}
				checkWorld(t, iter, r, w, formsapi.NewHandler(s, s))
			}
		})
	}
}

func checkWorld(t *testing.T, iter int, r *rand.Rand, w *world, h http.Handler) {
	t.Helper()
	unknown := do(t, h, "GET", "/v1/forms/"+randomID(r)+"-none/submissions", bearer(w.keys[w.accounts[0]])...)
	for c := 0; c < 10; c++ {
		account := w.accounts[r.IntN(len(w.accounts))]
		key := w.keys[account]
		limit := 1 + r.IntN(30)

		forms := walkHandler(t, h, "/v1/forms", limit, key, "forms")
		var ids []string
		for _, f := range forms {
			checkKeys(t, f, "createdAt", "formId", "icon", "notificationEmail", "title")
			ids = append(ids, f["formId"].(string))
		}
		sort.Strings(ids)
		want := slices.Sorted(slices.Values(w.forms[account]))
		if !slices.Equal(ids, want) && !(len(ids) == 0 && len(want) == 0) {
			t.Fatalf("iteration %d: account %s sees forms %v, owns %v", iter, account, ids, want)
		}

		// One own form, one foreign form, one garbage ID.
		var own, foreign string
		if fs := w.forms[account]; len(fs) > 0 {
			own = fs[r.IntN(len(fs))]
		}
		for id, o := range w.owner {
			if o != account {
				foreign = id
				break
			}
		}
		if own != "" {
			subs := walkHandler(t, h, "/v1/forms/"+own+"/submissions", limit, key, "submissions")
			var got []string
			for _, s := range subs {
				checkKeys(t, s, "attachments", "createdAt", "data", "formId")
				if s["formId"] != own {
					t.Fatalf("iteration %d: submission of %v in %s's list", iter, s["formId"], own)
				}
				raw, _ := json.Marshal(s["data"])
				got = append(got, storetest.Canonical(raw))
			}
			sort.Strings(got)
			if want := slices.Sorted(slices.Values(w.subs[own])); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("iteration %d: form %s: got %d submissions, want %d", iter, own, len(got), len(want))
			}
		}
		for _, id := range []string{foreign, randomID(r) + "-none", url.PathEscape(own + "/x"), strings.ToUpper(own) + "X"} {
			if id == "" {
				continue
			}
			res := do(t, h, "GET", "/v1/forms/"+id+"/submissions", bearer(key)...)
			if res.status != 404 || !bytes.Equal(res.body, unknown.body) {
				t.Fatalf("iteration %d: form %q with %s's key: %d %s", iter, id, account, res.status, res.body)
			}
		}
	}
}

// walkHandler reads every page of a list through the handler and checks
// each raw page for canaries.
func walkHandler(t *testing.T, h http.Handler, path string, limit int, key, field string) []map[string]any {
	t.Helper()
	var all []map[string]any
	target := fmt.Sprintf("%s?limit=%d", path, limit)
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("%s: the walk does not end", path)
		}
		res := do(t, h, "GET", target, bearer(key)...)
		if res.status != 200 {
			t.Fatalf("GET %s: %d %s", target, res.status, res.body)
		}
		if bytes.Contains(res.body, []byte("CANARY")) {
			t.Fatalf("GET %s: metadata in the body: %s", target, res.body)
		}
		var page map[string]any
		if err := json.Unmarshal(res.body, &page); err != nil {
			t.Fatal(err)
		}
		items, ok := page[field].([]any)
		if !ok {
			t.Fatalf("GET %s: %q is not an array: %s", target, field, res.body)
		}
		for _, it := range items {
			all = append(all, it.(map[string]any))
		}
		next, _ := page["nextCursor"].(string)
		if next == "" {
			return all
		}
		target = fmt.Sprintf("%s?limit=%d&cursor=%s", path, limit, url.QueryEscape(next))
	}
}

func checkKeys(t *testing.T, obj map[string]any, want ...string) {
	t.Helper()
	var got []string
	for k := range obj {
		got = append(got, k)
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("keys %v, want exactly %v", got, want)
	}
	if att, ok := obj["attachments"].([]any); ok {
		for _, a := range att {
			checkKeys(t, a.(map[string]any), "fieldName", "fileSize", "fileUrl", "mimeType")
		}
	}
}
