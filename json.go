package formsapi

// The JSON the API sends for a form and a submission, which the stores
// keep with each submission (AppendSubmissionJSON) and the handler sends
// as it is: appended by hand rather than built with encoding/json's
// reflection, since the shapes are fixed, into pooled buffers.

import (
	"bytes"
	"errors"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/formsapi/formsapi/internal/wire"
)

var bufferPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 16<<10)
	return &b
}}

// withBuffer lends fn an empty buffer from the pool (for one response,
// or one encoding to measure);
// fn returns the buffer as it grew it, and it goes back to the pool once
// fn is done with it (the body has been written by then).
func withBuffer(fn func(b []byte) []byte) {
	buf := bufferPool.Get().(*[]byte)
	b := fn((*buf)[:0])
	if cap(b) <= 4<<20 { // let a rare huge page go to the collector
		*buf = b[:0]
		bufferPool.Put(buf)
	}
}

var (
	errBadData = errors.New("submission data is not a JSON object")
	errTooDeep = errors.New("submission data nests too deep for a client to decode")
)

// appendForm appends the JSON object the API sends for f: exactly
// formId, title, icon, notificationEmail and createdAt in UTC.
func appendForm(b []byte, f Form) ([]byte, error) {
	b = append(b, `{"formId":`...)
	b = appendString(b, f.ID)
	b = append(b, `,"title":`...)
	b = appendString(b, f.Title)
	b = append(b, `,"icon":`...)
	b = appendString(b, f.Icon)
	b = append(b, `,"notificationEmail":`...)
	b = appendString(b, f.NotificationEmail)
	b = append(b, `,"createdAt":`...)
	b, err := appendTimestamp(b, f.CreatedAt)
	if err != nil {
		return b, err
	}
	return append(b, '}'), nil
}

// AppendSubmissionJSON appends to b the JSON object the API sends for s:
// exactly formId, data, attachments ([] when none) and createdAt in UTC.
// It fails if s.Data is not one JSON object. The library's stores keep the
// result with each submission, so that reads need not encode it again.
func AppendSubmissionJSON(b []byte, s Submission) ([]byte, error) {
	b = append(b, `{"formId":`...)
	b = appendString(b, s.FormID)
	b = append(b, `,"data":`...)
	b, err := appendObject(b, s.Data)
	if err != nil {
		return b, err
	}
	b = append(b, `,"attachments":[`...)
	for j, at := range s.Attachments {
		if j > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"fieldName":`...)
		b = appendString(b, at.FieldName)
		b = append(b, `,"fileUrl":`...)
		b = appendString(b, at.FileURL)
		b = append(b, `,"fileSize":`...)
		b = strconv.AppendInt(b, at.FileSize, 10)
		b = append(b, `,"mimeType":`...)
		b = appendString(b, at.MIMEType)
		b = append(b, '}')
	}
	b = append(b, `],"createdAt":`...)
	if b, err = appendTimestamp(b, s.CreatedAt); err != nil {
		return b, err
	}
	return append(b, '}'), nil
}

// appendObject copies a stored JSON object. Empty data becomes {}; data
// that is not one JSON object, or nests so deep that a response would
// pass encoding/json's limit (data stored before the write-side limits),
// is an error, since the store's output is not
// trusted; invalid UTF-8 inside strings becomes U+FFFD as encoding/json
// would make it.
func appendObject(b []byte, data []byte) ([]byte, error) {
	if len(data) == 0 {
		return append(b, "{}"...), nil
	}
	valid, utf8OK, tooDeep := wire.ScanObjectWithin(data, wire.MaxDataDepth)
	if tooDeep {
		return b, errTooDeep
	}
	if !valid {
		return b, errBadData
	}
	if !utf8OK {
		data = bytes.ToValidUTF8(data, []byte("\uFFFD"))
	}
	return append(b, data...), nil
}

func appendTimestamp(b []byte, t time.Time) ([]byte, error) {
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return b, errors.New("timestamp year outside 0..9999")
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaping as encoding/json does:
// control characters, quotes, backslashes, <, > and & (safe to embed in
// HTML), U+2028 and U+2029, and invalid UTF-8 as U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if wire.Plain[c] && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
