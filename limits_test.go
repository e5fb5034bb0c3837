package formsapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/matryer/is"
)

var limitsAt = time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)

// formOfSize returns a form whose JSON as the API sends it is exactly n
// bytes, most of it a title of "<" (six bytes each once escaped).
func formOfSize(t *testing.T, id string, n int) formsapi.Form {
	t.Helper()
	f := formsapi.Form{ID: id, Icon: "mail", NotificationEmail: "owner@example.com", CreatedAt: limitsAt}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	room := n - len(b)
	if room < 0 {
		t.Fatalf("a form of %d bytes cannot hold id %q", n, id)
	}
	f.Title = strings.Repeat("<", room/6) + strings.Repeat("a", room%6)
	return f
}

// refusedFor reports whether err wraps ErrInvalidInput and names limit.
func refusedFor(err error, limit string) bool {
	return errors.Is(err, formsapi.ErrInvalidInput) && strings.Contains(err.Error(), limit)
}

func TestLimitsPrepareFormCountsEscapes(t *testing.T) {
	for _, l := range []formsapi.Limits{{}, {MaxFormBytes: 300}} {
		limit := l.MaxFormBytes
		if limit == 0 {
			limit = formsapi.DefaultLimits.MaxFormBytes
		}
		f := formOfSize(t, "f", limit)
		if b, _ := json.Marshal(f); len(b) != limit {
			t.Fatalf("limit %d: the test form is %d bytes", limit, len(b))
		}
		if err := l.PrepareForm("acct", &f); err != nil {
			t.Errorf("limit %d: a form of exactly the limit (title %d bytes as given): %v", limit, len(f.Title), err)
		}
		f.Title += "a"
		if err := l.PrepareForm("acct", &f); !refusedFor(err, "MaxFormBytes") {
			t.Errorf("limit %d: a form one byte over: got %v, want ErrInvalidInput naming MaxFormBytes", limit, err)
		}
		// Short as given, long once escaped.
		short := formsapi.Form{ID: "f", Title: strings.Repeat("<", limit/5), CreatedAt: limitsAt}
		if err := l.PrepareForm("acct", &short); !refusedFor(err, "MaxFormBytes") {
			t.Errorf("limit %d: a title of %d \"<\" (%d bytes escaped): got %v, want ErrInvalidInput naming MaxFormBytes", limit, limit/5, limit/5*6, err)
		}
		for _, long := range []formsapi.Form{
			{ID: "f", Icon: strings.Repeat("i", limit+1)},
			{ID: "f", NotificationEmail: strings.Repeat("e", limit+1)},
			{ID: "f", Title: strings.Repeat("t", 8<<20)},
		} {
			if err := l.PrepareForm("acct", &long); !refusedFor(err, "MaxFormBytes") {
				t.Errorf("limit %d: a form with %d bytes of strings: got %v, want ErrInvalidInput naming MaxFormBytes", limit, len(long.Title+long.Icon+long.NotificationEmail), err)
			}
		}
	}
}

func TestLimitsPrepareFormText(t *testing.T) {
	for _, c := range []struct {
		name string
		f    formsapi.Form
		says string
	}{
		{"TitleNUL", formsapi.Form{ID: "f", Title: "a\x00b"}, "title has the control character U+0000"},
		{"TitleEscapeSequence", formsapi.Form{ID: "f", Title: "\x1b[31mred"}, "title has the control character"},
		{"IconC1", formsapi.Form{ID: "f", Icon: "x\u0085"}, "icon has the control character U+0085"},
		{"EmailNewline", formsapi.Form{ID: "f", NotificationEmail: "a@example.com\r\nBcc: b@example.com"}, "notificationEmail has the control character"},
		{"TitleInvalidUTF8", formsapi.Form{ID: "f", Title: "caf\xe9"}, "title is not valid UTF-8"},
	} {
		err := formsapi.DefaultLimits.PrepareForm("acct", &c.f)
		if !errors.Is(err, formsapi.ErrInvalidInput) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: got %v, want ErrInvalidInput saying %q", c.name, err, c.says)
		}
	}
	ok := formsapi.Form{ID: "f", Title: "Café ✉ <b>&</b> \u2028", Icon: "📬", NotificationEmail: "ops+forms@exämple.com"}
	if err := formsapi.DefaultLimits.PrepareForm("acct", &ok); err != nil {
		t.Errorf("a form of printable Unicode: %v", err)
	}
}

