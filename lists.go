package formsapi

// The list endpoints and the sync feed. Every page goes through one
// budgeted path: a pageReader appends the page's submissions to the
// response body, ending the page at the byte budget, and the page is
// finished in conditional.go. The library's own stores are their own
// pageReader (the fast path: their stored JSON, measured as sent); any
// other store is read through checkedReader, which encodes what the
// Store returns and cuts the page at the budget itself.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/formsapi/formsapi/internal/wire"
)

// serveForms answers a page of the forms list.
func (a *api) serveForms(w http.ResponseWriter, r *http.Request, req listRequest) {
	req.q.MaxBytes = a.cfg.pageBytes
	withBuffer(func(b []byte) []byte {
		b = appendEnvelope(b, msgForms, "forms")
		body, next, err := a.appendForms(req.ctx, req.grant, req.q, req.forms, b)
		if err != nil {
			a.fail(w, r, err)
			return body
		}
		// A form's ID names its place in the list, so the page's items
		// and whether more follow are all its tag needs; the store's
		// cursor would change with forms a scoped key cannot see.
		return a.respondPage(w, r, req, body, next, strconv.FormatBool(next != ""), pageItems{})
	})
}

// serveSubmissions answers a page of a form's submissions, or of its
// sync feed; it returns the wait of a sync request that is to wait
// (listFeed), else nil.
func (a *api) serveSubmissions(w http.ResponseWriter, r *http.Request, req listRequest) *feedWait {
	formID := req.list.FormID
	if req.sync {
		return a.listFeed(w, r, req, formID)
	}
	req.q.MaxBytes = a.cfg.pageBytes
	withBuffer(func(b []byte) []byte {
		p := wire.Page{Body: appendEnvelope(b, msgSubmissions, "submissions"), Form: req.form}
		// The stores count the work of filters and search in the meter,
		// which is charged once the page and its total are read, before
		// any answer (charge.go).
		ctx, meter := wire.WithMeter(req.ctx)
		tagNext, items, err := a.readSubmissions(ctx, &req, &p)
		a.chargeWork(w, r, req.request, meter.Examined())
		if err != nil {
			a.fail(w, r, err)
			return p.Body
		}
		a.logSkipped(w, r, p.Skipped)
		return a.respondPage(w, r, req, p.Body, p.NextCursor, tagNext, items)
	})
	return nil
}

// readSubmissions reads the page req asks for into p, and its total
// into req.totalJSON when asked for, under ctx. It returns what the
// page's tag covers besides its items (where the next page begins, and
// the total) and where the items are.
func (a *api) readSubmissions(ctx context.Context, req *listRequest, p *wire.Page) (tagNext string, items pageItems, err error) {
	formID := req.list.FormID
	start := len(p.Body) // where the items begin
	err = a.pages.AppendSubmissions(ctx, req.account, formID, req.q, p)
	if err == nil && otherIncarnation(req.inc, p.Incarnation) {
		err = errCursorOfGone
	}
	if err != nil {
		return "", pageItems{}, err
	}
	req.inc = p.Incarnation
	items = pageItems{start: start, held: p.Digests, n: p.DigestItems, sign: true}
	if req.q.Fields != nil {
		p.Body = append(p.Body[:start], projectItems(p.Body[start:], req.q.Fields)...)
		items.held = nil // the digest held is of the items as stored
	}
	if req.total == "" {
		return p.NextCursor, items, nil
	}
	// Counted after the page: a total never says less than the page, and
	// a write between the two may make it say more.
	if a.count == nil {
		return "", pageItems{}, errNoCount
	}
	t, err := a.count.CountSubmissions(ctx, req.account, formID, req.q, req.total == TotalExact)
	if err != nil {
		return "", pageItems{}, fmt.Errorf("count submissions: %w", err)
	}
	req.totalJSON = appendTotal(nil, t)
	// The tag covers the total as it covers where the next page begins.
	return p.NextCursor + string(req.totalJSON), items, nil
}

// listFeed answers a sync feed request: one page of the form's
// submissions in commit order, closed by the syncToken to resume from and
// hasMore. The last page carries a token too, so a poller always has one
// to store. A store without the feed gets 501, since the request is good
// and the server cannot serve it. A request that may wait (wait=) is not
// answered here: listFeed returns its wait, which handle reads and waits
// out once the route's frames are gone (wait.go).
func (a *api) listFeed(w http.ResponseWriter, r *http.Request, req listRequest, formID string) *feedWait {
	if a.feed == nil {
		a.fail(w, r, errNoFeed)
		return nil
	}
	d := a.waitFor(r, &req)
	if d <= 0 {
		a.feedPage(w, r, &req, formID, false)
		return nil
	}
	return &feedWait{req: req, d: d}
}

