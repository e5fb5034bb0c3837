package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

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
// package did not make. With the read cache on, it reads the version of
// the account's forms list first, and serves a page the cache holds at
// that version (see the package documentation).
func (s *Store) ListForms(ctx context.Context, accountID string, q formsapi.Query) (formsapi.Page[formsapi.Form], error) {
	return s.ListFormsAt(ctx, accountID, q, nil)
}

// ListFormsAt is ListForms for the handler's forms list over a store that
// is its own key resolver: at is the version of the account's forms list
// that AuthorizeForms read with the request's key, and a page the read
// cache holds at that version is served without a statement. A page read
// from the database is read with the list's version in the same
// statement, kept in the cache under that version, and at moves to it
// (see wire.Forms), so that the later pages of the request are not read
// at an earlier one. An at that is not Known reads every page from the
// database; a nil at is ListForms, which reads the version itself.
func (s *Store) ListFormsAt(ctx context.Context, accountID string, q formsapi.Query, at *wire.Forms) (formsapi.Page[formsapi.Form], error) {
	var p formsapi.Page[formsapi.Form]
	err := retry(ctx, func() (err error) {
		p, err = s.listForms(ctx, accountID, q, at)
		return err
	})
	if err != nil {
		return formsapi.Page[formsapi.Form]{}, fmt.Errorf("pgstore: list forms: %w", withCtx(ctx, err))
	}
	return p, nil
}

func (s *Store) listForms(ctx context.Context, accountID string, q formsapi.Query, at *wire.Forms) (formsapi.Page[formsapi.Form], error) {
	var p formsapi.Page[formsapi.Form]
	if err := ctx.Err(); err != nil {
		return p, err
	}
	b, err := bounds(q)
	if err != nil {
		return p, err
	}
	if !storableText(accountID) {
		return p, nil // no form of such an account can be stored
	}
	if s.cache == nil {
		known, want := false, int64(0)
		if at != nil {
			at.Cache = observe.CacheNone
			known, want = at.Known, at.Version
		}
		err := s.fromReplica(ctx, known, want, func(src source) (err error) {
			p, _, _, err = s.readForms(ctx, src, accountID, q, b)
			return err
		})
		return p, err
	}
	if at == nil {
		at = &wire.Forms{}
		err := s.pool.QueryRow(ctx, s.sql.formListVersion, accountID).Scan(&at.Version)
		switch {
		case err == nil:
			at.Known = true
		case !errors.Is(err, pgx.ErrNoRows): // no row: the version cannot be told
			return p, err
		}
	}
	if at.Known {
		if p, ok := s.cache.Forms(at.Version, accountID, q); ok {
			at.Cache = observe.CacheHit
			return p, nil
		}
	}
	at.Cache = observe.CacheMiss
	var (
		pos     []keyset.Pos
		version pgtype.Int8
	)
	err = s.fromReplica(ctx, at.Known, at.Version, func(src source) (err error) {
		p, pos, version, err = s.readForms(ctx, src, accountID, q, b)
		return err
	})
	if err != nil {
		return formsapi.Page[formsapi.Form]{}, err
	}
	// The page is of the version read with it, which is at's or a later
	// one (its statement began after at was read); no version: none is
	// cached, and the request's later pages are read from the database.
	at.Known, at.Version = version.Valid, version.Int64
	if version.Valid {
		s.cache.KeepForms(version.Int64, accountID, q, p.Items, pos, p.NextCursor != "")
	}
	return p, nil
}

