package pgstore

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/stored"
)

// fakeEntries answers a filtered page's statement from a list of entries
// in ascending keyset order, as PostgreSQL would, and records each batch
// and the bytes of data and attachments it returned.
type fakeEntries struct {
	entries []keyset.Pos
	desc    bool
	batches []int
	data    []byte // each entry's data, for a statement that selects it
	sent    int64
}

func (f *fakeEntries) Query(_ context.Context, _ string, args ...any) (pgx.Rows, error) {
	lo := keyset.Pos{At: args[2].(int64), Seq: args[3].(int64)}
	hi := keyset.Pos{At: args[4].(int64), Seq: args[5].(int64)}
	limit, maxBytes := args[6].(int), args[7].(int64)
	f.batches = append(f.batches, limit)
	less := func(a, b keyset.Pos) bool { return a.At < b.At || a.At == b.At && a.Seq < b.Seq }
	var out []keyset.Pos
	var before int64 // the statement's bound in bytes (byteBounded)
	for i := range f.entries {
		e := f.entries[i]
		if f.desc {
			e = f.entries[len(f.entries)-1-i]
		}
		if less(lo, e) && less(e, hi) && len(out) < limit && before < maxBytes {
			out = append(out, e)
			if f.data != nil {
				before += int64(len(f.data) + len("[]"))
			}
		}
	}
	f.sent += before
	return &fakeRows{out: out, i: -1, data: f.data}, nil
}

type fakeRows struct {
	pgx.Rows // not called: the methods a walk uses are below
	out      []keyset.Pos
	i        int
	data     []byte
}

func (r *fakeRows) Next() bool { r.i++; return r.i < len(r.out) }
func (r *fakeRows) Scan(dest ...any) error {
	*dest[0].(*int64), *dest[1].(*int64) = r.out[r.i].Seq, r.out[r.i].At
	if len(dest) == 5 { // the page statement: data, attachments, size
		*dest[2].(*[]byte), *dest[3].(*[]byte), *dest[4].(*int64) = r.data, []byte("[]"), int64(len(r.data))
	}
	return nil
}
func (r *fakeRows) Close()     {}
func (r *fakeRows) Err() error { return nil }

// TestWalkRowsBatches reads filtered pages through walkRows from a fake
// statement: a page that fills at once asks for the page and one entry
// more, and no more; a walk that reads on asks for batches twice the one
// before, each after the last entry read, never more than stored.Examined
// entries in all, in order, with no entry twice or skipped, and stops
// asking when a batch comes back short.
func TestWalkRowsBatches(t *testing.T) {
	t.Parallel()
	entries := make([]keyset.Pos, 3000)
	for i := range entries {
		entries[i] = keyset.Pos{At: int64(i / 3), Seq: int64(i + 1)} // runs of equal times
	}
	for _, tc := range []struct {
		name    string
		order   formsapi.Order
		limit   int
		entries int
		read    int // rows the walk reads
		want    []int
	}{
		{"PageFillsAtOnce", formsapi.Newest, 1, 3000, 2, []int{2}},
		{"PageFillsAtOnceOldest", formsapi.Oldest, 50, 3000, 51, []int{51}},
		{"ReadsToTheBound", formsapi.Newest, 1, 3000, stored.Examined, []int{2, 4, 8, 16, 32, 64, 128, 256, stored.Examined - 510}},
		{"ReadsToTheBoundOldest", formsapi.Oldest, 100, 3000, stored.Examined, []int{101, 202, 404, stored.Examined - 707}},
		{"ShortBatchEnds", formsapi.Newest, 1, 5, 5, []int{2, 4}},
		{"EmptyEnds", formsapi.Oldest, 10, 0, 0, []int{11}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeEntries{entries: entries[:tc.entries], desc: tc.order == formsapi.Newest}
			q := formsapi.Query{Limit: tc.limit, Order: tc.order}
			b := pageBounds{lo: keyset.Pos{At: -1 << 62, Seq: 0}, hi: keyset.Pos{At: 1 << 62, Seq: 1 << 62}}
			w := newWalkRows(context.Background(), f, "statement", 1, 2, q, b)
			var got []keyset.Pos
			for w.Next() {
				var p keyset.Pos
				if err := w.Scan(&p.Seq, &p.At); err != nil {
					t.Fatal(err)
				}
				if got = append(got, p); len(got) == tc.read {
					break // the page is full, as a walk stops
				}
			}
			w.Close()
			if err := w.Err(); err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.read {
				t.Fatalf("read %d entries, want %d", len(got), tc.read)
			}
			for i, p := range got {
				want := entries[i]
				if f.desc {
					want = entries[tc.entries-1-i]
				}
				if p != want {
					t.Fatalf("entry %d is %v, want %v", i, p, want)
				}
			}
			if len(f.batches) != len(tc.want) {
				t.Fatalf("batches %v, want %v", f.batches, tc.want)
			}
			total := 0
			for i := range tc.want {
				if f.batches[i] != tc.want[i] {
					t.Fatalf("batches %v, want %v", f.batches, tc.want)
				}
				total += f.batches[i]
			}
			if total > stored.Examined {
				t.Errorf("asked for %d entries in all, more than %d", total, stored.Examined)
			}
		})
	}
}

// TestCountRowsStopAtTheBounds counts a filtered list exactly through
// newCountRows from a fake statement: a count stops at
// find.MaxExactCount candidates or once those it checked hold
// find.MaxExactCountBytes of data, "at_least" the matches found, and
// asks for its batches so that it has not read far past where it
// stopped; a list within both bounds is counted exactly.
func TestCountRowsStopAtTheBounds(t *testing.T) {
	t.Parallel()
	small := []byte(`{"a":1}`)
	big := []byte(`{"a":1,"pad":"` + strings.Repeat("x", 1<<20) + `"}`)
	for _, tc := range []struct {
		name    string
		entries int
		data    []byte
		want    formsapi.Total
		batches []int
	}{
		{"Within", 3000, small, formsapi.Total{Value: 3000, Kind: find.Exact}, []int{32, 64, 128, 256, 512, 1024, 2048}},
		{"PastTheCount", 20000, small, formsapi.Total{Value: find.MaxExactCount, Kind: find.AtLeast}, []int{32, 64, 128, 256, 512, 1024, 2048, 4096, find.MaxExactCount + 1 - 8160}},
		{"PastTheBytes", 3000, big, formsapi.Total{Value: 32, Kind: find.AtLeast}, []int{32}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			entries := make([]keyset.Pos, tc.entries)
			for i := range entries {
				entries[i] = keyset.Pos{At: int64(i / 3), Seq: int64(i + 1)}
			}
			f := &fakeEntries{entries: entries, data: tc.data}
			b := pageBounds{lo: keyset.Pos{At: -1 << 62, Seq: 0}, hi: keyset.Pos{At: 1 << 62, Seq: 1 << 62}}
			rows := &matchRows{walkRows: newCountRows(context.Background(), f, "statement", 1, 2, b)}
			q := formsapi.Query{Filters: []formsapi.Filter{{Field: "a", Value: "1"}}}
			got, err := stored.CountMatches(context.Background(), rows, q)
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("count %+v, want %+v", got, tc.want)
			}
			if !slices.Equal(f.batches, tc.batches) {
				t.Errorf("batches %v, want %v", f.batches, tc.batches)
			}
		})
	}
}