// emptyFeedPage answers the page of a wait that ended with nothing: the
// empty page its last read found, with no statement (its position, floor
// and incarnation are the request's, as that read left them), or 401 for
// a key that expired meanwhile by the handler's clock.
func (a *api) emptyFeedPage(w http.ResponseWriter, r *http.Request, req *listRequest) {
	if exp := req.grant.ExpiresAt; !exp.IsZero() && !a.now().Before(exp) {
		a.fail(w, r, ErrInvalidKey)
		return
	}
	withBuffer(func(b []byte) []byte {
		body := appendEnvelope(b, msgSubmissions, "submissions")
		start := len(body)
		body = appendFeedEntries(body, a.tokens.Refs(req.list, req.inc), nil, nil)
		return a.respondFeed(w, r, *req, body, start, start, req.after, false)
	})
}

// feedPage reads one page of the feed for req and answers it, reporting
// true; or, when mayWait and the page holds nothing, answers nothing and
// reports false, for the caller to wait.
func (a *api) feedPage(w http.ResponseWriter, r *http.Request, req *listRequest, formID string, mayWait bool) (answered bool) {
	answered = true
	withBuffer(func(b []byte) []byte {
		p := wire.Page{Body: appendEnvelope(b, msgSubmissions, "submissions")}
		itemsStart := len(p.Body)
		if a.feedForm {
			p.Form = req.form
		}
		next, more, err := a.feed.AppendFeed(req.ctx, req.account, formID, wire.FeedQuery{After: req.after, Limit: req.q.Limit, MaxBytes: a.cfg.pageBytes}, &p)
		// A reader that began at sync=start never received a submission
		// whose deletion was forgotten by then: its floor is the store's
		// Purged at that first page. Past it, a forgotten deletion after
		// the token may concern a submission the reader holds (positions
		// are in commit order), so it must start over.
		floor := req.floor
		switch {
		case err != nil:
		case req.after == 0:
			floor = p.Purged
		case otherIncarnation(req.inc, p.Incarnation):
			// Before retention: the token's positions are of another
			// form's feed, and mean nothing in this one.
			err = errSyncOfGone
		case max(req.after, req.floor) < p.Purged:
			err = errSyncExpired
		}
		if err == nil && len(p.Positions) != p.Objects() {
			err = fmt.Errorf("sync submissions: the store gave %d positions for %d submissions", len(p.Positions), p.Objects())
		}
		if err != nil {
			a.fail(w, r, err)
			return p.Body
		}
		req.floor, req.inc = floor, p.Incarnation
		if mayWait && next == req.after && !more {
			answered = false // nothing past the token: wait
			return p.Body
		}
		a.logSkipped(w, r, p.Skipped)
		// The refs of the page's form: of its incarnation, as the
		// store read it with the page (internal/token's AppendRef).
		start, end := itemsStart, len(p.Body)
		body := appendFeedEntries(p.Body, a.tokens.Refs(req.list, p.Incarnation), p.Positions, p.Deleted)
		return a.respondFeed(w, r, *req, body, start, end, next, more)
	})
	return answered
}

// appendForms appends to b the page of forms g may read, as q asks,
// within the byte budget q.MaxBytes, and returns b and the store's cursor
// after the page: "" when no form g may read follows it. For a scoped
// key the store's pages are read in full and the other forms left out,
// paged by the store's own cursors. A page may hold fewer than q.Limit
// forms only where the list or the budget ends it. Where the page must
// end inside a store page, the store is asked again for a page that ends
// right there, so that its cursor starts the next page. Every page is
// read at at, the version of the account's forms list the key's lookup
// read, when it read one (see listForms).
func (a *api) appendForms(ctx context.Context, g Grant, q Query, at *wire.Forms, b []byte) ([]byte, string, error) {
	if g.Forms != nil && len(g.Forms) == 0 {
		return b, "", nil
	}
	scan := q
	if g.Forms != nil {
		scan.Limit = a.cfg.maxLimit
	}
	budget := wire.NewBudget(q.MaxBytes)
	n, full := 0, false
	for try := 0; ; try++ {
		if try == maxRecuts {
			budget = wire.NewBudget(0) // the store keeps changing: serve as it gives
		}
		p, err := a.listForms(ctx, g.AccountID, scan, at)
		if err != nil {
			return b, "", err
		}
		mark, saved, taken := len(b), budget, n
		end := len(p.Items) // our page ends before p.Items[end]
		for i, f := range p.Items {
			if !g.Allows(f.ID) {
				continue
			}
			if n == q.Limit {
				end = i
				break
			}
			before := len(b)
			if b, err = appendForm(appendComma(b, n), f); err != nil {
				return b, "", fmt.Errorf("encode page: %w", err)
			}
			if !budget.Take(len(b) - before) {
				b, end = b[:before], i
				break
			}
			n++
		}
		if end < len(p.Items) {
			if end == 0 {
				return b, scan.Cursor, nil // it ends where this store page began
			}
			// Ask again for a store page that ends before p.Items[end]:
			// its cursor is where our next page begins.
			b, budget, n, full = b[:mark], saved, taken, true
			scan.Limit = end
			continue
		}
		if p.NextCursor == "" {
			return b, "", nil
		}
		if g.Forms == nil {
			return b, p.NextCursor, nil // the store's page is ours
		}
		scan.Cursor, scan.Limit = p.NextCursor, a.cfg.maxLimit
		if n == q.Limit || full {
			more, err := a.anyForm(ctx, g, scan, at)
			if err != nil || !more {
				return b, "", err
			}
			return b, scan.Cursor, nil
		}
	}
}

