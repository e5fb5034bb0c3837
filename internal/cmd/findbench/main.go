// Command findbench measures filters on submitted fields and totals on a
// form of many submissions (issue 27), in SQLite or PostgreSQL, through
// the handler in process: for an equality filter that matches nothing,
// one submission, 1% and 50% of them, and a two-clause filter whose walk
// reaches the bound of entries examined, and filters with operators
// (issue 39), the time of the first page (and this process's CPU per
// request for it: all of SQLite's work, none of PostgreSQL's backends')
// and of a page deep in the walk, the items and index entries a page
// examines, and the time of an exact total and of an estimate; then the
// form's summary (issue 39), read afresh and kept, whole and filtered.
// bench/find.sh runs it; see there.
//
//	go run ./internal/cmd/findbench -db /tmp/find.db -n 1000000
//	go run ./internal/cmd/findbench -postgres "$DSN" -schema formsapi_find -n 1000000
//
// The form is filled once and kept,
// in bulk: the same rows, JSON and index keys as the store's
// AddSubmission writes (the triggers fill the index), in SQLite in
// transactions of 50,000 and in PostgreSQL with COPY, since a million
// single writes take many minutes (each waits for its commit, and in
// PostgreSQL on one form row's lock). The write cost per submission with
// and without the index is bench/writecost.sh's measure.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/stored"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/sqlitestore"
)

const (
	account = "find-bench"
	formID  = "find-bench-form"
	key     = "find-bench-key"
)

var start = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// data is submission i's data: a unique email (one match), a plan that
// is "gold" for 1 in 100 (1%), a flag true for every other one (50%),
// a name that is "Zoë Ünal" for 1 in 10,000 (a rare search term), and
// some text (common ones).
func data(i int) []byte {
	plan := "basic"
	if i%100 == 0 {
		plan = "gold"
	}
	name := "Alex Smith"
	if i%10_000 == 0 {
		name = "Zoë Ünal"
	}
	return fmt.Appendf(nil, `{"n":%d,"email":"user%d@example.com","plan":%q,"half":%t,"name":%q,"city":"City %d","message":"Hello, this is submission number %d, with a few words of text."}`,
		i, i, plan, i%2 == 0, name, i%500, i)
}

func at(i int) time.Time { return start.Add(time.Duration(i) * time.Second) }

type store interface {
	formsapi.Store
	formsapi.KeyResolver
	formsapi.Writer
	CountSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, exact bool) (formsapi.Total, error)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "findbench:", err)
		os.Exit(1)
	}
}

