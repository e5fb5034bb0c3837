package formsapi

// The two list endpoints: the store's page, checked and encoded.

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"

	"github.com/formsapi/formsapi/internal/wire"
)

func (a *api) handleListForms() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, ok := a.begin(w, r, "")
		if !ok {
			return
		}
		defer req.cancel()
		page, err := a.listForms(req.ctx, req.grant, req.q)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		withBuffer(func(b []byte) []byte {
			body, err := appendForms(b, page.Items)
			if err != nil {
				a.fail(w, r, fmt.Errorf("encode page: %w", err))
				return body
			}
			return a.respondPage(w, r, req, body, page.NextCursor)
		})
	})
}

func (a *api) handleListSubmissions() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		formID := r.PathValue("formId")
		req, ok := a.begin(w, r, formID)
		if !ok {
			return
		}
		defer req.cancel()
		if req.sync {
			a.listFeed(w, r, req, formID)
			return
		}
		req.q.MaxBytes = a.cfg.pageBytes
		if a.encoded != nil {
			a.listEncoded(w, r, req, formID)
			return
		}
		page, err := a.store.ListSubmissions(req.ctx, req.account, formID, req.q)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		items := a.ownSubmissions(w, r, formID, page.Items)
		withBuffer(func(b []byte) []byte {
			body, skipped := appendSubmissions(b, items)
			a.logSkipped(w, r, skipped, "item of the page")
			return a.respondPage(w, r, req, body, page.NextCursor)
		})
	})
}

// encodedLister is the fast path of this module's own stores, which keep
// each submission's JSON as AppendSubmissionJSON made it and append it to
// the response straight from storage: no decoding, no encoding. They
// append only objects they made or checked (sqlitestore scans what it
// reads from the file). The parameter's type is internal, so a host's
// store cannot take this path.
type encodedLister interface {
	AppendSubmissions(ctx context.Context, accountID, formID string, q Query, p *wire.Page) error
}

func (a *api) listEncoded(w http.ResponseWriter, r *http.Request, req request, formID string) {
	withBuffer(func(b []byte) []byte {
		p := wire.Page{Body: appendEnvelope(b, msgSubmissions, "submissions")}
		if err := a.encoded.AppendSubmissions(req.ctx, req.account, formID, req.q, &p); err != nil {
			a.fail(w, r, err)
			return p.Body
		}
		a.logSkipped(w, r, p.Skipped, "stored submission")
		return a.respondPage(w, r, req, p.Body, p.NextCursor)
	})
}

// logSkipped logs each damaged submission a page left out, by position
// and reason, never by content: the host's operators can repair the row,
// and clients still get the rest of the page and the pages after it.
func (a *api) logSkipped(w http.ResponseWriter, r *http.Request, skipped []wire.Skipped, what string) {
	for _, s := range skipped {
		a.log(w, r, slog.LevelError, "formsapi: left a damaged submission out of the page",
			slog.String("which", what), slog.Int64("position", s.Seq), slog.String("reason", s.Reason))
	}
}

// ownSubmissions drops any submission a faulty store returned for another
// form: the store's output is not trusted to uphold isolation on its own.
func (a *api) ownSubmissions(w http.ResponseWriter, r *http.Request, formID string, items []Submission) []Submission {
	foreign := func(s Submission) bool { return s.FormID != formID }
	if !slices.ContainsFunc(items, foreign) {
		return items
	}
	kept := slices.DeleteFunc(slices.Clone(items), foreign)
	a.log(w, r, slog.LevelError, "formsapi: store returned submissions of another form; dropped them",
		slog.Int("dropped", len(items)-len(kept)))
	return kept
}

// listFeed answers a sync feed request: one page of the form's
// submissions in commit order, closed by the syncToken to resume from and
// hasMore. The last page carries a token too, so a poller always has one
// to store. A store without the feed gets 501, since the request is good
// and the server cannot serve it.
func (a *api) listFeed(w http.ResponseWriter, r *http.Request, req request, formID string) {
	if a.feed == nil {
		writeError(w, http.StatusNotImplemented, msgNoFeed)
		return
	}
	page, err := a.readFeed(req, formID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	items := a.ownSubmissions(w, r, formID, page.Items)
	withBuffer(func(b []byte) []byte {
		body, skipped := appendSubmissions(b, items)
		a.logSkipped(w, r, skipped, "item of the feed page")
		// The tag covers the items and where the page ends, not the
		// sealed token, which differs on every answer.
		tag := a.pageTag(req, "sync:"+strconv.FormatInt(page.Next, 10)+":"+strconv.FormatBool(page.More), body)
		if a.notModified(w, r, req, tag) {
			return body
		}
		body = appendFeedEnd(body, a.cursor.sealSync(req.list, page.Next), page.More)
		writePage(w, r, tag, body)
		return body
	})
}

// feedChunk is how many submissions one store call of a feed page reads
// at most. FeedStore has no byte budget of its own, so the handler reads a
// large page in chunks and stops at the first chunk boundary past the
// page's byte budget: a feed page holds at most the budget plus one
// chunk's submissions, however large the limit.
const feedChunk = 16

// readFeed reads one feed page of up to req.q.Limit submissions after
// req.after, in chunks, within the byte budget (see feedChunk). Pages
// compose: each chunk starts after the last one's Next, so the result is
// what one call with the whole limit would have returned, possibly cut
// short with More set.
func (a *api) readFeed(req request, formID string) (FeedPage, error) {
	out := FeedPage{Next: req.after}
	size := 0
	for {
		want := min(req.q.Limit-len(out.Items), feedChunk)
		page, err := a.feed.SyncSubmissions(req.ctx, req.account, formID, out.Next, want)
		if err != nil {
			return FeedPage{}, err
		}
		if page.Next < out.Next || (len(page.Items) == 0 && page.Next != out.Next) {
			return FeedPage{}, fmt.Errorf("sync submissions: the store moved from position %d to %d with %d items", out.Next, page.Next, len(page.Items))
		}
		for _, s := range page.Items {
			size += len(s.Data) + 64*len(s.Attachments) + 128
			for _, at := range s.Attachments {
				size += len(at.FieldName) + len(at.FileURL) + len(at.MIMEType)
			}
		}
		out.Items = append(out.Items, page.Items...)
		out.Next, out.More = page.Next, page.More
		full := len(out.Items) >= req.q.Limit
		overBudget := a.cfg.pageBytes > 0 && size >= a.cfg.pageBytes
		if !page.More || len(page.Items) == 0 || full || overBudget {
			if !full && overBudget && page.More {
				out.More = true
			}
			return out, nil
		}
	}
}
