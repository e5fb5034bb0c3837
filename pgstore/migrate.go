package pgstore

import (
	"context"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/stored"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrSchemaTooNew means the schema was migrated by a newer version of this
// package than the one running. The store refuses it rather than write to
// tables whose shape it does not know; upgrade the program.
var ErrSchemaTooNew = errors.New("pgstore: database schema is newer than this version of the package")

// The schema, one file per version: NNNN_name.sql, applied in order with
// search_path set to the store's schema, so the files name tables without
// one. Published files never change; a schema change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration = stored.Migration

// migrations returns the embedded migrations in version order.
func migrations() ([]migration, error) {
	return stored.Migrations(migrationFiles)
}

// lockKey is the advisory lock that serialises migrations of one schema:
// nodes migrating other schemas of the same database do not wait.
func lockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("formsapi migrate\x00" + schema))
	return int64(h.Sum64())
}

// migrate brings the formsapi_ tables in schema to the current version,
// creating the schema if needed. Everything happens in one transaction
// that first takes a transaction-level advisory lock on the schema: nodes
// starting together queue on it, the first migrates, and the others then
// find nothing left to do. PostgreSQL's DDL is transactional, so a failed
// migration leaves the schema as it was, and no other connection ever
// sees half of one.
//
// The transaction runs at read committed whatever the database's default
// isolation: at repeatable read or serializable it would take its
// snapshot with the statement that waits for the lock, and then not see
// the schema and tables the node before it created.
//
// Under the same lock it turns the search index on when searchIndex says
// so (enableSearchIndex), and reads the store's cursor secret, making it first
// if there is none (see internal/stored/secret.go), and returns it: nodes
// starting together on an empty schema queue on the lock, and every one
// after the first finds the first one's secret.
//
// p logs the progress of the steps that take long (see WithLogger): the
// wait for another node's migration among them.
//
// A migration whose index build found an entry stored already
// (errEntryExists, which the store never leaves) is rolled back and made
// again, its build's inserts then skipping the entries there.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, now time.Time, searchIndex, sortIndex bool, sortFields []string, p *stored.Progress) (secret []byte, err error) {
	ms, err := migrations()
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	careful := false // the build's inserts of index entries skip those there (errEntryExists)
	migrateTx := func(tx pgx.Tx) error {
		wait := p.Begin(stored.StepLock, -1)
		_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey(schema))
		wait.End(err)
		if err != nil {
			return fmt.Errorf("take the migration lock: %w", err)
		}
		// CREATE SCHEMA IF NOT EXISTS would need the CREATE privilege on
		// the database even when the schema exists: look first.
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
			return fmt.Errorf("look up schema: %w", err)
		}
		quoted := pgx.Identifier{schema}.Sanitize()
		if !exists {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA "+quoted); err != nil {
				return fmt.Errorf("create schema: %w", err)
			}
		}
		// SET LOCAL ends with the transaction: a host's pooled connection
		// keeps its own search_path.
		if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+quoted); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS formsapi_migrations (
    version    integer PRIMARY KEY,
    name       text    NOT NULL,
    applied_at bigint  NOT NULL -- Unix nanoseconds, UTC
)`); err != nil {
			return err
		}
		var current int
		if err := tx.QueryRow(ctx, "SELECT COALESCE(MAX(version), 0) FROM formsapi_migrations").Scan(&current); err != nil {
			return err
		}
		if latest := len(ms); current > latest {
			return fmt.Errorf("schema %s has version %d, this package knows up to %d: %w", schema, current, latest, ErrSchemaTooNew)
		}
		for _, m := range ms[current:] {
			step := p.Begin(stored.StepMigration+m.Name, -1)
			_, err := tx.Exec(ctx, m.SQL)
			step.End(err)
			if err != nil {
				return fmt.Errorf("apply %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO formsapi_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
				m.Version, m.Name, time.Now().UnixNano()); err != nil {
				return fmt.Errorf("record %s: %w", m.Name, err)
			}
			if m.Name == fieldsMigration {
				if err := backfillFields(ctx, tx, p); err != nil {
					return fmt.Errorf("apply %s: fill the field table: %w", m.Name, err)
				}
			}
		}
		if err := reencode(ctx, tx, p); err != nil {
			return fmt.Errorf("re-encode stored submissions: %w", err)
		}
		if err := indexUnindexed(ctx, tx, p, careful); err != nil {
			return fmt.Errorf("index submitted values: %w", err)
		}
		if sortIndex {
			if err := configureSortIndex(ctx, tx, p, sortFields); err != nil {
				return fmt.Errorf("turn the sort index on: %w", err)
			}
		}
		var sorted bool
		if err := tx.QueryRow(ctx, `SELECT value > 0 FROM formsapi_settings WHERE name = $1`, stored.SortIndexSetting).Scan(&sorted); err != nil {
			return fmt.Errorf("read the sort index setting: %w", err)
		}
		if sorted {
			if err := indexUnsorted(ctx, tx, p); err != nil {
				return fmt.Errorf("index sort keys: %w", err)
			}
		}
		if searchIndex {
			if err := enableSearchIndex(ctx, tx, p, careful); err != nil {
				return fmt.Errorf("turn the search index on: %w", err)
			}
		}
		secret, err = cursorSecret(ctx, tx, now)
		return err
	}
	opts := pgx.TxOptions{IsoLevel: pgx.ReadCommitted}
	err = pgx.BeginTxFunc(ctx, pool, opts, migrateTx)
	if errors.Is(err, errEntryExists) {
		careful = true
		err = pgx.BeginTxFunc(ctx, pool, opts, migrateTx)
	}
	if err != nil {
		return nil, fmt.Errorf("migrate schema %s: %w", schema, err)
	}
	return secret, nil
}

// enableSearchIndex turns the search index on (migration 0020) if it is
// off, and in tx indexes the trigrams of every stored row into the
// posting blocks (migration 0035), under the fold's lock: it deletes
// the blocks left from an earlier time on (turning the index off need
// not), folds those a row's find_keys holds (rows written before the
// writers left them out while the index is off: put in the tail and
// folded, foldBatch rows at a time), and computes them again from the
// data of every row whose find_keys holds none (rows written since),
// setting find_keys and folding them (indexRows). It first takes
// the search lock exclusively, which every write that found the setting
// off holds shared until it commits: the copy and the reads of the rows
// to compute, statements of their own at read committed, then see every
// row written without its trigrams, and each write after it waits for
// the setting and reads it on (a write that computed none then writes
// nothing, and is made again: see AddSubmission).
func enableSearchIndex(ctx context.Context, tx pgx.Tx, p *stored.Progress, careful bool) (err error) {
	var on bool
	if err := tx.QueryRow(ctx, `SELECT value = 1 FROM formsapi_settings WHERE name = $1`, stored.SearchIndexSetting).Scan(&on); err != nil {
		return fmt.Errorf("read the setting: %w", err)
	}
	if on {
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(formsapi_search_lock())`); err != nil {
		return fmt.Errorf("take the search lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE formsapi_settings SET value = 1 WHERE name = $1`, stored.SearchIndexSetting); err != nil {
		return fmt.Errorf("set the setting: %w", err)
	}
	var total int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM formsapi_submissions`).Scan(&total); err != nil {
		return fmt.Errorf("count the submissions: %w", err)
	}
	step := p.Begin(stored.StepSearchIndex, total)
	defer func() { step.End(err) }()
	// Blocks left from an earlier time on (a host turning the index off
	// need not delete them) are stale: the rows' trigrams are folded
	// afresh, a batch of rows at a time, under the fold's lock.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(formsapi_fold_lock())`); err != nil {
		return fmt.Errorf("take the fold lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM formsapi_find_blocks`); err != nil {
		return fmt.Errorf("delete stale posting blocks: %w", err)
	}
	for last := int64(0); ; {
		var n int
		var next *int64
		if err := tx.QueryRow(ctx, `WITH r AS (
    SELECT seq, form_seq, created_at FROM formsapi_submissions s
    WHERE seq > $1 AND 0 > ANY (s.find_keys)
    ORDER BY seq LIMIT `+strconv.Itoa(foldBatch)+`
), t AS (
    INSERT INTO formsapi_find_tail (form_seq, created_at, seq) SELECT form_seq, created_at, seq FROM r
    ON CONFLICT DO NOTHING
)
SELECT count(*), max(seq) FROM r`, last).Scan(&n, &next); err != nil {
			return fmt.Errorf("index the trigrams of stored submissions: %w", err)
		}
		if n == 0 {
			break
		}
		if _, err := tx.Exec(ctx, `SELECT formsapi_fold_tail()`); err != nil {
			return fmt.Errorf("index the trigrams of stored submissions: fold: %w", err)
		}
		last = *next
	}
	if err := indexRows(ctx, tx, `SELECT seq, form_seq, created_at, find_keys, data, attachments FROM formsapi_submissions s
WHERE seq > $1 AND find_keys IS NOT NULL AND NOT EXISTS (SELECT 1 FROM unnest(s.find_keys) k WHERE k < 0)
ORDER BY seq LIMIT 500 FOR NO KEY UPDATE`, true, careful, step); err != nil {
		return fmt.Errorf("index the trigrams of submissions stored without them: %w", err)
	}
	return nil
}

