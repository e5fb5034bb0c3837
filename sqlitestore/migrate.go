package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/stored"
)

// ErrSchemaTooNew means the database was migrated by a newer version of
// this package than the one running. The store refuses it rather than
// write to tables whose shape it does not know; upgrade the program.
var ErrSchemaTooNew = errors.New("sqlitestore: database schema is newer than this version of the package")

// The schema, one file per version: NNNN_name.sql, applied in order.
// Published files never change; a schema change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration = stored.Migration

// migrations returns the embedded migrations in version order.
func migrations() ([]migration, error) {
	return stored.Migrations(migrationFiles)
}

// migrate brings db's formsapi_ tables to the current schema, turns
// the search index on when searchIndex says so (see WithSearchIndex),
// and sets the sort index to sortFields when sortIndex says so (see
// WithSortIndex). Each migration runs in its own transaction with its
// row in formsapi_migrations, so a failure leaves the last complete
// version. It returns whether the search index and the sort index are
// on. p logs the progress of the
// steps that take long (see WithLogger).
func migrate(ctx context.Context, db *sql.DB, searchIndex, sortIndex bool, sortFields []string, foldAt int64, p *stored.Progress) (on, sorted bool, err error) {
	ms, err := migrations()
	if err != nil {
		return false, false, fmt.Errorf("migrate: %w", err)
	}
	if err := migrateThrough(ctx, db, ms, p); err != nil {
		return false, false, err
	}
	if err := reencode(ctx, db, p); err != nil {
		return false, false, fmt.Errorf("migrate: re-encode stored submissions: %w", err)
	}
	if err := indexUnindexed(ctx, db, p); err != nil {
		return false, false, fmt.Errorf("migrate: index submitted values: %w", err)
	}
	if sortIndex {
		if err := configureSortIndex(ctx, db, p, sortFields); err != nil {
			return false, false, fmt.Errorf("migrate: turn the sort index on: %w", err)
		}
	}
	if err := db.QueryRowContext(ctx, sqlSortIndexed).Scan(&sorted); err != nil {
		return false, false, fmt.Errorf("migrate: read the sort index setting: %w", err)
	}
	if sorted {
		if err := indexUnsorted(ctx, db, p); err != nil {
			return false, false, fmt.Errorf("migrate: index sort keys: %w", err)
		}
	}
	if searchIndex {
		if err := enableSearchIndex(ctx, db, p); err != nil {
			return false, false, fmt.Errorf("migrate: turn the search index on: %w", err)
		}
	}
	if err := db.QueryRowContext(ctx, sqlSearchIndexed).Scan(&on); err != nil {
		return false, false, fmt.Errorf("migrate: read the search index setting: %w", err)
	}
	if err := foldLongTails(ctx, db, foldAt, p); err != nil {
		return false, false, fmt.Errorf("migrate: fold the index's tails: %w", err)
	}
	return on, sorted, nil
}

