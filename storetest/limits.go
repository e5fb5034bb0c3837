package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
)

// nested returns an object nested depth levels deep (the object itself is
// level 1), alternating objects and arrays, with a value at the bottom.
func nested(depth int) string {
	var open, close strings.Builder
	for d := 2; d <= depth; d++ {
		if d%2 == 0 {
			open.WriteString(`{"k":`)
			close.WriteString(`}`)
		} else {
			open.WriteString(`[`)
			close.WriteString(`]`)
		}
	}
	inner := `1`
	if depth%2 == 0 || depth == 1 {
		inner = `"bottom"`
	}
	c := []byte(close.String())
	slices.Reverse(c)
	return `{"d":` + open.String() + inner + string(c) + `}`
}

// paddedObject returns {"pad":"xxx…"} exactly n bytes long.
func paddedObject(n int) string {
	return `{"pad":"` + strings.Repeat("x", n-len(`{"pad":""}`)) + `"}`
}

func attachment(i int) formsapi.Attachment {
	return formsapi.Attachment{FieldName: "file", FileURL: fmt.Sprintf("https://files.example.com/%d/f.pdf", i), FileSize: 10, MIMEType: "application/pdf"}
}

func attachments(n int) []formsapi.Attachment {
	a := make([]formsapi.Attachment, n)
	for i := range a {
		a[i] = attachment(i)
	}
	return a
}

// limitRefusals are writes beyond formsapi.DefaultLimits or with
// malformed attachments; each must be refused with ErrInvalidInput and a
// message containing says.
func limitRefusals(ctx context.Context) []refusal {
	l := formsapi.DefaultLimits
	sub := func(data string, att ...formsapi.Attachment) func(WriteStore) error {
		return func(s WriteStore) error {
			return s.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy, Data: []byte(data), Attachments: att}, formsapi.Metadata{})
		}
	}
	att := func(change func(*formsapi.Attachment)) func(WriteStore) error {
		a := attachment(0)
		change(&a)
		return sub(`{"ok":true}`, a)
	}
	long := strings.Repeat("a", l.MaxAttachmentString+1)
	return []refusal{
		{"DataTooLarge", formsapi.ErrInvalidInput, "MaxDataBytes", sub(paddedObject(l.MaxDataBytes + 1))},
		{"DataTooDeep", formsapi.ErrInvalidInput, "MaxDepth", sub(nested(l.MaxDepth + 1))},
		{"DataTenThousandDeep", formsapi.ErrInvalidInput, "MaxDepth", sub(strings.Repeat(`{"a":`, 9999) + `{}` + strings.Repeat(`}`, 9999))},
		{"NumberTooLong", formsapi.ErrInvalidInput, "MaxNumberLength", sub(`{"n":1` + strings.Repeat("0", l.MaxNumberLength) + `}`)},
		{"NumberBeyondFloat64", formsapi.ErrInvalidInput, "64-bit float", sub(`{"n":1e309}`)},
		{"LoneSurrogate", formsapi.ErrInvalidInput, "surrogate", sub(`{"s":"\ud800"}`)},
		{"TooManyAttachments", formsapi.ErrInvalidInput, "MaxAttachments", sub(`{}`, attachments(l.MaxAttachments+1)...)},
		{"AttachmentFieldNameTooLong", formsapi.ErrInvalidInput, "MaxAttachmentString", att(func(a *formsapi.Attachment) { a.FieldName = long })},
		{"AttachmentURLTooLong", formsapi.ErrInvalidInput, "MaxAttachmentString", att(func(a *formsapi.Attachment) { a.FileURL = "https://x/" + long })},
		{"AttachmentMIMETypeTooLong", formsapi.ErrInvalidInput, "MaxAttachmentString", att(func(a *formsapi.Attachment) { a.MIMEType = "text/" + long })},
		{"AttachmentNUL", formsapi.ErrInvalidInput, "control", att(func(a *formsapi.Attachment) { a.FieldName = "cv\x00" })},
		{"AttachmentEscape", formsapi.ErrInvalidInput, "control", att(func(a *formsapi.Attachment) { a.FieldName = "cv\x1b[31m" })},
		{"AttachmentC1Control", formsapi.ErrInvalidInput, "control", att(func(a *formsapi.Attachment) { a.MIMEType = "text/plain\u0085" })},
		{"AttachmentNewlineInURL", formsapi.ErrInvalidInput, "control", att(func(a *formsapi.Attachment) { a.FileURL = "https://x/a\nb" })},
		{"AttachmentInvalidUTF8", formsapi.ErrInvalidInput, "UTF-8", att(func(a *formsapi.Attachment) { a.FieldName = "cv\xff" })},
		{"AttachmentRelativeURL", formsapi.ErrInvalidInput, "fileUrl", att(func(a *formsapi.Attachment) { a.FileURL = "/uploads/cv.pdf" })},
		{"AttachmentEmptyURL", formsapi.ErrInvalidInput, "fileUrl", att(func(a *formsapi.Attachment) { a.FileURL = "" })},
		{"AttachmentJavaScriptURL", formsapi.ErrInvalidInput, "fileUrl", att(func(a *formsapi.Attachment) { a.FileURL = "javascript:alert(1)" })},
		{"AttachmentFTPURL", formsapi.ErrInvalidInput, "fileUrl", att(func(a *formsapi.Attachment) { a.FileURL = "ftp://files.example.com/cv.pdf" })},
		{"AttachmentURLWithoutHost", formsapi.ErrInvalidInput, "fileUrl", att(func(a *formsapi.Attachment) { a.FileURL = "https:///cv.pdf" })},
		{"AttachmentURLWithSpace", formsapi.ErrInvalidInput, "fileUrl", att(func(a *formsapi.Attachment) { a.FileURL = "https://x/my cv.pdf" })},
		{"AttachmentNegativeSize", formsapi.ErrInvalidInput, "negative", att(func(a *formsapi.Attachment) { a.FileSize = -1 })},
		{"AttachmentMIMETypeWithoutSubtype", formsapi.ErrInvalidInput, "mimeType", att(func(a *formsapi.Attachment) { a.MIMEType = "pdf" })},
		{"AttachmentMIMETypeEmptySubtype", formsapi.ErrInvalidInput, "mimeType", att(func(a *formsapi.Attachment) { a.MIMEType = "application/" })},
		{"AttachmentMIMETypeEmpty", formsapi.ErrInvalidInput, "mimeType", att(func(a *formsapi.Attachment) { a.MIMEType = "" })},
		{"AttachmentMIMETypeBadParameter", formsapi.ErrInvalidInput, "mimeType", att(func(a *formsapi.Attachment) { a.MIMEType = "text/plain; charset" })},
		{"AttachmentMIMETypeSpaces", formsapi.ErrInvalidInput, "mimeType", att(func(a *formsapi.Attachment) { a.MIMEType = "text / plain" })},
	}
}

