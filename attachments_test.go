package formsapi_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/storetest"
)

// hmacSigner is a signer whose URLs verify checks, as a file server
// would: the stored URL with exp (Unix seconds) and sig, an HMAC-SHA256
// of the account, the form, the stored URL and exp.
type hmacSigner struct {
	key      []byte
	lifetime time.Duration
	calls    int
}

func (s *hmacSigner) mac(account, form, stored string, exp int64) string {
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "%d:%s|%d:%s|%d:%s|%d", len(account), account, len(form), form, len(stored), stored, exp)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *hmacSigner) sign(_ context.Context, account, form string, a formsapi.Attachment, at time.Time) (string, error) {
	s.calls++
	exp := at.Add(s.lifetime).Unix()
	return a.FileURL + "#exp=" + strconv.FormatInt(exp, 10) + "&sig=" + s.mac(account, form, a.FileURL, exp), nil
}

// verify returns the stored URL a signed URL was made of, and when it
// expires, or an error for a URL this signer did not make.
func (s *hmacSigner) verify(account, form, signed string) (stored string, exp time.Time, err error) {
	stored, frag, ok := strings.Cut(signed, "#")
	if !ok {
		return "", time.Time{}, errors.New("not signed")
	}
	v, err := url.ParseQuery(frag)
	if err != nil {
		return "", time.Time{}, err
	}
	e, err := strconv.ParseInt(v.Get("exp"), 10, 64)
	if err != nil {
		return "", time.Time{}, err
	}
	if !hmac.Equal([]byte(v.Get("sig")), []byte(s.mac(account, form, stored, e))) {
		return "", time.Time{}, errors.New("bad signature")
	}
	return stored, time.Unix(e, 0), nil
}

// signedSeed is a form of storetest.AccountA whose submissions carry
// attachments, one with a URL that must be escaped in JSON, and data
// that looks like attachments (a submitter's text, never signed).
const signedForm = "signed-a"