// foldLongTails folds, in one transaction, the tail of every form that
// holds foldAt rows or more above its mark (migration 0031): rows a
// host's SQL added, which would otherwise wait for the form's next
// writes to fold them a batch each, every read of the form walking them
// meanwhile; and it takes the entries of rows a host's SQL deleted out
// of the runs (purgeGone). In normal operation it finds neither, by one
// statement.
func foldLongTails(ctx context.Context, db *sql.DB, foldAt int64, p *stored.Progress) (err error) {
	var total, gone int64
	if err := db.QueryRowContext(ctx, sqlLongTails, foldAt).Scan(&total, &gone); err != nil || total == 0 && gone == 0 {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if err := tx.QueryRowContext(ctx, sqlLongTails, foldAt).Scan(&total, &gone); err != nil || total == 0 && gone == 0 {
		return err
	}
	// The entries of rows a host's SQL deleted go too, whether or not
	// their forms get another write.
	if err := purgeAllGone(ctx, tx); err != nil {
		return err
	}
	step := p.Begin(stored.StepFoldTails, total)
	defer func() { step.End(err) }()
	forms, err := queryInts(ctx, tx, `SELECT seq FROM formsapi_forms WHERE feed_last - find_folded >= ?`, foldAt)
	if err != nil {
		return err
	}
	for _, form := range forms {
		for n := foldBatch * foldAt; n == foldBatch*foldAt; {
			m, err := foldFormTail(ctx, tx, form, foldBatch*foldAt)
			if err != nil {
				return err
			}
			n = int64(m)
			step.Add(n)
		}
	}
	return tx.Commit()
}

// enableSearchIndex turns the search index on (migration 0015) if it is
// off, and in the same transaction indexes the trigrams of every stored
// row: it copies those a row's find_keys holds (rows written before the
// writers left them out while the index is off), and computes them again
// from the data of every row whose find_keys holds none (rows written
// since), setting find_keys, whose update trigger indexes them. Its
// first statement is a write, so it holds the write lock before it
// reads: no row is written meanwhile without its trigrams, and a write
// that computed none because it found the setting off is refused by its
// own statement once the setting is on (see AddSubmission). Rows whose
// find_keys is NULL get theirs from the update trigger when Open indexes
// them.
func enableSearchIndex(ctx context.Context, db *sql.DB, p *stored.Progress) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	res, err := tx.ExecContext(ctx, `UPDATE formsapi_settings SET value = 1 WHERE name = ? AND value = 0`, stored.SearchIndexSetting)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return err // already on
	}
	var total int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM formsapi_submissions`).Scan(&total); err != nil {
		return err
	}
	step := p.Begin(stored.StepSearchIndex, total)
	defer func() { step.End(err) }()
	// Rows whose find_keys hold trigram keys go through the tail into
	// the posting blocks (migration 0022), a few thousand at a time.
	for last := int64(0); ; {
		var next sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT max(seq) FROM (SELECT seq FROM formsapi_submissions WHERE seq > ? ORDER BY seq LIMIT 4096)`, last).Scan(&next); err != nil {
			return err
		}
		if !next.Valid {
			break
		}
		// filters 0: their filter entries are in the runs already
		// (migration 0031). Rows above their form's mark are its
		// fold's, trigrams and all.
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO formsapi_find_tail (form_seq, created_at, seq, filters)
SELECT s.form_seq, s.created_at, s.seq, 0 FROM formsapi_submissions s
WHERE s.seq > ?1 AND s.seq <= ?2 AND s.find_keys IS NOT NULL
    AND s.feed_pos <= (SELECT find_folded FROM formsapi_forms WHERE seq = s.form_seq) AND EXISTS (SELECT 1 FROM json_each(s.find_keys) j WHERE j.value < 0)`, last, next.Int64); err != nil {
			return err
		}
		if err := foldTail(ctx, tx); err != nil {
			return err
		}
		last = next.Int64
	}
	if err := indexRows(ctx, tx, `SELECT seq, data, attachments FROM formsapi_submissions s
