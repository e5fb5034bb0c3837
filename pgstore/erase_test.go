package pgstore_test

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

// TestEraseLeavesNoRow erases a respondent's submissions, with metadata
// of their own, and then searches every row of every table of the
// store's schema, as text and as the hex of its bytea columns, for their
// data and each metadata field: each was there before (so the search can
// fail), and none is after. What PostgreSQL keeps of deleted rows below
// the rows (dead tuples until VACUUM, the write-ahead log) is written
// down in Store.Erase.
func TestEraseLeavesNoRow(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pooledSchema(t)
	s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
	is.NoErr(err)
	t.Cleanup(func() { s.Close() })
	load(t, s, storetest.DefaultSeed())
	const who = "gone.respondent@example.org"
	traces := []string{who, "TRACE-DATA-7f3a", "TRACE-IP-7f3a", "TRACE-UA-7f3a", "TRACE-GEO-7f3a", "TRACE-ID-7f3a", "TRACE-HOST-ID-7f3a"}
	big := strings.Repeat("TRACE-DATA-7f3a ", 2000) // 32 KB: TOAST
	for i, data := range []string{
		fmt.Sprintf(`{"email":%q,"note":"TRACE-DATA-7f3a"}`, who),
		fmt.Sprintf(`{"email":%q,"essay":%q}`, who, big),
	} {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(data)}, formsapi.Metadata{
			ClientIP: "TRACE-IP-7f3a", UserAgent: "TRACE-UA-7f3a", Geo: []byte(`{"city":"TRACE-GEO-7f3a"}`),
			TraceID: "TRACE-ID-7f3a", ID: fmt.Sprintf("TRACE-HOST-ID-7f3a-%d", i),
		}))
	}
	conn, err := pgx.Connect(ctx, dsn)
	is.NoErr(err)
	t.Cleanup(func() { conn.Close(ctx) })
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE'`, schema)
	is.NoErr(err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	is.NoErr(err)
	is.True(len(tables) >= 4)
	// found returns the tables in which some row holds tr.
	found := func(tr string) []string {
		var in []string
		for _, table := range tables {
			var n int
			err := conn.QueryRow(ctx, "SELECT count(*) FROM "+quote(schema)+"."+quote(table)+" t WHERE strpos(t::text, $1) > 0 OR strpos(t::text, $2) > 0",
				tr, hex.EncodeToString([]byte(tr))).Scan(&n)
			is.NoErr(err)
			if n > 0 {
				in = append(in, table)
			}
		}
		return in
	}
	for _, tr := range traces {
		if len(found(tr)) == 0 {
			t.Fatalf("%q is in no row before the erasure: the search finds nothing", tr)
		}
	}
	n, err := s.Erase(ctx, storetest.AccountA, "email", who)
	is.NoErr(err)
	is.Equal(n, 2)
	for _, tr := range traces {
		if in := found(tr); len(in) > 0 {
			t.Errorf("%q is still in a row of %v after the erasure", tr, in)
		}
	}
	p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormSmall, formsapi.Query{Limit: 10})
	is.NoErr(err)
	is.Equal(len(p.Items), 3) // the rest is intact
}

// TestFeedCopyAcrossNodes runs storetest.RunFeedCopy with the writers on
// one node and the consumer on another, each with its own pool and read
// cache over one schema: the consumer's copy ends exact.
func TestFeedCopyAcrossNodes(t *testing.T) {
	t.Parallel()
	dsn, schema := pooledSchema(t)
	open := func() *pgstore.Store {
		s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	load(t, a, storetest.DefaultSeed())
	storetest.RunFeedCopy(t, a, b)
}
