package formsclient

import (
	"context"
	"fmt"

	"github.com/formsapi/formsapi"
)

// SyncStart is the token that reads a form's sync feed from its beginning.
const SyncStart = "start"

// msgBadSyncPrefix starts the API's message of a 400 for the sync
// parameter (formsapi's request.go).
const msgBadSyncPrefix = "invalid sync:"

// Change is one entry of a form's sync feed: a submission added, or one
// deleted (by the host, or erased).
type Change struct {
	// Ref is the submission's reference: opaque, stable, the same for
	// its addition and its deletion, and unique within the form. Keep
	// the copy of each submission under it, to find it again when it is
	// deleted. It stays the same for as long as the server keeps its
	// cursor secret, like sync tokens. A server from before deletions
	// were fed sends none: Ref is then "".
	Ref string
	// Deleted reports a deletion: remove the submission kept under Ref
	// (there may be none, if it was deleted before you read it).
	Deleted bool
	// Submission is the submission added; zero for a deletion.
	Submission formsapi.Submission
}

// Sync reads the changes to formID committed after token, in commit
// order, and hands each to fn: each submission added, and each deletion
// of one. Pass SyncStart the first time, and after that the token Sync
// returned last: the server's feed then gives every submission of the
// form exactly once, including one whose createdAt is earlier than
// submissions already seen, and every deletion after the token (see the
// README's sync feed). A caller that keeps each added submission under
// its Ref and removes the one each deletion names holds exactly the
// form's submissions after every call.
//
// Sync reads pages until the server says nothing more is committed, and
// returns the token to store: the one after the last page whose every
// change fn accepted. If fn returns an error, Sync stops and returns that
// page's starting token with the error, so resuming from it hands those
// changes to fn again rather than losing them (a deletion handed over
// twice, or one of a submission never seen, removes nothing). Errors from
// the server are *Error values, as for Submissions; one matching
// ErrResync means the server will not continue from the token (it is
// past the server's retention of deletions, or sealed with a cursor
// secret the server no longer has): empty the copy and read again from
// SyncStart, as the program in docs/client.md does. A page that brings
// nothing but says more follows is read on from, like any other; a
// server that gives such pages 5 times in a row, or a token it gave
// before, ends the call with an error wrapping ErrPaging rather than a
// loop. Sync reads its pages with [Client.SyncPage]'s code; call that to
// read one page at a time.
//
// Of the list options only [PageSize] and [Wait] apply. PageSize sets the
// page size, and a page over [WithMaxResponseSize] is asked for again
// with half as many items, as the lists do. With Wait, a call that finds
// nothing after token waits on the server for the form's next changes
// and returns as soon as they are handed to fn (or, when the wait ends
// with nothing, with token as it was): calling Sync again in a loop,
// with the token it returns, follows the feed live. The feed comes in commit order and cannot be
// filtered, so [Since], [Until], [Oldest] and [Newest] make Sync return an
// error naming the option, as do a nil fn, an empty token, an empty form
// ID and PageSize(0), all before any request and with token unchanged.
func (c *Client) Sync(ctx context.Context, formID, token string, fn func(Change) error, opts ...ListOption) (string, error) {
	l := submissionsList(fmt.Sprintf("sync submissions of form %q", formID), formID)
	if err := c.ready(); err != nil {
		return token, err
	}
	q := listOptions(opts)
	if q.err != nil {
		return token, q.err
	}
	for _, name := range q.given {
		if name != "PageSize" && name != "Wait" {
			return token, fmt.Errorf("formsclient: %s: %s cannot be used with Sync: the feed comes in commit order and cannot be filtered or reordered (of the list options only PageSize and Wait apply)", l.op, name)
		}
	}
	if l.err != nil {
		return token, l.err
	}
	if token == "" {
		return token, fmt.Errorf("formsclient: %s: an empty token: pass SyncStart the first time", l.op)
	}
	if fn == nil {
		return token, fmt.Errorf("formsclient: %s: a nil fn", l.op)
	}
	limit := q.limit // 0 until a page is too large for the server's default
	var sc scratch   // the memory of a page too large, for the smaller request after it
	seen := tokenSet{}
	for empty := 0; ; {
		changes, resp, err := syncPage(ctx, c, l, token, limit, q.wait, "", &sc)
		if err != nil {
			return token, err
		}
		limit = resp.PageSize // less than asked when a page was too large
		for _, ch := range changes {
			if err := fn(ch); err != nil {
				return token, err
			}
		}
		sent := token
		token = resp.SyncToken
		if !resp.HasMore {
			return token, nil
		}
		// More promised from a token followed before, or with nothing
		// brought page after page: a broken server, not a feed to follow
		// forever. (An empty page that leads on is a page like another.)
		if token == sent || !seen.add(token) {
			return token, withRequestID(fmt.Errorf("formsclient: %s: %w: hasMore from a syncToken it had returned before", l.op, ErrPaging), resp.RequestID)
		}
		if len(changes) == 0 {
			if empty++; empty >= maxEmptyPages {
				return token, withRequestID(fmt.Errorf("formsclient: %s: %w: hasMore with %d empty pages in a row", l.op, ErrPaging, empty), resp.RequestID)
			}
		} else {
			empty = 0
		}
	}
}