// foldBatch is how many rows the search index's build puts in the tail
// before it folds it into the posting blocks (migration 0035): folded
// after every batch of 500 rows instead, building 20,000 submissions of
// 200 forms took a third more CPU (bench/searchbuild.sh), each key's
// last block rewritten for a few entries.
const foldBatch = 2000

// fieldsMigration is the migration that makes the field table, which
// backfillFields fills in the same transaction.
const fieldsMigration = "0015_fields.sql"

// backfillBatch is how many submissions backfillFields reads at a time.
const backfillBatch = 1000

// backfillFields fills the field table (formsapi_fields) from the
// submissions stored before it existed, their names decoded in Go as
// AddSubmission's are, so that stored and new submissions give the same
// fields: it reads each form's submissions in feed order, a batch at a
// time, and adds each name at the first position that has it.
func backfillFields(ctx context.Context, tx pgx.Tx, p *stored.Progress) (err error) {
	var total int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM formsapi_submissions`).Scan(&total); err != nil {
		return err
	}
	if total == 0 {
		return nil
	}
	step := p.Begin(stored.StepFields, total)
	defer func() { step.End(err) }()
	var form, pos int64
	seen := map[string]bool{}
	for {
		rows, err := tx.Query(ctx, `SELECT form_seq, feed_pos, data FROM formsapi_submissions
WHERE (form_seq, feed_pos) > ($1, $2) ORDER BY form_seq, feed_pos LIMIT $3`, form, pos, backfillBatch)
		if err != nil {
			return err
		}
		var forms, firsts, ords []int64
		var names [][]byte
		n := 0
		for rows.Next() {
			var f, p int64
			var data []byte
			if err := rows.Scan(&f, &p, &data); err != nil {
				rows.Close()
				return err
			}
			if f != form {
				clear(seen)
			}
			form, pos, n = f, p, n+1
			for i, name := range wire.FieldNames(data) {
				if !seen[name] {
					seen[name] = true
					forms, names, firsts, ords = append(forms, f), append(names, []byte(name)), append(firsts, p), append(ords, int64(i+1))
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(names) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO formsapi_fields (form_seq, name, first_pos, ord)
SELECT * FROM unnest($1::bigint[], $2::bytea[], $3::bigint[], $4::bigint[])`, forms, names, firsts, ords); err != nil {
				return err
			}
		}
		step.Add(int64(n))
		if n < backfillBatch {
			return nil
		}
	}
}