func TestLimitsAccountID(t *testing.T) {
	key := "a-fine-key"
	for _, l := range []formsapi.Limits{{}, {MaxAccountIDBytes: 10}} {
		limit := l.MaxAccountIDBytes
		if limit == 0 {
			limit = formsapi.DefaultLimits.MaxAccountIDBytes
		}
		prepare := map[string]func(account string) error{
			"PrepareForm": func(account string) error {
				return l.PrepareForm(account, &formsapi.Form{ID: "f"})
			},
			"PrepareKeyOptions": func(account string) error {
				return l.PrepareKeyOptions(key, account, &formsapi.KeyOptions{})
			},
		}
		// A multi-byte character at the end: the limit counts bytes.
		atLimit := strings.Repeat("a", limit-2) + "é"
		for name, p := range prepare {
			if err := p(atLimit); err != nil {
				t.Errorf("%s, limit %d: an account ID of exactly the limit: %v", name, limit, err)
			}
			if err := p(atLimit + "a"); !refusedFor(err, "MaxAccountIDBytes") {
				t.Errorf("%s, limit %d: an account ID one byte over: got %v, want ErrInvalidInput naming MaxAccountIDBytes", name, limit, err)
			}
			for _, bad := range []struct{ id, says string }{
				{"", "empty account ID"},
				{"acct\n", "control character"},
				{"acct\x00", "control character"},
				{"acct\x9b", "not valid UTF-8"},
				{"acct\u009b", "control character"},
			} {
				if err := p(bad.id); !errors.Is(err, formsapi.ErrInvalidInput) || !strings.Contains(err.Error(), bad.says) {
					t.Errorf("%s, limit %d: account ID %q: got %v, want ErrInvalidInput saying %q", name, limit, bad.id, err, bad.says)
				}
			}
		}
	}
	is := is.New(t)
	err := formsapi.DefaultLimits.PrepareKeyOptions(key, strings.Repeat("a", formsapi.DefaultLimits.MaxAccountIDBytes+1), &formsapi.KeyOptions{})
	is.True(refusedFor(err, "MaxAccountIDBytes")) // the package-level function applies DefaultLimits
}

func TestLimitsMetadata(t *testing.T) {
	for _, l := range []formsapi.Limits{{}, {MaxMetadataBytes: 200}} {
		limit := l.MaxMetadataBytes
		if limit == 0 {
			limit = formsapi.DefaultLimits.MaxMetadataBytes
		}
		m := formsapi.Metadata{ClientIP: "203.0.113.7", Geo: json.RawMessage(`{"city":"Zürich"}`), TraceID: "trace-1"}
		m.UserAgent = strings.Repeat("U", limit-len(m.ClientIP)-len(m.Geo)-len(m.TraceID))
		sub := func() *formsapi.Submission {
			return &formsapi.Submission{FormID: "f", Data: []byte(`{}`), CreatedAt: limitsAt}
		}
		exact := m
		if err := l.PrepareSubmission(sub(), &exact); err != nil {
			t.Errorf("limit %d: metadata of exactly the limit: %v", limit, err)
		}
		for name, change := range map[string]func(*formsapi.Metadata){
			"ClientIP":  func(m *formsapi.Metadata) { m.ClientIP += "1" },
			"UserAgent": func(m *formsapi.Metadata) { m.UserAgent += "U" },
			"Geo":       func(m *formsapi.Metadata) { m.Geo = json.RawMessage(`{"city":"Zürich" }`) },
			"TraceID":   func(m *formsapi.Metadata) { m.TraceID += "1" },
		} {
			over := m
			change(&over)
			if err := l.PrepareSubmission(sub(), &over); !refusedFor(err, "MaxMetadataBytes") {
				t.Errorf("limit %d: metadata one byte over in %s: got %v, want ErrInvalidInput naming MaxMetadataBytes", limit, name, err)
			}
		}
	}
	// Metadata is recorded as it came and never returned: bytes that are
	// not UTF-8 (a raw header value) are kept as U+FFFD rather than
	// costing the respondent their submission.
	m := formsapi.Metadata{ClientIP: "\xff", UserAgent: "Mozilla/5.0 (X11; \xe9)", TraceID: "t\xc3", Geo: json.RawMessage("{\"city\":\"Z\xfcrich\"}")}
	if err := formsapi.DefaultLimits.PrepareSubmission(&formsapi.Submission{FormID: "f", Data: []byte(`{}`)}, &m); err != nil {
		t.Errorf("metadata that is not UTF-8: %v, want it kept with U+FFFD", err)
	}
	want := formsapi.Metadata{ClientIP: "\uFFFD", UserAgent: "Mozilla/5.0 (X11; \uFFFD)", TraceID: "t\uFFFD", Geo: json.RawMessage("{\"city\":\"Z\uFFFDrich\"}")}
	if m.ClientIP != want.ClientIP || m.UserAgent != want.UserAgent || m.TraceID != want.TraceID || string(m.Geo) != string(want.Geo) {
		t.Errorf("metadata prepared as %+v, want %+v", m, want)
	}
	bad := formsapi.Metadata{Geo: json.RawMessage(`{"city":`)}
	if err := formsapi.DefaultLimits.PrepareSubmission(&formsapi.Submission{FormID: "f", Data: []byte(`{}`)}, &bad); !errors.Is(err, formsapi.ErrInvalidInput) || !strings.Contains(err.Error(), "geo is not valid JSON") {
		t.Errorf("geo that is not JSON: got %v, want ErrInvalidInput saying so", err)
	}
}

