package stored

import (
	"context"
	"fmt"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/wire"
)

// Filtered pages: the database stores walk the entries of their index of
// submitted values (see find.Keys) for the key of one clause of q.Filters,
// in page order, joined to the submission each names, and every other
// clause, and the walked one against hash collisions, is checked here
// with find.Match on the submission's data. A search without filters
// walks a trigram's entries when the store's search index is on, and the
// form's submissions themselves, in the same order, when it is off (see
// Candidates); each row is checked the same way. A page examines at most
// find.MaxExamined entries: one that reaches the bound before it is full
// ends there with a cursor after the last entry examined, so the next
// page resumes the walk there, and it may be short or empty. It also
// ends, the same way, right after the entry whose check brings its work
// (find.Examined) to find.MaxExaminedBytes (RELIABILITY case 103): a
// statement may therefore leave out the rows past the one that brings
// the bytes of data and attachments it returned to that bound (pgstore's
// do), since their work is at least their bytes. The work is added to
// the request's wire.Meter, which the handler charges the rate limiter
// with.

// Examined is how many entries a filtered page's statement reads at most:
// one more than the bound, so that the extra row tells that entries
// follow.
const Examined = find.MaxExamined + 1

// Filtered reports whether q's page of submissions walks the index: it
// has filters or a search.
func Filtered(q formsapi.Query) bool {
	return len(q.Filters) > 0 || q.Search != ""
}

// Candidates returns the index keys a filtered page of q may walk, each
// of which every match has: each equality clause's (the other operators
// are checked on what the page walks, never walked), and, when the store's search
// index is on (searchIndexed), the trigram keys of its search that it
// probes (find.TermKeys). With more than one, the store counts each key's
// entries of the form, up to Probed, and walks the rarest (Rarest), so
// that a rare clause beside a common one costs its matches, whichever
// field's name sorts first. None (no equality, and a search alone with
// the search index off or no search) means the page walks the form's submissions themselves in page order,
// checking each as it would an entry's.
func Candidates(q formsapi.Query, searchIndexed bool) []int64 {
	var keys []int64
	for _, f := range q.Filters {
		if f.Op == formsapi.FilterEq {
			keys = append(keys, find.Key(f.Field, f.Value))
		}
	}
	if q.Search != "" && searchIndexed {
		keys = append(keys, find.TermKeys(q.Search)...)
	}
	return keys
}

// SearchIndexSetting is the name of the setting, kept in the database,
// that says whether the index of submitted values holds the trigram keys
// of search (find.TrigramKey, negative): 1 when it does, 0 when it holds
// filter keys only. Both database stores keep it in their
// formsapi_settings table.
const SearchIndexSetting = "search_index"

// SortIndexSetting is the name of the setting, kept in the database,
// that says whether the stores keep the ordered index of sort keys
// (internal/stored/sort.go), and for which fields: SortOff, SortEvery
// or SortListed.
const SortIndexSetting = "sort_index"

// The values of SortIndexSetting.
const (
	// SortOff: writers leave the sort keys out (sort_keys NULL) and
	// sorted lists are not served (find.ErrNoSortIndex).
	SortOff = 0
	// SortEvery: every submission's sort keys are stored, and the entries
	// of all its fields are in the index.
	SortEvery = 1
	// SortListed: every submission's sort keys are stored, and the index
	// holds the entries of the fields of formsapi_sort_fields only; a
	// sort by another field is refused (find.NotSortedError).
	SortListed = 2
)

// Probed bounds the entries of one candidate key that a filtered page
// counts to compare it with the others (a key with more is as common as
// any): up to 8 clauses' and 16 trigrams' candidates of at most this
// many entries each, read from the index alone.
const Probed = find.MaxExamined + 1

// ProbedLimit is Probed as an SQL literal.
const ProbedLimit = "1001"

// Probe is what a store's probe learned of one candidate key: its
// entries in the form, counted up to Probed, and the creation time (Unix
// nanoseconds) of the last of those in the index's order, oldest first;
// zero when it has none.
type Probe struct{ Entries, Last int64 }