WHERE seq > ? AND find_keys IS NOT NULL AND NOT EXISTS (SELECT 1 FROM json_each(s.find_keys) j WHERE j.value < 0)
ORDER BY seq LIMIT 500`, true, step); err != nil {
		return err
	}
	// And every form's tail, whose rows' trigrams the writes would fold
	// otherwise, the first write to each form paying for its form's.
	if err := foldEvery(ctx, tx, foldBatch*foldAt, nil); err != nil {
		return err
	}
	return tx.Commit()
}

// indexRows sets the find_keys of the rows that query (which takes the
// last seq of the batch before, selects seq, data and attachments in
// seq order, a batch at a time) selects, with their trigram keys when
// trigrams says so, a batch at a time, counting them done on step.
func indexRows(ctx context.Context, tx *sql.Tx, query string, trigrams bool, step *stored.Step) error {
	type row struct {
		seq  int64
		keys string
	}
	// One statement for every row: SQLite compiles the table's update
	// triggers into each UPDATE it prepares, most of the cost of a row
	// when prepared a row at a time.
	update, err := tx.PrepareContext(ctx, `UPDATE formsapi_submissions SET find_keys = ? WHERE seq = ?`)
	if err != nil {
		return err
	}
	defer update.Close()
	var last int64
	for {
		rows, err := tx.QueryContext(ctx, query, last)
		if err != nil {
			return err
		}
		var batch []row
		for rows.Next() {
			var r row
			var data, attachments []byte
			if err := rows.Scan(&r.seq, &data, &attachments); err != nil {
				rows.Close()
				return err
			}
			r.keys = findKeys(data, stored.FileURLs(attachments), trigrams)
			batch = append(batch, r)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		for _, r := range batch {
			if _, err := update.ExecContext(ctx, r.keys, r.seq); err != nil {
				return err
			}
		}
		if trigrams {
			// The update trigger put the rows in the tail (migration 0022).
			if err := foldTail(ctx, tx); err != nil {
				return err
			}
		}
		step.Add(int64(len(batch)))
		last = batch[len(batch)-1].seq
	}
}

// indexUnindexed sets find_keys, and so the index entries (migration
// 0013), of every row without them, in one transaction that reads the
// search index setting first (trigram keys only while it is on): rows
// stored before the index, or inserted by SQL that does not set the
// column. In normal operation it finds nothing, through an empty index.
func indexUnindexed(ctx context.Context, db *sql.DB, p *stored.Progress) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	var on bool
	if err := tx.QueryRowContext(ctx, sqlSearchIndexed).Scan(&on); err != nil {
		return err
	}
	var total int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM formsapi_submissions WHERE find_keys IS NULL`).Scan(&total); err != nil {
		return err
	}
	if total == 0 {
		return nil
	}
	step := p.Begin(stored.StepIndex, total)
	defer func() { step.End(err) }()
	if err := indexRows(ctx, tx, `SELECT seq, data, attachments FROM formsapi_submissions
WHERE seq > ? AND find_keys IS NULL ORDER BY seq LIMIT 500`, on, step); err != nil {
		return err
	}
	return tx.Commit()
}

// findKeys returns the find_keys column of a submission with data and
// attachments at the URLs files, as a JSON array: its index keys for
// filters and, when trigrams says so (the search index is on), search
// (find.IndexKeys); filters' alone (find.Keys) otherwise, which is all
// an index that is off stores.
func findKeys(data []byte, files []string, trigrams bool) string {
	var keys []int64
	if trigrams {
		keys = find.IndexKeys(data, files) // Keys among them
	} else {
		keys = find.Keys(data)
	}
	var b strings.Builder // one allocation: its String is not a copy
	b.Grow(2 + len(keys)*21)
	b.WriteByte('[')
	var d [20]byte
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(strconv.AppendInt(d[:0], k, 10))
	}
	b.WriteByte(']')
	return b.String()
}

// migrateThrough applies the migrations of ms that db lacks; ms is every
// migration this package knows, or for tests a prefix of them.
func migrateThrough(ctx context.Context, db *sql.DB, ms []migration, p *stored.Progress) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS formsapi_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL -- Unix nanoseconds, UTC
)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var current int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM formsapi_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if latest := len(ms); current > latest {
		return fmt.Errorf("migrate: the database has schema version %d, this package knows up to %d: %w", current, latest, ErrSchemaTooNew)
	}
	for _, m := range ms[current:] {
		step := p.Begin(stored.StepMigration+m.Name, -1)
		err := apply(ctx, db, m)
		step.End(err)
		if err != nil {
			return fmt.Errorf("migrate to %s: %w", m.Name, err)
		}
	}
	return nil
}

