// Package fastpath lets storetest hold the handler's encoded fast path to
// the Store contract. Production reads of this module's own stores take
// that path (AppendSubmissions), not ListSubmissions; Store wraps such a
// store so that its ListSubmissions answers through AppendSubmissions,
// decoding the JSON the handler would send, and every storetest clause
// runs over what clients actually get.
package fastpath

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/wire"
)

// Lister is a store with the handler's fast path.
type Lister interface {
	formsapi.Store
	AppendSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, p *wire.Page) error
}

// WriteLister is a Lister with the shared write side, which storetest's
// clauses about writes between pages use.
type WriteLister interface {
	Lister
	formsapi.Writer
}

// Store is s with ListSubmissions answered by its fast path.
type Store struct {
	WriteLister
}

// ListSubmissions lists one page through s.AppendSubmissions and decodes
// it. A page in which the store left out damaged rows is an error here:
// the conformance seed has none.
func (s Store) ListSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	p := wire.Page{Body: []byte("[")}
	if err := s.AppendSubmissions(ctx, accountID, formID, q, &p); err != nil {
		return formsapi.Page[formsapi.Submission]{}, err
	}
	if len(p.Skipped) > 0 {
		return formsapi.Page[formsapi.Submission]{}, fmt.Errorf("fastpath: the store left out %d rows as damaged", len(p.Skipped))
	}
	page := formsapi.Page[formsapi.Submission]{NextCursor: p.NextCursor}
	if err := json.Unmarshal(append(p.Body, ']'), &page.Items); err != nil {
		return formsapi.Page[formsapi.Submission]{}, fmt.Errorf("fastpath: the page is not valid JSON: %w", err)
	}
	if page.Items == nil {
		page.Items = []formsapi.Submission{}
	}
	return page, nil
}

// FeedLister is a store with the sync feed's fast path, and what
// storetest's feed clauses need besides.
type FeedLister interface {
	formsapi.Store
	formsapi.FeedStore
	AddSubmission(ctx context.Context, s formsapi.Submission, m formsapi.Metadata) error
	AppendFeed(ctx context.Context, accountID, formID string, q wire.FeedQuery, p *wire.Page) (int64, bool, error)
}

// Feed is s with SyncSubmissions answered by its fast path, AppendFeed,
// without a byte budget, decoding the JSON the handler would send.
type Feed struct {
	FeedLister
}

// SyncSubmissions reads one feed page through s.AppendFeed and decodes
// it. A page in which the store left out damaged rows is an error here.
func (s Feed) SyncSubmissions(ctx context.Context, accountID, formID string, after int64, limit int) (formsapi.FeedPage, error) {
	p := wire.Page{Body: []byte("[")}
	next, more, err := s.AppendFeed(ctx, accountID, formID, wire.FeedQuery{After: after, Limit: limit}, &p)
	if err != nil {
		return formsapi.FeedPage{}, err
	}
	if len(p.Skipped) > 0 {
		return formsapi.FeedPage{}, fmt.Errorf("fastpath: the store left out %d rows as damaged", len(p.Skipped))
	}
	page := formsapi.FeedPage{Next: next, More: more, Positions: p.Positions, Deleted: p.Deleted, Purged: p.Purged}
	if err := json.Unmarshal(append(p.Body, ']'), &page.Items); err != nil {
		return formsapi.FeedPage{}, fmt.Errorf("fastpath: the feed page is not valid JSON: %w", err)
	}
	if page.Items == nil {
		page.Items = []formsapi.Submission{}
	}
	return page, nil
}
