package stored

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/formsapi/formsapi"
)

// Prepared is a submission made ready for a SQL store's insert, once
// checked against the store's limits: its data compacted, its JSON as the
// API sends it encoded.
type Prepared struct {
	FormID      string
	At          int64    // CreatedAt, in Unix nanoseconds
	Data        []byte   // compacted
	Attachments []byte   // a JSON array, "[]" when none
	URLs        []string // of the attachments, which search looks in
	Encoded     []byte   // the submission's JSON as the API sends it
	Geo         []byte   // compacted; nil when absent
	Meta        formsapi.Metadata
}

// Prepare does for a SQL store's AddSubmission and AddSubmissions what
// needs no database: a zero CreatedAt becomes now(), limits are checked
// (formsapi.Limits.PrepareSubmission) and the columns made. The JSON the
// API sends is made once here, from the compacted data, so that reads
// copy it out without decoding or encoding anything.
func Prepare(sub formsapi.Submission, m formsapi.Metadata, limits formsapi.Limits, now func() time.Time) (Prepared, error) {
	if sub.CreatedAt.IsZero() {
		sub.CreatedAt = now()
	}
	if err := limits.PrepareSubmission(&sub, &m); err != nil {
		return Prepared{}, err
	}
	data, err := Compact(sub.Data)
	if err != nil {
		return Prepared{}, err
	}
	attachments := []byte("[]")
	if len(sub.Attachments) > 0 {
		if attachments, err = json.Marshal(sub.Attachments); err != nil {
			return Prepared{}, err
		}
	}
	sub.Data = data
	encoded, err := formsapi.AppendSubmissionJSON(nil, sub)
	if err != nil {
		return Prepared{}, err
	}
	var geo []byte
	if len(m.Geo) > 0 {
		if geo, err = Compact(m.Geo); err != nil {
			return Prepared{}, err
		}
	}
	return Prepared{FormID: sub.FormID, At: sub.CreatedAt.UnixNano(), Data: data, Attachments: attachments,
		URLs: URLs(sub.Attachments), Encoded: encoded, Geo: geo, Meta: m}, nil
}

// Compact returns JSON v without insignificant space: a column holds
// exactly what the read side returns, without decoding it again.
func Compact(v []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