// readForms reads q's page of the forms of accountID, and the version of
// the account's forms list in the same statement, so in the same
// snapshot: the version that tags the page exactly (NULL when the account
// has no version). It returns the keyset position of each form too, for
// the cache. On the replica it returns errStale, having read no form,
// when the version is not src.want.
func (s *Store) readForms(ctx context.Context, src source, accountID string, q formsapi.Query, b pageBounds) (p formsapi.Page[formsapi.Form], pos []keyset.Pos, version pgtype.Int8, err error) {
	st := s.sql.formsDesc
	if q.Order == formsapi.Oldest {
		st = s.sql.formsAsc
	}
	rows, err := src.db.Query(ctx, st, accountID, b.lo.At, b.lo.Seq, b.hi.At, b.hi.Seq, b.fetch)
	if err != nil {
		return p, nil, version, src.failed(err, true)
	}
	defer rows.Close()
	n := min(q.Limit, 16)
	p.Items, pos = make([]formsapi.Form, 0, n), make([]keyset.Pos, 0, n)
	var (
		seq, at                 pgtype.Int8 // NULL in the one row of an empty page
		id, title, icon, notify pgtype.Text
		found                   bool
	)
	for rows.Next() {
		if err := rows.Scan(&version, &seq, &at, &id, &title, &icon, &notify); err != nil {
			return formsapi.Page[formsapi.Form]{}, nil, version, err
		}
		if src.replica && !found && (!version.Valid || version.Int64 != src.want) {
			return formsapi.Page[formsapi.Form]{}, nil, version, errStale
		}
		found = true
		if !seq.Valid {
			break
		}
		if len(p.Items) == q.Limit {
			p.NextCursor = pos[len(pos)-1].String()
			break
		}
		p.Items = append(p.Items, formsapi.Form{ID: id.String, Title: title.String, Icon: icon.String, NotificationEmail: notify.String, CreatedAt: stored.Time(at.Int64)})
		pos = append(pos, keyset.Pos{At: at.Int64, Seq: seq.Int64})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return formsapi.Page[formsapi.Form]{}, nil, version, src.failed(err, true) // the page is the caller's only on success
	}
	if !found {
		return formsapi.Page[formsapi.Form]{}, nil, version, errors.New("the forms statement returned no row")
	}
	return p, pos, version, nil
}

// ListSubmissions implements formsapi.Store. It returns an error wrapping
// formsapi.ErrFormNotFound when formID is not a form of accountID, an error
// if q.Limit is below 1, and one wrapping formsapi.ErrInvalidCursor for a
// cursor this package did not make. Metadata is never read.
func (s *Store) ListSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	var p formsapi.Page[formsapi.Submission]
	err := retry(ctx, func() (err error) {
		p, err = s.listSubmissions(ctx, accountID, formID, q)
		return err
	})
	if err != nil {
		return formsapi.Page[formsapi.Submission]{}, fmt.Errorf("pgstore: list submissions: %w", withCtx(ctx, err))
	}
	return p, nil
}

func (s *Store) listSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	var p formsapi.Page[formsapi.Submission]
	if q.Sort != "" {
		if !storableText(accountID) || !storableText(formID) {
			return p, formsapi.ErrFormNotFound // no such form can be stored
		}
		form, err := s.filterForm(ctx, accountID, formID, wire.Form{})
		if err != nil {
			return p, err
		}
		if err := s.sortIndexed(ctx, q.Sort); err != nil {
			return p, err
		}
		return stored.SortedSubmissions(ctx, formID, q, sortSource[int](ctx, s, form.Seq, q, 0))
	}
	b, err := s.submissionBounds(ctx, accountID, formID, q)
	if err != nil {
		return p, err
	}
	if stored.Filtered(q) {
		return s.listFiltered(ctx, accountID, formID, q, b)
	}
	st := s.sql.subsDesc
	if q.Order == formsapi.Oldest {
		st = s.sql.subsAsc
	}
	rows, err := s.pool.Query(ctx, st, formID, accountID, b.lo.At, b.lo.Seq, b.hi.At, b.hi.Seq, b.fetch)
	if err != nil {
		return p, err
	}
	defer rows.Close()
	p, err = stored.Submissions(rows, formID, q)
	if err != nil {
		return formsapi.Page[formsapi.Submission]{}, err
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return formsapi.Page[formsapi.Submission]{}, err
	}
	if len(p.Items) == 0 {
		// The statement returns no row for a form that is not accountID's
		// as for one without submissions in range: tell them apart.
		if err := s.checkForm(ctx, accountID, formID); err != nil {
			return formsapi.Page[formsapi.Submission]{}, err
		}
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
	_ storecontract.Store[formsapi.Query]                                                         = (*Store)(nil)
	_ storecontract.FormAuthorizer[formsapi.Grant]                                                = (*Store)(nil)
	_ storecontract.FormsAuthorizer[formsapi.Grant, formsapi.Query, formsapi.Page[formsapi.Form]] = (*Store)(nil)
	_ formsapi.Counter                                                                            = (*Store)(nil)
)