// cursorSecret returns the cursor secret kept in the schema, making it
// first if there is none (stored.Secret). The insert does nothing if the
// row is there (ON CONFLICT), so it is safe without the lock too.
func cursorSecret(ctx context.Context, tx pgx.Tx, now time.Time) ([]byte, error) {
	return stored.Secret(func() ([]byte, bool, error) {
		var b []byte
		err := tx.QueryRow(ctx, "SELECT secret FROM formsapi_secrets WHERE name = $1", stored.CursorSecret).Scan(&b)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, nil
		}
		return b, err == nil, err
	}, func(secret []byte) error {
		_, err := tx.Exec(ctx, "INSERT INTO formsapi_secrets (name, secret, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING",
			stored.CursorSecret, secret, now.UnixNano())
		return err
	})
}

// sqlStale selects the rows stored in another encoding than the current
// one. The version is a literal, not a parameter, so that the planner can
// prove the partial index formsapi_submissions_stale applies.
var sqlStale = `SELECT s.seq, f.id, s.created_at, s.data, s.attachments
FROM formsapi_submissions s JOIN formsapi_forms f ON f.seq = s.form_seq
WHERE s.json_version <> ` + strconv.Itoa(stored.Version) + ` ORDER BY s.seq LIMIT 500`

// reencode rewrites the response JSON of every row stored in an older
// encoding from its source columns (see package internal/stored), inside
// the migration's transaction and under its lock, so every node serves
// the new encoding or none does. In normal operation it finds nothing,
// through an empty index.
func reencode(ctx context.Context, tx pgx.Tx, p *stored.Progress) (err error) {
	var total int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM formsapi_submissions WHERE json_version <> `+strconv.Itoa(stored.Version)).Scan(&total); err != nil {
		return err
	}
	if total == 0 {
		return nil
	}
	step := p.Begin(stored.StepReencode, total)
	defer func() { step.End(err) }()
	for {
		rows, err := tx.Query(ctx, sqlStale)
		if err != nil {
			return err
		}
		var seqs []int64
		var encoded [][]byte
		for rows.Next() {
			var seq, at int64
			var formID string
			var data, attachments []byte
			if err := rows.Scan(&seq, &formID, &at, &data, &attachments); err != nil {
				rows.Close()
				return err
			}
			seqs = append(seqs, seq)
			encoded = append(encoded, stored.Reencode(formID, at, data, attachments))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(seqs) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE formsapi_submissions s SET json = u.json, json_version = $3
FROM unnest($1::bigint[], $2::bytea[]) AS u(seq, json) WHERE s.seq = u.seq`, seqs, encoded, stored.Version); err != nil {
			return err
		}
		step.Add(int64(len(seqs)))
	}
}

