package formsapi

// Attachment URLs for private storage: the host's signer turns each
// stored attachment into the URL a client receives, on every answer that
// carries attachments (pages of the lists and of the sync feed, exports),
// after every cache, per answer. docs/api.md ("Attachment URLs") says
// what it means for ETags and 304s; in short:
//
//   - Time is cut in windows of half the URLs' lifetime. Every URL of an
//     answer is signed as of the start of the window the answer is made
//     in, so it is valid for at least half the lifetime after the answer.
//   - A page's ETag covers the stored page and the window, never the
//     signatures: within a window an unchanged page still answers 304
//     (and the client's body, signed in that window, still holds good
//     URLs); in the next window the tag changes, and the client gets a
//     fresh body.
//   - The stores' read caches keep stored JSON only. What this file
//     keeps (signed pages, signed URLs) is kept for one window and
//     dropped with it, so no answer ever carries a URL whose signature
//     ran out while it was kept.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// AttachmentSigner returns the URL a client receives for attachment a,
// as stored, of a submission of form formID of account accountID, signed
// as of time at (a presigned GET of the stored object, say). The URL must
// stay valid until at least at plus the lifetime given to
// [WithAttachmentURLs] (webhook's WithAttachmentURLs takes none: it signs
// as of each attempt, and a receiver fetches within the signer's own
// lifetime), and may be used until then by anyone who holds it. It is called with the same
// at for every answer of one window (see WithAttachmentURLs), so that a
// signer that is a function of its arguments (SigV4's presigning is one)
// gives the same URL all window long. For an attachment it will not
// sign (not a file of that account's form: a submitter may have stored
// any URL, and a bucket's credentials sign any object), it returns the
// stored URL as it is, not an error. An error fails the answer (500,
// or 503 when it wraps context.DeadlineExceeded, whatever else it wraps;
// or an export cut, logged); it is never shown to the client.
type AttachmentSigner func(ctx context.Context, accountID, formID string, a Attachment, at time.Time) (string, error)

// minAttachmentLifetime is the shortest lifetime WithAttachmentURLs takes.
const minAttachmentLifetime = 2 * time.Second

// WithAttachmentURLs has the handler send, as each attachment's fileUrl,
// the URL sign makes of the stored attachment, valid for lifetime: in
// every page of submissions, of the sync feed and of an export, JSON
// Lines and CSV alike. Each answer's URLs are signed as of the start of
// the current window of lifetime/2 (time truncated to it), so every URL
// a client receives is valid for at least lifetime/2 after it arrives,
// and so is every URL of a body a 304 confirms: a page's ETag changes
// with the window (docs/api.md, "Attachment URLs"). Pages the stores'
// read caches keep hold the URLs as stored; the handler signs after
// them, per answer, and keeps signed pages and URLs only for the window
// they were signed in. Webhook events are signed by the dispatcher's own
// option (package webhook). It panics if sign is nil or lifetime is
// below two seconds.
func WithAttachmentURLs(sign AttachmentSigner, lifetime time.Duration) Option {
	if sign == nil {
		panic("formsapi: WithAttachmentURLs with a nil signer")
	}
	if lifetime < minAttachmentLifetime {
		panic(fmt.Sprintf("formsapi: WithAttachmentURLs(%v): need a lifetime of at least %v", lifetime, minAttachmentLifetime))
	}
	return func(c *config) { c.signer = &urlSigner{sign: sign, window: lifetime / 2} }
}

// urlSigner signs the attachments of answers (see the file's comment).
type urlSigner struct {
	sign   AttachmentSigner
	window time.Duration

	mu   sync.Mutex
	at   time.Time         // the window memo is of
	memo map[string][]byte // signed pages (by tag) and URLs, of window at
	size int               // bytes of keys and values in memo
}

// memoBytes bounds what a handler keeps of signed pages and URLs: past
// it, the memo starts over (it is only ever a saving).
const memoBytes = 16 << 20

// windowAt returns the start of the window that now is in.
func (s *urlSigner) windowAt(now time.Time) time.Time {
	return now.Truncate(s.window)
}