// anyForm reports whether the list from q on holds a form g may read, so
// that a page carries a cursor only when a form follows it.
func (a *api) anyForm(ctx context.Context, g Grant, q Query, at *wire.Forms) (bool, error) {
	for {
		p, err := a.listForms(ctx, g.AccountID, q, at)
		if err != nil {
			return false, err
		}
		for _, f := range p.Items {
			if g.Allows(f.ID) {
				return true, nil
			}
		}
		if p.NextCursor == "" {
			return false, nil
		}
		q.Cursor = p.NextCursor
	}
}

// listForms reads one page of the forms of accountID: through the store's
// ListFormsAt at at, the version of the forms list that the combined
// lookup read with the request's key (non-nil only then, and only for
// that store itself: see capabilitiesOf), so that every page of one
// request is read at that version or, once the store has read a later
// one, at that; else through Store.ListForms.
func (a *api) listForms(ctx context.Context, accountID string, q Query, at *wire.Forms) (Page[Form], error) {
	if at != nil {
		return a.formsAuthz.ListFormsAt(ctx, accountID, q, at)
	}
	return a.store.ListForms(ctx, accountID, q)
}

// logSkipped logs each submission a page left out, by position and
// reason, never by content: the host's operators can repair a damaged
// row, and clients still get the rest of the page and the pages after it.
func (a *api) logSkipped(w http.ResponseWriter, r *http.Request, skipped []wire.Skipped) {
	for _, s := range skipped {
		a.log(w, r, slog.LevelError, "formsapi: left a submission out of the page",
			slog.Int64("position", s.Seq), slog.String("reason", s.Reason))
	}
}

// checkedReader reads pages from a host's Store and FeedStore, whose
// output is not trusted: it drops any submission of another form, leaves
// out what cannot be encoded, and keeps the byte budget itself, measured
// on the JSON it sends. A store may end pages at q.MaxBytes itself; one
// that does not costs a second call for a page over the budget, asked for
// with the limit cut to the items that fit, whose cursor is then the
// right one. Either of store and feed may be nil when unused.
type checkedReader struct {
	store Store
	feed  FeedStore
}

// maxRecuts bounds the calls one page takes to fit the budget: each asks
// for fewer items, so it ends anyway, but a store whose data changes
// under every call must not keep a request going.
const maxRecuts = 8

// Reasons a checked page leaves a submission out.
const (
	reasonForeign = "the store returned a submission of another form"
)

func (c checkedReader) AppendSubmissions(ctx context.Context, accountID, formID string, q Query, p *wire.Page) error {
	mark := p.Mark()
	for try := 0; ; try++ {
		page, err := c.store.ListSubmissions(ctx, accountID, formID, q)
		if err != nil {
			return err
		}
		budget := wire.NewBudget(q.MaxBytes)
		if try == maxRecuts {
			budget = wire.NewBudget(0) // serve it as the store gave it
		}
		cut := appendWithin(p, formID, page.Items, nil, q.Finds, &budget)
		if cut < 0 {
			p.NextCursor = page.NextCursor
			return nil
		}
		// Ask for the items that fit: that page's cursor follows them.
		p.Rewind(mark)
		q.Limit = max(min(cut, q.Limit-1), 1)
	}
}

// feedChunk is how many submissions one call of a host's FeedStore reads
// at most, so that a page over the budget costs at most this many
// submissions in memory before the handler sees their size.
const feedChunk = 16