// sqlStale selects a batch of rows stored in another encoding than the
// current one. The version is a literal, not a parameter, so that SQLite
// can prove the partial index formsapi_submissions_stale applies.
var sqlStale = `SELECT s.seq, f.id, s.created_at, s.data, s.attachments
FROM formsapi_submissions s JOIN formsapi_forms f ON f.seq = s.form_seq
WHERE s.json_version <> ` + strconv.Itoa(stored.Version) + ` ORDER BY s.seq LIMIT 500`

// reencode rewrites the response JSON of every row stored in an older
// encoding from its source columns, a batch per transaction (see package
// internal/stored). In normal operation it finds nothing, through an
// empty index.
func reencode(ctx context.Context, db *sql.DB, p *stored.Progress) (err error) {
	type row struct {
		seq  int64
		json []byte
	}
	var total int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM formsapi_submissions WHERE json_version <> `+strconv.Itoa(stored.Version)).Scan(&total); err != nil {
		return err
	}
	if total == 0 {
		return nil
	}
	step := p.Begin(stored.StepReencode, total)
	defer func() { step.End(err) }()
	for {
		rows, err := db.QueryContext(ctx, sqlStale)
		if err != nil {
			return err
		}
		var batch []row
		for rows.Next() {
			var r row
			var at int64
			var formID string
			var data, attachments []byte
			if err := rows.Scan(&r.seq, &formID, &at, &data, &attachments); err != nil {
				rows.Close()
				return err
			}
			r.json = stored.Reencode(formID, at, data, attachments)
			batch = append(batch, r)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		for _, r := range batch {
			if _, err := tx.ExecContext(ctx, `UPDATE formsapi_submissions SET json = ?, json_version = ? WHERE seq = ?`, r.json, stored.Version, r.seq); err != nil {
				tx.Rollback()
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		step.Add(int64(len(batch)))
	}
}

// apply runs one migration in a transaction. Its first statement claims
// the version: being a write, it takes the write lock before anything is
// read (so a deferred transaction cannot hit SQLITE_BUSY_SNAPSHOT), and if
// another process applied the version meanwhile, it fails as a duplicate
// and the migration is skipped.
func apply(ctx context.Context, db *sql.DB, m migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	_, err = tx.ExecContext(ctx, `INSERT INTO formsapi_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, time.Now().UnixNano())
	if isUniqueViolation(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	return tx.Commit()
}

// cursorSecret returns the cursor secret kept in db, making it first if
// there is none (stored.Secret). The insert does nothing when another
// process made one meanwhile.
func cursorSecret(ctx context.Context, db *sql.DB, now time.Time) ([]byte, error) {
	return stored.Secret(func() ([]byte, bool, error) {
		var b []byte
		err := db.QueryRowContext(ctx, `SELECT secret FROM formsapi_secrets WHERE name = ?`, stored.CursorSecret).Scan(&b)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, nil
		}
		return b, err == nil, err
	}, func(secret []byte) error {
		_, err := db.ExecContext(ctx, `INSERT INTO formsapi_secrets (name, secret, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`,
			stored.CursorSecret, secret, now.UnixNano())
		return err
	})
}