// indexUnindexed sets find_keys, and writes their index entries
// (indexRows), of every row without them, with search's trigram keys while the
// search index is on: rows stored before the index, or inserted by SQL
// that does not set the column. Like reencode, it runs in the
// migration's transaction, and in normal operation finds nothing,
// through an empty index.
func indexUnindexed(ctx context.Context, tx pgx.Tx, p *stored.Progress, careful bool) (err error) {
	var on bool
	if err := tx.QueryRow(ctx, `SELECT value = 1 FROM formsapi_settings WHERE name = $1`, stored.SearchIndexSetting).Scan(&on); err != nil {
		return fmt.Errorf("read the search index setting: %w", err)
	}
	var total int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM formsapi_submissions WHERE find_keys IS NULL`).Scan(&total); err != nil {
		return err
	}
	if total == 0 {
		return nil
	}
	step := p.Begin(stored.StepIndex, total)
	defer func() { step.End(err) }()
	if on {
		// The rows' forms' rows, which indexRows updates at its end, before
		// the fold's lock it takes, as a deletion takes its form's row (its
		// tombstone's) before it: the other way round, a deletion on one of
		// the forms that held the row while it waited for the lock was a
		// deadlock, which aborted the migration (TestIndexUnindexedBesideDeletion).
		if _, err := tx.Exec(ctx, `SELECT seq FROM formsapi_forms
WHERE seq IN (SELECT form_seq FROM formsapi_submissions WHERE find_keys IS NULL)
ORDER BY seq FOR NO KEY UPDATE`); err != nil {
			return fmt.Errorf("lock the forms: %w", err)
		}
	}
	return indexRows(ctx, tx, `SELECT seq, form_seq, created_at, find_keys, data, attachments FROM formsapi_submissions
WHERE seq > $1 AND find_keys IS NULL ORDER BY seq LIMIT 500 FOR NO KEY UPDATE`, on, careful, step)
}

// errEntryExists is indexRows's error when an index entry it inserts is
// there already, which the triggers and the store's statements never
// leave (see indexRows): the migration is then made again with careful
// inserts.
var errEntryExists = errors.New("an index entry is stored already")

// indexRows sets the find_keys of the rows that query (which takes the
// last seq of the batch before, and selects seq, form_seq, created_at,
// find_keys, data and attachments in seq order, a batch at a time,
// locking them) selects, with their trigram keys when trigrams says so,
// counting them done on step.
//
// It writes their index entries itself, as the update triggers of
// migrations 0006, 0017 and 0028 did, which the mark formsapi.indexing
// (migration 0034) keeps from running for its updates: each batch's
// triggers hashed every entry of formsapi_find, which the build grows,
// and so took longer with every batch. A batch deletes the filter
// entries of the keys a row's find_keys loses (none, unless the filter
// keys' computation changed since the row was written; a row the build
// takes has no trigram keys, so it loses none), inserts those of the
// filter keys it gains (when it had none), in index order, and puts the
// rows with trigram keys in the unfolded tail (migration 0023), which it
// folds into the posting blocks (migration 0035) every foldBatch rows and
// at the end, under the fold's lock, taken once. Once every batch is done, each form with
// a row updated gets a fresh version and base, as the trigger of 0006
// gave it on each batch (no other transaction sees a version between).
//
// A row's filter entries are those of its find_keys' keys, so the keys
// it gains have no entry, and the insert does not look for one (which,
// ON CONFLICT DO NOTHING, cost it twice as much). An entry there all
// the same (a host's SQL) fails the insert with errEntryExists; with
// careful, the insert writes every key's entry but those there, as the
// trigger's did.
func indexRows(ctx context.Context, tx pgx.Tx, query string, trigrams, careful bool, step *stored.Step) error {
	// A batch's entries (some 75,000 of 500 rows) are sorted in memory
	// (the default work_mem, 4 MB, sorted them on disk), for the rest of
	// the migration's transaction.
	if _, err := tx.Exec(ctx, `SELECT set_config('formsapi.indexing', '1', true),
    CASE WHEN pg_size_bytes(current_setting('work_mem')) < 64 * 1024 * 1024 THEN set_config('work_mem', '64MB', true) END`); err != nil {
		return err
	}
	insert := sqlIndexRows + " AND k <> ALL (u.old)\nORDER BY 1, 2, 3, 4"
	if careful {
		insert = sqlIndexRows + "\nORDER BY 1, 2, 3, 4\nON CONFLICT DO NOTHING"
	}
	if trigrams {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(formsapi_fold_lock())`); err != nil {
			return err
		}
	}
	forms := map[int64]bool{}
	var last int64
	unfolded := 0 // rows put in the tail since the last fold
	for {
		rows, err := tx.Query(ctx, query, last)
		if err != nil {
			return err
		}
		var seqs []int64
		var keys, olds []string
		var goneForms, gone, goneAt, goneSeqs []int64
		for rows.Next() {
			var seq, form, at int64
			var old []int64
			var data, attachments []byte
			if err := rows.Scan(&seq, &form, &at, &old, &data, &attachments); err != nil {
				rows.Close()
				return err
			}
			k := indexKeys(data, stored.FileURLs(attachments), trigrams)
			for _, o := range old {
				if _, found := slices.BinarySearch(k, o); !found {
					goneForms, gone, goneAt, goneSeqs = append(goneForms, form), append(gone, o), append(goneAt, at), append(goneSeqs, seq)
				}
			}
			seqs = append(seqs, seq)
			keys, olds = append(keys, arrayText(k)), append(olds, arrayText(old))
			forms[form] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(seqs) == 0 {
			break
		}
		if len(gone) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM formsapi_find f
USING unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[]) AS d(form_seq, key, created_at, seq)
WHERE f.form_seq = d.form_seq AND f.key = d.key AND f.created_at = d.created_at AND f.seq = d.seq`, goneForms, gone, goneAt, goneSeqs); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, insert, seqs, keys, olds); err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("%w: %w", errEntryExists, err)
			}
			return err
		}
		if unfolded += len(seqs); trigrams && unfolded >= foldBatch {
			if _, err := tx.Exec(ctx, `SELECT formsapi_fold_tail()`); err != nil {
				return err
			}
			unfolded = 0
		}
		step.Add(int64(len(seqs)))
		last = seqs[len(seqs)-1]
	}
	if trigrams && unfolded > 0 {
		if _, err := tx.Exec(ctx, `SELECT formsapi_fold_tail()`); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('formsapi.indexing', '', true)`); err != nil {
		return err
	}
	if len(forms) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `UPDATE formsapi_forms SET version = formsapi_next_version(), base = formsapi_next_version()
WHERE seq = ANY($1::bigint[])`, slices.Sorted(maps.Keys(forms)))
	return err
}

