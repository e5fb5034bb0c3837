package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/pagecache"
	"github.com/formsapi/formsapi/internal/storecontract"
	"github.com/formsapi/formsapi/internal/stored"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/formsapi/formsapi/observe"
)

// ListForms implements formsapi.Store. It returns an error if q.Limit is
// below 1, and one wrapping formsapi.ErrInvalidCursor for a cursor this
// package did not make.
func (s *Store) ListForms(ctx context.Context, accountID string, q formsapi.Query) (formsapi.Page[formsapi.Form], error) {
	p, err := s.listForms(ctx, accountID, q)
	if err != nil {
		return formsapi.Page[formsapi.Form]{}, fmt.Errorf("sqlitestore: list forms: %w", err)
	}
	return p, nil
}

func (s *Store) listForms(ctx context.Context, accountID string, q formsapi.Query) (formsapi.Page[formsapi.Form], error) {
	var p formsapi.Page[formsapi.Form]
	if err := ctx.Err(); err != nil {
		return p, err
	}
	args, err := listArgs(accountID, q)
	if err != nil {
		return p, err
	}
	st := s.formsDesc
	if q.Order == formsapi.Oldest {
		st = s.formsAsc
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return p, err
	}
	defer rows.Close()
	p, err = stored.Forms(rows, q)
	if err != nil {
		return formsapi.Page[formsapi.Form]{}, err
	}
	if err := rows.Err(); err != nil {
		return formsapi.Page[formsapi.Form]{}, err
	}
	return p, nil
}

// ListSubmissions implements formsapi.Store. It returns an error wrapping
// formsapi.ErrFormNotFound when formID is not a form of accountID, an error
// if q.Limit is below 1, and one wrapping formsapi.ErrInvalidCursor for a
// cursor this package did not make. Metadata is never read.
func (s *Store) ListSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	p, err := s.listSubmissions(ctx, accountID, formID, q)
	if err != nil {
		return formsapi.Page[formsapi.Submission]{}, fmt.Errorf("sqlitestore: list submissions: %w", err)
	}
	return p, nil
}

// formVersion returns the seq, version and incarnation of formID if it
// is a form of accountID: the ownership check before any submission is
// read, what the read cache checks its pages against, and what the
// handler seals into cursors and sync tokens.
func (s *Store) formVersion(ctx context.Context, accountID, formID string) (wire.Form, error) {
	if err := ctx.Err(); err != nil {
		return wire.Form{}, err
	}
	f := wire.Form{Found: true}
	var inc int64
	err := s.formOf.QueryRowContext(ctx, formID, accountID).Scan(&f.Seq, &f.Version, &inc)
	if errors.Is(err, sql.ErrNoRows) {
		return wire.Form{}, formsapi.ErrFormNotFound
	}
	f.Incarnation = uint64(inc)
	return f, err
}

// knownForm is formVersion, answered by the handler's combined lookup
// (see AuthorizeForm) when it made one: read before the page as well.
func (s *Store) knownForm(ctx context.Context, accountID, formID string, known *wire.Form) (wire.Form, error) {
	switch {
	case known == nil:
		return s.formVersion(ctx, accountID, formID)
	case !known.Found:
		return wire.Form{}, formsapi.ErrFormNotFound
	}
	return *known, ctx.Err()
}

// FormVersion is for the handler's summary of a form: knownForm, the
// version its read cache keys pages by (migration 0003's triggers change
// it in every writer's transaction).
func (s *Store) FormVersion(ctx context.Context, accountID, formID string, known *wire.Form) (wire.Form, error) {
	f, err := s.knownForm(ctx, accountID, formID, known)
	if err != nil {
		return wire.Form{}, fmt.Errorf("sqlitestore: form version: %w", err)
	}
	return f, nil
}

