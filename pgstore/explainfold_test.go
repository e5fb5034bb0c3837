package pgstore_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/formsapi/formsapi/pgstore"
)

// TestExplainFold: the search index's fold (formsapi_fold_tail_to,
// migration 0036) reads the tail's submissions by their primary key
// whatever the statistics say, and 0035's fold, under the same
// statistics, read the whole submissions table: the test's conditions
// reproduce what made a bulk load slow down as its table grew (a tail
// whose table, bloated by folds that no vacuum followed, looks large to
// the planner, beside 30,000 submissions it has not seen analyzed). The
// fold's statement is planned as the function plans it at a call: its
// body, with its parameter as a prepared statement's, under the
// function's search_path.
func TestExplainFold(t *testing.T) {
	t.Parallel()
	s := mustOpenFresh(t)
	pool := pgstore.Pool(s)
	schema := quote(s.Schema())
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, q := range []string{
		`BEGIN`,
		`SET LOCAL search_path = ` + schema,
		`INSERT INTO formsapi_forms (id, account_id, title, icon, notification_email, created_at) VALUES ('f', 'a', 't', 'i', 'e', 1)`,
		`ANALYZE formsapi_submissions`, // empty: what the planner then believes
		`ALTER TABLE formsapi_submissions DISABLE TRIGGER USER`,
		`INSERT INTO formsapi_submissions (form_seq, feed_pos, created_at, data, json, find_keys)
SELECT (SELECT seq FROM formsapi_forms WHERE id = 'f'), g, g, '{}', '\x7b7d'::bytea, ARRAY[-1 - g % 500, -1000 - g % 7]::bigint[]
FROM generate_series(1, 30000) g`,
		`ALTER TABLE formsapi_submissions ENABLE TRIGGER USER`,
		// The tail bloated: 40,000 rows folded (deleted) with no vacuum
		// since, then the 256 of the next fold.
		`INSERT INTO formsapi_find_tail (form_seq, created_at, seq) SELECT form_seq, created_at, seq FROM formsapi_submissions WHERE seq % 3 <> 0 LIMIT 20000`,
		`DELETE FROM formsapi_find_tail`,
		`INSERT INTO formsapi_find_tail (form_seq, created_at, seq) SELECT form_seq, created_at, seq FROM formsapi_submissions WHERE seq % 3 <> 0 LIMIT 20000`,
		`DELETE FROM formsapi_find_tail`,
		`INSERT INTO formsapi_find_tail (form_seq, created_at, seq) SELECT form_seq, created_at, seq FROM formsapi_submissions ORDER BY seq DESC LIMIT 256`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	defer func() { _, _ = conn.Exec(ctx, `ROLLBACK`) }() // the test's rows go with it

	plan := func(name, body string) string {
		t.Helper()
		// The body's one use of its parameter.
		if strings.Count(body, "seq <= last") != 1 {
			t.Fatalf("%s: the fold's body no longer compares seq <= last once:\n%s", name, body)
		}
		body = strings.Replace(body, "seq <= last", "seq <= $1", 1)
		if _, err := conn.Exec(ctx, `PREPARE `+name+`(bigint) AS `+body); err != nil {
			t.Fatalf("prepare %s: %v", name, err)
		}
		rows, err := conn.Query(ctx, `EXPLAIN EXECUTE `+name+`(9223372036854775807)`)
		if err != nil {
			t.Fatalf("explain %s: %v", name, err)
		}
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			b.WriteString(line + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	scansAll := regexp.MustCompile(`(Seq|Bitmap Heap) Scan on formsapi_submissions`)

	var body string
	if err := conn.QueryRow(ctx, `SELECT prosrc FROM pg_proc WHERE oid = 'formsapi_fold_tail_to(bigint)'::regprocedure`).Scan(&body); err != nil {
		t.Fatal(err)
	}
	now := plan("fold_now", body)
	if scansAll.MatchString(now) || !strings.Contains(now, "Index Scan using formsapi_submissions_pkey on formsapi_submissions") {
		t.Errorf("the fold reads the submissions table otherwise than by primary key:\n%s", now)
	}

	// 0035's body, under the same statistics, scanned the table: the
	// conditions above are those that matter.
	src, err := os.ReadFile("migrations/0035_find_blocks.sql")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)FUNCTION formsapi_fold_tail_to\(last bigint\).*? AS \$\$(.*?)\$\$;`).FindSubmatch(src)
	if m == nil {
		t.Fatal("0035's fold not found")
	}
	if was := plan("fold_0035", string(m[1])); !scansAll.MatchString(was) {
		t.Errorf("0035's fold no longer scans the submissions table under these statistics, so this test shows nothing:\n%s", was)
	}
}