// load returns what the memo keeps under key for window at.
func (s *urlSigner) load(at time.Time, key []byte) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.Equal(at) {
		return nil, false
	}
	v, ok := s.memo[string(key)]
	return v, ok
}

// store keeps v under key for window at, dropping what was kept for any
// other window.
func (s *urlSigner) store(at time.Time, key, v []byte) {
	n := len(key) + len(v)
	if n > memoBytes/8 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.Equal(at) {
		if at.Before(s.at) {
			return // a late answer of a window past
		}
		s.at, s.memo, s.size = at, nil, 0
	}
	if s.memo == nil || s.size+n > memoBytes {
		s.memo, s.size = make(map[string][]byte), 0
	}
	if _, ok := s.memo[string(key)]; !ok {
		s.memo[string(key)] = v
		s.size += n
	}
}

// Prefixes of the memo's keys.
const (
	memoPage = 'p'
	memoURL  = 'u'
)

// signPage returns body with its items, body[start:end], signed as of
// window at: from the memo when a page of the same tag was signed in this
// window, else signed now and kept. It reuses body's array: a page signed
// already costs a copy of its items.
func (s *urlSigner) signPage(ctx context.Context, account, formID, tag string, at time.Time, body []byte, start, end int) ([]byte, error) {
	key := append(make([]byte, 0, 1+len(tag)), memoPage)
	key = append(key, tag...)
	items, ok := s.load(at, key)
	if !ok {
		var err error
		if items, err = s.appendSignedItems(ctx, nil, account, formID, at, body[start:end]); err != nil {
			return body, err
		}
		s.store(at, key, items)
	}
	tail := bytes.Clone(body[end:]) // a feed page's refs, after its items
	body = append(body[:start], items...)
	return append(body, tail...), nil
}

// errSignItems is the error for items the signer cannot walk: the stored
// JSON is damaged in a way the store's checks let pass.
var errSignItems = errors.New("sign attachment URLs: malformed stored submissions")

// appendSignedItems appends items, submission objects separated by
// commas, each with its attachments' URLs signed.
func (s *urlSigner) appendSignedItems(ctx context.Context, b []byte, account, formID string, at time.Time, items []byte) ([]byte, error) {
	i := skipSpace(items, 0)
	for i < len(items) {
		end, ok := valueEnd(items, i)
		if !ok {
			return b, errSignItems
		}
		var err error
		if b, err = s.appendSignedObject(ctx, b, account, formID, at, items[i:end]); err != nil {
			return b, err
		}
		i = skipSpace(items, end)
		if i < len(items) {
			if items[i] != ',' {
				return b, errSignItems
			}
			b = append(b, ',')
			i = skipSpace(items, i+1)
		}
	}
	return b, nil
}

// appendSignedObject appends the submission object obj with the URL of
// each of its attachments signed; the rest (data above all: a
// submitter's text, never signed) is copied as it is.
func (s *urlSigner) appendSignedObject(ctx context.Context, b []byte, account, formID string, at time.Time, obj []byte) ([]byte, error) {
	m := members{b: obj}
	if !m.open() {
		return append(b, obj...), nil // not an object: nothing to sign
	}
	var tmp []byte
	last := 0 // obj[last:] is not yet copied
	for {
		name, escaped, v, more, err := m.next()
		if err != nil {
			return b, errSignItems
		}
		if !more {
			break
		}
		if n, ok := jsonText(name, escaped, &tmp); !ok || !bytes.EqualFold(n, []byte("attachments")) {
			continue
		}
		off := cap(obj) - cap(v) // v's offset in obj: v is obj[off:…]
		b = append(b, obj[last:off]...)
		if b, err = s.appendSignedArray(ctx, b, account, formID, at, v); err != nil {
			return b, err
		}
		last = off + len(v)
	}
	return append(b, obj[last:]...), nil
}