func run() error {
	db := flag.String("db", "", "SQLite database file (made and filled if absent)")
	dsn := flag.String("postgres", "", "PostgreSQL DSN, instead of -db")
	schema := flag.String("schema", "formsapi_find_bench", "PostgreSQL schema (made and filled if absent)")
	n := flag.Int("n", 1_000_000, "submissions of the form")
	runs := flag.Int("runs", 7, "requests per measure (the median is reported)")
	fillOnly := flag.Bool("fill-only", false, "fill the form if it is absent, and measure nothing")
	flag.Parse()
	ctx := context.Background()
	var s store
	var fill func() error
	// open opens the store, with its search index (q= walks trigrams)
	// and its sort index (sort= walks it; rows stored without their sort
	// keys, the bulk fill's, are indexed as it opens).
	var open func() (store, func(), error)
	switch {
	case *dsn != "":
		open = func() (store, func(), error) {
			pg, err := pgstore.Open(ctx, *dsn, pgstore.WithSchema(*schema), pgstore.WithSearchIndex(), pgstore.WithSortIndex())
			if err != nil {
				return nil, nil, err
			}
			return pg, func() { pg.Close() }, nil
		}
		fill = func() error { return copyPG(ctx, *dsn, *schema, *n) }
	case *db != "":
		open = func() (store, func(), error) {
			lite, err := sqlitestore.Open(*db, sqlitestore.WithSearchIndex(), sqlitestore.WithSortIndex())
			if err != nil {
				return nil, nil, err
			}
			return lite, func() { lite.Close() }, nil
		}
		fill = func() error { return bulkSQLite(ctx, *db, *n) }
	default:
		return fmt.Errorf("give -db or -postgres")
	}
	began := time.Now()
	s, closeStore, err := open()
	if err != nil {
		return err
	}
	fmt.Printf("opened in %s\n", time.Since(began).Round(time.Millisecond))
	defer func() { closeStore() }()
	t, err := s.CountSubmissions(ctx, account, formID, formsapi.Query{}, false)
	if err != nil || t.Value == 0 {
		began := time.Now()
		if err := addForm(ctx, s); err != nil {
			return err
		}
		if err := fill(); err != nil {
			return err
		}
		fmt.Printf("filled %d submissions in %s\n", *n, time.Since(began).Round(time.Second))
		closeStore()
		began = time.Now()
		if s, closeStore, err = open(); err != nil { // indexes the sort keys and folds the trigram keys
			return err
		}
		fmt.Printf("opened again (the sort and search indexes built) in %s\n", time.Since(began).Round(time.Second))
	} else {
		fmt.Printf("the form holds %d submissions (%s)\n", t.Value, t.Kind)
	}
	if *fillOnly {
		return nil
	}
	h := formsapi.NewHandler(s, s)
	get := func(q string) (time.Duration, page) {
		r := httptest.NewRequest("GET", "/v1/forms/"+formID+"/submissions?"+q, nil)
		r.Header.Set("Authorization", "Bearer "+key)
		w := httptest.NewRecorder()
		began := time.Now()
		h.ServeHTTP(w, r)
		d := time.Since(began)
		var p page
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &p) != nil {
			fmt.Fprintf(os.Stderr, "?%s: %d %.200s\n", q, w.Code, w.Body.String())
		}
		return d, p
	}
	var cpu time.Duration // this process's CPU over the last median's requests, per request
	median := func(q string) (time.Duration, page) {
		var ds []time.Duration
		var p page
		began := processCPU()
		for range *runs {
			d, pp := get(q)
			ds, p = append(ds, d), pp
		}
		cpu = (processCPU() - began) / time.Duration(*runs)
		slices.Sort(ds)
		return ds[len(ds)/2], p
	}
	fmt.Printf("\n%-34s %10s %9s %6s %9s %10s %6s %12s %12s\n", "filter (limit=100, newest first)", "page 1", "CPU/req", "items", "examined", "deep page", "items", "total exact", "estimate")
	for _, c := range []struct{ name, q string }{
		{"none (unfiltered)", ""},
		{"0 matches: email=nobody", "filter[email]=nobody@example.com"},
		{"1 match: email=user<n/2>", fmt.Sprintf("filter[email]=user%d@example.com", *n/2)},
		{"1%: plan=gold", "filter[plan]=gold"},
		{"50%: half=true", "filter[half]=true"},
		{"1% via 50%: half=true&plan=gold", "filter[half]=true&filter[plan]=gold"},
		{"q rare: zoe (1 in 10,000)", "q=zoe"},
		{"q rare, common trigrams: number <n/2>,", fmt.Sprintf("q=number+%d%%2C", *n/2)},
		{"q common: hello (all)", "q=hello"},
		{"q none: qqqq", "q=qqqq"},
		// Operators (issue 39): walked through an equality's entries
		// when there is one, else a scan of the form in page order.
		{"gte, newest 1%: n>=0.99n", fmt.Sprintf("filter[n][gte]=%d", *n*99/100)},
		{"lt, oldest 0.01%: n<n/10000", fmt.Sprintf("filter[n][lt]=%d", *n/10_000)},
		{"range + equality: gold, n>=n/2", fmt.Sprintf("filter[plan]=gold&filter[n][gte]=%d", *n/2)},
		{"ne 99%: plan ne gold", "filter[plan][ne]=gold"},
		{"ne 1%: plan ne basic", "filter[plan][ne]=basic"},
		{"in 1%: plan in gold,silver", "filter[plan][in]=gold,silver"},
		{"exists false: none", "filter[email][exists]=false"},
		{"prefix 1 in 10,000: name zoe", "filter[name][prefix]=zoe"},
	} {
		q := c.q
		if q != "" {
			q += "&"
		}
		first, p := median(q + "limit=100")
		firstCPU := cpu
		deepT, deepItems := time.Duration(0), 0
		if p.NextCursor != "" {
			// A page about 90% into the range: since bounds it, as a
			// cursor there would.
			since := url.QueryEscape(at(*n * 9 / 10).Format(time.RFC3339))
			var dp page
			deepT, dp = median(q + "limit=100&order=asc&since=" + since)
			deepItems = len(dp.Submissions)
		}
		exact, te := median(q + "limit=1&total=exact")
		est, tt := median(q + "limit=1&total=estimate")
		fmt.Printf("%-34s %10s %9s %6d %9s %10s %6d %12s %12s\n", c.name, ms(first), ms(firstCPU), len(p.Submissions), examined(c.q, len(p.Submissions), p.NextCursor != ""), ms(deepT), deepItems,
			fmt.Sprintf("%s %d %s", ms(exact), te.Total.Value, te.Total.Kind), fmt.Sprintf("%s %d %s", ms(est), tt.Total.Value, tt.Total.Kind))
	}
	// Sorted lists (issue 39): the first page, and a page 99% into the
	// sorted walk, reached by following the cursors of pages of 1,000.
	fmt.Printf("\n%-34s %10s %9s %6s %12s %9s %6s\n", "sort (limit=100)", "page 1", "CPU/req", "items", "99% page", "CPU/req", "items")
	for _, c := range []struct{ name, q string }{
		{"n ascending (a number, unique)", "sort=n"},
		{"n descending", "sort=-n"},
		{"email (text, unique)", "sort=email"},
		{"name (2 values: ties by time)", "sort=-name"},
		{"city (500 values)", "sort=city"},
		{"half (a boolean)", "sort=half"},
		{"missing (no submission has it)", "sort=missing"},
		{"n with filter plan=gold (1%)", "sort=n&filter[plan]=gold"},
	} {
		first, p := median(c.q + "&limit=100")
		firstCPU := cpu
		// Walk to 99% of the form, in pages of 1,000.
		cursor, walked := "", 0
		for walked < *n*99/100 {
			q := c.q + "&limit=1000"
			if cursor != "" {
				q = "limit=1000&cursor=" + url.QueryEscape(cursor)
			}
			_, wp := get(q)
			walked += 1000 // a short page (a filter's) counts its examined rows
			if wp.NextCursor == "" {
				break
			}
			cursor = wp.NextCursor
		}
		deepT, deepCPU, deepItems := time.Duration(0), time.Duration(0), 0
		if cursor != "" {
			var dp page
			deepT, dp = median("limit=100&cursor=" + url.QueryEscape(cursor))
			deepCPU, deepItems = cpu, len(dp.Submissions)
		}
		fmt.Printf("%-34s %10s %9s %6d %12s %9s %6d\n", c.name, ms(first), ms(firstCPU), len(p.Submissions), ms(deepT), ms(deepCPU), deepItems)
	}
	return summaries(s, *runs)
}

