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

// submissionOfSize returns a submission to form within every other
// default limit (MaxDataBytes of data, MaxAttachments attachments) whose
// JSON as the API sends it, escapes included, is exactly n bytes: the
// attachments' mimeType parameters are filled with "<", six bytes each
// once escaped. It panics if the other limits cannot reach n.
func submissionOfSize(form string, at time.Time, n int) formsapi.Submission {
	l := formsapi.DefaultLimits
	const mime = `application/octet-stream; name=""`
	s := formsapi.Submission{FormID: form, Data: []byte(paddedObject(l.MaxDataBytes)), CreatedAt: at,
		Attachments: make([]formsapi.Attachment, l.MaxAttachments)}
	for i := range s.Attachments {
		s.Attachments[i] = formsapi.Attachment{FieldName: "f", FileURL: fmt.Sprintf("https://files.example.com/%d", i), FileSize: 1, MIMEType: mime}
	}
	room := n - encodedLen(s)
	lts := room / 6
	for i := range s.Attachments {
		k := min(lts, l.MaxAttachmentString-len(mime))
		s.Attachments[i].MIMEType = mime[:len(mime)-1] + strings.Repeat("<", k) + `"`
		lts -= k
	}
	s.Attachments[0].FieldName += strings.Repeat("a", room%6)
	if lts > 0 || encodedLen(s) != n {
		panic(fmt.Sprintf("storetest: no submission within the other limits is %d bytes", n))
	}
	return s
}

// encodedLen is the length of s as the API sends it.
func encodedLen(s formsapi.Submission) int {
	b, err := formsapi.AppendSubmissionJSON(nil, s)
	if err != nil {
		panic(err)
	}
	return len(b)
}

// metadataOfSize is canary metadata whose fields together are exactly n
// bytes, the user agent padded.
func metadataOfSize(i, n int) formsapi.Metadata {
	m := canaryMetadata(i)
	m.UserAgent += strings.Repeat("u", n-len(m.ClientIP)-len(m.UserAgent)-len(m.Geo)-len(m.TraceID))
	return m
}

// formOfSize returns f with the field named by field ("title", "icon" or
// "notificationEmail") filled with unit, and then "a", until f's JSON as
// the API sends it is exactly n bytes. encoding/json escapes strings as
// the API does, so json.Marshal gives that JSON for forms in UTC.
func formOfSize(f formsapi.Form, field, unit string, n int) formsapi.Form {
	target := map[string]*string{"title": &f.Title, "icon": &f.Icon, "notificationEmail": &f.NotificationEmail}[field]
	room := n - formJSONLen(f)
	unitLen := formJSONLen(formsapi.Form{Title: unit}) - formJSONLen(formsapi.Form{})
	*target += strings.Repeat(unit, room/unitLen) + strings.Repeat("a", room%unitLen)
	if formJSONLen(f) != n {
		panic(fmt.Sprintf("storetest: cannot make a form of %d bytes", n))
	}
	return f
}

func formJSONLen(f formsapi.Form) int {
	b, err := json.Marshal(f)
	if err != nil {
		panic(err)
	}
	return len(b)
}

// accountOfSize is an account ID of n bytes ending in a two-byte
// character, so that a limit counted in characters would pass it.
func accountOfSize(n int) string {
	return "acct-" + strings.Repeat("x", n-len("acct-")-2) + "é"
}

// badAccounts are account IDs the write side refuses as text: one with a
// control character, one that is not valid UTF-8. snapshot looks at them.
var badAccounts = []string{"acct-new\n", "acct-new\xff"}

