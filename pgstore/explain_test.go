package pgstore_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/pgstore"
)

// TestExplain checks the plan of every list statement on tables big
// enough (50,000 forms, 100,000 submissions, analyzed) that the planner
// would sort or scan the whole table if the statement let it: each must
// be one index range scan bounded at both ends by the keyset, under a
// Limit, with no Sort node and no sequential scan, for the first page, a
// page 99% deep, a since/until window, both orders, and both the custom
// plans PostgreSQL makes for the first executions of a prepared statement
// and the generic plan it may switch to later. With ANALYZE, the scan
// reads no more rows than the page needs, however deep it is.
//
// The submissions are written with their table's triggers off, as in
// TestExplainFind: through the triggers each row updates its form's row
// (migration 0006's versions), and 50,000 updates of form-1's row in one
// statement took 480 s of PostgreSQL's CPU (2026-11-29, 600 s of wall
// time in CI). The plans read the tables as they are, not how they were
// filled.
func TestExplain(t *testing.T) {
	t.Parallel()
	s := mustOpenFresh(t)
	pool := pgstore.Pool(s)
	schema := quote(s.Schema())
	const t0 = int64(1_700_000_000_000_000_000)
	for _, q := range []string{
		// 20,000 forms of one account, the rest over 1,000 others; many
		// share a creation time.
		fmt.Sprintf(`INSERT INTO %s.formsapi_forms (id, account_id, title, icon, notification_email, created_at)
SELECT 'form-' || g, CASE WHEN g <= 20000 THEN 'big' ELSE 'acct-' || (g %% 1000) END, 't', 'i', 'e', %d + (g / 4)::bigint * 1000000000
FROM generate_series(1, 50000) g`, schema, t0),
		// 50,000 submissions of form-1, 50,000 over the other forms,
		// with the table's triggers off.
		fmt.Sprintf(`ALTER TABLE %s.formsapi_submissions DISABLE TRIGGER USER`, schema),
		fmt.Sprintf(`INSERT INTO %[1]s.formsapi_submissions (form_seq, feed_pos, created_at, data, json)
SELECT CASE WHEN g <= 50000 THEN (SELECT seq FROM %[1]s.formsapi_forms WHERE id = 'form-1') ELSE 1 + g %% 50000 END,
       g, %[2]d + (g / 3)::bigint * 1000000000, '{}', '\x7b7d'::bytea
FROM generate_series(1, 100000) g`, schema, t0),
		fmt.Sprintf(`ALTER TABLE %s.formsapi_submissions ENABLE TRIGGER USER`, schema),
		fmt.Sprintf(`ANALYZE %[1]s.formsapi_forms, %[1]s.formsapi_submissions`, schema),
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", firstLine(q), err)
		}
	}
	for _, sql := range pgstore.AllSQL(s) {
		if strings.Contains(strings.ToUpper(sql), "OFFSET") {
			t.Errorf("statement uses OFFSET: %s", sql)
		}
	}

	at := func(sec int64) time.Time { return time.Unix(0, t0+sec*1e9) }
	deep := func(rows int64, perSecond int64) string { // a cursor 99% into the list
		return keyset.Pos{At: t0 + rows*99/100/perSecond*1e9, Seq: rows * 99 / 100}.String()
	}
	queries := []struct {
		name string
		q    formsapi.Query
	}{
		{"FirstPage", formsapi.Query{Limit: 50}},
		{"MaxLimit", formsapi.Query{Limit: 1000}},
		{"Window", formsapi.Query{Limit: 50, Since: at(4000), Until: at(9000)}},
	}
	lists := []struct {
		table, owner, index string
		rows, perSecond     int64
	}{
		{"forms", "'big'", "formsapi_forms_account", 20000, 4},
		{"submissions", "'form-1', 'big'", "formsapi_submissions_form", 50000, 3},
		{"encoded", "'form-1', 'big'", "formsapi_submissions_form", 50000, 3},
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, l := range lists {
		for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
			cases := append(queries[:len(queries):len(queries)], struct {
				name string
				q    formsapi.Query
			}{"DeepPage", formsapi.Query{Limit: 50, Order: o, Cursor: deep(l.rows, l.perSecond)}})
			for _, c := range cases {
				c.q.Order = o
				args, err := pgstore.ListArgs(c.q)
				if err != nil {
					t.Fatal(err)
				}
				literals := l.owner
				for _, a := range args {
					literals += ", " + strconv.FormatInt(toInt64(a), 10)
				}
				fetch := toInt64(args[len(args)-1])
				if l.table == "encoded" {
					literals += ", 4194304" // the byte budget's room
				}
				name := fmt.Sprintf("%s/%s/%s", l.table, o, c.name)
				sql := pgstore.ListSQL(s, l.table, o)
				for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
					plan := explain(t, conn.Conn(), sql, literals, mode, mode == "force_custom_plan")
					checkListPlan(t, name+"/"+mode, plan, l.index, fetch)
				}
			}
		}
	}
	for sql, args := range pgstore.LookupSQL(s) {
		var literals []string
		for _, a := range args {
			switch v := a.(type) {
			case string:
				literals = append(literals, "'"+v+"'")
			case []byte:
				literals = append(literals, fmt.Sprintf(`'\x%x'::bytea`, v))
			case [][]byte:
				var elems []string
				for _, b := range v {
					elems = append(elems, fmt.Sprintf(`'\x%x'::bytea`, b))
				}
				literals = append(literals, "ARRAY["+strings.Join(elems, ", ")+"]")
			case []string:
				literals = append(literals, "ARRAY['"+strings.Join(v, "', '")+"']::text[]")
			case int:
				literals = append(literals, strconv.Itoa(v))
			default:
				t.Fatalf("%s: an argument of type %T", firstLine(sql), a)
			}
		}
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			plan := explain(t, conn.Conn(), sql, strings.Join(literals, ", "), mode, false)
			for _, n := range nodes(plan) {
				if n.NodeType == "Seq Scan" {
					t.Errorf("%s (%s): sequential scan of %s", firstLine(sql), mode, n.Relation)
				}
			}
		}
	}
	checkDeletePlan(t, s, conn.Conn())
}