// summaries measures the form's summary (issue 39): read afresh (a new
// handler each time, so none is kept) and kept (the same handler again,
// the form unchanged), the whole form and with filters, with the kinds
// of its figures.
func summaries(s store, runs int) error {
	fmt.Printf("\n%-34s %10s %9s %10s %9s %26s %8s %s\n", "summary (interval=day)", "afresh", "CPU/req", "kept", "CPU/req", "count", "read", "kinds (buckets, fields)")
	for _, c := range []struct{ name, q string }{
		{"whole form", ""},
		{"1%: plan=gold", "filter[plan]=gold"},
		{"50%: half=true", "filter[half]=true"},
		{"range: n>=0 (all)", "filter[n][gte]=0"},
		{"q rare: zoe", "q=zoe"},
	} {
		target := "/v1/forms/" + formID + "/summary?" + c.q
		var sum summary
		get := func(h http.Handler) time.Duration {
			r := httptest.NewRequest("GET", target, nil)
			r.Header.Set("Authorization", "Bearer "+key)
			w := httptest.NewRecorder()
			began := time.Now()
			h.ServeHTTP(w, r)
			d := time.Since(began)
			var body struct{ Summary summary }
			if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &body) != nil {
				fmt.Fprintf(os.Stderr, "%s: %d %.200s\n", target, w.Code, w.Body.String())
			}
			sum = body.Summary
			return d
		}
		measure := func(h func() http.Handler) (time.Duration, time.Duration) {
			var ds []time.Duration
			began := processCPU()
			for range runs {
				ds = append(ds, get(h()))
			}
			cpu := (processCPU() - began) / time.Duration(runs)
			slices.Sort(ds)
			return ds[len(ds)/2], cpu
		}
		afresh, afreshCPU := measure(func() http.Handler { return formsapi.NewHandler(s, s) })
		kept := formsapi.NewHandler(s, s)
		get(kept)
		keptT, keptCPU := measure(func() http.Handler { return kept })
		fmt.Printf("%-34s %10s %9s %10s %9s %26s %8d %s\n", c.name, ms(afresh), ms(afreshCPU), ms(keptT), ms(keptCPU),
			fmt.Sprintf("%d %s", sum.Count.Value, sum.Count.Kind), sum.Read.Value, sum.kinds())
	}
	return nil
}

