package webhook

import "github.com/formsapi/formsapi/internal/token"

// tokens makes the refs and sync tokens of a form's feed exactly as the
// handler does from the same cursor secret (formsapi.WithCursorSecret):
// the refs that events carry and receivers key their copies by, the
// sync tokens of thin events' URLs, and those Replay reads.
type tokens struct {
	c *token.Codec
}

func newTokens(secret []byte) tokens { return tokens{c: token.New(secret)} }

// ref returns the feed's ref of the submission at position pos of form.
func (t tokens) ref(account, form string, pos int64) string {
	return string(t.c.AppendRef(nil, token.List{Account: account, FormID: form}, pos))
}

// syncToken returns the sync token of form's feed at position pos (floor
// 0), the same every time it is asked for, so that a thin event's body
// is byte-identical on every attempt.
func (t tokens) syncToken(account, form string, pos int64) string {
	return t.c.SealSyncStable(token.List{Account: account, FormID: form}, token.Sync{Pos: pos})
}

// openSync returns the position a sync token of form's feed carries.
func (t tokens) openSync(account, form, tok string) (int64, bool) {
	s, ok := t.c.OpenSync(token.List{Account: account, FormID: form}, tok)
	return s.Pos, ok
}
