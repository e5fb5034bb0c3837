package formsapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/storetest"
)

// unicodeValues are the values of "v" of the submissions of
// TestSearchUnicodeEveryStore's form, n in order; unicodeFiles are the
// attachments' file names of some of them.
var unicodeValues = []string{
	"Zo\u00eb composed",      // 0: NFC
	"Zoe\u0308 decomposed",   // 1: NFD
	"Straße",                 // 2
	"STRASSE",                // 3
	"İstanbul",               // 4: dotted capital I
	"ıstanbul",               // 5: dotless i stays a letter of its own
	"ﬁnance ﬃ",               // 6: ligatures
	"ＦＵＬＬ ｗｉｄｔｈ",             // 7
	"thumbs 👍🏽 up",           // 8: emoji with a skin tone
	"family 👨\u200d👩\u200d👧", // 9: joined by ZWJ
	"שלום עולם",              // 10: RTL
	"a\u200db\u200dc zwj",    // 11: zero-width joiners inside a word
	"nul \u0000 here",        // 12: a NUL, escaped in JSON
	"ΣΟΦΟΣ σοφος",            // 13: final sigma
	"plain ascii",            // 14
}

var unicodeFiles = map[int]string{
	1: "https://files.example/u/Zoe%CC%88-cv.pdf", // NFD, percent-escaped
	3: "https://files.example/u/%EF%BC%A6%EF%BC%B5%EF%BC%AC%EF%BC%AC.txt",
	5: "https://files.example/u/Caf%C3%A9%20menu.txt", // an escaped space
}

// TestSearchUnicodeEveryStore: terms in other normal forms, cases,
// compatibility forms and scripts find the same submissions, the ones
// listed, on every store with the index on and off, and the inputs
// that are not terms are a 400 naming q.
func TestSearchUnicodeEveryStore(t *testing.T) {
	t.Parallel()
	seed := storetest.DefaultSeed()
	const form = "unicode-a"
	seed.Forms = append(seed.Forms, storetest.SeedForm{AccountID: storetest.AccountA, Form: formsapi.Form{ID: form, Title: "Unicode", CreatedAt: time.Unix(1_700_000_000, 0)}})
	for i, v := range unicodeValues {
		data := fmt.Sprintf(`{"n":%d,"v":%s}`, i, jsonString(v))
		sub := formsapi.Submission{FormID: form, Data: []byte(data), CreatedAt: time.Unix(1_700_000_000+int64(i), 0)}
		if f, ok := unicodeFiles[i]; ok {
			sub.Attachments = []formsapi.Attachment{{FieldName: "f", FileURL: f, FileSize: 1, MIMEType: "text/plain"}}
		}
		seed.Submissions = append(seed.Submissions, storetest.SeedSubmission{Submission: sub})
	}
	stores, m := everyStore(t, seed)
	path := "/v1/forms/" + form + "/submissions"
	cases := []struct {
		q    string
		want []int
	}{
		{"zoe", []int{0, 1}},
		{"Zo\u00eb", []int{0, 1}},
		{"Zoe\u0308", []int{0, 1}},
		{"ZOË-CV", []int{1}}, // an attachment's name
		{"strasse", []int{2, 3}},
		{"straße", []int{2, 3}},
		{"STRAẞE", []int{2, 3}},
		{"istanbul", []int{4}},
		{"ıstanbul", []int{5}},
		{"finance", []int{6}},
		{"ffi", []int{6}},
		{"full width", []int{7}},
		{"ＦＵＬＬ", []int{3, 7}}, // 3's file name
		{"👍🏽", nil},           // two runes: too short
		{"👍🏽 u", []int{8}},
		{"👨\u200d👩", []int{9}},
		{"שלום", []int{10}},
		{"a\u200db", []int{11}},
		{"abc", nil}, // the joiners are characters
		{"nul \u0000", []int{12}},
		{"σοφος", []int{13}},
		{"ΣΟΦΟΣ", []int{13}},
		{"cafe menu", []int{5}},
		{"   ", nil},
		{"...", nil},
	}
	for name, s := range stores {
		h := formsapi.NewHandler(s, m)
		for _, c := range cases {
			query := "q=" + url.QueryEscape(c.q)
			res := do(t, h, "GET", path+"?"+query, bearer(storetest.KeyA)...)
			if c.q == "👍🏽" {
				if res.status != http.StatusBadRequest || !strings.Contains(string(res.body), "invalid q") {
					t.Errorf("%s, q %q: %d %s, want 400 naming q", name, c.q, res.status, res.body)
				}
				continue
			}
			got := walkSearch(t, h, path, query)
			slices.Sort(got)
			if !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
				t.Errorf("%s, q %q: n %v, want %v", name, c.q, got, c.want)
			}
		}
		for _, query := range []string{"q=%FF%FFabc", "q=%00%00", "q=" + strings.Repeat("%EF%B7%BA", 4000)} {
			res := do(t, h, "GET", path+"?"+query, bearer(storetest.KeyA)...)
			if res.status != http.StatusBadRequest || !strings.Contains(string(res.body), "invalid q") {
				t.Errorf("%s, ?%.40s: %d %s, want 400 naming q", name, query, res.status, res.body)
			}
		}
	}
}

// jsonString is v as a JSON string.
func jsonString(v string) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