// configureSortIndex sets the sort index's setting and fields to what
// WithSortIndex asked (fields nil: every field, migration 0019; else
// those fields, migration 0021), in one transaction whose first
// statement is a write, so that it holds the write lock before it reads:
// no row is written meanwhile with the entries of the fields as they
// were. Turned on from off, every stored row is indexed
// (indexUnsortedTx); a writer that computed no keys because it found the
// setting off is refused by its own statement once it is on (see
// AddSubmission). Turned to other fields, the entries of the fields it no
// longer keeps are deleted and those of the fields it now keeps inserted
// from every row's sort_keys, each a step logged by p.
func configureSortIndex(ctx context.Context, db *sql.DB, p *stored.Progress, fields []string) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `UPDATE formsapi_settings SET value = value WHERE name = ?`, stored.SortIndexSetting); err != nil {
		return err // the write lock, taken by a write
	}
	var mode int
	if err := tx.QueryRowContext(ctx, `SELECT value FROM formsapi_settings WHERE name = ?`, stored.SortIndexSetting).Scan(&mode); err != nil {
		return err
	}
	old, err := sortFieldsIn(ctx, tx)
	if err != nil {
		return err
	}
	want := stored.SortEvery
	if fields != nil {
		want = stored.SortListed
	}
	if mode == want && (want == stored.SortEvery || sameSortFields(old, fields)) {
		return tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, `UPDATE formsapi_settings SET value = ? WHERE name = ?`, want, stored.SortIndexSetting); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM formsapi_sort_fields`); err != nil {
		return err
	}
	for _, f := range fields {
		if _, err := tx.ExecContext(ctx, `INSERT INTO formsapi_sort_fields (name, field) VALUES (?, ?)`, f, find.SortField(f)); err != nil {
			return err
		}
	}
	if mode == stored.SortOff {
		if err := indexUnsortedTx(ctx, tx, p); err != nil {
			return err
		}
		return tx.Commit()
	}
	if want == stored.SortListed {
		if err := dropSortEntries(ctx, tx, p); err != nil {
			return err
		}
	}
	if mode == stored.SortListed {
		// The fields kept before are indexed; with want SortEvery every
		// other one is added, else the listed ones not kept before.
		had := make(map[int64]bool, len(old))
		for _, h := range old {
			had[h] = true
		}
		var hashes []int64
		for _, f := range fields {
			if h := find.SortField(f); !had[h] {
				hashes = append(hashes, h)
			}
		}
		if want == stored.SortEvery {
			hashes = slices.Collect(maps.Keys(had))
		}
		if want == stored.SortEvery || len(hashes) > 0 {
			if err := addSortEntries(ctx, tx, p, hashes, want == stored.SortEvery); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// sortFieldsIn returns the sort index's fields (migration 0021), each
// name's find.SortField.
func sortFieldsIn(ctx context.Context, tx *sql.Tx) (map[string]int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name, field FROM formsapi_sort_fields`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]int64)
	for rows.Next() {
		var name string
		var h int64
		if err := rows.Scan(&name, &h); err != nil {
			return nil, err
		}
		out[name] = h
	}
	return out, rows.Err()
}

// sameSortFields reports whether fields are the names of old.
func sameSortFields(old map[string]int64, fields []string) bool {
	if len(old) != len(fields) {
		return false
	}
	for _, f := range fields {
		if _, ok := old[f]; !ok {
			return false
		}
	}
	return true
}

// dropSortEntries deletes the entries of every field not in
// formsapi_sort_fields, in one statement.
func dropSortEntries(ctx context.Context, tx *sql.Tx, p *stored.Progress) (err error) {
	step := p.Begin(stored.StepSortDrop, 0)
	defer func() { step.End(err) }()
	res, err := tx.ExecContext(ctx, `DELETE FROM formsapi_sort WHERE field NOT IN (SELECT field FROM formsapi_sort_fields)`)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	step.Add(n)
	return err
}