func TestLimitsSubmissionBytesCountEscapes(t *testing.T) {
	is := is.New(t)
	l := formsapi.Limits{MaxSubmissionBytes: 1000}
	sub := formsapi.Submission{FormID: "f", Data: []byte(`{"a":1}`), CreatedAt: limitsAt,
		Attachments: []formsapi.Attachment{{FieldName: "", FileURL: "https://x/f", FileSize: 1, MIMEType: "text/plain"}}}
	b, err := formsapi.AppendSubmissionJSON(nil, sub)
	is.NoErr(err)
	room := 1000 - len(b)
	sub.Attachments[0].FieldName = strings.Repeat("<", room/6) + strings.Repeat("a", room%6)
	b, err = formsapi.AppendSubmissionJSON(nil, sub)
	is.NoErr(err)
	is.Equal(len(b), 1000)                           // the test submission is exactly at the limit
	is.True(len(sub.Attachments[0].FieldName) < 200) // as given, far below it
	is.NoErr(l.PrepareSubmission(&sub, &formsapi.Metadata{}))

	sub.Attachments[0].FieldName += "a"
	err = l.PrepareSubmission(&sub, &formsapi.Metadata{})
	is.True(refusedFor(err, "MaxSubmissionBytes")) // one byte over, escapes included
	is.True(strings.Contains(err.Error(), "1001 bytes"))

	big := formsapi.Submission{FormID: "f", Data: []byte(`{"pad":"` + strings.Repeat("x", 2000) + `"}`)}
	err = l.PrepareSubmission(&big, &formsapi.Metadata{})
	is.True(refusedFor(err, "MaxSubmissionBytes")) // data alone over it, within MaxDataBytes
}

// TestDefaultLimitsKeepPagesWithinTheBudget holds the defaults to what
// their doc comments promise: a page of MaxPageSize forms, each as large
// as MaxFormBytes allows, is served whole within DefaultPageBytes (the
// byte budget does not cut it), and a submission as large as
// MaxSubmissionBytes allows takes at most half of it.
func TestDefaultLimitsKeepPagesWithinTheBudget(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := memstore.New()
	is.NoErr(s.AddKey(ctx, "k", "acct"))
	for i := range 1000 {
		f := formOfSize(t, fmt.Sprintf("form-%0120d", i), formsapi.DefaultLimits.MaxFormBytes)
		is.NoErr(s.AddForm(ctx, "acct", f))
	}
	r := httptest.NewRequest("GET", fmt.Sprintf("/v1/forms?limit=%d", 1000), nil)
	r.Header.Set("Authorization", "Bearer k")
	w := httptest.NewRecorder()
	formsapi.NewHandler(s, s).ServeHTTP(w, r)
	is.Equal(w.Code, http.StatusOK)
	var page struct {
		Forms      []json.RawMessage
		NextCursor string
	}
	is.NoErr(json.Unmarshal(w.Body.Bytes(), &page))
	is.Equal(len(page.Forms), 1000)
	for i, f := range page.Forms {
		if len(f) != formsapi.DefaultLimits.MaxFormBytes {
			t.Fatalf("form %d is %d bytes in the page, want the %d it was measured at", i, len(f), formsapi.DefaultLimits.MaxFormBytes)
		}
	}
	is.True(w.Body.Len() <= formsapi.DefaultPageBytes) // a whole page of the largest forms
	is.True(2*formsapi.DefaultLimits.MaxSubmissionBytes <= formsapi.DefaultPageBytes)
}
