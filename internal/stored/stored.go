// Package stored holds what the library's database stores share about
// their rows: how the attachments column decodes, and the version of the
// encoded response JSON each submission row keeps.
//
// # The stored encoding
//
// sqlitestore and pgstore keep, with every submission, the JSON object the
// API sends for it (formsapi.AppendSubmissionJSON), so that reads copy it
// out without decoding or encoding anything. That makes the wire format
// part of what is on disk. Each row records the Version it was encoded
// with, in its json_version column, and each store's migrations keep a
// partial index over the rows whose json_version is not the current one:
// empty in normal operation, so finding none costs nothing at open.
//
// Changing the encoding (anything AppendSubmissionJSON writes) requires, in
// the same release:
//
//  1. Version incremented;
//  2. a migration in every store that recreates that partial index with
//     the new number (see 0005_encoding_version.sql in sqlitestore and
//     0005_encoding_version.sql in pgstore), which also makes older
//     releases refuse the database (their schema is now too old) instead
//     of writing rows in the old encoding.
//
// At open, after migrating, each store re-encodes every stale row from its
// data, attachments and created_at columns (see Reencode), so the fast and
// the checked read paths never disagree on old rows.
package stored

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/formsapi/formsapi"
)

// Version is the encoding that formsapi.AppendSubmissionJSON writes
// today, as recorded in each row's json_version column.
const Version = 1

// DecodeAttachments decodes an attachments column; none is an empty,
// non-nil slice, since the API answers [] rather than null.
func DecodeAttachments(b []byte) ([]formsapi.Attachment, error) {
	att := []formsapi.Attachment{}
	if string(b) == "[]" {
		return att, nil
	}
	if err := json.Unmarshal(b, &att); err != nil {
		return nil, fmt.Errorf("decode attachments: %w", err)
	}
	if att == nil { // a stored JSON null
		att = []formsapi.Attachment{}
	}
	return att, nil
}

// Reencode returns the response JSON of a stored submission in the
// current encoding, made from its source columns. A row that cannot be
// encoded gets an empty object in place of its JSON, which the read paths
// then leave out and log as damaged, so that one bad row cannot keep a
// store from opening.
func Reencode(formID string, createdAt int64, data, attachments []byte) []byte {
	att, err := DecodeAttachments(attachments)
	if err != nil {
		return []byte{}
	}
	s := formsapi.Submission{FormID: formID, Data: data, Attachments: att, CreatedAt: time.Unix(0, createdAt).UTC()}
	b, err := formsapi.AppendSubmissionJSON(nil, s)
	if err != nil {
		return []byte{}
	}
	return b
}