// limitRefusals are writes beyond formsapi.DefaultLimits or with
// malformed attachments; each must be refused with ErrInvalidInput and a
// message containing says.
func limitRefusals(ctx context.Context) []refusal {
	l := formsapi.DefaultLimits
	sub := func(data string, att ...formsapi.Attachment) func(writeStore) error {
		return func(s writeStore) error {
			return s.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy, Data: []byte(data), Attachments: att}, formsapi.Metadata{})
		}
	}
	att := func(change func(*formsapi.Attachment)) func(writeStore) error {
		a := attachment(0)
		change(&a)
		return sub(`{"ok":true}`, a)
	}
	long := strings.Repeat("a", l.MaxAttachmentString+1)
	meta := func(m formsapi.Metadata) func(writeStore) error {
		return func(s writeStore) error {
			return s.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy, Data: []byte(`{"ok":true}`)}, m)
		}
	}
	form := func(account string, f formsapi.Form) func(writeStore) error {
		return func(s writeStore) error { return s.AddForm(ctx, account, f) }
	}
	newForm := formsapi.Form{ID: "new-form", Title: "New", CreatedAt: base}
	with := func(change func(*formsapi.Form)) formsapi.Form {
		f := newForm
		change(&f)
		return f
	}
	// The attack that MaxSubmissionBytes answers: MaxDataBytes of data and
	// every attachment string full of "<", 4.5 times the data once escaped.
	escaped := formsapi.Submission{FormID: FormBusy, Data: []byte(paddedObject(l.MaxDataBytes)), Attachments: make([]formsapi.Attachment, l.MaxAttachments)}
	lts := strings.Repeat("<", l.MaxAttachmentString-len(`text/plain; n=""`))
	for i := range escaped.Attachments {
		escaped.Attachments[i] = formsapi.Attachment{
			FieldName: strings.Repeat("<", l.MaxAttachmentString),
			FileURL:   "https://x/" + strings.Repeat("<", l.MaxAttachmentString-len("https://x/")),
			MIMEType:  `text/plain; n="` + lts + `"`,
		}
	}
	overAccount := accountOfSize(l.MaxAccountIDBytes + 1)
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
		{"SubmissionOneByteOverMaxSubmissionBytes", formsapi.ErrInvalidInput, "MaxSubmissionBytes", func(s writeStore) error {
			return s.AddSubmission(ctx, submissionOfSize(FormBusy, base, l.MaxSubmissionBytes+1), formsapi.Metadata{})
		}},
		{"SubmissionEscapesPastMaxSubmissionBytes", formsapi.ErrInvalidInput, "MaxSubmissionBytes", func(s writeStore) error {
			return s.AddSubmission(ctx, escaped, formsapi.Metadata{})
		}},
		{"MetadataOneByteOverMaxMetadataBytes", formsapi.ErrInvalidInput, "MaxMetadataBytes", meta(metadataOfSize(0, l.MaxMetadataBytes+1))},
		{"MetadataEightMiB", formsapi.ErrInvalidInput, "MaxMetadataBytes", meta(formsapi.Metadata{UserAgent: strings.Repeat("u", 8<<20)})},
		{"FormOneByteOverMaxFormBytes", formsapi.ErrInvalidInput, "MaxFormBytes", form(AccountA, formOfSize(newForm, "title", "<", l.MaxFormBytes+1))},
		{"FormTitleShortButLongEscaped", formsapi.ErrInvalidInput, "MaxFormBytes", form(AccountA, with(func(f *formsapi.Form) { f.Title = strings.Repeat("<", l.MaxFormBytes/5) }))},
		{"FormIconTooLong", formsapi.ErrInvalidInput, "MaxFormBytes", form(AccountA, with(func(f *formsapi.Form) { f.Icon = strings.Repeat("i", l.MaxFormBytes) }))},
		{"FormNotificationEmailTooLong", formsapi.ErrInvalidInput, "MaxFormBytes", form(AccountA, with(func(f *formsapi.Form) { f.NotificationEmail = strings.Repeat("e", l.MaxFormBytes) + "@example.com" }))},
		{"FormTitleOfEightMiB", formsapi.ErrInvalidInput, "MaxFormBytes", form(AccountA, with(func(f *formsapi.Form) { f.Title = strings.Repeat("t", 8<<20) }))},
		{"FormTitleNUL", formsapi.ErrInvalidInput, "control", form(AccountA, with(func(f *formsapi.Form) { f.Title = "a\x00b" }))},
		{"FormTitleEscapeSequence", formsapi.ErrInvalidInput, "control", form(AccountA, with(func(f *formsapi.Form) { f.Title = "\x1b[2J" }))},
		{"FormIconC1Control", formsapi.ErrInvalidInput, "control", form(AccountA, with(func(f *formsapi.Form) { f.Icon = "x\u0085" }))},
		{"FormNotificationEmailNewline", formsapi.ErrInvalidInput, "control", form(AccountA, with(func(f *formsapi.Form) { f.NotificationEmail = "a@example.com\r\nBcc: b@example.com" }))},
		{"FormTitleInvalidUTF8", formsapi.ErrInvalidInput, "UTF-8", form(AccountA, with(func(f *formsapi.Form) { f.Title = "caf\xe9" }))},
		{"FormAccountIDOneByteOverMaxAccountIDBytes", formsapi.ErrInvalidInput, "MaxAccountIDBytes", form(overAccount, newForm)},
		{"FormAccountIDControl", formsapi.ErrInvalidInput, "control", form(badAccounts[0], newForm)},
		{"FormAccountIDInvalidUTF8", formsapi.ErrInvalidInput, "UTF-8", form(badAccounts[1], newForm)},
		{"KeyAccountIDOneByteOverMaxAccountIDBytes", formsapi.ErrInvalidInput, "MaxAccountIDBytes", func(s writeStore) error {
			return s.AddKey(ctx, "a-fine-key", overAccount)
		}},
		{"KeyAccountIDControl", formsapi.ErrInvalidInput, "control", func(s writeStore) error {
			return s.AddKey(ctx, "a-fine-key", badAccounts[0])
		}},
		{"KeyAccountIDInvalidUTF8", formsapi.ErrInvalidInput, "UTF-8", func(s writeStore) error {
			return s.AddKey(ctx, "a-fine-key", badAccounts[1])
		}},
	}
}

