package sqlitestore

// Every statement the store runs. They are constants, prepared once; every
// value is a bound parameter.
//
// A list page is bounded by two keyset positions, both exclusive:
// (created_at, seq) > lower and (created_at, seq) < upper. Since, Until
// and the cursor are all folded into those two bounds (see keyset.Bounds), so
// each list has one statement per order and SQLite seeks the index
// straight to the page. With separate created_at terms beside the cursor,
// the planner may take the filter as the range bound and step over every
// item already read, like an OFFSET (measured: 50 ms instead of 25 µs per
// page deep into 200,000 rows). Because seq is the rowid, SQLite seeks on
// created_at and checks seq row by row, so only items sharing the cursor's
// exact timestamp are stepped over.
//
// The list statements have no LIMIT: the caller steps one row more than
// the page (keyset.Fetch) and stops, which costs SQLite nothing more, since
// rows come straight off the index in order. With a bound LIMIT ?, the
// SQLite in modernc.org/sqlite v1.59 may plan by the bound value
// (sqlite3ExprIsInteger with a Parse), so it marks the statement expired
// whenever that parameter is bound and prepares it again on every
// execution: a CPU profile put sqlite3Reprepare at a fifth of an uncached
// page read and most of a forms list.
import "github.com/formsapi/formsapi/internal/stored"

