package formsapi

import (
	"github.com/formsapi/formsapi/internal/token"
)

// tokenCodec makes the cursors, sync tokens and refs of the handler's
// cursor secret (internal/token), and seals a list's cursor with what
// selects the list (Query.AppendKey) before the store's position.
type tokenCodec struct {
	*token.Codec
}

func newTokenCodec(secret []byte) tokenCodec {
	return tokenCodec{token.New(secret)}
}

// seal returns the cursor of kind k of the page of l at the store's
// position pos, carrying what selects the list in q (Query.AppendKey), so
// the next page keeps every parameter of this one, and inc, the
// incarnation of l's form (0: not known).
func (c tokenCodec) seal(k token.Kind, l token.List, inc uint64, q Query, pos string) string {
	payload := make([]byte, 0, 2*13+1+len(pos))
	payload = q.AppendKey(payload)
	return c.Seal(k, l, inc, append(payload, pos...))
}

// open returns the order and filters a cursor of kind k of l carries,
// with the store's position in q.Cursor, and the incarnation of l's form
// it was sealed for.
func (c tokenCodec) open(k token.Kind, l token.List, tok string) (Query, uint64, bool) {
	inc, payload, ok := c.Open(k, l, tok)
	if !ok {
		return Query{}, 0, false
	}
	var q Query
	rest, ok := readKey(payload, &q)
	if !ok {
		return Query{}, 0, false
	}
	q.Cursor = string(rest)
	return q, inc, true
}
