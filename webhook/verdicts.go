package webhook

import (
	"context"
	"slices"

	"github.com/formsapi/formsapi/webhook/hookstore"
)

// A filtered endpoint is sent the deletion of a submission if and only if
// it was sent the submission's addition (docs/webhooks.md, "Filtered
// endpoints"). A deletion carries no data, so the verdict is taken when
// the addition is passed, and kept as positions only: each stream of
// such an endpoint is judging (Stream.Judging), and its store
// (hookstore.PassedStore) keeps the spans of positions whose additions
// the endpoint was not sent, written with the cursor that passes them,
// in one transaction. An addition is judged once, by the filter in force
// when the cursor first passes it; an addition deleted before the cursor
// reached it (a gap between the entries read) was never sent; a
// deletion's own position is no addition, and may go in a span or not,
// whichever keeps the spans fewer.

// record is what a turn knows of its stream's spans: the change not
// saved yet, and which deletions read hold the position of a stored span.
type record struct {
	v    hookstore.Verdicts
	open bool // the last entry passed ended a span: a deletion after it extends it
	// inSpan holds, of the deletions read, those whose submission's
	// position is in a stored span: the endpoint was not sent it.
	inSpan map[int64]bool
	// recent are the spans passed since the entries were read, saved or
	// not: a deletion read with them may concern a position in one.
	recent []hookstore.Span
}

// pending reports whether r has a change to save.
func (r *record) pending() bool {
	return r != nil && (r.v.Clear || len(r.v.Pass) > 0 || len(r.v.Unpass) > 0)
}

// pass adds from..to to the spans, merged with the last one when they
// touch.
func (r *record) pass(from, to int64) {
	r.v.Pass = merge(r.v.Pass, from, to)
	r.recent = merge(r.recent, from, to)
}

// merge adds from..to, which starts past every span of sps, to sps.
func merge(sps []hookstore.Span, from, to int64) []hookstore.Span {
	if n := len(sps); n > 0 && sps[n-1].To >= from-1 {
		sps[n-1].To = max(sps[n-1].To, to)
		return sps
	}
	return append(sps, hookstore.Span{From: from, To: to})
}

// unpassRecent takes pos, an addition sent again, out of r.recent,
// which may hold it (a span turned from the positions never sent,
// advance), so that a deletion read with it is sent.
func (r *record) unpassRecent(pos int64) {
	for i, sp := range r.recent {
		if sp.From <= pos && pos <= sp.To {
			var parts []hookstore.Span
			if sp.From < pos {
				parts = append(parts, hookstore.Span{From: sp.From, To: pos - 1})
			}
			if pos < sp.To {
				parts = append(parts, hookstore.Span{From: pos + 1, To: sp.To})
			}
			r.recent = slices.Replace(r.recent, i, i+1, parts...)
			return
		}
	}
}

// clear forgets every span of the stream: it stops judging (a resync, a
// form created again).
func (r *record) clear() {
	*r = record{v: hookstore.Verdicts{Clear: true}}
}

// advance records, on a judging stream st whose cursor is about to move
// to x, what passing x means: the positions between the cursor and x
// that were never judged are additions deleted before they were read
// (not sent); x itself, an addition, was sent or not; a deletion's
// position is no addition. A position at or below st.Judged keeps the
// verdict it had, but for an addition sent again (a replay), which is
// sent now. The positions above st.Judged and at or below the cursor
// count as sent: a node of an earlier version moves the cursor without
// judging (a rolling deploy), sending what the filter keeps, and a
// deletion sent for nothing is safe where one missed is not (so a
// replay to a sync token past the cursor, which skips the additions
// between them, has their deletions sent too). A cursor below
// st.Unsent (a replay from a sync token older than the endpoint) first
// turns the positions above it and at or below Unsent, never sent, into
// a span, judged: the replay's additions are then judged as any other
// addition sent again, those its filter passes over staying unsent.
func advance(st *Stream, r *record, x entry, sent bool) {
	if !st.Judging || r == nil {
		return
	}
	if st.Unsent > st.Cursor {
		r.pass(st.Cursor+1, st.Unsent)
		st.Judged = max(st.Judged, st.Unsent)
		st.Unsent = st.Cursor
	}
	lo := max(st.Cursor, st.Judged) + 1
	switch {
	case !x.deleted && sent:
		if lo <= x.pos-1 {
			r.pass(lo, x.pos-1)
		}
		if x.pos <= st.Judged {
			r.v.Unpass = append(r.v.Unpass, x.pos)
			r.unpassRecent(x.pos)
		}
		r.open = false
	case !x.deleted:
		if lo <= x.pos {
			r.pass(lo, x.pos)
			r.open = true
		}
	default:
		if lo <= x.pos && (lo <= x.pos-1 || r.open) {
			r.pass(lo, x.pos)
			r.open = true
		}
		if r.inSpan[x.of] {
			// The deletion is passed: the verdict on its submission goes
			// with it (no span keeps a position of a deleted submission
			// once the cursor passed its deletion).
			r.v.Unpass = append(r.v.Unpass, x.of)
		}
	}
	st.Judged = max(st.Judged, x.pos)
}

// received reports whether the endpoint of judging stream st was sent the
// addition at position of, as r knows it; a stream that is not judging
// is sent every deletion. A position the cursor passed above st.Judged
// (a node of an earlier version moved it, advance) counts as sent.
func received(st Stream, r *record, of int64) bool {
	if !st.Judging {
		return true
	}
	if of <= st.Unsent || of > max(st.Judged, st.Cursor) || r.inSpan[of] {
		return false
	}
	for _, sp := range r.recent {
		if sp.From <= of && of <= sp.To {
			return false
		}
	}
	return true
}

// judge starts judging t's stream when its endpoint has a filter f and
// the store keeps spans: the additions passed from its cursor on are
// judged, those before it count as sent (but for those at or below
// Unsent).
func (d *Dispatcher) judge(t *turn, f *matcher) {
	if f != nil && d.passed != nil && !t.st.Judging && !t.st.Resync {
		t.st.Judging, t.st.Judged = true, t.st.Cursor
	}
}

// spans reads which deletions of t.pending concern a position in a
// stored span of its judging stream. It reports false on a failed read
// (logged), after which the entries are not sent.
func (d *Dispatcher) spans(ctx context.Context, e Endpoint, t *turn) bool {
	t.rec.inSpan, t.rec.recent = nil, nil
	if !t.st.Judging || d.passed == nil {
		return true
	}
	var ofs []int64
	for _, x := range t.pending {
		if x.deleted && x.of > t.st.Unsent && x.of <= t.st.Judged {
			ofs = append(ofs, x.of)
		}
	}
	if len(ofs) == 0 {
		return true
	}
	in, err := d.passed.Passed(ctx, e.ID, t.st.FormID, ofs)
	if err != nil {
		if ctx.Err() == nil {
			d.cfg.log.Error("webhook: read a stream's passed spans", "endpoint", e.ID, "error", err)
		}
		return false
	}
	t.rec.inSpan = make(map[int64]bool, len(in))
	for _, of := range in {
		t.rec.inSpan[of] = true
	}
	return true
}