// checkDeletePlan: the delete of a submission by its metadata ID seeks
// the partial index on (form_seq, host_id), in a generic plan too.
func checkDeletePlan(t *testing.T, s *pgstore.Store, conn *pgx.Conn) {
	t.Helper()
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		plan := explain(t, conn, pgstore.DeleteSubmissionSQL(s), "'form-1', 'big', 'an-id'", mode, false)
		seeks := false
		for _, n := range nodes(plan) {
			seeks = seeks || n.Index == "formsapi_submissions_host_id"
		}
		if !seeks {
			t.Errorf("the delete by metadata ID (%s) does not seek formsapi_submissions_host_id: %+v", mode, plan)
		}
	}
}

func toInt64(a any) int64 {
	switch v := a.(type) {
	case int64:
		return v
	case int:
		return int64(v)
	}
	panic(fmt.Sprintf("unexpected argument %T", a))
}

// planNode is the part of EXPLAIN (FORMAT JSON) the test looks at.
type planNode struct {
	NodeType      string     `json:"Node Type"`
	Relation      string     `json:"Relation Name"`
	Index         string     `json:"Index Name"`
	IndexCond     string     `json:"Index Cond"`
	Filter        string     `json:"Filter"`
	ActualRows    *int64     `json:"Actual Rows"`
	ActualLoops   int64      `json:"Actual Loops"`
	Function      string     `json:"Function Name"`
	Alias         string     `json:"Alias"`
	RowsFiltered  int64      `json:"Rows Removed by Filter"`
	RowsRechecked int64      `json:"Rows Removed by Index Recheck"`
	Plans         []planNode `json:"Plans"`
}

func nodes(n planNode) []planNode {
	all := []planNode{n}
	for _, c := range n.Plans {
		all = append(all, nodes(c)...)
	}
	return all
}

