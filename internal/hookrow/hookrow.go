// Package hookrow is what the stores share about keeping webhook
// endpoints: the encoding of an endpoint's forms and secrets in one
// column each, and copies that share nothing with the stored value.
package hookrow

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/formsapi/formsapi/webhook/hookstore"
)

// secret is a hookstore.Secret as stored: Until in Unix nanoseconds, 0 for
// none.
type secret struct {
	Value string `json:"v"`
	Until int64  `json:"u,omitempty"`
}

// EncodeForms returns the JSON array of forms ("[]" for none).
func EncodeForms(forms []string) string {
	if len(forms) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(forms) // strings always encode
	return string(b)
}

// DecodeForms reads what EncodeForms wrote; none is nil.
func DecodeForms(s string) ([]string, error) {
	var forms []string
	if err := json.Unmarshal([]byte(s), &forms); err != nil {
		return nil, fmt.Errorf("stored forms of an endpoint: %w", err)
	}
	if len(forms) == 0 {
		return nil, nil
	}
	return forms, nil
}

// EncodeSecrets returns secrets as one JSON array, each secret's text as
// hookstore.Secret.Reveal gives it.
func EncodeSecrets(secrets []hookstore.EndpointSecret) string {
	out := make([]secret, len(secrets))
	for i, s := range secrets {
		out[i].Value = s.Secret.Reveal()
		if !s.Until.IsZero() {
			out[i].Until = s.Until.UnixNano()
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// DecodeSecrets reads what EncodeSecrets wrote.
func DecodeSecrets(s string) ([]hookstore.EndpointSecret, error) {
	var in []secret
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		return nil, errors.New("stored secrets of an endpoint: not a JSON array of secrets") // never quote them
	}
	out := make([]hookstore.EndpointSecret, len(in))
	for i, s := range in {
		secret, err := hookstore.ParseSecret(s.Value)
		if err != nil {
			return nil, fmt.Errorf("stored secret %d of an endpoint: %w", i, err)
		}
		out[i] = hookstore.EndpointSecret{Secret: secret, Until: Time(s.Until)}
	}
	return out, nil
}

// Nanos returns t in Unix nanoseconds, 0 for the zero time.
func Nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Time reads what Nanos wrote, in UTC.
func Time(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// Clone returns a copy of e that shares no slice with it.
func Clone(e hookstore.Endpoint) hookstore.Endpoint {
	e.Forms = slices.Clone(e.Forms)
	if len(e.Forms) == 0 {
		e.Forms = nil
	}
	e.Secrets = slices.Clone(e.Secrets)
	return e
}

// SortStreams orders streams by form ID, as Store.Endpoint returns them.
func SortStreams(s []hookstore.Stream) []hookstore.Stream {
	slices.SortFunc(s, func(a, b hookstore.Stream) int { return strings.Compare(a.FormID, b.FormID) })
	return s
}

// Endpoints returns the endpoints of ls; none is an empty slice.
func Endpoints(ls []hookstore.Lease) []hookstore.Endpoint {
	out := make([]hookstore.Endpoint, len(ls))
	for i, l := range ls {
		out[i] = l.Endpoint
	}
	return out
}

// EndpointColumns are the columns ScanEndpoint reads, in its order, as
// both SQL stores name them.
const EndpointColumns = "id, account_id, url, forms, secrets, disabled, disabled_reason, disabled_at, filter_query, created_at, lease_gen, lease_until"

// StreamColumns are the columns ScanStream reads, in its order.
const StreamColumns = "form_id, cursor, floor, attempts, next_at, failing_since, last_success, resync, incarnation, judging, unsent, judged"

// StreamUpdate is the SET clause of a stream's upsert: every column of
// StreamColumns but form_id, from the row the insert would have added.
const StreamUpdate = `cursor = excluded.cursor, floor = excluded.floor, attempts = excluded.attempts, next_at = excluded.next_at,
failing_since = excluded.failing_since, last_success = excluded.last_success, resync = excluded.resync, incarnation = excluded.incarnation,
judging = excluded.judging, unsent = excluded.unsent, judged = excluded.judged`

// ScanEndpoint reads a row of EndpointColumns with scan (a Rows' or a
// Row's Scan), into a lease: its endpoint, generation and end.
func ScanEndpoint(scan func(dest ...any) error) (hookstore.Lease, error) {
	var l hookstore.Lease
	var forms, secrets string
	var disabledAt, createdAt, until int64
	e := &l.Endpoint
	if err := scan(&e.ID, &e.AccountID, &e.URL, &forms, &secrets, &e.Disabled, &e.DisabledReason, &disabledAt, &e.Filter, &createdAt, &l.Gen, &until); err != nil {
		return l, err
	}
	var err error
	if e.Forms, err = DecodeForms(forms); err != nil {
		return l, err
	}
	if e.Secrets, err = DecodeSecrets(secrets); err != nil {
		return l, err
	}
	e.DisabledAt, e.CreatedAt, l.Until = Time(disabledAt), Time(createdAt), Time(until)
	return l, nil
}

// EndpointArgs returns e's values for the columns of EndpointColumns
// from url to created_at (created_at last, which an update leaves out).
func EndpointArgs(e hookstore.Endpoint) []any {
	return []any{e.URL, EncodeForms(e.Forms), EncodeSecrets(e.Secrets), e.Disabled, e.DisabledReason, Nanos(e.DisabledAt), e.Filter, Nanos(e.CreatedAt)}
}

// ScanStream reads a row of StreamColumns with scan.
func ScanStream(scan func(dest ...any) error) (hookstore.Stream, error) {
	var s hookstore.Stream
	var nextAt, failing, success, inc int64
	if err := scan(&s.FormID, &s.Cursor, &s.Floor, &s.Attempts, &nextAt, &failing, &success, &s.Resync, &inc, &s.Judging, &s.Unsent, &s.Judged); err != nil {
		return s, err
	}
	s.NextAt, s.FailingSince, s.LastSuccess = Time(nextAt), Time(failing), Time(success)
	s.Incarnation = uint64(inc) // stored as the signed 64 bits
	return s, nil
}

// StreamArgs returns s's values for StreamColumns, in order.
func StreamArgs(s hookstore.Stream) []any {
	return []any{s.FormID, s.Cursor, s.Floor, s.Attempts, Nanos(s.NextAt), Nanos(s.FailingSince), Nanos(s.LastSuccess), s.Resync, int64(s.Incarnation), s.Judging, s.Unsent, s.Judged}
}

// Rows is what the rows of both SQL stores' drivers have; the caller
// closes them.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ReadEndpoints reads every row of EndpointColumns, as leases without
// their streams.
func ReadEndpoints(rows Rows) ([]hookstore.Lease, error) {
	var out []hookstore.Lease
	for rows.Next() {
		l, err := ScanEndpoint(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// ReadStreams reads every row of StreamColumns; none is an empty slice.
func ReadStreams(rows Rows) ([]hookstore.Stream, error) {
	out := []hookstore.Stream{}
	for rows.Next() {
		st, err := ScanStream(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// AttachStreams gives each lease of ls the streams that streams reads
// for its endpoint.
func AttachStreams(ls []hookstore.Lease, streams func(id string) ([]hookstore.Stream, error)) error {
	for i := range ls {
		st, err := streams(ls[i].Endpoint.ID)
		if err != nil {
			return err
		}
		ls[i].Streams = st
	}
	return nil
}

// Split returns what is left of the span from..to once pos (within it)
// is taken out: none, one or two spans.
func Split(from, to, pos int64) []hookstore.Span {
	var out []hookstore.Span
	if from < pos {
		out = append(out, hookstore.Span{From: from, To: pos - 1})
	}
	if pos < to {
		out = append(out, hookstore.Span{From: pos + 1, To: to})
	}
	return out
}

// Ascending returns positions sorted, without repeats, in a new slice.
func Ascending(positions []int64) []int64 {
	return slices.Compact(slices.Sorted(slices.Values(positions)))
}