func (c checkedReader) AppendFeed(ctx context.Context, accountID, formID string, q wire.FeedQuery, p *wire.Page) (int64, bool, error) {
	after, limit, maxBytes := q.After, q.Limit, q.MaxBytes
	budget := wire.NewBudget(maxBytes)
	next, read := after, 0
	for {
		want := min(limit-read, feedChunk)
		mark, before := p.Mark(), budget
		for try := 0; ; try++ {
			page, err := c.feed.SyncSubmissions(ctx, accountID, formID, next, want)
			if err != nil {
				return 0, false, err
			}
			entries := len(page.Items) + len(page.Deleted)
			if page.Next < next || (entries == 0 && page.Next != next) || entries > want {
				return 0, false, fmt.Errorf("sync submissions: the store moved from position %d to %d with %d entries for a limit of %d", next, page.Next, entries, want)
			}
			if len(page.Positions) != len(page.Items) {
				return 0, false, fmt.Errorf("sync submissions: the store gave %d positions for %d submissions", len(page.Positions), len(page.Items))
			}
			if otherIncarnation(p.Incarnation, page.Incarnation) {
				// The form was created again since the page's first call:
				// the page ends before the new form's entries, and its
				// token, of the form before, gets 410.
				return next, true, nil
			}
			if page.Incarnation != 0 {
				p.Incarnation = page.Incarnation
			}
			p.Purged = max(p.Purged, page.Purged)
			if try == maxRecuts {
				unbounded := wire.NewBudget(0) // serve it as the store gave it
				appendWithin(p, formID, page.Items, page.Positions, nil, &unbounded)
				p.Deleted = append(p.Deleted, page.Deleted...)
				return page.Next, page.More, nil
			}
			cut := appendWithin(p, formID, page.Items, page.Positions, nil, &budget)
			if cut < 0 {
				p.Deleted = append(p.Deleted, page.Deleted...)
				next, read = page.Next, read+entries
				if try > 0 {
					return next, true, nil // cut to fit: the budget is spent
				}
				if !page.More || entries == 0 || read >= limit {
					return next, page.More, nil
				}
				break // the next chunk
			}
			p.Rewind(mark)
			budget = before
			if cut == 0 {
				return next, true, nil // not one more fits: the page ends here
			}
			// Ask for the items that fit: that page's Next follows them.
			want = max(min(cut, want-1), 1)
		}
	}
}

// appendWithin appends the submissions of formID among items to p,
// encoded as AppendSubmissionJSON makes them, leaving out (in p.Skipped)
// those of another form and those that cannot be encoded, and (silently)
// those whose data keep, unless nil, refuses: a page's filters, which a
// host's store may leave to the handler. It counts each in budget; for a feed page, positions (else nil) holds each item's
// position, recorded in p.Positions for those appended. When item i does
// not fit, it stops and returns i, with p holding the items before it; it
// returns -1 when all were appended.
func appendWithin(p *wire.Page, formID string, items []Submission, positions []int64, keep func(Submission) bool, budget *wire.Budget) int {
	for i, s := range items {
		if s.FormID != formID {
			p.Skipped = append(p.Skipped, wire.Skipped{Seq: int64(i), Reason: reasonForeign})
			continue
		}
		if keep != nil && !keep(s) {
			continue
		}
		mark := p.Mark()
		size, err := p.Append(func(b []byte) ([]byte, error) { return AppendSubmissionJSON(b, s) })
		if err != nil {
			p.Skipped = append(p.Skipped, wire.Skipped{Seq: int64(i), Reason: err.Error()})
			continue
		}
		if !budget.Take(size) {
			p.Rewind(mark)
			return i
		}
		if positions != nil {
			p.Positions, p.Ends = append(p.Positions, positions[i]), append(p.Ends, len(p.Body))
		}
	}
	return -1
}

// otherIncarnation reports whether a cursor or sync token sealed for the
// incarnation tok of its form is of another form than the one the store
// just read, of incarnation form: one deleted since, whose ID a new form
// took. 0 on either side is an incarnation not known (a token of an
// earlier version, a store that does not tell), which matches any.
func otherIncarnation(tok, form uint64) bool {
	return tok != 0 && form != 0 && tok != form
}

// Totals: total=exact or total=estimate asks a page of submissions to say
// how many items its list holds, counted by the store (a Counter).

// errNoCount: total was asked of a store that cannot count (501).
var errNoCount = errors.New("the store cannot count submissions")

// parseTotal reads the total parameter: "" (absent), "exact" or
// "estimate".
func parseTotal(v string) (mode string, msg string) {
	switch v {
	case "", TotalExact, TotalEstimate:
		return v, ""
	}
	return "", `invalid total: must be "exact" (counted, within a bound) or "estimate" (cheaper, may be off)`
}

// appendTotal appends the "total" member of a page.
func appendTotal(b []byte, t Total) []byte {
	b = append(b, `,"total":{"value":`...)
	b = strconv.AppendInt(b, t.Value, 10)
	b = append(b, `,"kind":`...)
	b = appendString(b, string(t.Kind))
	return append(b, '}')
}