// FastPath is for this module's handler, which reads pages straight from
// the store's encoded JSON when it is given the store itself. A host's
// type that embeds the store has this method too, but it returns the
// embedded store, so the handler sees the host's type and calls its
// methods (its overrides), never the embedded store's behind its back.
//
// It also hands the handler the cursor secret kept in the schema (table
// formsapi_secrets, made at the first Open or New): cursors, sync tokens,
// feed refs and page ETags then outlive a restart and hold on every node
// over the schema, with no formsapi.WithCursorSecret to set.
func (s *Store) FastPath() storecontract.Self { return storecontract.Self{Store: s, Secret: s.secret} }

// AppendSubmissions is ListSubmissions for the handler's fast path: it
// appends the stored JSON of each submission to p.Body, one column per
// row, with nothing decoded.
func (s *Store) AppendSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, p *wire.Page) error {
	// appendSubmissions leaves p as it was when it fails.
	if err := retry(ctx, func() error { return s.appendSubmissions(ctx, accountID, formID, q, p) }); err != nil {
		return fmt.Errorf("pgstore: list submissions: %w", withCtx(ctx, err))
	}
	return nil
}

func (s *Store) appendSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, p *wire.Page) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !storableText(accountID) || !storableText(formID) {
		return formsapi.ErrFormNotFound // no such form can be stored
	}
	form, err := s.knownForm(ctx, accountID, formID, p.Form)
	if err != nil {
		return err
	}
	mark := p.Mark()
	p.Incarnation = form.Incarnation
	if q.Sort != "" {
		// Around the read cache, which holds unsorted pages only.
		if form, err = s.filterForm(ctx, accountID, formID, form); err != nil {
			return err
		}
		p.Incarnation = form.Incarnation
		p.Cache = observe.CacheNone
		if err := s.sortIndexed(ctx, q.Sort); err != nil {
			return err
		}
		if err := stored.AppendSorted(ctx, q, sortSource[[]byte](ctx, s, form.Seq, q, 1), p); err != nil {
			p.Rewind(mark) // retry reads the page again from here
			return err
		}
		return nil
	}
	if stored.Filtered(q) {
		if err := s.appendFiltered(ctx, accountID, formID, form, q, p); err != nil {
			p.Rewind(mark) // retry reads the page again from here
			return err
		}
		return nil
	}
	r, err := s.cache.Begin(form.Version, form.Seq, q, p)
	if err != nil {
		if !form.Found { // the form is not known yet: answer ErrFormNotFound first
			if ferr := s.checkForm(ctx, accountID, formID); ferr != nil {
				return ferr
			}
		}
		return err
	}
	if since, ok := r.Since(); ok {
		// A following node splices from the rows its rounds read
		// (follow.go, Feeds), with no statement; if its feed holds them
		// and the splice still fails, the splice statement would read
		// the same rows: the page is read in full.
		rows, base, last, fed := s.follow.window(formID, form.Seq, form.Version, since)
		if fed && r.Splice(form.Version, base, last, rows) {
			s.follow.spliced.Add(1)
			return nil
		}
		var (
			inc     uint64
			spliced bool
			version int64
			head    pagecache.Head
		)
		err := error(nil)
		if !fed {
			err = s.fromReplica(ctx, form.Found, form.Version, func(src source) (err error) {
				inc, spliced, version, head, err = s.splice(ctx, src, accountID, formID, form.Seq, since, &r)
				return err
			})
		}
		if err != nil {
			p.Rewind(mark)
			return err
		}
		if spliced {
			p.Incarnation = inc
			s.follow.want(formID, form.Seq, version, head)
			return nil
		}
	}
	for whole := false; !r.Served(); whole = true {
		var (
			version int64
			inc     uint64
			same    bool
			head    pagecache.Head
		)
		err := s.fromReplica(ctx, form.Found, form.Version, func(src source) (err error) {
			version, inc, same, head, err = s.readPage(ctx, src, accountID, formID, q.Order, form.Seq, &r, p)
			return err
		})
		if err != nil {
			p.Rewind(mark) // retry reads the page again from here
			return err
		}
		// The page began with items the cache held at the version read
		// first, and the rest was read at another (a commit came between):
		// read it all again, so that every page is one version's. The
		// second time nothing held is used, so it ends there.
		if !whole && r.Mixed(version) {
			p.Rewind(mark)
			if r, err = s.cache.BeginWhole(version, form.Seq, q, p); err != nil {
				return err
			}
			continue
		}
		p.Incarnation = inc // of the form the rows are of, read with them
		if same {
			r.DoneAt(version, head)
			s.follow.want(formID, form.Seq, version, head)
		}
		return nil
	}
	return nil
}

