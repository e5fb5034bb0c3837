package formsapi

import (
	"strconv"

	"github.com/formsapi/formsapi/internal/token"
)

// The response bodies are appended to a pooled buffer by hand rather than
// built with encoding/json's reflection: the shapes are fixed, and a whole
// page is encoded before the status line is written, so a failure midway
// still becomes a clean 500 rather than a truncated 200.

// Messages of the successful responses.
const (
	msgForms       = "forms retrieved"
	msgSubmissions = "submissions retrieved"
)

func appendError(b []byte, msg string) []byte {
	b = append(b, `{"success":false,"message":`...)
	b = appendString(b, msg)
	return append(b, '}')
}

func appendEnvelope(b []byte, msg, listName string) []byte {
	b = append(b, `{"success":true,"message":`...)
	b = appendString(b, msg)
	b = append(b, `,"`...)
	b = append(b, listName...)
	return append(b, `":[`...)
}

// appendNext closes a page whose items a pageReader or appendForms
// wrote, with extra (the page's total, or nil) after the items.
func appendNext(b, extra []byte, next string) []byte {
	b = append(b, ']')
	b = append(b, extra...)
	if next != "" {
		b = append(b, `,"nextCursor":`...)
		b = appendString(b, next)
	}
	return append(b, '}')
}

// appendFeedEntries closes the submissions of a feed page that a
// pageReader wrote and appends its refs (one for each submission, in
// order) and deleted (the refs of the submissions whose deletions the
// page holds, in commit order), as refs makes them (internal/token).
func appendFeedEntries(b []byte, refs *token.Refs, positions, deleted []int64) []byte {
	b = append(b, `],"refs":[`...)
	for i, pos := range positions {
		b = append(appendComma(b, i), '"')
		b = append(refs.Append(b, pos), '"')
	}
	b = append(b, `],"deleted":[`...)
	for i, pos := range deleted {
		b = append(appendComma(b, i), '"')
		b = append(refs.Append(b, pos), '"')
	}
	return append(b, ']')
}

// appendFeedEnd closes a feed page whose entries appendFeedEntries
// closed, with the token to resume from and whether more can be read at
// once.
func appendFeedEnd(b []byte, token string, more bool) []byte {
	b = append(b, `,"syncToken":`...)
	b = appendString(b, token)
	b = append(b, `,"hasMore":`...)
	b = strconv.AppendBool(b, more)
	return append(b, '}')
}

// appendComma separates the item after n others from the one before it.
func appendComma(b []byte, n int) []byte {
	if n > 0 {
		return append(b, ',')
	}
	return b
}