func (s *Store) listSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	var p formsapi.Page[formsapi.Submission]
	form, err := s.formVersion(ctx, accountID, formID)
	if err != nil {
		return p, err
	}
	if q.Sort != "" {
		if err := s.sortIndexed(ctx, q.Sort); err != nil {
			return p, err
		}
		return stored.SortedSubmissions(ctx, formID, q, sortSource[int](ctx, s, form.Seq, q, 0))
	}
	args, err := listArgs(form.Seq, q)
	if err != nil {
		return p, err
	}
	if stored.Filtered(q) {
		return s.listFiltered(ctx, formID, args, q)
	}
	st := s.subsDesc
	if q.Order == formsapi.Oldest {
		st = s.subsAsc
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return p, err
	}
	defer rows.Close()
	p, err = stored.Submissions(rows, formID, q)
	if err != nil {
		return formsapi.Page[formsapi.Submission]{}, err
	}
	if err := rows.Err(); err != nil {
		return formsapi.Page[formsapi.Submission]{}, err
	}
	return p, nil
}

// The parts of the module-private store contract (internal/storecontract)
// and of the optional public interfaces the store implements. The
// private contract's methods (FastPath, AppendSubmissions, AppendFeed,
// FeedHead and, where the store has them, AuthorizeForm, AuthorizeForms
// and ListFormsAt) are exported only so that the handler, in another
// package, can call them: their types are internal, so a host cannot, and
// they are not part of the store's API.
var (
	_ storecontract.Store[formsapi.Query]          = (*Store)(nil)
	_ storecontract.FormAuthorizer[formsapi.Grant] = (*Store)(nil)
	_ formsapi.Counter                             = (*Store)(nil)
)

// FastPath is for this module's handler, which reads pages straight from
// the store's encoded JSON when it is given the store itself. A host's
// type that embeds the store has this method too, but it returns the
// embedded store, so the handler sees the host's type and calls its
// methods (its overrides), never the embedded store's behind its back.
//
// It also hands the handler the cursor secret kept in the database (table
// formsapi_secrets, made at the first Open or New): cursors, sync tokens,
// feed refs and page ETags then outlive a restart and hold in every
// process over the file, with no formsapi.WithCursorSecret to set.
func (s *Store) FastPath() storecontract.Self { return storecontract.Self{Store: s, Secret: s.secret} }

// AppendSubmissions is ListSubmissions for the handler's fast path: it
// appends the stored JSON of each submission to p.Body, one column per
// row, with nothing decoded.
func (s *Store) AppendSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, p *wire.Page) error {
	if err := s.appendSubmissions(ctx, accountID, formID, q, p); err != nil {
		return fmt.Errorf("sqlitestore: list submissions: %w", err)
	}
	return nil
}

func (s *Store) appendSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, p *wire.Page) error {
	form, err := s.knownForm(ctx, accountID, formID, p.Form)
	if err != nil {
		return err
	}
	formSeq, version := form.Seq, form.Version
	p.Incarnation = form.Incarnation
	if q.Sort != "" {
		// Around the read cache, which holds unsorted pages only.
		p.Cache = observe.CacheNone
		if err := s.sortIndexed(ctx, q.Sort); err != nil {
			return err
		}
		return stored.AppendSorted(ctx, q, sortSource[[]byte](ctx, s, formSeq, q, 1), p)
	}
	if stored.Filtered(q) {
		return s.appendFiltered(ctx, formSeq, q, p)
	}
	// Where the page stood before the cache put anything in it: a Mixed
	// page is read again from here, without the items the cache began it
	// with (rewound to after them, it kept them and counted them, and the
	// page read again whole followed them: items twice, and a cached
	// entry that began with a comma).
	mark := p.Mark()
	r, err := s.cache.Begin(version, formSeq, q, p)
	if err != nil || r.Served() {
		return err
	}
	if since, ok := r.Since(); ok {
		spliced, err := s.splice(ctx, formSeq, since, &r)
		if err != nil || spliced {
			return err
		}
	}
	if s.afterBegin != nil {
		s.afterBegin()
	}
	for whole := false; ; whole = true {
		v, head, err := s.readPage(ctx, formSeq, q.Order, &r)
		if err != nil {
			return err
		}
		// The page began with items the cache held at the version read
		// first, and the rest was read at another (a commit came
		// between): read it all again, so that every page is one
		// version's. The second time nothing held is used, so it ends
		// there.
		if !whole && r.Mixed(v) {
			p.Rewind(mark)
			if r, err = s.cache.BeginWhole(v, formSeq, q, p); err != nil || r.Served() {
				return err
			}
			continue
		}
		r.DoneAt(v, head)
		return nil
	}
}