// knownForm returns what the read cache needs of formID, a form of
// accountID: from the handler's combined lookup (see AuthorizeForm) if it
// made one, else from the database when the cache is on or the store
// reads a replica (whose pages must be of that version). Without either and the lookup it returns a zero Form, Found false: the page
// statement checks ownership itself. It returns ErrFormNotFound for a
// form that is not accountID's.
func (s *Store) knownForm(ctx context.Context, accountID, formID string, known *wire.Form) (wire.Form, error) {
	switch {
	case known != nil && !known.Found:
		return wire.Form{}, formsapi.ErrFormNotFound
	case known != nil:
		return *known, nil
	case s.cache == nil && s.replica == nil:
		return wire.Form{}, nil
	}
	f := wire.Form{Found: true}
	var inc int64
	err := s.pool.QueryRow(ctx, s.sql.formOf, formID, accountID).Scan(&f.Seq, &f.Version, &inc)
	if errors.Is(err, pgx.ErrNoRows) {
		return wire.Form{}, formsapi.ErrFormNotFound
	}
	f.Incarnation = uint64(inc)
	return f, err
}

// FormVersion is for the handler's summary of a form: the form's
// version (migration 0006's triggers change it in every writer's
// transaction) read now, as knownForm reads it, but also without a read
// cache.
func (s *Store) FormVersion(ctx context.Context, accountID, formID string, known *wire.Form) (wire.Form, error) {
	f := wire.Form{Found: true}
	var err error
	if known != nil {
		f, err = s.knownForm(ctx, accountID, formID, known)
	} else {
		var inc int64
		err = s.pool.QueryRow(ctx, s.sql.formOf, formID, accountID).Scan(&f.Seq, &f.Version, &inc)
		if errors.Is(err, pgx.ErrNoRows) {
			err = formsapi.ErrFormNotFound
		}
		f.Incarnation = uint64(inc)
	}
	if err != nil {
		return wire.Form{}, fmt.Errorf("pgstore: form version: %w", err)
	}
	return f, nil
}

// splice serves r's page from the page the cache holds at an older
// version of the form and what was added to the form since that page's
// head (see pagecache.Splice), in one statement, and reports whether it
// did, with the form's incarnation; if it did not (anything but additions
// came between, too many of them, the form was made again), nothing was
// appended and the caller reads the page in full. On the replica (src) it
// returns errStale, having changed nothing, when the form's version there
// is not src.want or the form is not there. When it spliced, it returns
// the form's version and head too, read with the rows.
func (s *Store) splice(ctx context.Context, src source, accountID, formID string, seq int64, since pagecache.Head, r *pagecache.Read) (inc uint64, spliced bool, version int64, head pagecache.Head, err error) {
	rows, err := src.db.Query(ctx, s.sql.splice, formID, accountID, since.Last, pagecache.MaxSplice+1)
	if err != nil {
		return 0, false, 0, head, src.failed(err, true)
	}
	defer rows.Close()
	var (
		formSeq, formInc, base, last int64
		feed, itemSeq, at            pgtype.Int8 // NULL when nothing was added
		encoded                      []byte
		added                        []pagecache.Added
		found                        bool
	)
	for rows.Next() {
		if err := rows.Scan(&formSeq, &version, &formInc, &base, &last, &feed, &itemSeq, &at, &encoded); err != nil {
			return 0, false, 0, head, err
		}
		found = true
		if !feed.Valid {
			break
		}
		added = append(added, pagecache.Added{Feed: feed.Int64, Pos: keyset.Pos{At: at.Int64, Seq: itemSeq.Int64}, Encoded: encoded})
		encoded = nil // a new slice for the next row: Splice reads them all at the end
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, false, 0, head, src.failed(err, true) // nothing is handed on before the end
	}
	switch {
	case src.replica && (!found || version != src.want):
		return 0, false, 0, head, errStale // the primary tells
	case !found:
		return 0, false, 0, head, formsapi.ErrFormNotFound
	}
	if formSeq != seq { // made again: another form, whose pages are not under seq
		return 0, false, 0, head, nil
	}
	head = pagecache.Head{Base: base, Last: last, Anchor: since.Anchor}
	if n := len(added); n > 0 {
		head.Anchor = added[n-1].Pos // a splice takes every position up to last
	}
	return uint64(formInc), r.Splice(version, base, last, added), version, head, nil
}

