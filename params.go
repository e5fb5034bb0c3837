package formsapi

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"
)

// The parameters that select a list (order and the filters), each
// described once: how it is read from the query string into a Query, and
// its canonical bytes. Everything else takes them from this table: the
// sealed cursor (so a page reached through a cursor keeps every
// parameter), the cursor's check against the request's own parameters,
// the page's ETag, and the cache keys of stores ([Query.AppendKey]).
// limit, cursor and sync are not here: they say which page, not which
// list. TestEveryQueryFieldIsAParameter fails for a Query field that
// selects a list and is not in this table.
var listParams = []listParam{
	{
		name: "order", field: "Order", sample: "asc",
		parse: func(v string, q *Query) string {
			switch v {
			case "desc":
				q.Order = Newest
			case "asc":
				q.Order = Oldest
			default:
				return `must be "desc" (newest first) or "asc" (oldest first)`
			}
			return ""
		},
		append: func(b []byte, q Query) []byte { return append(b, byte(q.Order)) },
		read: func(b []byte, q *Query) ([]byte, bool) {
			if len(b) < 1 || b[0] > byte(Oldest) {
				return nil, false
			}
			q.Order = Order(b[0])
			return b[1:], true
		},
	},
	timeParam("since", "Since", func(q *Query) *time.Time { return &q.Since }),
	timeParam("until", "Until", func(q *Query) *time.Time { return &q.Until }),
}

// listParam is one parameter that selects a list.
type listParam struct {
	name   string // in the query string, and in the 400's message
	field  string // the Query field it sets
	sample string // a valid value other than the default, for tests
	// parse sets the field in q from a non-empty value, or returns what
	// is wrong with the value, for the message of the 400.
	parse func(v string, q *Query) string
	// append appends the field's value in q in a canonical form; read
	// reads it back into q, returning the rest of b.
	append func(b []byte, q Query) []byte
	read   func(b []byte, q *Query) ([]byte, bool)
}

// timeParam is a bound on createdAt, an RFC 3339 time.
func timeParam(name, field string, at func(*Query) *time.Time) listParam {
	return listParam{
		name: name, field: field, sample: "2024-05-01T12:00:00.5+02:00",
		parse: func(v string, q *Query) string {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return "must be an RFC 3339 time such as 2024-05-01T12:00:00Z (percent-encode a + in the offset as %2B)"
			}
			*at(q) = t.UTC()
			return ""
		},
		append: func(b []byte, q Query) []byte { return appendTime(b, *at(&q)) },
		read:   func(b []byte, q *Query) ([]byte, bool) { return readTime(b, at(q)) },
	}
}

// AppendKey appends to b a canonical encoding of what selects q's list:
// its order and filters, not its limit, cursor or byte budget. Queries
// with the same key list the same items in the same order. A store that
// caches pages keys them by it (with the list's owner and position), so
// that a parameter added to Query later can never be left out of its
// keys.
func (q Query) AppendKey(b []byte) []byte {
	for _, p := range listParams {
		b = p.append(b, q)
	}
	return b
}

// readKey reads into q what AppendKey wrote, returning the rest of b.
func readKey(b []byte, q *Query) ([]byte, bool) {
	for _, p := range listParams {
		var ok bool
		if b, ok = p.read(b, q); !ok {
			return nil, false
		}
	}
	return b, true
}

// pageParams are every parameter of a list request, in the order they
// are checked for being given more than once.
var pageParams = func() []string {
	names := []string{"limit", "cursor"}
	for _, p := range listParams {
		names = append(names, p.name)
	}
	return append(names, "sync")
}()

// parseListParams sets q's order and filters from the query string's
// values (get returns "" for an absent one), or returns the message of a
// 400.
func parseListParams(get func(string) string, q *Query) string {
	for _, p := range listParams {
		v := get(p.name)
		if v == "" {
			continue
		}
		if msg := p.parse(v, q); msg != "" {
			return fmt.Sprintf("invalid %s: %s", p.name, msg)
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return "invalid until: must be later than since"
	}
	return ""
}

// fromCursor takes the list's order and filters, and its position, from
// the cursor's c: a request may repeat them, but one it gives differently
// is a 400, whose message it returns.
func fromCursor(get func(string) string, q *Query, c Query) string {
	for _, p := range listParams {
		if get(p.name) != "" && !bytes.Equal(p.append(nil, *q), p.append(nil, c)) {
			return fmt.Sprintf("invalid cursor: it was issued for another %s", p.name)
		}
	}
	c.Limit, c.MaxBytes = q.Limit, q.MaxBytes
	*q = c
	return ""
}

// appendTime encodes t as a presence byte, then Unix seconds and
// nanoseconds, which covers every year time.Parse accepts.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, uint64(t.Unix()))
	return binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
}

func readTime(b []byte, t *time.Time) ([]byte, bool) {
	if len(b) < 1 {
		return nil, false
	}
	if b[0] == 0 {
		return b[1:], true
	}
	if len(b) < 13 {
		return nil, false
	}
	*t = time.Unix(int64(binary.BigEndian.Uint64(b[1:9])), int64(binary.BigEndian.Uint32(b[9:13]))).UTC()
	return b[13:], true
}