// readPage reads the rows r asks for of the form formSeq, in order, in
// one statement that also returns the form's version and head
// (pagecache.Head) in the same snapshot, and returns them. A form that
// is no longer there (deleted since its version was read) is
// ErrFormNotFound.
func (s *Store) readPage(ctx context.Context, formSeq int64, order formsapi.Order, r *pagecache.Read) (version int64, head pagecache.Head, err error) {
	st := s.encodedDesc
	if order == formsapi.Oldest {
		st = s.encodedAsc
	}
	lo, hi, _ := r.Range() // the statement has no LIMIT: Row says when to stop
	rows, err := st.QueryContext(ctx, formSeq, lo.At, lo.Seq, hi.At, hi.Seq)
	if err != nil {
		return 0, head, err
	}
	defer rows.Close()
	found := false
	// One allocation for the scan targets (each escapes through Scan's
	// ...any): the row's position and JSON (valid until the next Next:
	// Row copies it).
	var c struct {
		pos     keyset.Pos
		encoded sql.RawBytes
	}
	for rows.Next() {
		if err := rows.Scan(&c.pos.Seq, &c.pos.At, &c.encoded); err != nil {
			return 0, head, err
		}
		if !found {
			var ok bool
			if version, head, ok = headOf(c.encoded); !ok {
				// No form row, whose position the bounds exclude.
				return 0, head, formsapi.ErrFormNotFound
			}
			found = true
			continue
		}
		if !r.Row(c.pos, c.encoded) {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return 0, head, err
	}
	if !found {
		return 0, head, formsapi.ErrFormNotFound
	}
	return version, head, nil
}

// headOf parses the first row of a page read (sqlAppendSubmissions): the
// form's version and its head, five decimal integers separated by
// spaces, the anchor's position 0 0 when no submission is at feed_last.
// It reports false for anything else (a submission's JSON).
func headOf(b []byte) (version int64, h pagecache.Head, ok bool) {
	var v [5]int64
	for i := range v {
		if i > 0 {
			if len(b) == 0 || b[0] != ' ' {
				return 0, h, false
			}
			b = b[1:]
		}
		neg := len(b) > 0 && b[0] == '-'
		if neg {
			b = b[1:]
		}
		n := 0
		var u uint64
		for n < len(b) && b[n] >= '0' && b[n] <= '9' && n < 19 {
			u = u*10 + uint64(b[n]-'0')
			n++
		}
		if n == 0 || n < len(b) && b[n] >= '0' && b[n] <= '9' || !neg && u > math.MaxInt64 || neg && u > 1<<63 {
			return 0, h, false
		}
		b = b[n:]
		v[i] = int64(u)
		if neg {
			v[i] = -v[i] // also for 1<<63: -MinInt64 wraps to MinInt64
		}
	}
	if len(b) != 0 {
		return 0, h, false
	}
	h = pagecache.Head{Base: v[1], Last: v[2]}
	if v[4] != 0 {
		h.Anchor = keyset.Pos{At: v[3], Seq: v[4]}
	}
	return v[0], h, true
}

// splice serves r's page from the page the cache holds at an older
// version of the form and what its feed gained since that page's head
// (see pagecache.Splice), read in one statement, and reports whether it
// did; if it did not (anything but additions and deletions came between,
// too many of them, a tombstone without the deleted submission's
// position), nothing was appended and the caller reads the page in full.
func (s *Store) splice(ctx context.Context, formSeq int64, since pagecache.Head, r *pagecache.Read) (bool, error) {
	rows, err := s.spliceRows.QueryContext(ctx, formSeq, since.Last)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	// One allocation for the scan targets (see readPage): see sqlSplice.
	var t struct {
		feed        int64
		a, b, c, of sql.NullInt64
		encoded     sql.RawBytes // valid until the next Next: copied into arena
	}
	var (
		version, base, last int64
		found               bool
		above               int // rows above since.Last
		added               []pagecache.Added
		ends                []int // where each addition's JSON ends in arena
		arena               []byte
	)
	for rows.Next() {
		if err := rows.Scan(&t.feed, &t.a, &t.b, &t.c, &t.encoded, &t.of); err != nil {
			return false, err
		}
		if !found {
			if t.feed != 0 {
				return false, nil // the form is not there
			}
			found, version, base, last = true, t.a.Int64, t.b.Int64, t.c.Int64
			continue
		}
		if t.feed > last {
			break // no feed position of the form: base changed too
		}
		if t.feed > since.Last {
			if above++; above > pagecache.MaxSplice {
				return false, nil // too many: the page is read in full
			}
		}
		if !t.a.Valid || !t.b.Valid {
			return false, nil // a tombstone made before migration 0029
		}
		arena = append(arena, t.encoded...)
		ends = append(ends, len(arena))
		added = append(added, pagecache.Added{Feed: t.feed, Pos: keyset.Pos{At: t.b.Int64, Seq: t.a.Int64}, Deleted: t.of.Valid, Of: t.of.Int64})
	}
	if err := rows.Err(); err != nil {
		return false, err
	}
	if !found {
		return false, nil
	}
	start := 0
	for i := range added {
		if !added[i].Deleted {
			added[i].Encoded = arena[start:ends[i]]
		}
		start = ends[i]
	}
	return r.Splice(version, base, last, added), nil
}

// listArgs returns the arguments of a list statement for the list owner
// (the account ID or the form's seq) and q: the page's keyset bounds. The
// caller reads at most keyset.Fetch(q) rows: one more than the limit, to
// learn whether a next page exists. It returns an error for a limit below
// 1.
func listArgs(owner any, q formsapi.Query) ([]any, error) {
	if _, err := keyset.Fetch(q); err != nil {
		return nil, err
	}
	lo, hi, err := keyset.Bounds(q)
	if err != nil {
		return nil, err
	}
	return []any{owner, lo.At, lo.Seq, hi.At, hi.Seq}, nil
}

// walkKey returns the index key a filtered page of q on the form formSeq
// walks: its only candidate (stored.Candidates), or the one with the
// fewest entries, counted up to stored.Probed each (see stored.Rarest for
// ties). It reports false when
// a filter's key has no entries: nothing matches (a trigram's entries
// leave out the form's unfolded tail, which its walk reads). scan says the page walks
// the form's submissions instead (a search without filters while the
// search index is off); the setting is read for searches only.
func (s *Store) walkKey(ctx context.Context, formSeq any, q formsapi.Query) (key int64, found, scan bool, err error) {
	indexed := false
	if q.Search != "" {
		if err := s.searchIndexed.QueryRowContext(ctx).Scan(&indexed); err != nil {
			return 0, false, false, fmt.Errorf("read the search index setting: %w", err)
		}
	}
	keys := stored.Candidates(q, indexed)
	switch len(keys) {
	case 0:
		return 0, true, true, nil
	case 1:
		return keys[0], true, false, nil
	}
	probes := make([]stored.Probe, len(keys))
	for i, k := range keys {
		if k < 0 {
			probes[i], err = s.probeBlocks(ctx, formSeq.(int64), k)
		} else {
			probes[i], err = s.probeRuns(ctx, formSeq.(int64), k)
		}
		if err != nil {
			return 0, false, false, err
		}
	}
	key, found = stored.Rarest(keys, probes)
	// A trigram without entries in its blocks may still be in the form's
	// unfolded tail, which its walk reads too (migration 0017); a filter
	// key's probe counts the tail's rows that hold it (migration 0031).
	return key, found || key < 0, false, nil
}

// listFiltered is listSubmissions for a query with filters: it walks the
// index of submitted values (see stored.FilteredSubmissions).
func (s *Store) listFiltered(ctx context.Context, formID string, args []any, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	rows, found, err := s.filteredRows(ctx, args, q, false)
	if err != nil || !found {
		return formsapi.Page[formsapi.Submission]{Items: []formsapi.Submission{}}, err
	}
	if err != nil {
		return formsapi.Page[formsapi.Submission]{}, err
	}
	defer rows.Close()
	p, err := stored.FilteredSubmissions(ctx, rows, formID, q)
	if err != nil {
		return formsapi.Page[formsapi.Submission]{}, err
	}
	if err := rows.Err(); err != nil {
		return formsapi.Page[formsapi.Submission]{}, err
	}
	return p, nil
}

// appendFiltered is appendSubmissions for a query with filters: it walks
// the index of submitted values (see stored.AppendFiltered), around the
// read cache, which holds unfiltered pages only.
func (s *Store) appendFiltered(ctx context.Context, formSeq int64, q formsapi.Query, p *wire.Page) error {
	args, err := listArgs(formSeq, q)
	if err != nil {
		return err
	}
	p.Cache = observe.CacheNone
	rows, found, err := s.filteredRows(ctx, args, q, true)
	if err != nil || !found {
		p.NextCursor = ""
		return err
	}
	defer rows.Close()
	if err := stored.AppendFiltered(ctx, rows, q, p); err != nil {
		return err
	}
	return rows.Err()
}

// filteredRows returns the rows of a filtered page of q (args are
// listArgs', the form's first): the entries of the key walkKey picks
// with the form's unfolded tail (searchRows) or, for a search without
// its index, the form's submissions, with the handler's encoded JSON
// when encoded, in q's order. found is false when nothing can match.
func (s *Store) filteredRows(ctx context.Context, args []any, q formsapi.Query, encoded bool) (rows filteredRows, found bool, err error) {
	key, found, scan, err := s.walkKey(ctx, args[0], q)
	if err != nil || !found {
		return nil, false, err
	}
	if !scan {
		mode := searchLength
		if encoded {
			mode = searchEncoded
		}
		lo, hi := rangeOf(args)
		r, err := s.searchWalk(ctx, args[0].(int64), key, lo, hi, stored.ByOrder(q.Order, false, true), mode)
		return r, err == nil, err
	}
	o := q.Order
	// The plain list's columns are those of a filtered page's.
	st := stored.ByOrder(o, s.subsAsc, s.subsDesc)
	if encoded {
		st = stored.ByOrder(o, s.scanEncodedAsc, s.scanEncodedDesc)
	}
	r, err := st.QueryContext(ctx, args...)
	return r, err == nil, err
}

// filteredRows is what a filtered page reads: a statement's rows, or a
// searched walk's (searchRows).
type filteredRows interface {
	stored.Rows
	Err() error
	Close() error
}

// rangeOf returns the bounds of listArgs' args.
func rangeOf(args []any) (lo, hi entry) {
	return entry{args[1].(int64), args[2].(int64)}, entry{args[3].(int64), args[4].(int64)}
}

// CountSubmissions is the count the handler asks for total= (see formsapi.Counter): it counts the rows of
// q's range, or for a filtered list the entries of the index of
// submitted values it walks, checked against the filters when exact, all
// within the bounds formsapi.Total documents.
func (s *Store) CountSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, exact bool) (formsapi.Total, error) {
	t, err := s.countSubmissions(ctx, accountID, formID, q, exact)
	if err != nil {
		return formsapi.Total{}, fmt.Errorf("sqlitestore: count submissions: %w", err)
	}
	return t, nil
}