// summary is the part of a summary's body findbench prints.
type summary struct {
	Count figure
	Read  struct {
		Value    int64
		Complete bool
	}
	Buckets []struct{ Count figure }
	Fields  []struct{ Present, Distinct figure }
}

type figure struct {
	Value int64
	Kind  string
}

// kinds counts the kinds of the summary's bucket and field figures.
func (s summary) kinds() string {
	buckets, fields := map[string]int{}, map[string]int{}
	for _, b := range s.Buckets {
		buckets[b.Count.Kind]++
	}
	for _, f := range s.Fields {
		fields[f.Present.Kind]++
	}
	return fmt.Sprintf("%v %v", buckets, fields)
}

// addForm adds the bench's form and its key to s, which the fill then
// fills.
func addForm(ctx context.Context, s store) error {
	if err := s.AddForm(ctx, account, formsapi.Form{ID: formID, Title: "Find bench", CreatedAt: start}); err != nil {
		return err
	}
	return s.AddKey(ctx, key, account)
}

// examined is how many index entries the first page read: each item's
// and the one after a full page for one clause; the bound for a page
// that reaches it (short, with a cursor). A search's probe counts are
// not in it (up to 16 keys of up to 1,001 entries each, from the index
// alone).
func examined(q string, items int, more bool) string {
	switch {
	case q == "":
		return "-"
	case items < 100 && more:
		return fmt.Sprint(find.MaxExamined)
	case more:
		return fmt.Sprint(items + 1)
	}
	return fmt.Sprint(items)
}

type page struct {
	Submissions []json.RawMessage
	NextCursor  string
	Total       struct {
		Value int64
		Kind  string
	}
}

// processCPU is this process's user and system CPU time so far (what
// /proc/self/stat's utime and stime count), which holds SQLite's work
// (in process) but not PostgreSQL's backends'.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