// sqlIndexRows sets a batch of indexRows's rows' find_keys ($1 their
// seqs, $2 their keys and $3 the keys they had, as the text of bigint[]
// each), puts those with trigram keys in the tail, and inserts the
// entries of their filter keys: indexRows adds which, and their order.
const sqlIndexRows = `WITH u AS (
    UPDATE formsapi_submissions s SET find_keys = u.keys::bigint[]
    FROM unnest($1::bigint[], $2::text[], $3::text[]) AS u(seq, keys, old) WHERE s.seq = u.seq
    RETURNING s.form_seq, s.created_at, s.seq, s.find_keys, u.old::bigint[] AS old
), tail AS (
    INSERT INTO formsapi_find_tail (form_seq, created_at, seq)
    SELECT u.form_seq, u.created_at, u.seq FROM u WHERE 0 > ANY (u.find_keys)
    ON CONFLICT DO NOTHING
)
INSERT INTO formsapi_find (form_seq, key, created_at, seq)
SELECT u.form_seq, k, u.created_at, u.seq FROM u, unnest(u.find_keys) k
WHERE k >= 0`

// indexKeys returns the index keys of a submission with data and
// attachments at the URLs files, sorted: for filters and, when trigrams
// says so (the search index is on), search (find.IndexKeys); filters'
// alone (find.Keys) otherwise.
func indexKeys(data []byte, files []string, trigrams bool) []int64 {
	if trigrams {
		return find.IndexKeys(data, files)
	}
	return find.Keys(data)
}

