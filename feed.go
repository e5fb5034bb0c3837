package formsapi

import "context"

// FeedStore is an optional interface of a [Store]: a form's submissions in
// the order they were committed, read from a position the caller keeps.
// When the handler's Store implements it, the handler serves the sync feed
// (GET /v1/forms/{formId}/submissions?sync=start, then ?sync=<syncToken>);
// otherwise those requests get 501. memstore, sqlitestore and pgstore
// implement it, and storetest.Run checks the contract below, one subtest
// per clause, so a host's own store is held to it too.
//
// A feed exists because createdAt order cannot be resumed: a submission
// whose createdAt is earlier than one a poller has already seen, but which
// commits later (two writers racing, an import of old submissions, clocks
// of two nodes apart), would never be returned to a poller that asks for
// everything since the last createdAt it saw. Commit order has no such gap.
//
// The contract:
//
//   - Positions. Every submission of a form has a position: an int64
//     greater than 0, given when the submission is stored, unique within
//     its form and never changed. Positions need not be contiguous. So
//     has every deletion of a submission (see [Writer.DeleteSubmission]
//     and Erase): the feed's entries are the form's additions and
//     deletions, in one order. "Submissions" below means both kinds of
//     entry, except where it says items.
//   - Commit order. A submission that a call could not see (it was not yet
//     committed, or not yet visible to the call's reads) has a position
//     greater than every position that call returned, and greater than
//     its Next. Equivalently: at any moment, the visible positions of a
//     form are all the positions up to some bound, with none missing that
//     will appear later. Positions handed out under a per-form counter
//     that is incremented under the same lock or in the same transaction
//     as the insert, and read back only once committed, meet this; values
//     of a database sequence taken by concurrent transactions do not,
//     since a later value can commit first.
//   - Reading. SyncSubmissions returns, in ascending position order, the
//     visible submissions of formID whose positions are greater than
//     after, at most limit of them and no fewer when that many are
//     visible. Items carry exactly the stored public fields, as for
//     [Store.ListSubmissions]; internal [Metadata] is never part of them.
//   - Next. FeedPage.Next is the position of the page's last item, or
//     after itself when the page is empty. Passing Next back as after
//     reads what follows, so a caller that stores Next after each page,
//     and resumes from it, sees every submission of the form exactly
//     once, however writers race: none is missed and none repeated.
//   - More. FeedPage.More reports that submissions after Next were visible
//     to the call, so the caller may read on at once; false means the
//     page reached the end of what the call could see.
//   - After. after is 0 to read from the beginning, or a Next this store
//     returned for the same form. A position beyond the form's last one
//     gives an empty page with Next equal to after (a store restored from
//     an older backup, say), not an error. A negative after is an error
//     wrapping [ErrInvalidCursor].
//   - Isolation. It returns an error wrapping [ErrFormNotFound] when formID
//     is not a form of accountID, the same whether the form does not
//     exist or belongs to another account, and checks this before
//     anything else about the call.
//   - Limit. The handler always sends 1 <= limit <= its maximum page size.
//     A store returns an error for a limit below 1 rather than guess.
//   - Context. When ctx is canceled or its deadline passes, it returns an
//     error wrapping ctx.Err().
//   - Concurrency. It is safe for concurrent use with itself and with
//     writes, and the page is the caller's: no slice in it is shared with
//     the store or another result.
//   - Items and deletions. A submission that was deleted is not an item
//     of any later page (its position becomes a gap); its deletion is an
//     entry at a position of its own, after every position the
//     submission's form had when it was deleted, and the page that holds
//     it lists, in FeedPage.Deleted, the position the deleted submission
//     had. FeedPage.Positions[i] is the position of Items[i]. A caller
//     that keeps a copy of the form, each item under its position, and
//     removes the one each deletion names, holds exactly the form's
//     submissions once it has read to the end, whatever it read before.
//     FeedPage.DeletedAt, when not empty, has one position per deletion:
//     that deletion's own, so the page's entries in position order are
//     its commit order.
//   - Incarnation. FeedPage.Incarnation is 0, or a value the form keeps
//     for its life, the same on every page, which no form of the same ID
//     had before it: a form deleted and created again with the ID gets
//     another. With one, the handler answers 410 Gone to a cursor or
//     sync token of another incarnation of the form, and a form whose
//     incarnation has its top bit set has refs of its own, none of them
//     the refs of an earlier form of its ID (the library's stores give
//     every form they make such an incarnation; forms made before keep
//     the refs they had). A store that cannot tell leaves it 0; one that
//     wraps a store of this module passes its value on.
//   - Retention. A store may forget deletions once they are old enough
//     (the library's stores keep them 30 days by default): FeedPage.Purged
//     is then the last position of a forgotten deletion (it never
//     decreases), on every page, whatever after is. A caller whose after
//     is between 0 and Purged, exclusive, may have missed one that
//     concerns its copy, unless it began reading at after 0 when Purged
//     was already at least that high (it never received the submissions
//     those deletions deleted, since positions are in commit order): the
//     handler keeps that floor in its sync tokens and answers 410 Gone
//     to a token whose position and floor are both below Purged. The
//     caller must then read the feed again from the start and replace
//     its copy.
//
// The handler keeps the page byte budget (see [WithPageBytes]) on feed
// pages too: it reads a FeedStore in calls of at most 16 submissions,
// measures each as it sends it, and where one does not fit asks again
// for the ones before it, so the page ends after the last that fits and
// says more follows. The stores of this module are read without that:
// they keep the budget themselves, on the JSON they stored.
//
// Errors are answered as for [Store]: ErrFormNotFound with 404,
// ErrInvalidCursor with 400, context.DeadlineExceeded with 503, anything
// else with 500 and a log line.
type FeedStore interface {
	// SyncSubmissions returns the submissions of formID, a form of
	// accountID, that come after position after in commit order.
	SyncSubmissions(ctx context.Context, accountID, formID string, after int64, limit int) (FeedPage, error)
}

