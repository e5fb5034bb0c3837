package formsclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

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
// SyncStart, as the program in docs/client.md does. A server whose pages claim
// more but bring nothing new ends the call with an error wrapping
// ErrPaging rather than a loop.
//
// Of the list options only [PageSize] applies: it sets the page size, and
// a page over [WithMaxResponseSize] is asked for again with half as many
// items, as the lists do. The feed comes in commit order and cannot be
// filtered, so [Since], [Until], [Oldest] and [Newest] make Sync return an
// error naming the option, as do a nil fn, an empty token, an empty form
// ID and PageSize(0), all before any request and with token unchanged.
func (c *Client) Sync(ctx context.Context, formID, token string, fn func(Change) error, opts ...ListOption) (string, error) {
	l := list[formsapi.Submission]{
		op:    fmt.Sprintf("sync submissions of form %q", formID),
		path:  "/v1/forms/" + url.PathEscape(formID) + "/submissions",
		field: "submissions",
		form:  true,
	}
	if err := c.ready(); err != nil {
		return token, err
	}
	q := listOptions(opts)
	if q.err != nil {
		return token, q.err
	}
	for _, name := range q.given {
		if name != "PageSize" {
			return token, fmt.Errorf("formsclient: %s: %s cannot be used with Sync: the feed comes in commit order and cannot be filtered or reordered (of the list options only PageSize applies)", l.op, name)
		}
	}
	if formID == "" || formID == "." || formID == ".." {
		return token, fmt.Errorf("formsclient: %s: %w", l.op, formsapi.ErrFormNotFound)
	}
	if token == "" {
		return token, fmt.Errorf("formsclient: %s: an empty token: pass SyncStart the first time", l.op)
	}
	if fn == nil {
		return token, fmt.Errorf("formsclient: %s: a nil fn", l.op)
	}
	limit := q.limit // 0 until a page is too large for the server's default
	var sc scratch   // the memory of a page too large, for the smaller request after it
	for empty := 0; ; {
		params := url.Values{"sync": {token}}
		if limit > 0 {
			params.Set("limit", strconv.Itoa(limit))
		}
		items, env, err := fetchEnvelope(ctx, c, l, params, &sc)
		if e, ok := err.(*Error); ok && e.StatusCode == http.StatusBadRequest && token != SyncStart && strings.HasPrefix(e.Message, msgBadSyncPrefix) {
			e.badToken = true // ErrResync: the only parameters sent are the token and a limit the client checked
		}
		if e, ok := err.(*Error); ok && e.tooLarge && limit != 1 {
			// Ask again from the same token for fewer items.
			if limit == 0 {
				limit = defaultPageSize
			}
			limit /= 2
			continue
		}
		if err != nil {
			return token, err
		}
		if env.SyncToken == nil || *env.SyncToken == "" || env.HasMore == nil {
			return token, fmt.Errorf("formsclient: %s: %w: a feed page without syncToken and hasMore", l.op, ErrPaging)
		}
		if env.Refs != nil && len(env.Refs) != len(items) {
			return token, fmt.Errorf("formsclient: %s: %w: a feed page with %d refs for %d submissions", l.op, ErrPaging, len(env.Refs), len(items))
		}
		// A submission is deleted after it was added, so additions first,
		// then deletions, leave the copy as the page's order would.
		for i, s := range items {
			ch := Change{Submission: s}
			if env.Refs != nil {
				ch.Ref = env.Refs[i]
			}
			if err := fn(ch); err != nil {
				return token, err
			}
		}
		for _, ref := range env.Deleted {
			if err := fn(Change{Ref: ref, Deleted: true}); err != nil {
				return token, err
			}
		}
		token = *env.SyncToken
		if !*env.HasMore {
			return token, nil
		}
		// More promised and nothing brought, page after page: a broken
		// server, not a feed to follow forever.
		if len(items)+len(env.Deleted) == 0 {
			if empty++; empty >= 3 {
				return token, fmt.Errorf("formsclient: %s: %w: hasMore with empty pages", l.op, ErrPaging)
			}
		} else {
			empty = 0
		}
	}
}