// Rarest returns the key of keys with the fewest entries by probes, and
// whether any has entries: a key without any says no submission matches.
// Keys counted equally (in practice those at Probed, past which a probe
// stops counting) are told apart by how far in time their counted
// entries reach: the one whose first Probed entries span the longest
// stretch of the form is the sparsest there, so a walk of it is likely to
// examine the fewest entries per match. A term of common trigrams that
// is rare as a whole is one such case (BENCHMARKS.md, "Search at
// 1,000,000 submissions"). The first of exact equals wins.
func Rarest(keys []int64, probes []Probe) (int64, bool) {
	best := 0
	for i := range keys {
		p, b := probes[i], probes[best]
		if p.Entries < b.Entries || p.Entries == b.Entries && p.Last > b.Last {
			best = i
		}
	}
	return keys[best], probes[best].Entries > 0
}

// ByOrder is asc for a page of the oldest first, else desc: a store's
// statement (or anything else) of each order.
func ByOrder[T any](o formsapi.Order, asc, desc T) T {
	if o == formsapi.Oldest {
		return asc
	}
	return desc
}

// Clauses returns q.Filters as internal/find has them.
func Clauses(q formsapi.Query) []find.Clause {
	cs := make([]find.Clause, len(q.Filters))
	for i, f := range q.Filters {
		cs[i] = find.Clause{Field: f.Field, Op: string(f.Op), Value: f.Value, Values: f.Values}
	}
	return find.Prepare(cs)
}

// filterWalk is the rule of a filtered page, whichever way its items are
// kept.
type filterWalk struct {
	q        formsapi.Query
	cs       []find.Clause
	term     string
	budget   keyset.Budget
	last     keyset.Pos // the last entry examined
	n        int        // items on the page
	examined int
	work     int64 // find.Examined of the entries examined
}

func newFilterWalk(q formsapi.Query) filterWalk {
	return filterWalk{q: q, cs: Clauses(q), term: q.Search, budget: keyset.NewBudget(q)}
}

// row takes the entry at pos with the submission's data, its stored
// attachments and its size as sent. It returns take, whether the item
// goes on the page, and stop, whether the page ends with this call (its
// cursor is then cursor): before this entry, at the bound on entries or
// when a match does not fit, or after it, when its check brought the
// page's work to find.MaxExaminedBytes.
func (w *filterWalk) row(pos keyset.Pos, data, attachments []byte, size int) (take, stop bool) {
	if w.examined == find.MaxExamined {
		return false, true
	}
	w.examined++
	found, work := Finds(data, attachments, w.cs, w.term)
	w.work += work
	spent := w.work >= find.MaxExaminedBytes
	if !found {
		w.last = pos
		return false, spent
	}
	if w.n == w.q.Limit || !w.budget.Fits(size) {
		return false, true
	}
	w.last = pos
	return true, spent
}

// taken counts an item of size bytes as on the page.
func (w *filterWalk) taken(size int) {
	w.budget.Count(size)
	w.n++
}

func (w *filterWalk) cursor() string { return w.last.String() }

// Finds reports whether a submission with data and stored attachments
// matches the clauses cs and contains the search term (find.Search; ""
// is none), and the work of the check (find.Examined). Attachments that
// do not decode have no file names.
func Finds(data, attachments []byte, cs []find.Clause, term string) (bool, int64) {
	stored := len(data) + len(attachments)
	ok, matched := find.MatchWork(data, cs)
	if !ok {
		return false, find.Examined(stored, matched)
	}
	if term == "" {
		return true, find.Examined(stored, matched)
	}
	found, normalized := find.Search(data, FileURLs(attachments), term)
	return found, find.Examined(stored, matched+normalized)
}

// FileURLs returns the URLs of stored attachments, nil when they do not
// decode.
func FileURLs(attachments []byte) []string {
	if len(attachments) == 0 || string(attachments) == "[]" {
		return nil
	}
	att, err := DecodeAttachments(attachments)
	if err != nil {
		return nil
	}
	return URLs(att)
}

// URLs returns the FileURL of each attachment.
func URLs(att []formsapi.Attachment) []string {
	if len(att) == 0 {
		return nil
	}
	urls := make([]string, len(att))
	for i, a := range att {
		urls[i] = a.FileURL
	}
	return urls
}

