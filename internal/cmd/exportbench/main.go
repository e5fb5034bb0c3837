// Command exportbench is the export benchmark of issue 25, in two steps
// that bench/export.sh runs against the example server:
//
//	exportbench seed -db forms.db -n 1000000            # or -postgres DSN -schema S
//	exportbench get -url URL -key KEY -path /v1/forms/export/export?format=csv -gzip
//
// seed adds to account benchdata.Account a form "export" of -n
// submissions of ten data fields each (benchdata.WideSubmission) and a
// key for the account (written to FILE.key, FILE being -db, or -schema
// over PostgreSQL). The first -distinct submissions (10,000) go through
// the store's AddSubmission (-parallel writers); the rest, but the last,
// are copies of those rows made by SQL in the store's own tables, each
// with the next feed position: a million calls of AddSubmission take
// 10 to 20 minutes on a loaded machine, the copies seconds. The copies
// name every column of the submissions table but the row's seq and
// feed position, so a column added later is copied too; the stores'
// table of field names needs nothing from them, every one of the ten
// fields being in the first submissions already. SQLite runs its
// triggers for each copy (the form's version and feed counter);
// PostgreSQL's copies run with triggers off (session_replication_role
// replica), then the form's feed counter is set, and the last
// submission, through AddSubmission again, moves the form's version as
// any write does. The copies carry no search keys (SQLite: a copy's
// find_keys keeps only the filters' keys, see sqliteFilterKeys;
// PostgreSQL: triggers off, so no index entries at all): an export reads
// no index, and indexing a copy's hundred trigram keys made the SQLite
// seed the slowest part of the run. Repeats are 10,000 rows (about 5 MB) apart, beyond
// gzip's 32 KiB window, so they do not make the gzip export smaller.
// Over PostgreSQL the seed's own sessions commit with synchronous_commit
// off. It prints one line:
//
//	seed: n=1000000 distinct=10000 seconds=41.2
//
// get sends one GET of -path, with Accept-Encoding: gzip when -gzip,
// reads the whole body (decoding gzip as it comes) and prints one line:
//
//	get: status=200 first_byte_ms=12.3 first_line_ms=14.0 total_s=9.81 wire_bytes=480000000 bytes=480000000 lines=1000001
//
// first_byte_ms is the time from sending the request to the response's
// first byte (the status line), first_line_ms to the body's first
// complete line, total_s to its end; wire_bytes counts the body as sent,
// bytes and lines the decoded file.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/internal/steps"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the copies' SQLite connection
)

// FormID is the form seed fills.
const FormID = "export"

func main() {
	steps.Main("exportbench",
		steps.Step{Name: "seed", Run: seed},
		steps.Step{Name: "get", Run: get},
	)
}

func seed(args []string) error {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	db := fs.String("db", "forms.db", "SQLite database file")
	dsn := fs.String("postgres", "", "seed PostgreSQL at this DSN instead")
	schema := fs.String("schema", "", "with -postgres: the schema")
	n := fs.Int("n", 1_000_000, "submissions of form "+FormID)
	distinct := fs.Int("distinct", 10_000, "submissions written through AddSubmission; the others copy them")
	parallel := fs.Int("parallel", 4, "writers at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *distinct < 1 || *distinct >= *n {
		return fmt.Errorf("-distinct %d: want 1 to -n minus one", *distinct)
	}
	ctx := context.Background()
	var s formsapi.Writer
	var copyRows func(ctx context.Context, k, upTo int) error
	file := *db
	if *dsn != "" {
		u, err := url.Parse(*dsn)
		if err != nil {
			return fmt.Errorf("-postgres: %w", err)
		}
		q := u.Query()
		q.Set("options", "-c synchronous_commit=off")
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads + as itself
		copyRows = func(ctx context.Context, k, upTo int) error { return copyPostgres(ctx, u.String(), *schema, k, upTo) }
		var opts []pgstore.Option
		if *schema != "" {
			opts = append(opts, pgstore.WithSchema(*schema))
		}
		pg, err := pgstore.Open(ctx, u.String(), opts...)
		if err != nil {
			return err
		}
		defer pg.Close()
		s, file = pg, *schema
	} else {
		sq, err := sqlitestore.Open(*db)
		if err != nil {
			return err
		}
		defer sq.Close()
		s = sq
		copyRows = func(ctx context.Context, k, upTo int) error { return copySQLite(ctx, *db, k, upTo) }
	}
	if err := s.AddForm(ctx, benchdata.Account, formsapi.Form{ID: FormID, Title: "Sign-ups"}); err != nil {
		return err
	}
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, *parallel)
	for range *parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= *distinct {
					return
				}
				sub, m := benchdata.WideSubmission(FormID, i)
				if err := s.AddSubmission(ctx, sub, m); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d submissions through AddSubmission, %.0f s\n", *distinct, time.Since(start).Seconds())
	if err := copyRows(ctx, *distinct, *n-1); err != nil {
		return fmt.Errorf("copies: %w", err)
	}
	last, m := benchdata.WideSubmission(FormID, *n-1)
	if err := s.AddSubmission(ctx, last, m); err != nil {
		return err
	}
	d := time.Since(start)
	key, err := formsapi.NewKey()
	if err != nil {
		return err
	}
	if err := s.AddKey(ctx, key, benchdata.Account); err != nil {
		return err
	}
	if err := os.WriteFile(file+".key", []byte(key), 0o600); err != nil {
		return err
	}
	fmt.Printf("seed: n=%d distinct=%d seconds=%.1f\n", *n, *distinct, d.Seconds())
	return nil
}