const (
	sqlListFormsDesc = `SELECT seq, created_at, id, title, icon, notification_email
FROM formsapi_forms
WHERE account_id = ? AND (created_at, seq) > (?, ?) AND (created_at, seq) < (?, ?)
ORDER BY created_at DESC, seq DESC`

	sqlListFormsAsc = `SELECT seq, created_at, id, title, icon, notification_email
FROM formsapi_forms
WHERE account_id = ? AND (created_at, seq) > (?, ?) AND (created_at, seq) < (?, ?)
ORDER BY created_at ASC, seq ASC`

	// Only public columns: the metadata columns are never selected.
	// length(json) is the item's size for the byte budget; on a BLOB it
	// is read from the record header, without loading the value.
	sqlListSubmissionsDesc = `SELECT seq, created_at, data, attachments, length(json)
FROM formsapi_submissions
WHERE form_seq = ? AND (created_at, seq) > (?, ?) AND (created_at, seq) < (?, ?)
ORDER BY created_at DESC, seq DESC`

	sqlListSubmissionsAsc = `SELECT seq, created_at, data, attachments, length(json)
FROM formsapi_submissions
WHERE form_seq = ? AND (created_at, seq) > (?, ?) AND (created_at, seq) < (?, ?)
ORDER BY created_at ASC, seq ASC`

	// The handler's fast path: each submission as the API sends it,
	// after a first row that holds the form's version and head
	// (pagecache.Head, migration 0029), read in the same statement, so in
	// the same snapshot as the rows: its version, base and feed_last, and
	// the keyset position of the submission at feed_last (0 0 when none
	// is there), one probe of the (form_seq, feed_pos) index, as decimal
	// integers in one text, parsed by headOf. The first row sorts before
	// every row of the range (its position is the extreme the bounds
	// exclude). The head in a text of its own, not in columns beside the
	// rows', costs a page read three allocations: five more columns cost
	// it 18 (their names, and each integer boxed), and on every row five
	// allocations when they were not NULL. The two are merged, not sorted:
	// the range's rows come off the index in order. A form that is not
	// there gives no first row.
	sqlAppendSubmissionsDesc = `SELECT 9223372036854775807, 9223372036854775807,
    printf('%d %d %d %d %d', f.version, f.base, f.feed_last, ifnull(a.created_at, 0), ifnull(a.seq, 0))
FROM formsapi_forms f
LEFT JOIN formsapi_submissions a ON a.form_seq = f.seq AND a.feed_pos = f.feed_last
WHERE f.seq = ?1
UNION ALL
SELECT seq, created_at, json
FROM formsapi_submissions
WHERE form_seq = ?1 AND (created_at, seq) > (?2, ?3) AND (created_at, seq) < (?4, ?5)
ORDER BY 2 DESC, 1 DESC`

	sqlAppendSubmissionsAsc = `SELECT -9223372036854775807 - 1, -9223372036854775807 - 1,
    printf('%d %d %d %d %d', f.version, f.base, f.feed_last, ifnull(a.created_at, 0), ifnull(a.seq, 0))
FROM formsapi_forms f
LEFT JOIN formsapi_submissions a ON a.form_seq = f.seq AND a.feed_pos = f.feed_last
WHERE f.seq = ?1
UNION ALL
SELECT seq, created_at, json
FROM formsapi_submissions
WHERE form_seq = ?1 AND (created_at, seq) > (?2, ?3) AND (created_at, seq) < (?4, ?5)
ORDER BY 2 ASC, 1 ASC`

	// What the form's feed gained since a page of it was read
	// (pagecache's Since and Splice): the form's row first, at position
	// 0, with its version, base and feed_last; then every submission from
	// feed position ?2 (the page's feed_last, whose submission is the
	// page's anchor) and every tombstone above it, merged by position,
	// each with its keyset position (a tombstone's, of the submission it
	// deleted: NULL for one made before migration 0029) and a
	// tombstone's last column the feed position it deleted (a
	// submission's is NULL). One range of the (form_seq, feed_pos) index
	// and one of the tombstones' primary key, in one statement, so in one
	// snapshot. No LIMIT (see the note on the list statements): the
	// caller stops after pagecache.MaxSplice + 2 rows.
	sqlSplice = `SELECT 0, version, base, feed_last, NULL, NULL FROM formsapi_forms WHERE seq = ?1
UNION ALL
SELECT feed_pos, seq, created_at, NULL, json, NULL FROM formsapi_submissions WHERE form_seq = ?1 AND feed_pos >= ?2
UNION ALL
SELECT feed_pos, of_seq, of_at, NULL, NULL, of_pos FROM formsapi_tombstones WHERE form_seq = ?1 AND feed_pos > ?2
ORDER BY 1`

	// A search without filters while the search index is off
	// (stored.Candidates gives no key): the form's submissions in keyset
	// order, each checked as a filtered page's entry. The list without
	// the fast path uses sqlListSubmissions*, whose columns are those of
	// sqlFind*.
	sqlScanEncodedDesc = `SELECT seq, created_at, data, attachments, json
FROM formsapi_submissions
WHERE form_seq = ? AND (created_at, seq) > (?, ?) AND (created_at, seq) < (?, ?)
ORDER BY created_at DESC, seq DESC`

	sqlScanEncodedAsc = `SELECT seq, created_at, data, attachments, json
FROM formsapi_submissions
WHERE form_seq = ? AND (created_at, seq) > (?, ?) AND (created_at, seq) < (?, ?)
ORDER BY created_at ASC, seq ASC`

	// Whether the index holds search's trigrams (migration 0015), read by
	// searches only.
	sqlSearchIndexed = `SELECT value FROM formsapi_settings WHERE name = '` + stored.SearchIndexSetting + `'`

	// Whether the sort index is on (migration 0019), for any fields
	// (0021).
	sqlSortIndexed = `SELECT value > 0 FROM formsapi_settings WHERE name = '` + stored.SortIndexSetting + `'`

	// Whether a sorted list by the field ?1 is served: the sort index's
	// setting and whether its fields (migration 0021) name ?1.
	sqlSortServed = `SELECT value, EXISTS (SELECT 1 FROM formsapi_sort_fields WHERE name = ?1)
FROM formsapi_settings WHERE name = '` + stored.SortIndexSetting + `'`

	// Totals (total=exact|estimate; see formsapi.Counter): the rows of a
	// range, bounded (a key's entries are counted by its walk,
	// countSearch).
	sqlCountRows = `SELECT count(*) FROM (SELECT 1 FROM formsapi_submissions
WHERE form_seq = ? AND (created_at, seq) > (?, ?) AND (created_at, seq) < (?, ?) LIMIT ` + stored.CountLimit + `)`

	// The data of a range's rows to check against a search, when the
	// search index is off and there is no filter.
	sqlCountScan = `SELECT data, attachments FROM formsapi_submissions
WHERE form_seq = ? AND (created_at, seq) > (?, ?) AND (created_at, seq) < (?, ?)
LIMIT ` + stored.MatchesLimit

	// The ownership check: a form of another account is not found. The
	// version (migration 0003) is what the read cache checks its pages by,
	// and the incarnation (migration 0011) what cursors and tokens carry.
	sqlFormOf = `SELECT seq, version, incarnation FROM formsapi_forms WHERE id = ? AND account_id = ?`

	// The key copy's refresh (keycopy.go): keys_gen, the highest seq of
	// a submission, the count of those above ?1 (the highest the copy
	// last read; ?2 at most) and the schema cookie in the first row,
	// then the forms of those submissions (migration 0025).
	sqlKeyCopyRefresh = `SELECT (SELECT value FROM formsapi_settings WHERE name = 'keys_gen'), (SELECT max(seq) FROM formsapi_submissions),
    (SELECT count(*) FROM (SELECT 1 FROM formsapi_submissions WHERE seq > ?1 LIMIT ?2)), (SELECT schema_version FROM pragma_schema_version()),
    NULL, NULL, NULL, NULL, NULL
UNION ALL
SELECT NULL, NULL, NULL, NULL, f.id, f.account_id, f.seq, f.version, f.incarnation FROM formsapi_forms f
WHERE f.seq IN (SELECT form_seq FROM formsapi_submissions WHERE seq > ?1 LIMIT ?2)`

	// Expiry is checked by the caller against the current time.
	sqlResolveKey = `SELECT account_id, forms, expires_at FROM formsapi_keys WHERE key_hash = ? AND revoked_at IS NULL`

	// The handler's combined lookup: the key, and the form it asks for
	// among its account's forms, in one statement. No row: no live key;
	// NULLs after expires_at: no such form of the key's account.
	sqlAuthorizeForm = `SELECT k.account_id, k.forms, k.expires_at, f.seq, f.version, f.incarnation
FROM formsapi_keys k
LEFT JOIN formsapi_forms f ON f.id = ?2 AND f.account_id = k.account_id
WHERE k.key_hash = ?1 AND k.revoked_at IS NULL`

	sqlListKeys = `SELECT key_hash, forms, created_at, expires_at, revoked_at, last_used_at
FROM formsapi_keys WHERE account_id = ? ORDER BY created_at, key_hash`

	// A batch of noted uses; an older time never overwrites a newer one
	// (two stores over one file may flush in any order).
	sqlTouchKey = `UPDATE formsapi_keys SET last_used_at = ?1
WHERE key_hash = ?2 AND (last_used_at IS NULL OR last_used_at < ?1)`

	sqlAddForm = `INSERT INTO formsapi_forms (id, account_id, title, icon, notification_email, created_at)
VALUES (?, ?, ?, ?, ?, ?)`

	// One statement finds the form, takes its next feed position and
	// inserts, so no transaction is needed; no row inserted means no such
	// form. A trigger moves the form's counter to the position taken
	// (see migrations/0004_feed.sql).
	// find_keys (?12) are the submission's index keys, which a trigger
	// copies into formsapi_find (migration 0013); ?13 says whether they
	// include search's trigram keys. Keys without them are written only
	// while the search index is off: once it is on, the statement inserts
	// nothing (see AddSubmission).
	// sort_keys (?14) are its sort keys, which a trigger copies into
	// formsapi_sort (migration 0019), NULL while the sort index is off;
	// ?15 says whether they are there, and the statement inserts nothing
	// when they are not while the setting is on.
	sqlAddSubmission = `INSERT INTO formsapi_submissions
    (form_seq, feed_pos, created_at, data, attachments, json, json_version, client_ip, user_agent, geo, trace_id, host_id, find_keys, sort_keys)
SELECT seq, feed_last + 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?12, ?14 FROM formsapi_forms
WHERE id = ?11 AND (?13 OR (` + sqlSearchIndexed + `) = 0) AND (?15 OR (` + sqlSortIndexed + `) = 0)`

	// The data lifecycle (lifecycle.go). Each names the form by ID and
	// owner, so another account's form is not found.
	sqlUpdateForm = `UPDATE formsapi_forms SET title = ?, icon = ?, notification_email = ?
WHERE id = ? AND account_id = ?`

	sqlFormCreatedAt = `SELECT created_at FROM formsapi_forms WHERE id = ? AND account_id = ?`

	// host_id <> '' (an empty ID is refused before) lets SQLite seek
	// the partial index on (form_seq, host_id): without it, the delete
	// walked every submission of the form (TestTriggerLookupsSeek).
	sqlDeleteSubmission = `DELETE FROM formsapi_submissions
WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = ? AND account_id = ?) AND host_id = ? AND host_id <> ''
RETURNING form_seq`

	sqlDeleteFormRuns = `DELETE FROM formsapi_find_run_list
WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = ? AND account_id = ?)`

	// A form's posting blocks go in one statement before its rows, whose
	// deletion trigger would otherwise edit each row's blocks one
	// trigram at a time: 20 s for a form of 5,000 submissions.
	sqlDeleteFormBlocks = `DELETE FROM formsapi_find_blocks
WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = ? AND account_id = ?)`

	sqlDeleteFormSubmissions = `DELETE FROM formsapi_submissions
WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = ? AND account_id = ?)`

	sqlDeleteForm = `DELETE FROM formsapi_forms WHERE id = ? AND account_id = ? RETURNING seq`

	// Erase reads the data of every submission of the account and
	// matches it in Go (stored.Holds), the one rule of all stores.
	sqlAccountData = `SELECT s.seq, s.form_seq, s.data FROM formsapi_submissions s
JOIN formsapi_forms f ON f.seq = s.form_seq
WHERE f.account_id = ?`

	// Erase by a value the index of submitted values holds (migration
	// 0031): the account's forms, whose entries of the key eraseCandidates
	// walks; the submissions of a chunk of them, a JSON array of [seq,
	// created_at]; and each form's rows not indexed yet, which Erase
	// matches in Go as sqlAccountData's.
	sqlAccountForms = `SELECT seq FROM formsapi_forms WHERE account_id = ?1`

	sqlEraseChunk = `SELECT s.seq, s.form_seq, s.data FROM json_each(?1) j CROSS JOIN formsapi_submissions s ON s.seq = j.value ->> 0
WHERE s.created_at = j.value ->> 1 AND s.form_seq = ?2`

	sqlEraseUnindexed = `SELECT s.seq, s.form_seq, s.data FROM formsapi_submissions s INDEXED BY formsapi_submissions_unindexed
WHERE s.find_keys IS NULL AND s.form_seq = ?1`

	sqlDeleteBySeq = `DELETE FROM formsapi_submissions WHERE seq = ?`

	// The sync feed, and its fast path: one range of the index on
	// (form_seq, feed_pos) merged with one of the tombstones' primary key
	// (migration 0007), by position. The first row, at position 0, is the
	// form's: its second column is its incarnation, its last feed_purged.
	// A tombstone's last column is the position of the submission it deleted; a submission's is 0.
	// Like the lists, no LIMIT ?: the caller steps one row more than the
	// page, to learn whether more follow, and stops.
	sqlFeed = `SELECT 0, incarnation, NULL, NULL, feed_purged FROM formsapi_forms WHERE seq = ?1
UNION ALL
SELECT feed_pos, created_at, data, attachments, 0 FROM formsapi_submissions WHERE form_seq = ?1 AND feed_pos > ?2
UNION ALL
SELECT feed_pos, 0, NULL, NULL, of_pos FROM formsapi_tombstones WHERE form_seq = ?1 AND feed_pos > ?2
ORDER BY 1`

	sqlFeedEncoded = `SELECT 0, NULL, feed_purged FROM formsapi_forms WHERE seq = ?1
UNION ALL
SELECT feed_pos, json, 0 FROM formsapi_submissions WHERE form_seq = ?1 AND feed_pos > ?2
UNION ALL
SELECT feed_pos, NULL, of_pos FROM formsapi_tombstones WHERE form_seq = ?1 AND feed_pos > ?2
ORDER BY 1`

	// sqlFeedKeyed is sqlFeedEncoded with each submission's find_keys
	// (NULL for the form's row and the tombstones): what a page read with
	// keys (wire.FeedQuery.Keys) checks before it takes a submission.
	sqlFeedKeyed = `SELECT 0, NULL, feed_purged, NULL FROM formsapi_forms WHERE seq = ?1
UNION ALL
SELECT feed_pos, json, 0, find_keys FROM formsapi_submissions WHERE form_seq = ?1 AND feed_pos > ?2
UNION ALL
SELECT feed_pos, NULL, of_pos, NULL FROM formsapi_tombstones WHERE form_seq = ?1 AND feed_pos > ?2
ORDER BY 1`

	// Every deletion of the store stamps the tombstones the triggers made
	// (its own and any writer's since its last deletion) with its clock,
	// then forgets those past retention ($1: now less the retention),
	// keeping the last position forgotten on each form.
	sqlStampTombstones = `UPDATE formsapi_tombstones SET deleted_at = ? WHERE deleted_at IS NULL`

	// INDEXED BY: without statistics (the store runs no ANALYZE) SQLite
	// walked every tombstone of the store in form order, to group without
	// a sort, on every deletion; the index reads only those past
	// retention (TestQueryPlans).
	sqlPurgedUpTo = `UPDATE formsapi_forms SET feed_purged = p.pos
FROM (SELECT form_seq, max(feed_pos) AS pos FROM formsapi_tombstones INDEXED BY formsapi_tombstones_deleted_at
    WHERE deleted_at <= ?1 GROUP BY form_seq) AS p
WHERE formsapi_forms.seq = p.form_seq AND formsapi_forms.feed_purged < p.pos`

	sqlPurgeTombstones = `DELETE FROM formsapi_tombstones WHERE deleted_at <= ?`

	sqlAddKey = `INSERT INTO formsapi_keys (key_hash, account_id, created_at, forms, expires_at) VALUES (?, ?, ?, ?, ?)`

	// Revocation keeps the row, so the key can never be added again.
	sqlRevokeKey = `UPDATE formsapi_keys SET revoked_at = ? WHERE key_hash = ? AND revoked_at IS NULL`
)

