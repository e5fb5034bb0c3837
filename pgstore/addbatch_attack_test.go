package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

// TestLongBatchRefusedWritesNothing: a batch of several statements of
// many submissions, refused for one submission in a later statement (a
// form not stored, a metadata ID an earlier statement of the batch gave
// the same form, data that is not an object) writes nothing, and the
// error names that submission's index in the batch (storetest's batches
// are shorter than one statement).
func TestLongBatchRefusedWritesNothing(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.Schema(t)
	s := load(t, mustOpenIn(t, dsn, schema), storetest.DefaultSeed())
	count := func() (n int64) {
		if err := pgstore.Pool(s).QueryRow(ctx, fmt.Sprintf(`SELECT count(*) + coalesce(sum(feed_last), 0) FROM %[1]s.formsapi_forms f LEFT JOIN %[1]s.formsapi_submissions s ON false`, quote(schema))).Scan(&n); err != nil {
			t.Fatal(err)
		}
		var subs int64
		if err := pgstore.Pool(s).QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s.formsapi_submissions`, quote(schema))).Scan(&subs); err != nil {
			t.Fatal(err)
		}
		return n*1_000_000 + subs
	}
	before := count()
	forms := []string{storetest.FormBusy, storetest.FormSmall}
	const n, bad = 1100, 1050 // two statements; the bad one in the second
	good := func(i int) (formsapi.Submission, formsapi.Metadata) {
		return formsapi.Submission{FormID: forms[i%2], Data: []byte(fmt.Sprintf(`{"i":%d}`, i)), CreatedAt: time.Unix(int64(i), 0)},
			formsapi.Metadata{ID: fmt.Sprintf("long-%d", i)}
	}
	batch := func(change func(*formsapi.Submission, *formsapi.Metadata)) error {
		return s.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
			for i := range n {
				sub, m := good(i)
				if i == bad {
					change(&sub, &m)
				}
				if !yield(sub, m) {
					return
				}
			}
		})
	}
	for _, c := range []struct {
		name   string
		change func(*formsapi.Submission, *formsapi.Metadata)
		want   error
	}{
		{"a form not stored", func(s *formsapi.Submission, _ *formsapi.Metadata) { s.FormID = storetest.FormNone }, formsapi.ErrFormNotFound},
		{"an ID given earlier in the batch", func(s *formsapi.Submission, m *formsapi.Metadata) {
			s.FormID, m.ID = forms[7%2], "long-7"
		}, formsapi.ErrInvalidInput},
		{"data over the limits", func(s *formsapi.Submission, _ *formsapi.Metadata) { s.Data = []byte(`[1]`) }, formsapi.ErrInvalidInput},
	} {
		err := batch(c.change)
		if !errors.Is(err, c.want) || !regexp.MustCompile(`\b1050\b`).MatchString(fmt.Sprint(err)) {
			t.Errorf("%s: %v, want %v naming item %d", c.name, err, c.want, bad)
		}
		if got := count(); got != before {
			t.Errorf("%s: the refused batch changed the store (%d, was %d)", c.name, got, before)
		}
	}
	// A whole batch that is good goes in.
	if err := batch(func(*formsapi.Submission, *formsapi.Metadata) {}); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != before+n*1_000_000+n {
		t.Errorf("the good batch: %d, want %d", got, before+n*1_000_000+n)
	}
}

// singles counts the statements of one submission (AddSubmission's) that
// a pool's connections send in pipelines.
type singles struct{ n atomic.Int64 }

func (c *singles) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *singles) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if strings.Contains(d.SQL, "SET feed_last = t.feed_last + 1,") {
		c.n.Add(1)
	}
}

func (c *singles) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *singles) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (c *singles) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestRefusedBatchRetriesOneStatement: a long batch refused in one of
// its statements of many is written again one submission a statement
// only from that statement on: the statements before it, accepted, go
// in as they did. A batch of 10,000 refused for its last submission took
// 7.1 s to name it (10,000 single statements) against 0.38 s to write;
// any batch with one duplicate ID cost its length in single statements.
func TestRefusedBatchRetriesOneStatement(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.Schema(t)
	mustOpenIn(t, dsn, schema) // migrated
	cfg, err := pgxpool.ParseConfig(withParam(dsn, "search_path", schema))
	if err != nil {
		t.Fatal(err)
	}
	count := &singles{}
	cfg.ConnConfig.Tracer = count
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	load(t, s, storetest.DefaultSeed())
	const n, bad = 2500, 2400 // three statements; the refused one the third
	err = s.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
		for i := range n {
			id := fmt.Sprintf("one-%d", i)
			if i == bad {
				id = "one-7" // given to item 7 already
			}
			if !yield(formsapi.Submission{FormID: storetest.FormBusy, Data: []byte(fmt.Sprintf(`{"i":%d}`, i))}, formsapi.Metadata{ID: id}) {
				return
			}
		}
	})
	if !errors.Is(err, formsapi.ErrInvalidInput) || !regexp.MustCompile(`\b2400\b`).MatchString(fmt.Sprint(err)) {
		t.Fatalf("%v, want ErrInvalidInput naming item %d", err, bad)
	}
	// From the third statement's first submission (2,000) to the one
	// refused.
	if got := count.n.Load(); got != bad-2000+1 {
		t.Errorf("%d statements of one submission, want %d", got, bad-2000+1)
	}
}
