package formsclient

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/formsapi/formsapi"
)

// SyncStart is the token that reads a form's sync feed from its beginning.
const SyncStart = "start"

// Sync reads the submissions of formID committed after token, in commit
// order, and hands each to fn. Pass SyncStart the first time, and after
// that the token Sync returned last: the server's feed then gives every
// submission of the form exactly once, including one whose createdAt is
// earlier than submissions already seen (see the README's sync feed).
//
// Sync reads pages until the server says nothing more is committed, and
// returns the token to store: the one after the last page whose every
// submission fn accepted. If fn returns an error, Sync stops and returns
// that page's starting token with the error, so resuming from it hands
// those submissions to fn again rather than losing them. Errors from the
// server are *Error values, as for Submissions; a server whose pages claim
// more but bring nothing new ends the call with an error wrapping
// ErrPaging rather than a loop. PageSize sets the page size.
func (c *Client) Sync(ctx context.Context, formID, token string, fn func(formsapi.Submission) error, opts ...ListOption) (string, error) {
	l := list[formsapi.Submission]{
		op:    fmt.Sprintf("sync submissions of form %q", formID),
		path:  "/v1/forms/" + url.PathEscape(formID) + "/submissions",
		field: "submissions",
		form:  true,
	}
	if formID == "" || formID == "." || formID == ".." {
		return token, fmt.Errorf("formsclient: %s: %w", l.op, formsapi.ErrFormNotFound)
	}
	if token == "" {
		return token, fmt.Errorf("formsclient: %s: an empty token: pass SyncStart the first time", l.op)
	}
	var q listQuery
	for _, o := range opts {
		o(&q)
	}
	for empty := 0; ; {
		params := url.Values{"sync": {token}}
		if q.limit > 0 {
			params.Set("limit", strconv.Itoa(q.limit))
		}
		items, env, err := fetchEnvelope(ctx, c, l, params)
		if err != nil {
			return token, err
		}
		if env.SyncToken == nil || *env.SyncToken == "" || env.HasMore == nil {
			return token, fmt.Errorf("formsclient: %s: %w: a feed page without syncToken and hasMore", l.op, ErrPaging)
		}
		for _, s := range items {
			if err := fn(s); err != nil {
				return token, err
			}
		}
		token = *env.SyncToken
		if !*env.HasMore {
			return token, nil
		}
		// More promised and nothing brought, page after page: a broken
		// server, not a feed to follow forever.
		if len(items) == 0 {
			if empty++; empty >= 3 {
				return token, fmt.Errorf("formsclient: %s: %w: hasMore with empty pages", l.op, ErrPaging)
			}
		} else {
			empty = 0
		}
	}
}