// explain prepares sql, and explains executing it with literal arguments
// under plan_cache_mode mode, with ANALYZE if analyze is set.
func explain(t *testing.T, conn *pgx.Conn, sql, literals, mode string, analyze bool) planNode {
	t.Helper()
	opts := "FORMAT JSON"
	if analyze {
		opts += ", ANALYZE, TIMING OFF"
	}
	for _, q := range []string{
		"DEALLOCATE ALL",
		"SET plan_cache_mode = " + mode,
		"PREPARE explained AS " + sql,
	} {
		if _, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", firstLine(q), err)
		}
	}
	defer conn.Exec(ctx, "DEALLOCATE explained; RESET plan_cache_mode", pgx.QueryExecModeSimpleProtocol)
	var out string
	q := fmt.Sprintf("EXPLAIN (%s) EXECUTE explained(%s)", opts, literals)
	if err := conn.QueryRow(ctx, q, pgx.QueryExecModeSimpleProtocol).Scan(&out); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var plans []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN output: %v\n%s", err, out)
	}
	return plans[0].Plan
}

var (
	lowerBound = regexp.MustCompile(`ROW\(created_at, seq\) > ROW\(`)
	upperBound = regexp.MustCompile(`ROW\(created_at, seq\) < ROW\(`)
)

// checkListPlan checks that a list plan is a Limit over one range scan of
// index, bounded below and above by the keyset, with nothing sorted or
// scanned whole; with ANALYZE figures, that the scan read at most fetch
// rows and filtered none away.
//
// The fast path's statement (table "encoded") reads its form's row with
// the page, for the form's version: its plan must be a nested loop over
// one lookup of the form by its unique ID, with that Limit inside. The
// statement of a page of forms, which reads its list's version too (table
// "forms"), must be a nested loop over the one row that carries the
// version, read by one probe of formsapi_form_lists' primary key, and
// that Limit.
func checkListPlan(t *testing.T, name string, plan planNode, index string, fetch int64) {
	t.Helper()
	if strings.HasPrefix(name, "forms/") {
		var version, limit *planNode
		for i, n := range plan.Plans {
			switch {
			case n.NodeType == "Index Scan" && n.Index == "formsapi_form_lists_pkey":
				version = &plan.Plans[i]
			case n.NodeType == "Limit":
				limit = &plan.Plans[i]
			case n.NodeType != "Result":
				t.Errorf("%s: %s node (on %q) beside the page", name, n.NodeType, n.Relation)
			}
		}
		switch {
		case plan.NodeType != "Nested Loop":
			t.Errorf("%s: the plan starts with %s, want a Nested Loop", name, plan.NodeType)
		case version == nil:
			t.Errorf("%s: the version is not read by an index scan of formsapi_form_lists_pkey", name)
		case version.ActualRows != nil && *version.ActualRows != 1:
			t.Errorf("%s: the version's scan read %d rows, want 1", name, *version.ActualRows)
		case limit == nil:
			t.Errorf("%s: no Limit beside the version", name)
		default:
			plan = *limit
		}
	}
	if strings.HasPrefix(name, "encoded/") {
		// Nested loops over the form's row, the probe of the submission at
		// its feed_last (the head's anchor, migration 0016) and the page.
		var form, anchor, page []planNode
		var flatten func(n planNode)
		flatten = func(n planNode) {
			switch {
			case n.NodeType == "Nested Loop":
				for _, c := range n.Plans {
					flatten(c)
				}
			case n.Index == "formsapi_forms_id":
				form = append(form, n)
			case n.Index == "formsapi_submissions_feed":
				anchor = append(anchor, n)
			default:
				page = append(page, n)
			}
		}
		if plan.NodeType != "Nested Loop" {
			t.Errorf("%s: the plan starts with %s, want a Nested Loop", name, plan.NodeType)
		}
		flatten(plan)
		switch {
		case len(form) != 1 || form[0].NodeType != "Index Scan":
			t.Errorf("%s: the form is not read by one index scan of formsapi_forms_id: %+v", name, form)
		case len(anchor) != 1 || anchor[0].NodeType != "Index Scan" && anchor[0].NodeType != "Index Only Scan":
			t.Errorf("%s: the head's anchor is not read by one index scan of formsapi_submissions_feed: %+v", name, anchor)
		case anchor[0].ActualRows != nil && *anchor[0].ActualRows > 1:
			t.Errorf("%s: the anchor's probe read %d rows", name, *anchor[0].ActualRows)
		case len(page) != 1:
			t.Errorf("%s: %d nodes beside the form and the anchor, want the page's", name, len(page))
		default:
			plan = page[0]
		}
	}
	if strings.HasPrefix(name, "encoded/") {
		// The rows are bounded in bytes around the limit: a subquery scan
		// of a window over it. Check from the limit down.
		for _, n := range nodes(plan) {
			if n.NodeType == "Limit" {
				plan = n
				break
			}
			if n.NodeType == "Sort" || n.NodeType == "Incremental Sort" {
				t.Errorf("%s: %s node above the limit", name, n.NodeType)
			}
		}
	}
	if plan.NodeType != "Limit" {
		t.Errorf("%s: the plan starts with %s, want Limit", name, plan.NodeType)
	}
	var scans int
	for _, n := range nodes(plan) {
		switch n.NodeType {
		case "Sort", "Incremental Sort", "Seq Scan", "Bitmap Heap Scan", "Materialize", "Hash":
			t.Errorf("%s: %s node (on %q)", name, n.NodeType, n.Relation)
		}
		if n.Index != index {
			continue
		}
		scans++
		if n.NodeType != "Index Scan" && n.NodeType != "Index Only Scan" {
			t.Errorf("%s: %s on %s, want an index scan", name, n.NodeType, index)
		}
		if !lowerBound.MatchString(n.IndexCond) || !upperBound.MatchString(n.IndexCond) {
			t.Errorf("%s: index condition %q is not bounded at both ends by the keyset", name, n.IndexCond)
		}
		if n.Filter != "" {
			t.Errorf("%s: rows filtered after the index scan: %s", name, n.Filter)
		}
		if n.ActualRows != nil && (*n.ActualRows > fetch || n.RowsFiltered > 0) {
			t.Errorf("%s: the scan read %d rows and filtered %d for a page of %d", name, *n.ActualRows, n.RowsFiltered, fetch)
		}
	}
	if scans != 1 {
		t.Errorf("%s: %d scans of %s, want 1", name, scans, index)
	}
	if t.Failed() {
		b, _ := json.MarshalIndent(plan, "", "  ")
		t.Logf("%s plan:\n%s", name, b)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// TestLookupsPlannedOnce runs each key and form lookup as pgx runs it, a
// prepared statement executed again and again on one connection, and
// checks that PostgreSQL moves to its generic plan rather than planning
// every execution anew. The batched lookup did not while the planner
// could count the batch's rows, and its planning cost more than the
// lookups.
func TestLookupsPlannedOnce(t *testing.T) {
	t.Parallel()
	s := mustOpenFresh(t)
	conn, err := pgstore.Pool(s).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for sql, args := range pgstore.LookupSQL(s) {
		for i := 0; i < 10; i++ {
			// pgx's default mode: a statement prepared once per connection.
			rows, err := conn.Query(ctx, sql, append([]any{pgx.QueryExecModeCacheStatement}, args...)...)
			if err != nil {
				t.Fatal(err)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
		}
		var generic, custom int64
		if err := conn.QueryRow(ctx, "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1", sql).Scan(&generic, &custom); err != nil {
			t.Fatal(err)
		}
		if generic == 0 || custom > 5 {
			t.Errorf("%s: after 10 executions, %d generic plans and %d custom: PostgreSQL plans it on every execution", firstLine(sql), generic, custom)
		}
	}
}