// arrayText returns keys as the text of a PostgreSQL bigint[].
func arrayText(keys []int64) string {
	b := make([]byte, 0, 2+len(keys)*21)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, k, 10)
	}
	return string(append(b, '}'))
}

// configureSortIndex sets the sort index's setting and fields in tx to
// what WithSortIndex asked (fields nil: every field, migration 0028; else
// those fields, migration 0031). It first takes the sort lock
// exclusively, which every write that found the setting off holds shared
// until it commits (formsapi_sort_indexed), and so does every write while
// the setting keeps listed fields (formsapi_sort_kept): the rows it then
// reads, in statements of their own at read committed, include every row
// written with the fields as they were, and each write after it reads the
// setting as it leaves it. Turned on from off, the rows are indexed by
// indexUnsorted, which the migration calls next; turned to other fields,
// the entries of the fields it no longer keeps are deleted and those of
// the fields it now keeps inserted from every row's sort_keys, each a
// step logged by p.
func configureSortIndex(ctx context.Context, tx pgx.Tx, p *stored.Progress, fields []string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(formsapi_sort_lock())`); err != nil {
		return fmt.Errorf("take the sort lock: %w", err)
	}
	var mode int
	if err := tx.QueryRow(ctx, `SELECT value FROM formsapi_settings WHERE name = $1`, stored.SortIndexSetting).Scan(&mode); err != nil {
		return fmt.Errorf("read the setting: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT name FROM formsapi_sort_fields`)
	if err != nil {
		return fmt.Errorf("read the fields: %w", err)
	}
	old, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read the fields: %w", err)
	}
	want := stored.SortEvery
	if fields != nil {
		want = stored.SortListed
	}
	if mode == want && (want == stored.SortEvery || sameNames(old, fields)) {
		return nil
	}
	// The setting's row is updated even when its value stays: a write at
	// repeatable read that read it FOR SHARE (formsapi_sort_kept) then
	// fails to serialize, and is made again.
	if _, err := tx.Exec(ctx, `UPDATE formsapi_settings SET value = $2 WHERE name = $1`, stored.SortIndexSetting, want); err != nil {
		return fmt.Errorf("set the setting: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM formsapi_sort_fields`); err != nil {
		return fmt.Errorf("set the fields: %w", err)
	}
	for _, f := range fields {
		if _, err := tx.Exec(ctx, `INSERT INTO formsapi_sort_fields (name, prefix) VALUES ($1, $2)`, f, sortPrefix(f)); err != nil {
			return fmt.Errorf("set the fields: %w", err)
		}
	}
	if mode == stored.SortOff {
		return nil // indexUnsorted indexes every row
	}
	if want == stored.SortListed {
		if err := dropSortEntries(ctx, tx, p); err != nil {
			return fmt.Errorf("drop the entries of removed fields: %w", err)
		}
	}
	if mode != stored.SortListed {
		return nil
	}
	// The fields kept before are indexed; with want SortEvery every other
	// one is added, else the listed ones not kept before.
	had := make(map[string]bool, len(old))
	for _, f := range old {
		had[string(sortPrefix(f))] = true
	}
	var prefixes [][]byte
	for _, f := range fields {
		if pre := sortPrefix(f); !had[string(pre)] {
			prefixes = append(prefixes, pre)
		}
	}
	if want == stored.SortEvery {
		prefixes = prefixes[:0]
		for pre := range had {
			prefixes = append(prefixes, []byte(pre))
		}
	} else if len(prefixes) == 0 {
		return nil
	}
	if err := addSortEntries(ctx, tx, p, prefixes, want == stored.SortEvery); err != nil {
		return fmt.Errorf("index the entries of added fields: %w", err)
	}
	return nil
}