// copyColumns returns the submissions table's columns but seq and
// feed_pos, comma-separated, and the same list as a SELECT reads them for
// a copy: find_keys becomes findKeys (SQLite: only the filters' keys of
// the copied row, PostgreSQL: the column itself).
func copyColumns(all []string, findKeys string) (cols, sel string) {
	var c, s []string
	for _, name := range all {
		if name == "seq" || name == "feed_pos" {
			continue
		}
		c = append(c, name)
		if name == "find_keys" {
			s = append(s, findKeys)
		} else {
			s = append(s, name)
		}
	}
	return strings.Join(c, ", "), strings.Join(s, ", ")
}

// sqliteFilterKeys is the SQLite copies' find_keys: the copied row's
// filter keys (find.Key's non-negative keys) without its search trigram
// keys (negative). An export reads no index, and the trigger that copies
// every key into formsapi_find made a copy of a wide submission cost
// about a hundred index inserts: a million copies took most of an hour.
// The copies still answer filters; a search (q=) finds only the first
// -distinct submissions.
const sqliteFilterKeys = "(SELECT json_group_array(value) FROM json_each(find_keys) WHERE value >= 0)"

// copySQLite copies the first k submissions of form FormID (feed
// positions 1 to k) over and over, each copy at the next feed positions,
// until position upTo, in one transaction; a copy's find_keys holds only
// the filters' keys (sqliteFilterKeys).
func copySQLite(ctx context.Context, path string, k, upTo int) error {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT name FROM pragma_table_info('formsapi_submissions')")
	if err != nil {
		return err
	}
	var all []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return err
		}
		all = append(all, c)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	cols, sel := copyColumns(all, sqliteFilterKeys)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt := "INSERT INTO formsapi_submissions (feed_pos, " + cols + ") SELECT feed_pos + ?, " + sel +
		" FROM formsapi_submissions WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = ?) AND feed_pos <= ? ORDER BY feed_pos"
	for from := k; from < upTo; from += k {
		if _, err := tx.ExecContext(ctx, stmt, from, FormID, min(k, upTo-from)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// copyPostgres is copySQLite over PostgreSQL, with triggers off, then the
// form's feed counter set to upTo.
func copyPostgres(ctx context.Context, dsn, schema string, k, upTo int) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return err
	}
	if schema != "" {
		cfg.RuntimeParams["search_path"] = schema
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'formsapi_submissions' ORDER BY ordinal_position")
	if err != nil {
		return err
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	cols, _ := copyColumns(all, "find_keys")
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
		return err
	}
	stmt := "INSERT INTO formsapi_submissions (feed_pos, " + cols + ") SELECT feed_pos + $1, " + cols +
		" FROM formsapi_submissions WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = $2) AND feed_pos <= $3 ORDER BY feed_pos"
	for from := k; from < upTo; from += k {
		if _, err := tx.Exec(ctx, stmt, from, FormID, min(k, upTo-from)); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, "UPDATE formsapi_forms SET feed_last = $1 WHERE id = $2", upTo, FormID); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	_, err = c.Exec(ctx, "ANALYZE formsapi_submissions")
	return err
}

func get(args []string) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:8080", "the server")
	path := fs.String("path", "/v1/forms/"+FormID+"/export", "what to get")
	key := fs.String("key", "", "API key")
	gz := fs.Bool("gzip", false, "ask for gzip")
	if err := fs.Parse(args); err != nil {
		return err
	}
	req, err := http.NewRequest("GET", *base+*path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+*key)
	if *gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	var first time.Time
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotFirstResponseByte: func() { first = time.Now() },
	}))
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	start := time.Now()
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	wire := &counter{r: res.Body}
	var body io.Reader = wire
	if res.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(wire)
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		body = zr
	}
	var firstLine time.Time
	var n, lines int64
	buf := make([]byte, 256<<10)
	for {
		k, err := body.Read(buf)
		n += int64(k)
		if c := bytes.Count(buf[:k], []byte{'\n'}); c > 0 {
			lines += int64(c)
			if firstLine.IsZero() {
				firstLine = time.Now()
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("after %d bytes: %w", n, err)
		}
	}
	total := time.Since(start)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", res.StatusCode)
	}
	ms := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return fmt.Sprintf("%.1f", float64(t.Sub(start).Microseconds())/1000)
	}
	fmt.Printf("get: status=%d first_byte_ms=%s first_line_ms=%s total_s=%.2f wire_bytes=%d bytes=%d lines=%d sync_token=%t\n",
		res.StatusCode, ms(first), ms(firstLine), total.Seconds(), wire.n, n, lines, strings.TrimSpace(res.Header.Get("Sync-Token")) != "")
	return nil
}

// counter counts the bytes read through it.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}
