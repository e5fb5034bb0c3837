package webhook

import (
	"github.com/formsapi/formsapi/internal/storecontract"
	"github.com/formsapi/formsapi/internal/token"
)

// tokens makes the refs and sync tokens of a form's feed exactly as the
// handler does from the same cursor secret (formsapi.WithCursorSecret):
// the refs that events carry and receivers key their copies by, the
// sync tokens of thin events' URLs, and those Replay reads. Each is of
// one incarnation of the form (0: not known), as the handler's are.
type tokens struct {
	c *token.Codec
}

func newTokens(secret []byte) tokens { return tokens{c: token.New(secret)} }

// ref returns the feed's ref of the submission at position pos of form,
// of incarnation inc.
func (t tokens) ref(account, form string, inc uint64, pos int64) string {
	return string(t.c.AppendRef(nil, token.List{Account: account, FormID: form}, inc, pos))
}

// syncToken returns the sync token of form's feed at position pos (floor
// 0), of incarnation inc, the same every time it is asked for, so that a
// thin event's body is byte-identical on every attempt. Brought to a form
// of another incarnation, the handler answers it 410.
func (t tokens) syncToken(account, form string, inc uint64, pos int64) string {
	return t.c.SealSyncStable(token.List{Account: account, FormID: form}, token.Sync{Pos: pos, Incarnation: inc})
}

// openSync returns what a sync token of form's feed carries.
func (t tokens) openSync(account, form, tok string) (token.Sync, bool) {
	return t.c.OpenSync(token.List{Account: account, FormID: form}, tok)
}

// sameIncarnation reports whether incarnations a and b may be of one
// form: equal, or either not known (0), as the handler takes them.
func sameIncarnation(a, b uint64) bool { return a == 0 || b == 0 || a == b }

// secretOf returns secret, or when it is empty the cursor secret that
// feed, or else store, keeps: the one the handler takes without
// formsapi.WithCursorSecret (storecontract.KeptSecret). It panics when there is
// none.
func secretOf(secret []byte, feed Feed, store Store) []byte {
	if len(secret) > 0 {
		return secret
	}
	if kept := storecontract.KeptSecret(feed, store); kept != nil {
		return kept
	}
	panic("webhook: no cursor secret: pass the one the handler has from formsapi.WithCursorSecret, " +
		"or a Feed of this module's stores, which keeps one")
}

// headOf returns feed as a storecontract.Head, which tells its forms'
// incarnations, if feed is one of this module's stores itself; nil
// otherwise. A type that embeds one may serve another feed than the
// embedded store's (as for the handler's fast path), and the handler
// then seals its refs with no incarnation, as the dispatcher must too.
func headOf(feed Feed) storecontract.Head {
	h, _ := storecontract.Of[storecontract.Head](feed)
	return h
}