// sameNames reports whether a and b hold the same names (each once).
func sameNames(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(b, func(n string) bool { return !slices.Contains(a, n) })
}

// dropSortEntries deletes the entries of every field not in
// formsapi_sort_fields, in one statement.
func dropSortEntries(ctx context.Context, tx pgx.Tx, p *stored.Progress) (err error) {
	step := p.Begin(stored.StepSortDrop, 0)
	defer func() { step.End(err) }()
	tag, err := tx.Exec(ctx, `DELETE FROM formsapi_sort WHERE substring(entry from 1 for 8) NOT IN (SELECT prefix FROM formsapi_sort_fields)`)
	step.Add(tag.RowsAffected())
	return err
}

// addSortEntries inserts, from every row's sort_keys, the entries of the
// fields whose entries begin with one of prefixes (sortPrefix) or, with
// others, of every field whose entries begin with none of them, in
// batches of rows, each counted by p's step.
func addSortEntries(ctx context.Context, tx pgx.Tx, p *stored.Progress, prefixes [][]byte, others bool) (err error) {
	var total int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM formsapi_submissions WHERE sort_keys IS NOT NULL`).Scan(&total); err != nil {
		return err
	}
	if total == 0 {
		return nil
	}
	if prefixes == nil {
		prefixes = [][]byte{} // an empty array, not NULL
	}
	step := p.Begin(stored.StepSortFields, total)
	defer func() { step.End(err) }()
	var last int64
	for {
		var hi *int64
		var n int64
		if err := tx.QueryRow(ctx, `SELECT max(seq), count(*) FROM (SELECT seq FROM formsapi_submissions WHERE seq > $1 ORDER BY seq LIMIT 1000) b`, last).Scan(&hi, &n); err != nil {
			return err
		}
		if n == 0 || hi == nil {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO formsapi_sort (form_seq, entry, created_at, seq)
SELECT s.form_seq, k, s.created_at, s.seq FROM formsapi_submissions s, unnest(s.sort_keys) k
WHERE s.seq > $1 AND s.seq <= $2 AND (substring(k from 1 for 8) = ANY($3::bytea[])) <> $4
ON CONFLICT DO NOTHING`, last, *hi, prefixes, others); err != nil {
			return err
		}
		step.Add(n)
		last = *hi
	}
}