// atLimits are submissions right at each of formsapi.DefaultLimits, and
// other unusual input the write side accepts.
func atLimits() []formsapi.Submission {
	l := formsapi.DefaultLimits
	at := base.Add(10 * time.Hour)
	var subs []formsapi.Submission
	add := func(data string, att ...formsapi.Attachment) {
		subs = append(subs, formsapi.Submission{FormID: FormEmpty, Data: []byte(data), Attachments: att, CreatedAt: at.Add(time.Duration(len(subs)) * time.Second)})
	}
	add(paddedObject(l.MaxDataBytes))
	add(nested(l.MaxDepth))
	add(`{"a":` + strings.Repeat("[", l.MaxDepth-1) + strings.Repeat("]", l.MaxDepth-1) + `}`)
	add(`{"n":1` + strings.Repeat("0", l.MaxNumberLength-1) + `}`)
	add(`{"n":-` + strings.Repeat("9", l.MaxNumberLength-1) + `}`)
	add(`{"n":0.` + strings.Repeat("1", l.MaxNumberLength-2) + `}`)
	add(`{"max":1.7976931348623157e308,"min":-1.7976931348623157e308,"tiny":4.9e-324,"under":1e-400,"big":9007199254740993}`)
	add(`{"pair":"\ud83d\ude00","nul":"\u0000","seps":"\u2028\u2029","html":"<script>&amp;</script>","raw":"日本 🎉 é"}`)
	add(` { "spaced" : [ 1 , 2 ] ,
 "tab":	true } `)
	add(`{}`)
	full := make([]formsapi.Attachment, l.MaxAttachments)
	for i := range full {
		full[i] = formsapi.Attachment{
			FieldName: strings.Repeat("é", l.MaxAttachmentString/2),
			FileURL:   "https://files.example.com/" + strings.Repeat("a", l.MaxAttachmentString-len("https://files.example.com/")),
			FileSize:  1<<63 - 1,
			MIMEType:  `application/octet-stream; name="` + strings.Repeat("<", l.MaxAttachmentString-len(`application/octet-stream; name=""`)) + `"`,
		}
	}
	add(`{"files":true}`, full...)
	add(`{"odd":true}`,
		formsapi.Attachment{FieldName: "", FileURL: "HTTP://EXAMPLE.COM/Upper?q=1&r=<2>#frag", FileSize: 0, MIMEType: "Application/VND.example+JSON"},
		formsapi.Attachment{FieldName: "日本 \u2028", FileURL: "https://user@例え.jp:8443/ファイル.pdf", FileSize: 1, MIMEType: "image/svg+xml; charset=utf-8"})
	return subs
}