// atLimits are submissions right at each of formsapi.DefaultLimits, and
// other unusual input the write side accepts, with their metadata.
func atLimits() []SeedSubmission {
	l := formsapi.DefaultLimits
	at := base.Add(10 * time.Hour)
	var subs []SeedSubmission
	add := func(data string, att ...formsapi.Attachment) {
		subs = append(subs, SeedSubmission{
			Submission: formsapi.Submission{FormID: FormEmpty, Data: []byte(data), Attachments: att, CreatedAt: at.Add(time.Duration(len(subs)) * time.Second)},
			Metadata:   canaryMetadata(len(subs)),
		})
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
	// Metadata that is not UTF-8 (raw header values) is stored, as U+FFFD,
	// never costing the respondent the submission.
	add(`{"rawHeaders":true}`)
	subs[len(subs)-1].Metadata = formsapi.Metadata{ClientIP: "203.0.113.1\xff", UserAgent: "Mozilla/5.0 (\xe9)", TraceID: "t\xc3", Geo: []byte("{\"city\":\"Z\xfcrich\"}")}
	// Exactly MaxSubmissionBytes as the API sends it, most of the
	// attachments' bytes escapes, with metadata of exactly
	// MaxMetadataBytes.
	subs = append(subs, SeedSubmission{
		Submission: submissionOfSize(FormEmpty, at.Add(time.Duration(len(subs))*time.Second), l.MaxSubmissionBytes),
		Metadata:   metadataOfSize(len(subs), l.MaxMetadataBytes),
	})
	return subs
}

// checkReadable adds every submission of atLimits and reads them back
// through a handler over the store, on the store's fast path if it has
// one and on the checked Store path: every page must be a 200 that
// encoding/json decodes, holding exactly what was added, and each
// submission whose data was given compact comes back byte for byte as
// formsapi.AppendSubmissionJSON makes it.
func checkReadable(t *testing.T, s writeStore) {
	ctx := context.Background()
	subs := atLimits()
	for i, sub := range subs {
		if err := s.AddSubmission(ctx, sub.Submission, sub.Metadata); err != nil {
			t.Fatalf("AddSubmission of submission %d (at a limit): %.300v", i, err)
		}
	}
	for _, h := range []struct {
		path    string
		handler http.Handler
	}{
		{"fast path", formsapi.NewHandler(s, s)},
		{"checked path", formsapi.NewHandler(checkedOnly{s}, s)},
	} {
		var got []json.RawMessage
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
				Submissions []json.RawMessage `json:"submissions"`
				NextCursor  string            `json:"nextCursor"`
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
		for i, want := range subs {
			var sub formsapi.Submission
			if err := json.Unmarshal(got[i], &sub); err != nil {
				t.Errorf("%s: submission %d: %v", h.path, i, err)
				continue
			}
			if msg := diffSubmission(want.Submission, sub); msg != "" {
				t.Errorf("%s: submission %d: %.300s", h.path, i, msg)
			}
			if !isCompact(want.Submission.Data) {
				continue
			}
			b, err := formsapi.AppendSubmissionJSON(nil, want.Submission)
			if err != nil {
				t.Fatalf("submission %d: %v", i, err)
			}
			if !bytes.Equal(got[i], b) {
				t.Errorf("%s: submission %d is %d bytes in the page, not byte for byte the %d it was measured at: %.200s", h.path, i, len(got[i]), len(b), got[i])
			}
		}
	}
}

// isCompact reports whether data is JSON without insignificant space.
func isCompact(data []byte) bool {
	var b bytes.Buffer
	return json.Compact(&b, data) == nil && bytes.Equal(b.Bytes(), data)
}

// checkFormsAtLimits adds forms of exactly formsapi.DefaultLimits'
// MaxFormBytes, each filled with a different escaped character, to an
// account whose ID is exactly MaxAccountIDBytes, and a key of that
// account: each form comes back from ListForms field for field, and from
// a handler over the store byte for byte as it was measured.
func checkFormsAtLimits(t *testing.T, s writeStore) {
	ctx := context.Background()
	l := formsapi.DefaultLimits
	account := accountOfSize(l.MaxAccountIDBytes)
	key := mustNewKey()
	if err := s.AddKey(ctx, key, account); err != nil {
		t.Fatalf("AddKey for an account ID of exactly MaxAccountIDBytes: %v", err)
	}
	var forms []formsapi.Form
	for i, c := range []struct{ field, unit string }{
		{"title", "<"}, {"icon", "&"}, {"notificationEmail", ">"}, {"title", "\u2028"}, {"title", `"`}, {"icon", "é"},
	} {
		f := formsapi.Form{ID: fmt.Sprintf("limit-%d", i), Title: "T", Icon: "i", NotificationEmail: "n@example.com", CreatedAt: base.Add(time.Duration(i) * time.Minute)}
		f = formOfSize(f, c.field, c.unit, l.MaxFormBytes)
		if err := s.AddForm(ctx, account, f); err != nil {
			t.Fatalf("AddForm of a form of exactly MaxFormBytes (%s of %q): %.300v", c.field, c.unit, err)
		}
		forms = append(forms, f)
	}
	got := walkForms(t, s, account, formsapi.Query{Limit: MaxLimit, Order: formsapi.Oldest})
	if len(got) != len(forms) {
		t.Fatalf("ListForms: %d forms, added %d", len(got), len(forms))
	}
	for i := range forms {
		if msg := diffForm(forms[i], got[i]); msg != "" {
			t.Errorf("ListForms: form %d: %.300s", i, msg)
		}
	}
	r := httptest.NewRequest("GET", "/v1/forms?order=asc&limit=1000", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	w := httptest.NewRecorder()
	formsapi.NewHandler(s, s).ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /v1/forms: status %d: %.200s", w.Code, w.Body)
	}
	var page struct{ Forms []json.RawMessage }
	if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil {
		t.Fatalf("GET /v1/forms: %v", err)
	}
	if len(page.Forms) != len(forms) {
		t.Fatalf("GET /v1/forms: %d forms, added %d", len(page.Forms), len(forms))
	}
	for i, f := range forms {
		want, _ := json.Marshal(f)
		if !bytes.Equal(page.Forms[i], want) {
			t.Errorf("GET /v1/forms: form %d is %d bytes, not byte for byte the %d it was measured at: %.200s", i, len(page.Forms[i]), len(want), page.Forms[i])
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