// AppendFiltered appends a filtered page of q (see above) to p from rows
// that select an index entry's seq and created_at and its submission's
// data, attachments and JSON as sent, in page order, Examined of them at
// most. It sets p.NextCursor, and adds the page's work to the Meter of
// ctx; damaged submissions are left out as wire.Page.Add leaves them.
func AppendFiltered(ctx context.Context, rows Rows, q formsapi.Query, p *wire.Page) error {
	w := newFilterWalk(q)
	defer func() { wire.AddExamined(ctx, w.work) }()
	for rows.Next() {
		var pos keyset.Pos
		var data, attachments, encoded []byte
		if err := rows.Scan(&pos.Seq, &pos.At, &data, &attachments, &encoded); err != nil {
			return err
		}
		take, stop := w.row(pos, data, attachments, len(encoded))
		if take && p.Add(pos.Seq, encoded) {
			w.taken(len(encoded))
		}
		if stop {
			p.NextCursor = w.cursor()
			return nil
		}
	}
	p.NextCursor = ""
	return nil
}

// FilteredSubmissions reads a filtered page of q (see above) of the
// submissions of formID from rows that select an index entry's seq and
// created_at and its submission's data, attachments and size in bytes as
// sent, in page order, Examined of them at most. It adds the page's work
// to the Meter of ctx.
func FilteredSubmissions(ctx context.Context, rows Rows, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	p := formsapi.Page[formsapi.Submission]{Items: make([]formsapi.Submission, 0, min(q.Limit, prealloc))}
	w := newFilterWalk(q)
	defer func() { wire.AddExamined(ctx, w.work) }()
	for rows.Next() {
		var pos keyset.Pos
		var data, attachments []byte
		var size int
		if err := rows.Scan(&pos.Seq, &pos.At, &data, &attachments, &size); err != nil {
			return formsapi.Page[formsapi.Submission]{}, err
		}
		take, stop := w.row(pos, data, attachments, size)
		if take {
			sub, err := submission(formID, pos.At, data, attachments)
			if err != nil {
				return formsapi.Page[formsapi.Submission]{}, fmt.Errorf("submission %d: %w", pos.Seq, err)
			}
			w.taken(size)
			p.Items = append(p.Items, sub)
		}
		if stop {
			p.NextCursor = w.cursor()
			return p, nil
		}
	}
	return p, nil
}

// Count statements' bounds, as SQL literals: each reads one row more than
// its bound, which says the bound was reached.
const (
	CountLimit   = "100001" // find.MaxCount + 1
	MatchesLimit = "10001"  // find.MaxExactCount + 1
)

// Counted is the Total of a count statement that read n rows, one more
// than bound when it reached it.
func Counted(n int64, bound int64, estimate bool) formsapi.Total {
	switch {
	case n > bound:
		if estimate {
			return formsapi.Total{Value: bound, Kind: find.Estimate}
		}
		return formsapi.Total{Value: bound, Kind: find.AtLeast}
	case estimate:
		return formsapi.Total{Value: n, Kind: find.Estimate}
	}
	return formsapi.Total{Value: n, Kind: find.Exact}
}

// CountMatches counts the matches of q's filters and search among rows
// that select the data and attachments of the submissions of one index
// key's entries, find.MaxExactCount+1 of them at most, and adds its work
// to the Meter of ctx. It stops, "at_least", at a candidate past
// find.MaxExactCount of them, or right after the one whose check brings
// its work (find.Examined) to find.MaxExactCountBytes: a statement may
// leave out the rows past the one that brings the bytes of data and
// attachments it returned to that bound, as for a page (see above).
func CountMatches(ctx context.Context, rows Rows, q formsapi.Query) (formsapi.Total, error) {
	cs := Clauses(q)
	var n, work, matches int64
	defer func() { wire.AddExamined(ctx, work) }()
	for rows.Next() {
		if n == find.MaxExactCount {
			return formsapi.Total{Value: matches, Kind: find.AtLeast}, nil
		}
		n++
		var data, attachments []byte
		if err := rows.Scan(&data, &attachments); err != nil {
			return formsapi.Total{}, err
		}
		found, w := Finds(data, attachments, cs, q.Search)
		work += w
		if found {
			matches++
		}
		if work >= find.MaxExactCountBytes {
			return formsapi.Total{Value: matches, Kind: find.AtLeast}, nil
		}
	}
	return formsapi.Total{Value: matches, Kind: find.Exact}, nil
}

// CountQuery is q as a count reads it: its range, filters and search,
// from the start.
func CountQuery(q formsapi.Query) formsapi.Query {
	return formsapi.Query{Limit: 1, Since: q.Since, Until: q.Until, Filters: q.Filters, Search: q.Search}
}