// checkReadable adds every submission of atLimits and reads them back
// through a handler over the store, on the store's fast path if it has
// one and on the checked Store path: every page must be a 200 that
// encoding/json decodes, holding exactly what was added.
func checkReadable(t *testing.T, s WriteStore) {
	ctx := context.Background()
	subs := atLimits()
	for i, sub := range subs {
		if err := s.AddSubmission(ctx, sub, canaryMetadata(i)); err != nil {
			t.Fatalf("AddSubmission of submission %d (at a limit): %v", i, err)
		}
	}
	for _, h := range []struct {
		path    string
		handler http.Handler
	}{
		{"fast path", formsapi.NewHandler(s, s)},
		{"checked path", formsapi.NewHandler(checkedOnly{s}, s)},
	} {
		var got []formsapi.Submission
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > len(subs) {
				t.Fatalf("%s: more pages than submissions", h.path)
			}
			target := "/v1/forms/" + FormEmpty + "/submissions?order=asc&limit=1000"
			if cursor != "" {
				target += "&cursor=" + url.QueryEscape(cursor)
			}
			r := httptest.NewRequest("GET", target, nil)
			r.Header.Set("Authorization", "Bearer "+KeyA)
			w := httptest.NewRecorder()
			h.handler.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Fatalf("%s: page %d: status %d: %.200s", h.path, pages, w.Code, w.Body)
			}
			var generic any
			if err := json.Unmarshal(w.Body.Bytes(), &generic); err != nil {
				t.Fatalf("%s: page %d: encoding/json cannot decode the response: %v", h.path, pages, err)
			}
			if d := depth(generic); d > formsapi.DefaultLimits.MaxDepth+3 {
				t.Errorf("%s: page %d is %d levels deep, more than the data limit %d and the envelope's 3", h.path, pages, d, formsapi.DefaultLimits.MaxDepth)
			}
			var page struct {
				Submissions []formsapi.Submission `json:"submissions"`
				NextCursor  string                `json:"nextCursor"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil {
				t.Fatalf("%s: page %d: %v", h.path, pages, err)
			}
			got = append(got, page.Submissions...)
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if len(got) != len(subs) {
			t.Fatalf("%s: read %d submissions, added %d", h.path, len(got), len(subs))
		}
		for i := range subs {
			if msg := diffSubmission(subs[i], got[i]); msg != "" {
				t.Errorf("%s: submission %d: %.300s", h.path, i, msg)
			}
		}
	}
}

// checkedOnly hides a store's fast path from the handler.
type checkedOnly struct{ formsapi.Store }

// depth returns how deeply v nests objects and arrays; a scalar is 0.
func depth(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			d = max(d, depth(e))
		}
	case []any:
		for _, e := range v {
			d = max(d, depth(e))
		}
	default:
		return 0
	}
	return d + 1
}

// errorSays reports whether err's message contains says, ignoring case.
func errorSays(err error, says string) bool {
	return err != nil && bytes.Contains(bytes.ToLower([]byte(err.Error())), bytes.ToLower([]byte(says)))
}