// Sorted pages (internal/stored/sort.go): the form's entries of one
// field in the ordered index (migration 0019), from the cursor's place,
// joined to their submissions; then the form's submissions in position
// order, which the page checks for having no key. No LIMIT: the reader
// stops stepping (see the note on the list statements).
const (
	sqlSortedAsc = `SELECT e.seq, e.created_at, e.value, s.data, s.attachments, %s
FROM formsapi_sort e JOIN formsapi_submissions s ON s.seq = e.seq
WHERE e.form_seq = ?1 AND e.field = ?2 AND (e.value, e.created_at, e.seq) > (?3, ?4, ?5)
ORDER BY e.value, e.created_at, e.seq`

	sqlSortedDesc = `SELECT e.seq, e.created_at, e.value, s.data, s.attachments, %s
FROM formsapi_sort e JOIN formsapi_submissions s ON s.seq = e.seq
WHERE e.form_seq = ?1 AND e.field = ?2 AND (e.value, e.created_at, e.seq) < (?3, ?4, ?5)
ORDER BY e.value DESC, e.created_at DESC, e.seq DESC`

	sqlUnsortedAsc = `SELECT seq, created_at, data, attachments, %s
FROM formsapi_submissions
WHERE form_seq = ? AND (created_at, seq) > (?, ?) AND (created_at, seq) < (?, ?)
ORDER BY created_at ASC, seq ASC`

	sqlUnsortedDesc = `SELECT seq, created_at, data, attachments, %s
FROM formsapi_submissions
WHERE form_seq = ? AND (created_at, seq) > (?, ?) AND (created_at, seq) < (?, ?)
ORDER BY created_at DESC, seq DESC`
)