// readPage reads the rows r asks for, in one statement that also returns
// the form's seq, version, incarnation and head (pagecache.Head) in the
// same snapshot, and returns that version, incarnation and head, and
// whether the form's seq is seq (a form deleted and made again since seq
// was read has another: its page is not to be kept under seq). A form
// that is no longer formID of accountID is ErrFormNotFound. On failure p
// may hold part of the page. On the replica (src) it returns errStale,
// having handed r no row, when the form's version there is not src.want
// or the form is not there.
func (s *Store) readPage(ctx context.Context, src source, accountID, formID string, order formsapi.Order, seq int64, r *pagecache.Read, p *wire.Page) (version int64, inc uint64, same bool, head pagecache.Head, err error) {
	st := s.sql.encodedDesc
	if order == formsapi.Oldest {
		st = s.sql.encodedAsc
	}
	lo, hi, fetch := r.Range()
	rows, err := src.db.Query(ctx, st, formID, accountID, lo.At, lo.Seq, hi.At, hi.Seq, fetch, r.Room())
	if err != nil {
		return 0, 0, false, head, src.failed(err, true)
	}
	defer rows.Close()
	var (
		formSeq, formInc   int64
		anchorAt, anchor   pgtype.Int8 // NULL when no submission is at feed_last
		found, full        bool
		itemSeq, at, total pgtype.Int8        // NULL for a form without submissions in range
		encoded            pgtype.DriverBytes // valid until the next Next: Row copies it
		read               int64
	)
	for rows.Next() {
		if err := rows.Scan(&formSeq, &version, &formInc, &itemSeq, &at, &encoded, &total, &head.Base, &head.Last, &anchorAt, &anchor); err != nil {
			return 0, 0, false, head, err
		}
		if src.replica && !found && version != src.want {
			return 0, 0, false, head, errStale
		}
		found = true
		if !itemSeq.Valid {
			break
		}
		read++
		if !r.Row(keyset.Pos{At: at.Int64, Seq: itemSeq.Int64}, encoded) {
			full = true
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, false, head, src.failed(err, !found)
	}
	if !found {
		if src.replica {
			return 0, 0, false, head, errStale // the primary tells
		}
		return 0, 0, false, head, formsapi.ErrFormNotFound
	}
	if !full && total.Valid && read < total.Int64 {
		r.Cut() // the statement's byte bound ended the rows, not the range
	}
	if anchor.Valid {
		head.Anchor = keyset.Pos{At: anchorAt.Int64, Seq: anchor.Int64}
	}
	return version, uint64(formInc), seq == 0 || formSeq == seq, head, nil
}

// retry runs the read f, and runs it again if it failed because its
// connection broke (once: the database restarted, or an operator or a
// proxy killed the session; the pool replaces a broken connection) or
// because a conflict with concurrent writes aborted it (up to
// conflictAttempts in all, after a backoff: at serializable isolation
// even a read can be aborted; see retry.go). Reads change nothing, so a
// retry answers the client instead of failing it for something that was
// not its request's fault.
func retry(ctx context.Context, f func() error) error {
	err := f()
	for n, reconnected := 1, false; err != nil; {
		switch {
		case !reconnected && brokenConn(ctx, err):
			reconnected = true
		case n < conflictAttempts && conflict(err):
			if backoff(ctx, n) != nil {
				return err
			}
			n++
		default:
			return err
		}
		err = f()
	}
	return err
}

// brokenConn reports whether err means the connection failed, not the
// statement, while ctx is still live.
func brokenConn(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08 is connection exception; 57P01 to 57P03 are the
		// server shutting down or killing the session.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ne net.Error
	return pgconn.SafeToRetry(err) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// pageBounds are the arguments of a list statement: the page's keyset
// bounds and one row more than the limit, to learn whether a next page
// exists.
type pageBounds struct {
	lo, hi keyset.Pos
	fetch  int
}

func bounds(q formsapi.Query) (pageBounds, error) {
	fetch, err := keyset.Fetch(q)
	if err != nil {
		return pageBounds{}, err
	}
	lo, hi, err := keyset.Bounds(q)
	if err != nil {
		return pageBounds{}, err
	}
	return pageBounds{lo: lo, hi: hi, fetch: fetch}, nil
}

// submissionBounds returns q's bounds for a list of formID. Like
// sqlitestore, it answers ErrFormNotFound before looking at the cursor or
// the limit, so a bad query on a form that is not accountID's says
// nothing about the form.
func (s *Store) submissionBounds(ctx context.Context, accountID, formID string, q formsapi.Query) (pageBounds, error) {
	if err := ctx.Err(); err != nil {
		return pageBounds{}, err
	}
	if !storableText(accountID) || !storableText(formID) {
		return pageBounds{}, formsapi.ErrFormNotFound // no such form can be stored
	}
	b, err := bounds(q)
	if err != nil {
		if ferr := s.checkForm(ctx, accountID, formID); ferr != nil {
			return pageBounds{}, ferr
		}
		return pageBounds{}, err
	}
	return b, nil
}

// checkForm returns an error wrapping ErrFormNotFound unless formID is a
// form of accountID: the ownership check.
func (s *Store) checkForm(ctx context.Context, accountID, formID string) error {
	var seq, version, inc int64
	err := s.pool.QueryRow(ctx, s.sql.formOf, formID, accountID).Scan(&seq, &version, &inc)
	if errors.Is(err, pgx.ErrNoRows) {
		return formsapi.ErrFormNotFound
	}
	return err
}

// filterForm returns the seq and incarnation of formID, a form of
// accountID, for a filtered page: form's when the handler's combined
// lookup or the cache read them, else read now. A filtered page's
// statement walks the index by the form's seq, so it needs the form
// first.
func (s *Store) filterForm(ctx context.Context, accountID, formID string, form wire.Form) (wire.Form, error) {
	if form.Found {
		return form, nil
	}
	f := wire.Form{Found: true}
	var inc int64
	err := s.pool.QueryRow(ctx, s.sql.formOf, formID, accountID).Scan(&f.Seq, &f.Version, &inc)
	if errors.Is(err, pgx.ErrNoRows) {
		return wire.Form{}, formsapi.ErrFormNotFound
	}
	f.Incarnation = uint64(inc)
	return f, err
}

// listFiltered is listSubmissions for a query with filters: it walks the
// index of submitted values (see stored.FilteredSubmissions).
func (s *Store) listFiltered(ctx context.Context, accountID, formID string, q formsapi.Query, b pageBounds) (formsapi.Page[formsapi.Submission], error) {
	form, err := s.filterForm(ctx, accountID, formID, wire.Form{})
	if err != nil {
		return formsapi.Page[formsapi.Submission]{}, err
	}
	key, found, scan, err := s.walkKey(ctx, form.Seq, q)
	if err != nil || !found {
		return formsapi.Page[formsapi.Submission]{Items: []formsapi.Submission{}}, err
	}
	rows := s.filteredRows(ctx, form.Seq, key, scan, false, q, b)
	defer rows.Close()
	p, err := stored.FilteredSubmissions(ctx, rows, formID, q)
	if err != nil {
		return formsapi.Page[formsapi.Submission]{}, err
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return formsapi.Page[formsapi.Submission]{}, err
	}
	return p, nil
}

// walkKey returns the index key a filtered page of q on the form formSeq
// walks: its only candidate (stored.Candidates), or the one with the
// fewest entries, counted up to stored.Probed each in one statement (see
// stored.Rarest for ties). It
// reports false when a filter's key has no entries: nothing matches (a
// trigram's entries leave out the form's unfolded tail, which its walk
// reads). scan
// says the page walks the form's submissions instead (a search without
// filters while the search index is off); the setting is read for
// searches only.
func (s *Store) walkKey(ctx context.Context, formSeq int64, q formsapi.Query) (key int64, found, scan bool, err error) {
	indexed := false
	if q.Search != "" {
		if err := s.pool.QueryRow(ctx, s.sql.searchIndexed).Scan(&indexed); err != nil {
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
	rows, err := s.pool.Query(ctx, s.sql.probe, formSeq, keys)
	if err != nil {
		return 0, false, false, err
	}
	defer rows.Close()
	probes := make([]stored.Probe, 0, len(keys))
	for rows.Next() {
		var p stored.Probe
		if err := rows.Scan(&p.Entries, &p.Last); err != nil {
			return 0, false, false, err
		}
		probes = append(probes, p)
	}
	if err := rows.Err(); err != nil {
		return 0, false, false, err
	}
	if len(probes) != len(keys) {
		return 0, false, false, fmt.Errorf("probe: %d counts for %d keys", len(probes), len(keys))
	}
	key, found = stored.Rarest(keys, probes)
	// A trigram without entries may still be in the form's unfolded
	// tail, which its walk reads too (migration 0023).
	return key, found || key < 0, false, nil
}

// appendFiltered is appendSubmissions for a query with filters: it walks
// the index of submitted values (see stored.AppendFiltered), around the
// read cache, which holds unfiltered pages only.
func (s *Store) appendFiltered(ctx context.Context, accountID, formID string, form wire.Form, q formsapi.Query, p *wire.Page) error {
	form, err := s.filterForm(ctx, accountID, formID, form)
	if err != nil {
		return err
	}
	b, err := bounds(q) // after the form: a bad query on another's form is not found
	if err != nil {
		return err
	}
	p.Incarnation = form.Incarnation
	p.Cache = observe.CacheNone
	key, found, scan, err := s.walkKey(ctx, form.Seq, q)
	if err != nil || !found {
		p.NextCursor = ""
		return err
	}
	rows := s.filteredRows(ctx, form.Seq, key, scan, true, q, b)
	defer rows.Close()
	if err := stored.AppendFiltered(ctx, rows, q, p); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// CountSubmissions is the count the handler asks for total= (see formsapi.Counter): it counts the rows of
// q's range, or for a filtered list the entries of the index of
// submitted values it walks, checked against the filters when exact, all
// within the bounds formsapi.Total documents.
func (s *Store) CountSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, exact bool) (formsapi.Total, error) {
	var t formsapi.Total
	err := retry(ctx, func() (err error) {
		t, err = s.countSubmissions(ctx, accountID, formID, q, exact)
		return err
	})
	if err != nil {
		return formsapi.Total{}, fmt.Errorf("pgstore: count submissions: %w", withCtx(ctx, err))
	}
	return t, nil
}

func (s *Store) countSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, exact bool) (formsapi.Total, error) {
	if err := ctx.Err(); err != nil {
		return formsapi.Total{}, err
	}
	if !storableText(accountID) || !storableText(formID) {
		return formsapi.Total{}, formsapi.ErrFormNotFound
	}
	form, err := s.filterForm(ctx, accountID, formID, wire.Form{})
	if err != nil {
		return formsapi.Total{}, err
	}
	q = stored.CountQuery(q)
	b, err := bounds(q)
	if err != nil {
		return formsapi.Total{}, err
	}
	args := []any{form.Seq, b.lo.At, b.lo.Seq, b.hi.At, b.hi.Seq}
	var n int64
	if !stored.Filtered(q) {
		err = s.pool.QueryRow(ctx, s.sql.countRows, args...).Scan(&n)
		return stored.Counted(n, find.MaxCount, false), err
	}
	key, found, scan, err := s.walkKey(ctx, form.Seq, q)
	if err != nil || !found {
		return formsapi.Total{Kind: find.Exact}, err
	}
	if !exact {
		if scan {
			// Without the search index: the range's rows, an upper
			// bound as a walked key's entries are.
			err = s.pool.QueryRow(ctx, s.sql.countRows, args...).Scan(&n)
		} else {
			countEntries := s.sql.countEntries
			if key < 0 {
				countEntries = s.sql.countSearchEntries // with the unfolded tail
			}
			err = s.pool.QueryRow(ctx, countEntries, append(args, key)...).Scan(&n)
		}
		return stored.Counted(n, find.MaxCount, true), err
	}
	walk := s.sql.findAsc
	if key < 0 {
		walk = s.sql.searchAsc // with the unfolded tail
	}
	count := newCountRows(ctx, s.pool, walk, form.Seq, key, b)
	if scan {
		count.sql, count.scan = s.sql.scanAsc, true
	}
	rows := &matchRows{walkRows: count}
	defer rows.Close()
	t, err := stored.CountMatches(ctx, rows, q)
	if err != nil {
		return formsapi.Total{}, err
	}
	rows.Close()
	return t, rows.Err()
}

// filteredRows is the walk of a filtered or searched page: the entries of
// key (walkKey's; a trigram's with the form's unfolded tail), or with scan the form's submissions themselves (a
// search without its index), in q's order, each row with its data
// (encoded: with its JSON as the API sends it).
func (s *Store) filteredRows(ctx context.Context, formSeq, key int64, scan, encoded bool, q formsapi.Query, b pageBounds) *walkRows {
	o := q.Order
	var st string
	switch {
	case scan && encoded:
		st = stored.ByOrder(o, s.sql.scanEncodedAsc, s.sql.scanEncodedDesc)
	case scan:
		st = stored.ByOrder(o, s.sql.scanAsc, s.sql.scanDesc)
	case encoded && key < 0:
		st = stored.ByOrder(o, s.sql.searchEncodedAsc, s.sql.searchEncodedDesc)
	case key < 0:
		st = stored.ByOrder(o, s.sql.searchAsc, s.sql.searchDesc)
	case encoded:
		st = stored.ByOrder(o, s.sql.findEncodedAsc, s.sql.findEncodedDesc)
	default:
		st = stored.ByOrder(o, s.sql.findAsc, s.sql.findDesc)
	}
	if scan {
		return newScanRows(ctx, s.pool, st, formSeq, q, b)
	}
	return newWalkRows(ctx, s.pool, st, formSeq, key, q, b)
}

// sortSource reads a sorted page of q on the form formSeq from the
// ordered index (migration 0028) and the form's submissions, with the
// JSON as sent (encoded 1) or its size (0).
func sortSource[X any](ctx context.Context, s *Store, formSeq int64, q formsapi.Query, encoded int) stored.SortSource[X] {
	field, desc, _ := find.ParseSort(q.Sort)
	d := 0
	if desc {
		d = 1
	}
	prefix := sortPrefix(field)
	end := prefix // the end of the field's run: before every entry descending
	if !desc {
		end = append(slices.Clip(prefix), 0xFF) // after every entry ascending
	}
	return stored.SortSource[X]{
		Keyed: func(key []byte, at, seq int64, limit int) (stored.Rows, error) {
			return s.pool.Query(ctx, s.sql.sorted[encoded][d], formSeq, append(slices.Clip(prefix), key...), at, seq, end, limit)
		},
		Plain: func(lo, hi keyset.Pos, limit int) (stored.Rows, error) {
			return s.pool.Query(ctx, s.sql.unsorted[encoded][d], formSeq, lo.At, lo.Seq, hi.At, hi.Seq, limit)
		},
	}
}

// sortIndexed returns nil when the schema's sort index keeps the
// entries of the field of sort, an error wrapping find.ErrNoSortIndex
// when it is off, and a *find.NotSortedError when it keeps other fields
// only: as the database says now, for another node may have changed them
// (a sorted page reads it each time, one row).
func (s *Store) sortIndexed(ctx context.Context, sort string) error {
	field, _, _ := find.ParseSort(sort)
	name := field
	if strings.IndexByte(field, 0) >= 0 {
		// PostgreSQL's text holds no NUL, so no listed field has one
		// (find.CheckSortFields refuses it), and the empty name is
		// never listed: a NUL in a parameter would be the statement's
		// error (the fuzzer's ?sort=%00).
		name = ""
	}
	var mode int
	var listed bool
	if err := s.pool.QueryRow(ctx, s.sql.sortServed, name).Scan(&mode, &listed); err != nil {
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