// bulkSQLite inserts n submissions in transactions of 50,000, each with
// its JSON as sent and its index keys as the store's AddSubmission
// writes them (the triggers move the feed counter). The setting is off
// while the rows go in, and it is left off: the store's next Open with
// WithSearchIndex turns it on and folds the rows, all in the form's
// unfolded tail, into the runs of the filters' entries and the trigrams'
// posting blocks (migrations 0022 and 0031) 4,096 rows at a time, the
// store's own code (run reopens the store after the fill).
func bulkSQLite(ctx context.Context, path string, n int) error {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=cache_size(-1000000)")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var formSeq int64
	if err := db.QueryRowContext(ctx, `SELECT seq FROM formsapi_forms WHERE id = ?`, formID).Scan(&formSeq); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `UPDATE formsapi_settings SET value = 0 WHERE name = ?`, stored.SearchIndexSetting); err != nil {
		return err
	}
	const batch = 50_000
	for lo := 0; lo < n; lo += batch {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		st, err := tx.PrepareContext(ctx, `INSERT INTO formsapi_submissions (form_seq, feed_pos, created_at, data, attachments, json, json_version, find_keys) VALUES (?, ?, ?, ?, '[]', ?, ?, ?)`)
		if err != nil {
			tx.Rollback()
			return err
		}
		for i := lo; i < min(lo+batch, n); i++ {
			sub := formsapi.Submission{FormID: formID, Data: data(i), CreatedAt: at(i)}
			encoded, err := formsapi.AppendSubmissionJSON(nil, sub)
			if err != nil {
				tx.Rollback()
				return err
			}
			keys, _ := json.Marshal(find.IndexKeys(sub.Data, nil))
			if _, err := st.ExecContext(ctx, formSeq, i+1, at(i).UnixNano(), string(sub.Data), encoded, stored.Version, string(keys)); err != nil {
				tx.Rollback()
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%d\n", lo+batch)
	}
	_, err = db.ExecContext(ctx, `ANALYZE`)
	return err
}

// copyPG writes n submissions with COPY, each with its JSON as sent and
// its index keys as the store would write them, then fills the index from
// the keys and moves the form's feed counter past them and its version
// on.
func copyPG(ctx context.Context, dsn, schema string, n int) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var formSeq int64
	if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT seq FROM %s.formsapi_forms WHERE id = $1`, pgx.Identifier{schema}.Sanitize()), formID).Scan(&formSeq); err != nil {
		return err
	}
	// The row triggers (the form's version and feed counter, the index)
	// would update the form's row once per submission, a million times
	// in one transaction: they are off for the COPY, and what they would
	// have done is done once after it, the index's entries included.
	sub := pgx.Identifier{schema, "formsapi_submissions"}.Sanitize()
	if _, err := conn.Exec(ctx, `ALTER TABLE `+sub+` DISABLE TRIGGER USER`); err != nil {
		return err
	}
	const batch = 50_000
	for lo := 0; lo < n; lo += batch {
		rows := make([][]any, 0, batch)
		for i := lo; i < min(lo+batch, n); i++ {
			sub := formsapi.Submission{FormID: formID, Data: data(i), CreatedAt: at(i)}
			encoded, err := formsapi.AppendSubmissionJSON(nil, sub)
			if err != nil {
				return err
			}
			rows = append(rows, []any{formSeq, int64(i + 1), at(i).UnixNano(), string(sub.Data), "[]", encoded, int32(stored.Version), find.IndexKeys(sub.Data, nil)})
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{schema, "formsapi_submissions"},
			[]string{"form_seq", "feed_pos", "created_at", "data", "attachments", "json", "json_version", "find_keys"}, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%d\n", lo+batch)
	}
	// The filters' entries, a few per submission, go in without
	// formsapi_find's primary key, which is then built again as migration
	// 0017 defines it: one sort, where inserting under the key puts each
	// entry at a random place in it. The keys of a row are distinct
	// (find.IndexKeys) and the form is new, so no entry would have
	// conflicted. The trigrams' entries, about a hundred per submission
	// with the search index on, go into posting blocks (migration 0035),
	// 56 to a block in keyset order, as that migration makes them of
	// formsapi_find's.
	sch := pgx.Identifier{schema}.Sanitize()
	began := time.Now()
	for _, q := range []string{
		`SET maintenance_work_mem = '1GB'`,
		fmt.Sprintf(`ALTER TABLE %s.formsapi_find DROP CONSTRAINT formsapi_find_pkey`, sch),
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return err
		}
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.formsapi_find (form_seq, key, created_at, seq)
SELECT form_seq, k, created_at, seq FROM %s.formsapi_submissions, unnest(find_keys) k WHERE form_seq = $1 AND k >= 0`, sch, sch), formSeq); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO %[1]s.formsapi_find_blocks (form_seq, key, lo_at, lo_seq, ats, seqs)
SELECT form_seq, key, ats[1], seqs[1], ats, seqs FROM (
    SELECT form_seq, key, b, array_agg(created_at ORDER BY created_at, seq) AS ats, array_agg(seq ORDER BY created_at, seq) AS seqs
    FROM (
        SELECT s.form_seq, k AS key, s.created_at, s.seq,
            (row_number() OVER (PARTITION BY k ORDER BY s.created_at, s.seq) - 1) / 56 AS b
        FROM %[1]s.formsapi_submissions s, unnest(s.find_keys) k WHERE s.form_seq = $1 AND k < 0
    ) e
    GROUP BY form_seq, key, b
) g`, sch), formSeq); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "index entries inserted in %s\n", time.Since(began).Round(time.Second))
	if _, err := conn.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s.formsapi_find ADD CONSTRAINT formsapi_find_pkey PRIMARY KEY (form_seq, key, created_at, seq)`, sch)); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "index entries and primary key in %s\n", time.Since(began).Round(time.Second))
	if _, err := conn.Exec(ctx, `ALTER TABLE `+sub+` ENABLE TRIGGER USER`); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, fmt.Sprintf(`UPDATE %s.formsapi_forms SET feed_last = $1, version = version + 1 WHERE seq = $2`, sch), n, formSeq)
	if err == nil {
		// VACUUM sets the visibility map, as autovacuum would after so
		// many inserts, so a walk of the index's entries reads them from
		// the index alone.
		_, err = conn.Exec(ctx, fmt.Sprintf(`VACUUM ANALYZE %s.formsapi_submissions`, sch))
	}
	if err == nil {
		_, err = conn.Exec(ctx, fmt.Sprintf(`VACUUM ANALYZE %[1]s.formsapi_find, %[1]s.formsapi_find_blocks`, sch))
	}
	return err
}