func (s *Store) countSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, exact bool) (formsapi.Total, error) {
	form, err := s.formVersion(ctx, accountID, formID)
	if err != nil {
		return formsapi.Total{}, err
	}
	q = stored.CountQuery(q)
	args, err := listArgs(form.Seq, q)
	if err != nil {
		return formsapi.Total{}, err
	}
	var n int64
	if !stored.Filtered(q) {
		err = s.read.QueryRowContext(ctx, sqlCountRows, args...).Scan(&n)
		return stored.Counted(n, find.MaxCount, false), err
	}
	key, found, scan, err := s.walkKey(ctx, form.Seq, q)
	if err != nil || !found {
		return formsapi.Total{Kind: find.Exact}, err
	}
	if !scan {
		// A key's entries and the form's unfolded tail.
		lo, hi := rangeOf(args)
		if !exact {
			n, err := s.countSearch(ctx, form.Seq, key, lo, hi)
			return stored.Counted(n, find.MaxCount, true), err
		}
		rows, err := s.searchWalk(ctx, form.Seq, key, lo, hi, false, searchData)
		if err != nil {
			return formsapi.Total{}, err
		}
		defer rows.Close()
		t, err := stored.CountMatches(ctx, rows, q)
		if err != nil {
			return formsapi.Total{}, err
		}
		return t, rows.Err()
	}
	// Without the search index: the range's rows, an upper bound as a
	// walked key's entries are.
	if !exact {
		err = s.read.QueryRowContext(ctx, sqlCountRows, args...).Scan(&n)
		return stored.Counted(n, find.MaxCount, true), err
	}
	rows, err := s.read.QueryContext(ctx, sqlCountScan, args...)
	if err != nil {
		return formsapi.Total{}, err
	}
	defer rows.Close()
	t, err := stored.CountMatches(ctx, rows, q)
	if err != nil {
		return formsapi.Total{}, err
	}
	return t, rows.Err()
}