// FeedPage is one page of a form's feed.
type FeedPage struct {
	// Items are submissions in commit order; never nil in a result of
	// the library's stores, and treated the same when nil.
	Items []Submission
	// Positions holds the position of each item: Positions[i] is that
	// of Items[i]. The handler derives each item's opaque reference in
	// the feed from it.
	Positions []int64
	// Deleted holds, for each deletion among the page's entries, in
	// commit order, the position the deleted submission had.
	Deleted []int64
	// DeletedAt holds the deletions' own positions: DeletedAt[i] is the
	// position of the entry that deleted Deleted[i]. It places each
	// deletion among the page's items, as webhook deliveries need; a
	// store may leave it empty (the handler does not read it), and then
	// webhook reads a page that holds deletions one entry at a time.
	DeletedAt []int64
	// Next is the position to pass as after to read on: the last entry's
	// position (an item's or a deletion's), or after itself when nothing
	// follows it.
	Next int64
	// More reports that more entries after Next could be read now.
	More bool
	// Purged is the last position of a deletion the store no longer
	// keeps, 0 when none: a caller whose after is above 0 and below it
	// may have missed a deletion (see the Retention clause).
	Purged int64
	// Incarnation is the form's incarnation, 0 when the store cannot
	// tell (see the Incarnation clause).
	Incarnation uint64
}

// FieldStore is an optional interface of a [FeedStore]: a form's fields,
// the names of the top-level members of its submissions' data, each with
// the feed position of the first submission that carried it, kept by the
// store as submissions are added. When the store that serves the
// handler's feed implements it, a CSV export (GET
// /v1/forms/{formId}/export?format=csv) takes its columns from one call
// here, so that its header, and its first byte, come at once whatever the
// form's size; otherwise the export reads the whole form once before its
// first byte to learn them. memstore, sqlitestore and pgstore implement
// it, and storetest.Run checks the contract below, one subtest per
// clause, so a host's own store is held to it too. A type that embeds one
// of this module's stores is not asked: its fields would be the embedded
// store's, not those of the feed it serves.
//
// The contract:
//
//   - Fields. Every name that is a top-level member of the Data of a
//     submission the feed has carried (its escapes resolved, as
//     encoding/json decodes an object's names) is a field of the form,
//     once, with its first position: the feed position of the first
//     submission, in feed order, whose Data had it. Nothing else is a
//     field.
//   - Order. DataFields returns fields in ascending first position, and
//     fields of one first position in the order of their first
//     appearance in that submission's Data; first[i] is the first
//     position of names[i].
//   - Range. It returns the fields whose first position is at most upTo,
//     and of those at most limit, the first ones in that order: a caller
//     asks for one more than it will use to learn that there are more.
//   - As of. For any upTo at or below a position the feed has shown
//     (FeedPage.Next of a call that returned), every later call with
//     that upTo returns the same fields, while the form exists:
//     submissions added later add only fields of greater first
//     positions. So an export resumed with the same as-of position gets
//     the same columns.
//   - Never shrunk. Deleting a submission (Writer.DeleteSubmission) or
//     erasing it (Writer.Erase) neither removes a field nor moves its
//     first position: a field may have no submission left (an empty
//     column). Field names are the form's schema, not anyone's answers.
//   - Forms. The fields are the form's: a form deleted (Writer.DeleteForm)
//     and created again with the same ID starts without any.
//   - Isolation. It returns an error wrapping [ErrFormNotFound] when
//     formID is not a form of accountID, the same whether the form does
//     not exist or belongs to another account.
//   - Limit. The handler always sends 1 <= limit; a store returns an
//     error for a limit below 1 rather than guess.
//   - Context. When ctx is canceled or its deadline passes, it returns an
//     error wrapping ctx.Err().
//   - Concurrency. It is safe for concurrent use with itself and with
//     writes, and its slices are the caller's.
type FieldStore interface {
	// DataFields returns the fields of formID, a form of accountID, whose
	// first position is at most upTo, at most limit of them, in order:
	// names[i] first appeared at feed position first[i].
	DataFields(ctx context.Context, accountID, formID string, upTo int64, limit int) (names []string, first []int64, err error)
}