// addSortEntries inserts, from every row's sort_keys, the entries of the
// fields hashes (find.SortField) or, with others, of every field not in
// hashes, in batches of rows, each counted by p's step.
func addSortEntries(ctx context.Context, tx *sql.Tx, p *stored.Progress, hashes []int64, others bool) (err error) {
	var total int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM formsapi_submissions WHERE sort_keys IS NOT NULL`).Scan(&total); err != nil {
		return err
	}
	if total == 0 {
		return nil
	}
	list, err := json.Marshal(append([]int64{}, hashes...))
	if err != nil {
		return err
	}
	insert := sqlAddSortEntries
	if others {
		insert = strings.Replace(insert, "j.value ->> 0 IN", "j.value ->> 0 NOT IN", 1)
	}
	step := p.Begin(stored.StepSortFields, total)
	defer func() { step.End(err) }()
	var last int64
	for {
		var hi sql.NullInt64
		var n int64
		if err := tx.QueryRowContext(ctx, `SELECT max(seq), count(*) FROM (SELECT seq FROM formsapi_submissions WHERE seq > ? ORDER BY seq LIMIT 1000)`, last).Scan(&hi, &n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, insert, last, hi.Int64, string(list)); err != nil {
			return err
		}
		step.Add(n)
		last = hi.Int64
	}
}

// sqlAddSortEntries inserts the entries of the rows with seq in (?1, ?2]
// of the fields in the JSON array ?3.
const sqlAddSortEntries = `INSERT OR IGNORE INTO formsapi_sort (form_seq, field, value, created_at, seq)
SELECT s.form_seq, j.value ->> 0, unhex(j.value ->> 1), s.created_at, s.seq
FROM formsapi_submissions s, json_each(s.sort_keys) j
WHERE s.seq > ?1 AND s.seq <= ?2 AND s.sort_keys IS NOT NULL AND j.value ->> 0 IN (SELECT value FROM json_each(?3))`

// indexUnsorted sets sort_keys, and so the entries of the ordered index
// (migration 0019), of every row without them, in one transaction: rows
// inserted by SQL that does not set the column while the index is on.
// In normal operation it finds nothing, through an empty index.
func indexUnsorted(ctx context.Context, db *sql.DB, p *stored.Progress) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if err := indexUnsortedTx(ctx, tx, p); err != nil {
		return err
	}
	return tx.Commit()
}

// indexUnsortedTx is indexUnsorted in tx: rows written while the sort
// index was off too, when it is turned on.
func indexUnsortedTx(ctx context.Context, tx *sql.Tx, p *stored.Progress) (err error) {
	var total int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM formsapi_submissions WHERE sort_keys IS NULL`).Scan(&total); err != nil {
		return err
	}
	if total == 0 {
		return nil
	}
	step := p.Begin(stored.StepSortIndex, total)
	defer func() { step.End(err) }()
	var last int64
	for {
		// By rowid, the whole table once: the partial index of rows
		// without sort keys cost every write a page while the sort
		// index is off, the default, for this walk alone (migration
		// 0031).
		rows, err := tx.QueryContext(ctx, `SELECT seq, data FROM formsapi_submissions
WHERE seq > ? AND sort_keys IS NULL ORDER BY seq LIMIT 500`, last)
		if err != nil {
			return err
		}
		type row struct {
			seq  int64
			keys string
		}
		var batch []row
		for rows.Next() {
			var r row
			var data []byte
			if err := rows.Scan(&r.seq, &data); err != nil {
				rows.Close()
				return err
			}
			r.keys = sortKeys(data)
			batch = append(batch, r)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		for _, r := range batch {
			if _, err := tx.ExecContext(ctx, `UPDATE formsapi_submissions SET sort_keys = ? WHERE seq = ?`, r.keys, r.seq); err != nil {
				return err
			}
		}
		step.Add(int64(len(batch)))
		last = batch[len(batch)-1].seq
	}
}

// sortKeysIf is sortKeys when the sort index is on (sorted), and NULL
// otherwise: an index that is off stores nothing.
func sortKeysIf(data []byte, sorted bool) any {
	if !sorted {
		return nil
	}
	return sortKeys(data)
}

// sortKeys returns the sort_keys column of a submission with data: a
// JSON array of [field, key] pairs, each member's find.SortField and its
// find.SortKey in hex (find.SortEntries).
func sortKeys(data []byte) string {
	es := find.SortEntries(data)
	b := make([]byte, 0, 2+len(es)*48)
	b = append(b, '[')
	for i, e := range es {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, e.Field, 10)
		b = append(b, ',', '"')
		b = hex.AppendEncode(b, e.Key)
		b = append(b, '"', ']')
	}
	return string(append(b, ']'))
}
