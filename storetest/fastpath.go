package storetest

// The handler's fast path, held to the Store and FeedStore contracts.
// Production reads of this module's own stores take that path
// (AppendSubmissions, AppendFeed: the module-private contract of
// internal/storecontract), not ListSubmissions or SyncSubmissions; the
// FastPath and FeedFastPath groups run the same clauses through it, on
// adapters that answer the public methods by decoding the JSON the
// handler would send, so every clause runs over what clients actually
// get.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/storecontract"
	"github.com/formsapi/formsapi/internal/wire"
)

// fastStore is one of this module's stores (storecontract.Of tells it
// from a host's type that embeds one).
type fastStore = storecontract.Store[formsapi.Query]

// fastWriter is a store with the fast path and the shared write side,
// which the clauses about writes between pages use.
type fastWriter interface {
	formsapi.Store
	formsapi.Writer
	fastStore
}

// fastLists is s with ListSubmissions answered by its fast path.
type fastLists struct {
	fastWriter
}

// ListSubmissions lists one page through s.AppendSubmissions and decodes
// it. A page in which the store left out damaged rows is an error here:
// the conformance seed has none.
func (s fastLists) ListSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	p := wire.Page{Body: []byte("[")}
	if err := s.AppendSubmissions(ctx, accountID, formID, q, &p); err != nil {
		return formsapi.Page[formsapi.Submission]{}, err
	}
	if len(p.Skipped) > 0 {
		return formsapi.Page[formsapi.Submission]{}, fmt.Errorf("fast path: the store left out %d rows as damaged", len(p.Skipped))
	}
	page := formsapi.Page[formsapi.Submission]{NextCursor: p.NextCursor}
	if err := json.Unmarshal(append(p.Body, ']'), &page.Items); err != nil {
		return formsapi.Page[formsapi.Submission]{}, fmt.Errorf("fast path: the page is not valid JSON: %w", err)
	}
	if page.Items == nil {
		page.Items = []formsapi.Submission{}
	}
	return page, nil
}

// fastFeedStore is a store with the fast path, the sync feed, and what
// the feed clauses need besides.
type fastFeedStore interface {
	syncStore
	fastStore
}

// fastFeed is s with SyncSubmissions answered by its fast path,
// AppendFeed, without a byte budget, decoding the JSON the handler would
// send.
type fastFeed struct {
	fastFeedStore
}

// SyncSubmissions reads one feed page through s.AppendFeed and decodes
// it. A page in which the store left out damaged rows is an error here.
func (s fastFeed) SyncSubmissions(ctx context.Context, accountID, formID string, after int64, limit int) (formsapi.FeedPage, error) {
	p := wire.Page{Body: []byte("[")}
	next, more, err := s.AppendFeed(ctx, accountID, formID, wire.FeedQuery{After: after, Limit: limit}, &p)
	if err != nil {
		return formsapi.FeedPage{}, err
	}
	if len(p.Skipped) > 0 {
		return formsapi.FeedPage{}, fmt.Errorf("fast path: the store left out %d rows as damaged", len(p.Skipped))
	}
	page := formsapi.FeedPage{Next: next, More: more, Positions: p.Positions, Deleted: p.Deleted, Purged: p.Purged}
	if err := json.Unmarshal(append(p.Body, ']'), &page.Items); err != nil {
		return formsapi.FeedPage{}, fmt.Errorf("fast path: the feed page is not valid JSON: %w", err)
	}
	if page.Items == nil {
		page.Items = []formsapi.Submission{}
	}
	return page, nil
}
