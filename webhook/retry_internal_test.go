package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestRetryDelay checks every branch of the schedule: each step with
// jitter at both ends and in the middle, the steps past the last, the
// floor after a 429 or a timeout, and Retry-After held within [the wait,
// twice it].
func TestRetryDelay(t *testing.T) {
	t.Parallel()
	steps := []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour, 10 * time.Hour, 10 * time.Hour}
	for i, step := range steps {
		failed := i + 1
		for _, c := range []struct {
			rnd  float64
			want time.Duration
		}{{0, step * 8 / 10}, {0.5, step}, {0.999999999, step * 12 / 10}} {
			got := retryDelay(failed, OutcomeServerError, 0, false, c.rnd)
			if d := got - c.want; d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("failure %d, jitter %v: wait %s, want %s", failed, c.rnd, got, c.want)
			}
		}
	}
	cases := []struct {
		name   string
		failed int
		o      Outcome
		ra     time.Duration
		hasRA  bool
		want   time.Duration
	}{
		{"429 on the first failure waits a minute, not 5 s", 1, OutcomeThrottled, 0, false, ThrottledMin},
		{"a timeout too", 1, OutcomeTimeout, 0, false, ThrottledMin},
		{"a 500 keeps the schedule", 1, OutcomeServerError, 0, false, 5 * time.Second},
		{"429 later in the schedule keeps the longer wait", 2, OutcomeThrottled, 0, false, 5 * time.Minute},
		{"Retry-After within the window is honoured", 2, OutcomeServerError, 7 * time.Minute, true, 7 * time.Minute},
		{"Retry-After below the wait is raised to it", 2, OutcomeServerError, time.Second, true, 5 * time.Minute},
		{"Retry-After above twice the wait is cut to it", 2, OutcomeServerError, time.Hour, true, 10 * time.Minute},
		{"Retry-After on a 429 counts from the minute", 1, OutcomeThrottled, 90 * time.Second, true, 90 * time.Second},
		{"and is cut at two minutes", 1, OutcomeThrottled, time.Hour, true, 2 * time.Minute},
		{"Retry-After 0 is the wait", 3, OutcomeThrottled, 0, true, 30 * time.Minute},
	}
	for _, c := range cases {
		if got := retryDelay(c.failed, c.o, c.ra, c.hasRA, 0.5); got != c.want {
			t.Errorf("%s: wait %s, want %s", c.name, got, c.want)
		}
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	timeout := &net.OpError{Op: "dial", Err: timeoutErr{}}
	cases := []struct {
		status int
		err    error
		want   Outcome
	}{
		{200, nil, OutcomeSuccess}, {204, nil, OutcomeSuccess}, {299, nil, OutcomeSuccess},
		{301, nil, OutcomeRedirect}, {302, nil, OutcomeRedirect}, {307, nil, OutcomeRedirect}, {304, nil, OutcomeRedirect},
		{400, nil, OutcomeClientError}, {401, nil, OutcomeClientError}, {404, nil, OutcomeClientError},
		{410, nil, OutcomeGone}, {429, nil, OutcomeThrottled},
		{500, nil, OutcomeServerError}, {503, nil, OutcomeServerError}, {100, nil, OutcomeServerError}, {600, nil, OutcomeServerError},
		{0, context.DeadlineExceeded, OutcomeTimeout}, {0, fmt.Errorf("post: %w", context.DeadlineExceeded), OutcomeTimeout},
		{0, timeout, OutcomeTimeout},
		{0, errors.New("connection refused"), OutcomeNetwork}, {0, ErrRefusedAddress, OutcomeNetwork},
	}
	for _, c := range cases {
		if got := classify(c.status, c.err); got != c.want {
			t.Errorf("status %d, error %v: %s, want %s", c.status, c.err, got, c.want)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"", 0, false}, {"120", 2 * time.Minute, true}, {"0", 0, true}, {"-5", 0, false}, {"soon", 0, false},
		{"99999999999", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
	}
	for _, c := range cases {
		h := http.Header{}
		if c.v != "" {
			h.Set("Retry-After", c.v)
		}
		got, ok := retryAfter(h, now)
		if got != c.want || ok != c.ok {
			t.Errorf("Retry-After %q: (%s, %v), want (%s, %v)", c.v, got, ok, c.want, c.ok)
		}
	}
}

func TestFailingTooLong(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 10, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	cases := []struct {
		name string
		sts  []Stream
		want bool
	}{
		{"no stream", nil, false},
		{"all well", []Stream{{LastSuccess: now.Add(-9 * day)}}, false},
		{"failing 4 days", []Stream{{FailingSince: now.Add(-4 * day)}}, false},
		{"failing exactly 5 days", []Stream{{FailingSince: now.Add(-5 * day)}}, true},
		{"failing 6 days, another form succeeded yesterday", []Stream{{FailingSince: now.Add(-6 * day)}, {LastSuccess: now.Add(-day)}}, false},
		{"failing 6 days, the last success 5 days ago", []Stream{{FailingSince: now.Add(-6 * day)}, {LastSuccess: now.Add(-5 * day)}}, true},
	}
	for _, c := range cases {
		if got := failingTooLong(c.sts, now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestEventBodies pins the three bodies byte for byte: they are the
// wire, and the same bytes go out on every attempt.
func TestEventBodies(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	created, err := eventOf("contact", entry{pos: 7, sub: submissionOf("contact", `{"email":"a@x.org"}`, at)}, "REF", "THIN")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"submission.created","data":{"formId":"contact","ref":"REF","submission":{"formId":"contact","data":{"email":"a@x.org"},"attachments":[],"createdAt":"2025-01-02T03:04:05Z"}}}`
	if string(created.body) != want || created.id != MessageID(EventCreated, "REF") || created.thin {
		t.Errorf("created: %s (id %s)\nwant %s", created.body, created.id, want)
	}
	deleted, _ := eventOf("contact", entry{pos: 9, deleted: true, of: 7}, "REF", "THIN")
	if want := `{"type":"submission.deleted","data":{"formId":"contact","ref":"REF"}}`; string(deleted.body) != want || deleted.id != MessageID(EventDeleted, "REF") {
		t.Errorf("deleted: %s, want %s", deleted.body, want)
	}
	big := `{"blob":"` + string(make([]byte, 0)) + fmt.Sprintf("%0*d", MaxSubmissionBytes, 0) + `"}`
	thin, _ := eventOf("contact", entry{pos: 7, sub: submissionOf("contact", big, at)}, "REF", "https://api.example.com/v1/forms/contact/submissions?sync=T&limit=1")
	if want := `{"type":"submission.created","data":{"formId":"contact","ref":"REF","thin":true,"url":"https://api.example.com/v1/forms/contact/submissions?sync=T&limit=1"}}`; string(thin.body) != want || !thin.thin {
		t.Errorf("thin: %.300s, want %s", thin.body, want)
	}
	edge := `{"b":"` + fmt.Sprintf("%0*d", MaxSubmissionBytes-len(`{"formId":"contact","data":{"b":""},"attachments":[],"createdAt":"2025-01-02T03:04:05Z"}`), 0) + `"}`
	if whole, _ := eventOf("contact", entry{pos: 7, sub: submissionOf("contact", edge, at)}, "REF", "THIN"); whole.thin {
		t.Errorf("a submission of exactly MaxSubmissionBytes was sent thin")
	}
}