// sortSource reads a sorted page of q on the form formSeq from the
// ordered index (migration 0019) and the form's submissions, with the
// JSON as sent (encoded 1) or its size (0).
func sortSource[X any](ctx context.Context, s *Store, formSeq int64, q formsapi.Query, encoded int) stored.SortSource[X] {
	field, desc, _ := find.ParseSort(q.Sort)
	d := 0
	if desc {
		d = 1
	}
	return stored.SortSource[X]{
		// No LIMIT (see the note on the list statements): the walk stops
		// stepping.
		Keyed: func(key []byte, at, seq int64, _ int) (stored.Rows, error) {
			return s.sorted[encoded][d].QueryContext(ctx, formSeq, find.SortField(field), key, at, seq)
		},
		Plain: func(lo, hi keyset.Pos, _ int) (stored.Rows, error) {
			return s.unsorted[encoded][d].QueryContext(ctx, formSeq, lo.At, lo.Seq, hi.At, hi.Seq)
		},
	}
}

// sortIndexed returns nil when the file's sort index keeps the entries
// of field, an error wrapping find.ErrNoSortIndex when it is off, and a
// *find.NotSortedError when it keeps other fields only: as the file says
// now, for another process may have changed them (a sorted page reads
// it each time, one row).
func (s *Store) sortIndexed(ctx context.Context, sort string) error {
	field, _, _ := find.ParseSort(sort)
	var mode int
	var listed bool
	if err := s.read.QueryRowContext(ctx, sqlSortServed, field).Scan(&mode, &listed); err != nil {
		return fmt.Errorf("read the sort index setting: %w", err)
	}
	switch {
	case mode == stored.SortOff:
		return find.ErrNoSortIndex
	case mode == stored.SortListed && !listed:
		return &find.NotSortedError{Field: field}
	}
	s.sortOn.Store(true)
	return nil
}