func addSignedForm(t *testing.T, w formsapi.Writer) map[string]bool {
	t.Helper()
	ctx := context.Background()
	if err := w.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: signedForm, Title: "files"}); err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for i := range 5 {
		atts := []formsapi.Attachment{{FieldName: "cv", FileURL: fmt.Sprintf("https://files.example.com/cv/%d.pdf?a=1&b=<2>", i), FileSize: int64(100 + i), MIMEType: "application/pdf"}}
		if i%2 == 0 {
			atts = append(atts, formsapi.Attachment{FieldName: "photo", FileURL: fmt.Sprintf("https://files.example.com/p/%d.png", i), FileSize: 7, MIMEType: "image/png"})
		}
		for _, a := range atts {
			stored[a.FileURL] = true
		}
		data := fmt.Sprintf(`{"n":%d,"x":{"attachments":[{"fileUrl":"https://evil.example/steal"}],"createdAt":"x"}}`, i)
		s := formsapi.Submission{FormID: signedForm, Data: []byte(data), Attachments: atts, CreatedAt: time.Date(2024, 5, 1, 0, 0, i, 0, time.UTC)}
		if err := w.AddSubmission(ctx, s, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	return stored
}

// checkSigned checks every attachment of subs: its URL verifies, is of a
// stored URL, and is valid until at least validFrom; the data's look-alike
// is left as it is. It returns how many attachments it checked.
func checkSigned(t *testing.T, s *hmacSigner, stored map[string]bool, validFrom time.Time, subs []formsapi.Submission) int {
	t.Helper()
	n := 0
	for _, sub := range subs {
		for _, a := range sub.Attachments {
			u, exp, err := s.verify(storetest.AccountA, signedForm, a.FileURL)
			if err != nil || !stored[u] {
				t.Fatalf("attachment URL %q: %v (stored %q)", a.FileURL, err, u)
			}
			if exp.Before(validFrom) {
				t.Fatalf("attachment URL %q expires at %v, before %v", a.FileURL, exp, validFrom)
			}
			n++
		}
		if !bytes.Contains(sub.Data, []byte(`"https://evil.example/steal"`)) {
			t.Fatalf("the submitter's data changed: %s", sub.Data)
		}
	}
	return n
}

func getSigned(t *testing.T, h http.Handler, target string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", target, nil)
	r.Header.Set("Authorization", "Bearer "+storetest.KeyA)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestAttachmentURLsOnEveryPath: over memstore, sqlitestore and pgstore,
// every attachment of a page of the list, of the sync feed, and of an
// export in JSON Lines and in CSV carries a URL the signer made, valid
// for at least half its lifetime from the answer, while the data's
// look-alike of attachments is sent as stored; without the option the
// URLs are as stored.
func TestAttachmentURLsOnEveryPath(t *testing.T) {
	t.Parallel()
	for name, st := range exportStores(t) {
		t.Run(name, func(t *testing.T) {
			stored := addSignedForm(t, st)
			now := time.Date(2026, 1, 1, 12, 3, 0, 0, time.UTC)
			s := &hmacSigner{key: []byte("test key"), lifetime: 10 * time.Minute}
			h := formsapi.NewHandler(st, st, formsapi.WithAttachmentURLs(s.sign, s.lifetime), formsapi.WithClock(func() time.Time { return now }))
			validFrom := now.Add(s.lifetime / 2)
			base := "/v1/forms/" + signedForm

			var page struct {
				Submissions []formsapi.Submission `json:"submissions"`
			}
			for _, target := range []string{base + "/submissions?limit=2", base + "/submissions?limit=100&order=asc", base + "/submissions?sync=start", base + "/submissions?limit=100&fields=n,x"} {
				w := getSigned(t, h, target)
				if w.Code != 200 {
					t.Fatalf("%s: %d %s", target, w.Code, w.Body)
				}
				page.Submissions = nil
				if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil {
					t.Fatal(err)
				}
				if n := checkSigned(t, s, stored, validFrom, page.Submissions); n == 0 {
					t.Fatalf("%s: no attachment", target)
				}
			}

			w := getSigned(t, h, base+"/export")
			if w.Code != 200 || !strings.HasPrefix(w.Header().Get("ETag"), `W/"`) {
				t.Fatalf("export: %d, ETag %q (want a weak one)", w.Code, w.Header().Get("ETag"))
			}
			var lines []formsapi.Submission
			sc := bufio.NewScanner(w.Body)
			for sc.Scan() {
				var sub formsapi.Submission
				if err := json.Unmarshal(sc.Bytes(), &sub); err != nil {
					t.Fatal(err)
				}
				lines = append(lines, sub)
			}
			if n := checkSigned(t, s, stored, validFrom, lines); n != len(stored) {
				t.Fatalf("JSON Lines export: %d attachments, want %d", n, len(stored))
			}

			w = getSigned(t, h, base+"/export?format=csv")
			rows, err := csv.NewReader(w.Body).ReadAll()
			if w.Code != 200 || err != nil {
				t.Fatalf("CSV export: %d %v", w.Code, err)
			}
			col := len(rows[0]) - 1
			if rows[0][col] != "attachments" {
				t.Fatalf("CSV header %q", rows[0])
			}
			var csvSubs []formsapi.Submission
			for _, row := range rows[1:] {
				sub := formsapi.Submission{Data: []byte(`"https://evil.example/steal"`)}
				if err := json.Unmarshal([]byte(row[col]), &sub.Attachments); err != nil {
					t.Fatalf("CSV attachments cell %q: %v", row[col], err)
				}
				csvSubs = append(csvSubs, sub)
			}
			if n := checkSigned(t, s, stored, validFrom, csvSubs); n != len(stored) {
				t.Fatalf("CSV export: %d attachments, want %d", n, len(stored))
			}

			// Without the option: as stored.
			plain := formsapi.NewHandler(st, st)
			w = getSigned(t, plain, base+"/submissions?limit=100")
			page.Submissions = nil
			if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil {
				t.Fatal(err)
			}
			for _, sub := range page.Submissions {
				for _, a := range sub.Attachments {
					if !stored[a.FileURL] {
						t.Fatalf("unsigned handler sent %q", a.FileURL)
					}
				}
			}
		})
	}
}

// TestSignedPagesNeverExpire: over each store (sqlitestore's and
// pgstore's read caches keep the page after its first read), a page
// asked for again and again as a clock moves through several signing
// windows never carries a URL valid for less than half the lifetime; an
// unchanged page answers 304 to its tag within a window, and a full page
// with a new tag and new URLs in the next; a body confirmed by a 304
// still holds URLs valid for half the lifetime from the 304.
func TestSignedPagesNeverExpire(t *testing.T) {
	t.Parallel()
	for name, st := range exportStores(t) {
		t.Run(name, func(t *testing.T) {
			stored := addSignedForm(t, st)
			clock := storetest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
			s := &hmacSigner{key: []byte("test key"), lifetime: 10 * time.Minute}
			h := formsapi.NewHandler(st, st, formsapi.WithAttachmentURLs(s.sign, s.lifetime), formsapi.WithClock(clock.Now))
			for _, target := range []string{"/v1/forms/" + signedForm + "/submissions?limit=3", "/v1/forms/" + signedForm + "/submissions?sync=start"} {
				var tag, body string
				tags := map[string]bool{}
				for step := range 40 { // 40 steps of 47s: 31 minutes, six windows
					now := clock.Now()
					w := getSigned(t, h, target, "If-None-Match", tag)
					switch w.Code {
					case 304:
						if w.Header().Get("ETag") != tag {
							t.Fatalf("step %d: 304 with tag %q, asked with %q", step, w.Header().Get("ETag"), tag)
						}
					case 200:
						if w.Header().Get("ETag") == tag {
							t.Fatalf("step %d: 200 with the tag asked for", step)
						}
						tag, body = w.Header().Get("ETag"), w.Body.String()
						tags[tag] = true
					default:
						t.Fatalf("step %d: %d %s", step, w.Code, w.Body)
					}
					// The body the client holds now, sent or confirmed.
					var page struct {
						Submissions []formsapi.Submission `json:"submissions"`
					}
					if err := json.Unmarshal([]byte(body), &page); err != nil {
						t.Fatal(err)
					}
					checkSigned(t, s, stored, now.Add(s.lifetime/2), page.Submissions)
					clock.Advance(47 * time.Second)
				}
				if len(tags) < 6 || len(tags) > 7 {
					t.Fatalf("%s: %d tags over six windows", target, len(tags))
				}
			}
		})
	}
}