// indexUnsorted sets sort_keys, and so the entries of the ordered index
// (migration 0028), of every row without them, while the sort index is
// on: rows written while it was off, or inserted by SQL that does not set
// the column. Like
// indexUnindexed, it runs in the migration's transaction, and in normal
// operation finds nothing, through an empty index.
func indexUnsorted(ctx context.Context, tx pgx.Tx, p *stored.Progress) (err error) {
	var total int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM formsapi_submissions WHERE sort_keys IS NULL`).Scan(&total); err != nil {
		return err
	}
	if total == 0 {
		return nil
	}
	step := p.Begin(stored.StepSortIndex, total)
	defer func() { step.End(err) }()
	var last int64
	for {
		rows, err := tx.Query(ctx, `SELECT seq, data FROM formsapi_submissions
WHERE seq > $1 AND sort_keys IS NULL ORDER BY seq LIMIT 500`, last)
		if err != nil {
			return err
		}
		var seqs []int64
		var keys [][]byte // each row's entries, as one bytea[]'s text
		for rows.Next() {
			var seq int64
			var data []byte
			if err := rows.Scan(&seq, &data); err != nil {
				rows.Close()
				return err
			}
			seqs = append(seqs, seq)
			keys = append(keys, sortArrayText(sortKeys(data)))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(seqs) == 0 {
			return nil
		}
		// s.seq = ANY($1) lets the planner find the rows by the primary
		// key: with the join alone, on a table just filled and not yet
		// analyzed, it scanned the whole table for each of the batch's
		// rows (5,000 rows took 3.5 minutes).
		if _, err := tx.Exec(ctx, `UPDATE formsapi_submissions s SET sort_keys = u.keys::bytea[]
FROM unnest($1::bigint[], $2::text[]) AS u(seq, keys) WHERE s.seq = u.seq AND s.seq = ANY($1::bigint[])`, seqs, keys); err != nil {
			return err
		}
		step.Add(int64(len(seqs)))
		last = seqs[len(seqs)-1]
	}
}

// sortKeysIf is sortKeys when the sort index is on (sorted), and NULL
// otherwise: an index that is off stores nothing.
func sortKeysIf(data []byte, sorted bool) [][]byte {
	if !sorted {
		return nil
	}
	return sortKeys(data)
}

// sortKeys returns the sort_keys of a submission with data (migration
// 0028): for each member with a sort key, its field's find.SortField,
// big-endian with the sign bit flipped, then the key. Never nil, so that
// a submission without one is indexed (an empty array), not NULL.
func sortKeys(data []byte) [][]byte {
	es := find.SortEntries(data)
	out := make([][]byte, len(es))
	for i, e := range es {
		b := make([]byte, 0, 8+len(e.Key))
		b = binary.BigEndian.AppendUint64(b, uint64(e.Field)^(1<<63))
		out[i] = append(b, e.Key...)
	}
	return out
}

// sortPrefix is the first 8 bytes of the entries of field (sortKeys).
func sortPrefix(field string) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(find.SortField(field))^(1<<63))
}

// sortArrayText is keys as the text of a PostgreSQL bytea[].
func sortArrayText(keys [][]byte) []byte {
	b := []byte{'{'}
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `"\\x`...)
		b = hex.AppendEncode(b, k)
		b = append(b, '"')
	}
	return append(b, '}')
}