// appendSignedArray appends the attachments array v with each
// attachment's fileUrl signed; a value that is not an array, or an
// element that is not an object with a string fileUrl, is copied as it
// is.
func (s *urlSigner) appendSignedArray(ctx context.Context, b []byte, account, formID string, at time.Time, v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != '[' {
		return append(b, v...), nil
	}
	b = append(b, '[')
	i := skipSpace(v, 1)
	for n := 0; i < len(v) && v[i] != ']'; n++ {
		end, ok := valueEnd(v, i)
		if !ok {
			return b, errSignItems
		}
		b = appendComma(b, n)
		var err error
		if b, err = s.appendSignedAttachment(ctx, b, account, formID, at, v[i:end]); err != nil {
			return b, err
		}
		i = skipSpace(v, end)
		if i < len(v) && v[i] == ',' {
			i = skipSpace(v, i+1)
		}
	}
	return append(b, ']'), nil
}

// signError is a signer's error. It fails the answer as a store's
// failure would (500; 503 when it ends with context.DeadlineExceeded),
// whatever else it wraps: a signer that reports ErrInvalidKey or
// ErrFormNotFound (the host's own lookup, say) must not tell the client
// that its key or the form is gone.
type signError struct{ err error }

func (e signError) Error() string { return "sign attachment URLs: " + e.err.Error() }

// Unwrap returns the context's error the signer's wraps, if any: a
// signer that timed out is a store that timed out, and nothing else.
func (e signError) Unwrap() error {
	for _, c := range []error{context.DeadlineExceeded, context.Canceled} {
		if errors.Is(e.err, c) {
			return c
		}
	}
	return nil
}

// appendSignedAttachment appends the attachment object el with its
// fileUrl's value replaced by the signed URL, its other members as they
// are.
func (s *urlSigner) appendSignedAttachment(ctx context.Context, b []byte, account, formID string, at time.Time, el []byte) ([]byte, error) {
	a, urlValue, ok := decodeAttachment(el)
	if !ok {
		return append(b, el...), nil
	}
	key := make([]byte, 0, 1+len(account)+len(formID)+len(el)+2)
	key = append(key, memoURL)
	key = append(append(key, account...), 0)
	key = append(append(key, formID...), 0)
	key = append(key, el...)
	signed, ok := s.load(at, key)
	if !ok {
		u, err := s.sign(ctx, account, formID, a, at)
		if err != nil {
			return b, signError{err}
		}
		signed = appendString(nil, u)
		s.store(at, key, signed)
	}
	off := cap(el) - cap(urlValue) // urlValue is el[off:…]
	b = append(b, el[:off]...)
	b = append(b, signed...)
	return append(b, el[off+len(urlValue):]...), nil
}

// decodeAttachment reads the members of a stored attachment object, as
// encoding/json would (names case-insensitively, the last of duplicates
// winning), and returns it with the bytes of its fileUrl's value; ok is
// false when el has no string fileUrl.
func decodeAttachment(el []byte) (a Attachment, urlValue []byte, ok bool) {
	m := members{b: el}
	if !m.open() {
		return a, nil, false
	}
	var tmp []byte
	for {
		name, escaped, v, more, err := m.next()
		if err != nil {
			return a, nil, false
		}
		if !more {
			return a, urlValue, urlValue != nil
		}
		n, ok := jsonText(name, escaped, &tmp)
		if !ok {
			return a, nil, false
		}
		text := func() string {
			if len(v) < 2 || v[0] != '"' {
				return ""
			}
			t, _ := jsonText(v[1:len(v)-1], bytes.IndexByte(v, '\\') >= 0, new([]byte))
			return string(t)
		}
		switch {
		case bytes.EqualFold(n, []byte("fileUrl")):
			if len(v) < 2 || v[0] != '"' {
				urlValue = nil
				continue
			}
			a.FileURL, urlValue = text(), v
		case bytes.EqualFold(n, []byte("fieldName")):
			a.FieldName = text()
		case bytes.EqualFold(n, []byte("mimeType")):
			a.MIMEType = text()
		case bytes.EqualFold(n, []byte("fileSize")):
			a.FileSize, _ = strconv.ParseInt(string(v), 10, 64)
		}
	}
}
