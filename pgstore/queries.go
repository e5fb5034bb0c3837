package pgstore

import (
	"strconv"
	"strings"

	"github.com/formsapi/formsapi/internal/stored"
)

// Every statement the store runs. They are made once per store, with the
// schema's quoted name in place of "formsapi_" table prefixes, and every
// value is a bound parameter; pgx prepares each once per connection.
//
// A list page is bounded by two keyset positions, both exclusive:
// (created_at, seq) > lower and (created_at, seq) < upper. Since, Until
// and the cursor are all folded into those two bounds by keyset.Bounds,
// so each list has one statement per order, and PostgreSQL turns the two
// row comparisons into the start and the end of one index range scan: no
// OFFSET, no sort, however deep the page (TestExplain checks the plans).
const (
	// A page of forms, with the version of the account's forms list
	// (migration 0009) read in the same snapshot, which tags the page
	// exactly for the read cache (a store without one ignores it). The
	// first column is the version, NULL when the account has no row; an
	// empty page is one row of NULLs after it. As in
	// sqlAppendSubmissions, the LATERAL subquery runs inside the one outer
	// row, and its rows come out in its order.
	sqlListForms = `SELECT v.version, f.seq, f.created_at, f.id, f.title, f.icon, f.notification_email
FROM (SELECT (SELECT version FROM formsapi_form_lists WHERE account_id = $1) AS version) v
LEFT JOIN LATERAL (
    SELECT seq, created_at, id, title, icon, notification_email
    FROM formsapi_forms
    WHERE account_id = $1 AND (created_at, seq) > ($2, $3) AND (created_at, seq) < ($4, $5)
    ORDER BY created_at {DIR}, seq {DIR}
    LIMIT $6
) f ON true`

	// The version of an account's forms list, for a read through the
	// cache that the key's lookup did not bring it to.
	sqlFormListVersion = `SELECT version FROM formsapi_form_lists WHERE account_id = $1`

	// The form is looked up by ID and owner inside the statement, so a
	// page takes one round trip; an empty page asks sqlFormOf whether the
	// form exists at all. Only public columns: metadata is never selected.
	sqlListSubmissions = `SELECT seq, created_at, data, attachments, octet_length(json)
FROM formsapi_submissions
WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = $1 AND account_id = $2)
  AND (created_at, seq) > ($3, $4) AND (created_at, seq) < ($5, $6)
ORDER BY created_at {DIR}, seq {DIR}
LIMIT $7`

	// The handler's fast path: each submission as the API sends it, with
	// the seq and version of its form read in the same snapshot, which
	// tag the page in the read cache exactly. The form is looked up by ID
	// and owner; the LATERAL subquery refers to it, so PostgreSQL runs it
	// as a nested loop inside that one form row, and the rows come out in
	// the subquery's order. A form without submissions in range gives one
	// row of NULLs after its seq and version; a form that is not
	// accountID's, none at all.
	//
	// Rows are bounded in bytes too ($8, the room left in the page's byte
	// budget): only rows whose earlier rows total at most $8 bytes come
	// out, which is every row that fits and the first that does not, so
	// that the store sees where the budget ends the page, and none of the
	// rows after it are read from their TOAST tables and sent, whatever
	// the limit. octet_length of a bytea reads only its header. total is
	// how many rows the limit let through, so that a store that counts
	// fewer bytes than this statement does (it leaves damaged rows out of
	// its count) can tell rows cut here from the end of the range.
	//
	// The last four columns are the form's head for incremental pages
	// (pagecache.Head, migration 0016): its base and feed_last, and the
	// position of the submission at feed_last (NULL when none is there),
	// one probe of the (form_seq, feed_pos) index.
	sqlAppendSubmissions = `SELECT f.seq, f.version, f.incarnation, s.seq, s.created_at, s.json, s.total,
    f.base, f.feed_last, a.created_at, a.seq
FROM formsapi_forms f
LEFT JOIN LATERAL (
    SELECT created_at, seq FROM formsapi_submissions WHERE form_seq = f.seq AND feed_pos = f.feed_last
) a ON true
LEFT JOIN LATERAL (
    SELECT seq, created_at, json, total FROM (
        SELECT seq, created_at, json,
            sum(octet_length(json)) OVER (ORDER BY created_at {DIR}, seq {DIR} ROWS UNBOUNDED PRECEDING) - octet_length(json) AS before,
            count(*) OVER () AS total
        FROM (
            SELECT seq, created_at, json FROM formsapi_submissions
            WHERE form_seq = f.seq AND (created_at, seq) > ($3, $4) AND (created_at, seq) < ($5, $6)
            ORDER BY created_at {DIR}, seq {DIR}
            LIMIT $7
        ) lim
    ) sized
    WHERE before <= $8
    ORDER BY created_at {DIR}, seq {DIR}
) s ON true
WHERE f.id = $1 AND f.account_id = $2`

	// What was added to a form since a page of it was read (pagecache's
	// Since and Splice): the form's seq, version, incarnation and head,
	// and every submission from feed position $3 to its feed_last, in
	// feed order, at most $4: one range of the (form_seq, feed_pos) index,
	// in the same snapshot. (A host's insert above feed_last is no
	// addition, and changed base; leaving such rows out keeps its form
	// spliceable after it.) A form without such submissions gives one row of NULLs
	// after its own columns; a form that is not accountID's, none at all.
	sqlSplice = `SELECT f.seq, f.version, f.incarnation, f.base, f.feed_last, s.feed_pos, s.seq, s.created_at, s.json
FROM formsapi_forms f
LEFT JOIN LATERAL (
    SELECT feed_pos, seq, created_at, json FROM formsapi_submissions
    WHERE form_seq = f.seq AND feed_pos >= $3 AND feed_pos <= f.feed_last
    ORDER BY feed_pos
    LIMIT $4
) s ON true
WHERE f.id = $1 AND f.account_id = $2`

	// Filtered pages (internal/stored's AppendFiltered and
	// FilteredSubmissions): the index entries of one key ($2) of the form
	// ($1; migration 0017) in keyset order, each joined to its submission,
	// $7 of them: a page reads them in batches (walkRows), stored.Examined
	// in all at most. The form's ownership is checked before, as the read
	// cache's lookup is.
	//
	// The entries are read, limit and all, in a subquery of their own and
	// each submission fetched by its primary key in a LATERAL one: joined
	// plainly, the planner chose for a key of 1% of a form's rows a hash
	// join with a sequential scan of every form's submissions (EXPLAIN
	// at 100,000 submissions; BENCHMARKS.md, "Filters' plans").
	//
	// Rows are bounded in bytes too ($8, as sqlAppendSubmissions' are, by
	// the wrapper byteBounded): only rows whose earlier rows' data and attachments
	// total less than $8 bytes come out, so that a walk that stops at its
	// bound on work (find.MaxExaminedBytes; $8 is what is left of it)
	// has not made PostgreSQL read and send the rest of a batch of
	// megabyte submissions.
	sqlFindEncoded = `SELECT i.seq, i.created_at, s.data, s.attachments, s.json
FROM (` + sqlFindEntries + `) i
CROSS JOIN LATERAL (SELECT data, attachments, json FROM formsapi_submissions WHERE seq = i.seq OFFSET 0) s
ORDER BY i.created_at {DIR}, i.seq {DIR}`

	sqlFind = `SELECT i.seq, i.created_at, s.data, s.attachments, octet_length(s.json) AS size
FROM (` + sqlFindEntries + `) i
CROSS JOIN LATERAL (SELECT data, attachments, json FROM formsapi_submissions WHERE seq = i.seq OFFSET 0) s
ORDER BY i.created_at {DIR}, i.seq {DIR}`

	// A search's walk (a trigram's entries: a negative key): the entries
	// of the key's posting blocks (migration 0035; sqlBlockEntries) and
	// the form's unfolded tail (migration 0023), merged. A submission is
	// in one or the other, as one statement sees the schema (the fold
	// moves tail rows into the blocks in one transaction), and each batch
	// of a walk is one statement over a range of its own.
	sqlSearch = `SELECT i.seq, i.created_at, s.data, s.attachments, octet_length(s.json) AS size
FROM (` + sqlSearchEntries + `) i
CROSS JOIN LATERAL (SELECT data, attachments, json FROM formsapi_submissions WHERE seq = i.seq OFFSET 0) s
ORDER BY i.created_at {DIR}, i.seq {DIR}`

	sqlSearchEncoded = `SELECT i.seq, i.created_at, s.data, s.attachments, s.json
FROM (` + sqlSearchEntries + `) i
CROSS JOIN LATERAL (SELECT data, attachments, json FROM formsapi_submissions WHERE seq = i.seq OFFSET 0) s
ORDER BY i.created_at {DIR}, i.seq {DIR}`

	sqlSearchEntries = `({BLOCKS})
    UNION ALL
    (SELECT seq, created_at FROM formsapi_find_tail
    WHERE form_seq = $1 AND (created_at, seq) > ($3, $4) AND (created_at, seq) < ($5, $6)
    ORDER BY created_at {DIR}, seq {DIR}
    LIMIT $7)
    ORDER BY created_at {DIR}, seq {DIR}
    LIMIT $7`

	sqlFindEntries = `SELECT seq, created_at FROM formsapi_find
    WHERE form_seq = $1 AND key = $2 AND (created_at, seq) > ($3, $4) AND (created_at, seq) < ($5, $6)
    ORDER BY created_at {DIR}, seq {DIR}
    LIMIT $7`

	// The entries of a trigram's posting blocks (migration 0035) in a
	// range, in keyset order, at most {LIMIT}: a walk of the key's blocks
	// in the order of their names, one descent each, from the block that
	// holds the range's start (ascending: the last block named at or
	// before it; descending: the last named before the range's end),
	// that stops once the blocks after the first hold {LIMIT} entries
	// (a block is never empty) or the range ends. So it reads at most
	// {LIMIT} entries and two blocks' more (56 each), whatever the key's
	// size, and returns every entry of the range up to {LIMIT}: fewer
	// means the range has no more. {FORM}, {KEY}, {LO} and {HI} (pairs
	// of created_at and seq, exclusive) are its parameters.
	sqlBlockEntriesAsc = `WITH RECURSIVE w AS (
        (SELECT lo_at, lo_seq, 0::bigint AS n, ats, seqs FROM (
            (SELECT lo_at, lo_seq, ats, seqs FROM formsapi_find_blocks
            WHERE form_seq = {FORM} AND key = {KEY} AND (lo_at, lo_seq) <= ({LO})
            ORDER BY lo_at DESC, lo_seq DESC LIMIT 1)
            UNION ALL
            (SELECT lo_at, lo_seq, ats, seqs FROM formsapi_find_blocks
            WHERE form_seq = {FORM} AND key = {KEY} AND (lo_at, lo_seq) > ({LO}) AND (lo_at, lo_seq) < ({HI})
            ORDER BY lo_at, lo_seq LIMIT 1)
        ) f ORDER BY lo_at, lo_seq LIMIT 1)
        UNION ALL
        SELECT b.lo_at, b.lo_seq, w.n + cardinality(b.seqs), b.ats, b.seqs
        FROM w CROSS JOIN LATERAL (
            SELECT lo_at, lo_seq, ats, seqs FROM formsapi_find_blocks
            WHERE form_seq = {FORM} AND key = {KEY} AND (lo_at, lo_seq) > (w.lo_at, w.lo_seq) AND (lo_at, lo_seq) < ({HI})
            ORDER BY lo_at, lo_seq LIMIT 1
        ) b
        WHERE w.n < {LIMIT}
    )
    SELECT x.seq, x.at AS created_at FROM w, unnest(w.ats, w.seqs) x (at, seq)
    WHERE (x.at, x.seq) > ({LO}) AND (x.at, x.seq) < ({HI})
    ORDER BY x.at, x.seq
    LIMIT {LIMIT}`

	sqlBlockEntriesDesc = `WITH RECURSIVE w AS (
        (SELECT lo_at, lo_seq, 0::bigint AS n, ats, seqs FROM formsapi_find_blocks
        WHERE form_seq = {FORM} AND key = {KEY} AND (lo_at, lo_seq) < ({HI})
        ORDER BY lo_at DESC, lo_seq DESC LIMIT 1)
        UNION ALL
        SELECT b.lo_at, b.lo_seq, w.n + cardinality(b.seqs), b.ats, b.seqs
        FROM w CROSS JOIN LATERAL (
            SELECT lo_at, lo_seq, ats, seqs FROM formsapi_find_blocks
            WHERE form_seq = {FORM} AND key = {KEY} AND (lo_at, lo_seq) < (w.lo_at, w.lo_seq)
            ORDER BY lo_at DESC, lo_seq DESC LIMIT 1
        ) b
        WHERE w.n < {LIMIT} AND (w.lo_at, w.lo_seq) > ({LO})
    )
    SELECT x.seq, x.at AS created_at FROM w, unnest(w.ats, w.seqs) x (at, seq)
    WHERE (x.at, x.seq) > ({LO}) AND (x.at, x.seq) < ({HI})
    ORDER BY x.at DESC, x.seq DESC
    LIMIT {LIMIT}`

	// A search without filters while the search index is off
	// (stored.Candidates gives no key): the form's ($1) submissions in
	// keyset order, $6 of them, read in batches as the entries of a key
	// are (walkRows), each checked as a filtered page's entry, and
	// bounded in bytes ($7) the same way (byteBounded).
	sqlScanEncoded = `SELECT seq, created_at, data, attachments, json FROM formsapi_submissions
WHERE form_seq = $1 AND (created_at, seq) > ($2, $3) AND (created_at, seq) < ($4, $5)
ORDER BY created_at {DIR}, seq {DIR}
LIMIT $6`

	sqlScan = `SELECT seq, created_at, data, attachments, octet_length(json) AS size FROM formsapi_submissions
WHERE form_seq = $1 AND (created_at, seq) > ($2, $3) AND (created_at, seq) < ($4, $5)
ORDER BY created_at {DIR}, seq {DIR}
LIMIT $6`

	// Whether the index holds search's trigrams (migration 0020), read
	// by searches only.
	sqlSearchIndexed = `SELECT value = 1 FROM formsapi_settings WHERE name = '` + stored.SearchIndexSetting + `'`

	// The sort index's setting (migration 0028).
	sqlSortIndexed = `SELECT value > 0 FROM formsapi_settings WHERE name = '` + stored.SortIndexSetting + `'`

	// Whether a sorted list by the field $1 is served: the sort index's
	// setting and whether its fields (migration 0031) name $1.
	sqlSortServed = `SELECT value, EXISTS (SELECT 1 FROM formsapi_sort_fields WHERE name = $1)
FROM formsapi_settings WHERE name = '` + stored.SortIndexSetting + `'`

	// Totals (total=exact|estimate; see formsapi.Counter): the rows of a
	// range and the index entries of one key in a range, both bounded (an
	// exact count of a filtered list reads the data of a key's entries
	// with the oldest-first page statement, in batches: newCountRows). The
	// entries are read in their index's order, which costs nothing: without
	// it, for a key on most of a form that fills most of the table, the
	// planner read the whole of formsapi_find, every form's entries, and
	// for a form that fills most of the table, every form's submissions
	// (TestExplainFind).
	sqlCountRows = `SELECT count(*) FROM (SELECT 1 FROM formsapi_submissions
WHERE form_seq = $1 AND (created_at, seq) > ($2, $3) AND (created_at, seq) < ($4, $5)
ORDER BY created_at, seq LIMIT ` + stored.CountLimit + `) c`

	sqlCountEntries = `SELECT count(*) FROM (SELECT 1 FROM formsapi_find
WHERE form_seq = $1 AND key = $6 AND (created_at, seq) > ($2, $3) AND (created_at, seq) < ($4, $5)
ORDER BY created_at, seq LIMIT ` + stored.CountLimit + `) c`

	// The sync feed, and its fast path: one range of the index on
	// (form_seq, feed_pos) and one of the tombstones' primary key
	// (migration 0008), each one row more than the limit, merged by
	// position, to learn whether more follow. The form is looked up inside
	// the statement, as for pages, and its row comes first, at position
	// 0, with its incarnation in the second column and its feed_purged in
	// the last; no row at all means no
	// form of the account. A tombstone's last column is the position of
	// the submission it deleted; a submission's is 0.
	sqlFeed = `SELECT 0::bigint, incarnation, NULL::text, NULL::text, feed_purged FROM formsapi_forms WHERE id = $1 AND account_id = $2
UNION ALL
(SELECT feed_pos, created_at, data, attachments, 0::bigint FROM formsapi_submissions
WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = $1 AND account_id = $2) AND feed_pos > $3
ORDER BY feed_pos LIMIT $4)
UNION ALL
(SELECT feed_pos, 0::bigint, NULL::text, NULL::text, of_pos FROM formsapi_tombstones
WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = $1 AND account_id = $2) AND feed_pos > $3
ORDER BY feed_pos LIMIT $4)
ORDER BY 1`

	// The fast path is bounded in bytes as pages are ($5; see
	// sqlAppendSubmissions); a tombstone takes no bytes. The form's row
	// carries its version in the last column, read in the page's
	// snapshot: a page read from a replica is used only at the version
	// the primary gave the request (see WithReplica).
	sqlFeedEncoded = `SELECT feed_pos, json, of_pos, total, 0::bigint FROM (
    SELECT feed_pos, json, of_pos,
        coalesce(sum(octet_length(json)) OVER (ORDER BY feed_pos ROWS UNBOUNDED PRECEDING), 0) - coalesce(octet_length(json), 0) AS before,
        count(*) OVER () AS total
    FROM (
        SELECT feed_pos, json, of_pos FROM (
            (SELECT feed_pos, json, 0::bigint AS of_pos FROM formsapi_submissions
            WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = $1 AND account_id = $2) AND feed_pos > $3
            ORDER BY feed_pos LIMIT $4)
            UNION ALL
            (SELECT feed_pos, NULL::bytea, of_pos FROM formsapi_tombstones
            WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = $1 AND account_id = $2) AND feed_pos > $3
            ORDER BY feed_pos LIMIT $4)
        ) entries
        ORDER BY feed_pos
        LIMIT $4
    ) lim
) sized
WHERE before <= $5
UNION ALL
SELECT 0, NULL, feed_purged, incarnation, version FROM formsapi_forms WHERE id = $1 AND account_id = $2
ORDER BY 1`

	// sqlFeedKeyed is sqlFeedEncoded for a page read with keys
	// (wire.FeedQuery.Keys, $6): a submission whose find_keys is known and
	// holds none of them comes without its JSON, its of_pos the negative
	// of its JSON's bytes (wire.FeedRows), and takes nothing of the byte
	// bound ($5), so that neither the server nor the client spends more on
	// it than its row's read.
	sqlFeedKeyed = `SELECT feed_pos, json, of_pos, total, 0::bigint FROM (
    SELECT feed_pos, json, of_pos,
        coalesce(sum(octet_length(json)) OVER (ORDER BY feed_pos ROWS UNBOUNDED PRECEDING), 0) - coalesce(octet_length(json), 0) AS before,
        count(*) OVER () AS total
    FROM (
        SELECT feed_pos, json, of_pos FROM (
            (SELECT feed_pos, CASE WHEN keep THEN json END AS json, CASE WHEN keep THEN 0 ELSE -octet_length(json) END::bigint AS of_pos FROM (
                SELECT feed_pos, json, (find_keys IS NULL OR find_keys && $6::bigint[]) AS keep FROM formsapi_submissions
                WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = $1 AND account_id = $2) AND feed_pos > $3
                ORDER BY feed_pos LIMIT $4) keyed)
            UNION ALL
            (SELECT feed_pos, NULL::bytea, of_pos FROM formsapi_tombstones
            WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = $1 AND account_id = $2) AND feed_pos > $3
            ORDER BY feed_pos LIMIT $4)
        ) entries
        ORDER BY feed_pos
        LIMIT $4
    ) lim
) sized
WHERE before <= $5
UNION ALL
SELECT 0, NULL, feed_purged, incarnation, version FROM formsapi_forms WHERE id = $1 AND account_id = $2
ORDER BY 1`

	// Every deletion of the store stamps the tombstones the triggers made
	// (its own and any writer's since its last deletion) with its clock,
	// then forgets those past retention ($1: now less the retention),
	// keeping the last position forgotten on each form.
	sqlStampTombstones = `UPDATE formsapi_tombstones SET deleted_at = $1 WHERE deleted_at IS NULL`

	sqlPurgedUpTo = `UPDATE formsapi_forms f SET feed_purged = p.pos
FROM (SELECT form_seq, max(feed_pos) AS pos FROM formsapi_tombstones WHERE deleted_at <= $1 GROUP BY form_seq) AS p
WHERE f.seq = p.form_seq AND f.feed_purged < p.pos`

	sqlPurgeTombstones = `DELETE FROM formsapi_tombstones WHERE deleted_at <= $1`

	// The ownership check: a form of another account is not found. The
	// version (migration 0006) is what the read cache checks its pages by,
	// and the incarnation (migration 0013) what cursors and tokens carry.
	sqlFormOf = `SELECT seq, version, incarnation FROM formsapi_forms WHERE id = $1 AND account_id = $2`

	// Expiry is checked by the caller against the store's clock (see
	// WithClock), never the database's now(). The lookup of a request for
	// the forms list: the key, and the version of its account's forms
	// list (migration 0009), NULL when the account has no row, in one
	// round trip.
	sqlResolveKey = `SELECT k.account_id, k.forms, k.expires_at,
    (SELECT l.version FROM formsapi_form_lists l WHERE l.account_id = k.account_id)
FROM formsapi_keys k WHERE k.key_hash = $1 AND k.revoked_at IS NULL`

	// The handler's combined lookup: the key, and the form it asks for
	// among its account's forms, in one round trip. No row: no live key;
	// NULLs after expires_at: no such form of the key's account.
	sqlAuthorizeForm = `SELECT k.account_id, k.forms, k.expires_at, f.seq, f.version, f.incarnation
FROM formsapi_keys k
LEFT JOIN formsapi_forms f ON f.id = $2 AND f.account_id = k.account_id
WHERE k.key_hash = $1 AND k.revoked_at IS NULL`

	// The lookups of several concurrent requests in one statement (see
	// lookups.go): for each (key hash, form ID) pair, numbered from 1, a
	// row with the key's columns, NULL for no live key, and the form's,
	// NULL for no such form of the key's account (or an empty form ID).
	// The last column is the version of the account's forms list, as
	// sqlResolveKey reads it, for a pair with an empty form ID only: the
	// subquery under CASE runs for those rows alone, so the lookups of
	// forms cost nothing more. Each lookup is its own LATERAL subquery
	// with a LIMIT (of 1: key_hash and id are unique), which the planner
	// cannot merge into a join: so every plan probes the two unique
	// indexes once per lookup. As plain joins, with a few hundred forms
	// or keys, it chose hash joins over whole-table scans, which cost
	// PostgreSQL about twice as much per statement (EXPLAIN ANALYZE on the
	// fleet benchmark's data: 80–110 µs against 30–50), and more as the
	// tables grow until it changes its mind. The arrays are read through
	// sub-SELECTs so that the planner never sees their length: with the
	// arrays as constants, each custom plan counted the batch's rows
	// exactly and looked cheaper than the generic plan's guess for a
	// small batch, so PostgreSQL planned the statement again on every
	// execution (pg_prepared_statements: 0 generic plans, all custom),
	// which cost more than running it. Now the plans cost the same, and
	// after its first five executions on a connection the statement is
	// planned no more (TestLookupsPlannedOnce).
	sqlAuthorizeBatch = `SELECT u.n, k.account_id, k.forms, k.expires_at, f.seq, f.version, f.incarnation,
    CASE WHEN u.form_id = '' THEN (SELECT l.version FROM formsapi_form_lists l WHERE l.account_id = k.account_id) END
FROM unnest((SELECT $1::bytea[]), (SELECT $2::text[])` + lookupsJoin

	// A following node's round (follow.go, migration 0025), one
	// statement and so one snapshot: a row with the snapshot, a row for
	// each log row whose transaction the last round's snapshot did not
	// see ($1 its xmax, $2 the transactions in progress then; NULL and
	// none for a first round, which reads no log), with the current state
	// of what it names (NULLs: gone), the feeds of the forms the node
	// holds pages of (below), and a row for each lookup ($5, $6,
	// numbered from 1) as sqlAuthorizeBatch reads it, with the version of
	// the key's account's forms list for every one. The log's rows are
	// found by its index on xid: one range from $1 and one probe per
	// transaction in progress (xip is below xmax, so the two never both
	// find a row). The range has an upper bound (the largest xid8) for
	// the planner's sake: with one bound from a parameter it guesses a
	// third of the table and scans all of it; with two, a small range.
	// The log's rows are read once (MATERIALIZED) and each kind joins its
	// own table, so that a form's ID and an account are decoded from ref
	// only for rows of their kind (a key's hash is no UTF-8). A round
	// whose requests the copy answers all runs sqlRoundLog alone. The
	// decoded form IDs and accounts are compared COLLATE "default":
	// convert_from's result has the "C" collation, and an index of a
	// column of the database's default collation serves no equality
	// under another (byte equality all the same, both being
	// deterministic); without it each changed form's row was found by a
	// scan of every form (TestExplain).
	//
	// The feeds (follow.go's formFeed): $3 names the forms whose feed
	// the node holds and the feed position each is at, each as a zero
	// byte, the form's ID, a zero byte and the position in 8 bytes, big
	// endian (feedArgs; one bytea, which PostgreSQL receives whole: a
	// text[] of 200 IDs cost it about 40 µs a round, a palloc and a call
	// per element). A changed form's row (kind 2) has its base and
	// feed_last too, and when $3 names it (the ID between zero bytes,
	// which no ID holds), 1 in the column of expires and each submission
	// and tombstone whose feed position is above the one $3 gives and at
	// most feed_last, at most $4 of each (one range of the (form_seq,
	// feed_pos) index, one of the tombstones' key), the form's columns
	// repeated on a row for each: a submission's feed and keyset
	// positions and JSON, or a tombstone's feed position and the feed
	// position (in the column of list) and keyset position of the
	// submission it deleted (migration 0026; NULL for older tombstones).
	// All of it is in the branch of kind 2, whose rows a round whose log
	// names no form does not run: each more branch, table and index in
	// the statement cost every round some µs to start (a branch of its
	// own for the feed's rows and a probe for the anchor cost an empty
	// round 60% more).
	sqlRoundLog = roundHead + roundForms + roundTail

	// A round's probe (follow.go): the statement's snapshot, and whether
	// the log has a row whose transaction the last round's snapshot did
	// not see ($1 its xmax, $2 the transactions in progress then), by
	// the same two index lookups as roundHead's. When it has none, the
	// round's statement in the same snapshot would have read the
	// snapshot's row and nothing else: nothing the copy holds changed
	// between the two snapshots, and the probe's snapshot is the round's.
	// It costs PostgreSQL about a statement's floor (one index probe
	// each; a lean round's statement twice that: each branch, table and
	// index of it opened), so a round with nothing to look up after one
	// that read nothing sends it first, and the round's statement only
	// when it finds a row.
	sqlRoundProbe = `SELECT pg_current_snapshot()::text,
    EXISTS (SELECT FROM formsapi_changes WHERE xid >= (SELECT $1::text::xid8) AND xid < (SELECT '18446744073709551615'::text::xid8))
    OR EXISTS (SELECT FROM formsapi_changes WHERE xid = ANY ((SELECT $2::text[])::xid8[]))`

	// A round on the replica (follow.go, roundOnReplica): the primary's
	// snapshot, the round's position (the statement's, taken when it
	// starts), and where the primary has inserted its WAL, read after
	// it, which so holds every commit the snapshot sees; and whether the replica has
	// replayed past it, NULL on a server not in recovery (a promoted
	// standby's pg_last_wal_replay_lsn() stays where recovery ended, so
	// pg_is_in_recovery() decides). Neither touches a table.
	sqlRoundPosition = `SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text`
	sqlReplayedPast  = `SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() >= $1::text::pg_lsn END`

	// sqlRoundLog and the lookups: a round with misses.
	sqlRound = sqlRoundLog + roundLookups + `$5::bytea[]), (SELECT $6::text[])` + lookupsJoin

	// sqlRoundLogLean and sqlRoundLean are sqlRoundLog and sqlRound
	// without the feeds: a changed form's row reads no submissions, and
	// the lookups' arrays are $3 and $4. A round that the node expects to
	// find no form changed in runs them (follow.go), as the feeds' part
	// costs an empty round some 20 µs more to start.
	sqlRoundLogLean = roundHead + roundFormsLean + roundTail
	sqlRoundLean    = sqlRoundLogLean + roundLookups + `$3::bytea[]), (SELECT $4::text[])` + lookupsJoin

	// roundLookups and lookupsJoin, around the two arrays' parameters,
	// are a round's lookups (sqlRound, sqlRoundLean): a row for each key
	// hash with its form ID, numbered from 1, as sqlAuthorizeBatch reads
	// it (lookupsJoin is its joins too), with the version of the key's
	// account's forms list for every one.
	roundLookups = `
UNION ALL
SELECT u.n, NULL, NULL, NULL, k.account_id, k.forms, k.expires_at, f.seq, f.version, f.incarnation,
    (SELECT l.version FROM formsapi_form_lists l WHERE l.account_id = k.account_id),
    NULL, NULL, NULL, NULL, NULL, NULL
FROM unnest((SELECT `
	lookupsJoin = `) WITH ORDINALITY AS u (h, form_id, n)
LEFT JOIN LATERAL (
    SELECT account_id, forms, expires_at FROM formsapi_keys WHERE key_hash = u.h AND revoked_at IS NULL LIMIT 1
) k ON true
LEFT JOIN LATERAL (
    SELECT seq, version, incarnation FROM formsapi_forms WHERE id = u.form_id AND account_id = k.account_id LIMIT 1
) f ON true`

	roundHead = `WITH c AS MATERIALIZED (
    SELECT kind, ref FROM formsapi_changes
    WHERE xid >= (SELECT $1::text::xid8) AND xid < (SELECT '18446744073709551615'::text::xid8)
    UNION ALL
    SELECT kind, ref FROM formsapi_changes WHERE xid = ANY ((SELECT $2::text[])::xid8[])
)
SELECT 0::bigint, NULL::smallint, NULL::bytea, pg_current_snapshot()::text,
    NULL::text, NULL::text[], NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
    NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bytea
UNION ALL
SELECT 0, c.kind, c.ref, NULL, k.account_id, k.forms, k.expires_at, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL
FROM c LEFT JOIN LATERAL (
    SELECT account_id, forms, expires_at FROM formsapi_keys WHERE key_hash = c.ref AND revoked_at IS NULL LIMIT 1
) k ON true
WHERE c.kind = 1
UNION ALL
`
	roundForms = `SELECT 0, c.kind, c.ref, NULL, f.account_id, NULL, f.fed, f.seq, f.version, f.incarnation, s.of_pos,
    f.base, f.feed_last, s.feed_pos, s.created_at, s.seq, s.json
FROM c LEFT JOIN LATERAL (
    SELECT account_id, seq, version, incarnation, base, feed_last, CASE WHEN p > 0 THEN 1::bigint END AS fed,
        CASE WHEN p > 0 THEN ('x' || encode(substring($3::bytea FROM p + octet_length(c.ref) + 2 FOR 8), 'hex'))::bit(64)::bigint END AS since
    FROM formsapi_forms, position('\x00'::bytea || c.ref || '\x00'::bytea IN $3::bytea) AS p
    WHERE id = convert_from(c.ref, 'UTF8') COLLATE "default" LIMIT 1
) f ON true
LEFT JOIN LATERAL (
    (SELECT feed_pos, created_at, seq, json, NULL::bigint AS of_pos FROM formsapi_submissions
    WHERE form_seq = f.seq AND feed_pos > f.since AND feed_pos <= f.feed_last
    ORDER BY feed_pos LIMIT $4)
    UNION ALL
    (SELECT feed_pos, of_at, of_seq, NULL::bytea, of_pos FROM formsapi_tombstones
    WHERE form_seq = f.seq AND feed_pos > f.since AND feed_pos <= f.feed_last
    ORDER BY feed_pos LIMIT $4)
) s ON true
WHERE c.kind = 2
`
	roundFormsLean = `SELECT 0, c.kind, c.ref, NULL, f.account_id, NULL, NULL, f.seq, f.version, f.incarnation, NULL,
    f.base, f.feed_last, NULL, NULL, NULL, NULL
FROM c LEFT JOIN LATERAL (
    SELECT account_id, seq, version, incarnation, base, feed_last FROM formsapi_forms WHERE id = convert_from(c.ref, 'UTF8') COLLATE "default" LIMIT 1
) f ON true
WHERE c.kind = 2
`
	roundTail = `UNION ALL
SELECT 0, c.kind, c.ref, NULL, NULL, NULL, NULL, NULL, NULL, NULL, l.version,
    NULL, NULL, NULL, NULL, NULL, NULL
FROM c LEFT JOIN LATERAL (
    SELECT version FROM formsapi_form_lists WHERE account_id = convert_from(c.ref, 'UTF8') COLLATE "default" LIMIT 1
) l ON true
WHERE c.kind = 3
UNION ALL
SELECT 0, c.kind, c.ref, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL FROM c WHERE c.kind = 0`

	sqlListKeys = `SELECT key_hash, forms, created_at, expires_at, revoked_at, last_used_at
FROM formsapi_keys WHERE account_id = $1 ORDER BY created_at, key_hash`

	// A batch of noted key uses in one statement; an older time never
	// overwrites a newer one (nodes flush in any order).
	sqlTouchKeys = `UPDATE formsapi_keys AS k SET last_used_at = u.at
FROM unnest($1::bytea[], $2::bigint[]) AS u (h, at)
WHERE k.key_hash = u.h AND (k.last_used_at IS NULL OR k.last_used_at < u.at)`

	// GCRA in one statement that writes only for an allowed request. cur
	// reads the row of (policy, key) without a lock; when it shows the
	// request refused, nothing is inserted or updated and the statement
	// returns cur's tat, not allowed. Otherwise the row is created, or
	// updated under its row lock if the request still fits there, so that
	// concurrent requests on any node are decided one after another. $3
	// is the interval and $4 the burst tolerance, in microseconds, of the
	// policy of this call. A request that cur allowed and the locked row
	// refuses (another took the last unit meanwhile) updates nothing and
	// returns cur's tat, which would allow it: the caller reads the row
	// again (sqlRateTat) for its RetryAfter. tat only grows while a row
	// lives, so a refusal read from cur's snapshot holds at now. An
	// update is decided at the later of now and the row's at, the time of
	// the decision before it, which a statement that began earlier and
	// waited for that one's row finds ahead of its own now; it returns
	// the time it was decided at.
	sqlRateLimit = `WITH now AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS us),
cur AS (SELECT r.tat FROM formsapi_rate_limits AS r WHERE r.policy = $1 AND r.key = $2),
up AS (
    INSERT INTO formsapi_rate_limits AS r (policy, key, tat, allowed, at)
    SELECT $1, $2, now.us + $3, true, now.us FROM now
    WHERE NOT EXISTS (SELECT FROM cur WHERE GREATEST(cur.tat, now.us) + $3 - now.us > $4)
    ON CONFLICT (policy, key) DO UPDATE SET
        at = GREATEST(r.at, EXCLUDED.at),
        allowed = true,
        tat = GREATEST(r.tat, r.at, EXCLUDED.at) + $3
    WHERE GREATEST(r.tat, r.at, EXCLUDED.at) + $3 - GREATEST(r.at, EXCLUDED.at) <= $4
    RETURNING r.tat, r.at
)
SELECT coalesce((SELECT tat FROM up), (SELECT tat FROM cur), 0), EXISTS (SELECT FROM up), coalesce((SELECT at FROM up), now.us) FROM now`

	// A charge of units (RateLimiter.Charge): $3 more microseconds on the
	// bucket's tat, from now if it is earlier, whatever is left, and the
	// time it was charged at: the later of now and the row's at, as for
	// sqlRateLimit.
	sqlRateCharge = `WITH now AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS us)
INSERT INTO formsapi_rate_limits AS r (policy, key, tat, allowed, at)
SELECT $1, $2, now.us + $3, true, now.us FROM now
ON CONFLICT (policy, key) DO UPDATE SET
    at = GREATEST(r.at, EXCLUDED.at),
    allowed = true,
    tat = GREATEST(r.tat, r.at, EXCLUDED.at) + $3
RETURNING r.tat, r.at`

	// The bucket's tat as it is now, and now: a refusal's RetryAfter when
	// sqlRateLimit lost a race (see there).
	sqlRateTat = `SELECT coalesce((SELECT tat FROM formsapi_rate_limits WHERE policy = $1 AND key = $2), 0),
    (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

	// Rows whose quota is full again carry nothing.
	sqlRatePrune = `DELETE FROM formsapi_rate_limits
WHERE tat < (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

	sqlAddForm = `INSERT INTO formsapi_forms (id, account_id, title, icon, notification_email, created_at)
VALUES ($1, $2, $3, $4, $5, $6)`

	// One statement takes the form's next feed position and inserts, so
	// no transaction is needed. The UPDATE locks the form's row until the
	// insert commits, so the positions of one form commit in order; no
	// row means no such form. It gives the form its new version too
	// (formsapi_addition_kept, migrations 0030 and 0032, which marks the transaction as
	// the store's, so the insert's triggers leave the row alone): one
	// update of the form's row per write.
	// The submission's fields ($12, its data's member names in order)
	// go to the form's field table in the same statement: only names the
	// table lacks at a lower position are written, so a submission of
	// known fields reads the table's index and writes nothing to it.
	// $15 are its sort keys (migration 0028), NULL while the sort index
	// is off, $16 whether they are there: the statement writes nothing
	// when they are not while the setting is on.
	// $13 are the submission's index keys, $14 whether they include
	// search's trigram keys: keys without them are written only while
	// the search index is off (formsapi_addition_kept holds the search lock
	// shared until the write commits when it finds it off). Once it is
	// on, the statement writes nothing at all (see AddSubmission).
	// The statement writes the form's row of the change log (migration
	// 0025's formsapi_change, after the form's row lock, as its trigger
	// did) and the index entries itself (migration 0030):
	// the filter entries (the keys that are not negative), the row in
	// the search index's tail while that index is on, and the sort
	// entries of the fields the sort index keeps (formsapi_addition_kept's
	// kept, read under the sort lock: every member's while it keeps
	// every field; migration 0032). It returns a row without columns for the submission it
	// inserted, so its tag counts it, as the insert's did.
	sqlAddSubmission = `WITH v AS (
    SELECT * FROM formsapi_addition_kept(1, $14::boolean, $16::boolean)
), f AS (
    UPDATE formsapi_forms t SET feed_last = t.feed_last + 1, version = v.version
    FROM v WHERE t.id = $1 AND v.version IS NOT NULL
    RETURNING t.seq, t.feed_last, t.id
), ch AS (
    INSERT INTO formsapi_changes AS c (kind, ref, xid)
    SELECT 2, convert_to(f.id, 'UTF8'), pg_current_xact_id() FROM f
    ON CONFLICT (kind, ref) DO UPDATE SET xid = excluded.xid WHERE c.xid <> excluded.xid
), fields AS (
    INSERT INTO formsapi_fields AS t (form_seq, name, first_pos, ord)
    SELECT f.seq, n.name, f.feed_last, n.ord FROM f, unnest($12::bytea[]) WITH ORDINALITY AS n(name, ord)
    WHERE NOT EXISTS (SELECT 1 FROM formsapi_fields x WHERE x.form_seq = f.seq AND x.name = n.name AND x.first_pos <= f.feed_last)
    ON CONFLICT (form_seq, name) DO UPDATE SET first_pos = EXCLUDED.first_pos, ord = EXCLUDED.ord
    WHERE (EXCLUDED.first_pos, EXCLUDED.ord) < (t.first_pos, t.ord)
), s AS (
    INSERT INTO formsapi_submissions
        (form_seq, feed_pos, created_at, data, attachments, json, json_version, client_ip, user_agent, geo, trace_id, host_id, find_keys, sort_keys)
    SELECT f.seq, f.feed_last, $2::bigint, $3::text, $4::text, $5::bytea, $10::integer, $6::bytea, $7::bytea, $8::bytea, $9::bytea, $11::text, $13::bigint[], $15::bytea[] FROM f
    RETURNING form_seq, created_at, seq
), e AS (
    INSERT INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT s.form_seq, k, s.created_at, s.seq FROM s, unnest($13::bigint[]) k WHERE k >= 0
    ON CONFLICT DO NOTHING
), tl AS (
    INSERT INTO formsapi_find_tail (form_seq, created_at, seq)
    SELECT s.form_seq, s.created_at, s.seq FROM s, v WHERE v.indexed AND $13::bigint[] IS NOT NULL
), o AS (
    INSERT INTO formsapi_sort (form_seq, entry, created_at, seq)
    SELECT s.form_seq, k, s.created_at, s.seq FROM s, v, unnest($15::bytea[]) k
    WHERE v.kept IS NULL OR substring(k from 1 for 8) = ANY (v.kept)
    ON CONFLICT DO NOTHING
)
SELECT FROM s`

	// sqlAddSubmissions is sqlAddSubmission for n submissions ($3) in
	// one statement (AddSubmissions), in their order, to the forms $1:
	// each form's row is updated once, its feed_last moved by its count
	// ($2), and the forms given one version, once for the statement
	// (formsapi_addition_kept(n, ...), migrations 0024, 0030 and 0032), a value no state of
	// any of them had. The submissions, one element of each array ($4 to
	// $17) apiece, are inserted in array order, so their seqs are those
	// that many single statements would take; each takes the position
	// feed_last - count + its rank ($5, from 1) among the submissions of
	// its form ($4, an index into $1, from 1). A submission's find_keys
	// is the slice $18[$15:$16] of the keys of all of them (bigint[] holds
	// no arrays of different lengths), or NULL where $17 says. The field
	// sort_keys is the slice $24[$25[i]:$26[i]] of the sort keys of all
	// of them, i its place in the arrays, or NULL unless $27 (the sort
	// index is on, as for $16 above). The field
	// table takes each name ($19; $20 the submission's place in the
	// arrays, from 1, and $21 the name's among its names) at its least
	// (position, ord), as that many single statements leave it. The
	// index entries are written as sqlAddSubmission writes them, and the
	// statement returns a row without columns a submission.
	sqlAddSubmissions = `WITH v AS (
    SELECT * FROM formsapi_addition_kept($3, $22::boolean, $27::boolean)
), f AS (
    UPDATE formsapi_forms t SET feed_last = t.feed_last + c.n, version = v.version
    FROM v, unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS c(id, n, fi)
    WHERE t.id = c.id AND v.version IS NOT NULL
    RETURNING c.fi, t.seq, t.feed_last - c.n AS before, t.id
), ch AS (
    INSERT INTO formsapi_changes AS c (kind, ref, xid)
    SELECT 2, convert_to(f.id, 'UTF8'), pg_current_xact_id() FROM f
    ON CONFLICT (kind, ref) DO UPDATE SET xid = excluded.xid WHERE c.xid <> excluded.xid
), r AS (
    SELECT f.seq AS form_seq, f.before + u.rank AS pos, u.*
    FROM unnest($4::integer[], $5::bigint[], $6::bigint[], $7::text[], $8::text[], $9::bytea[], $10::bytea[], $11::bytea[],
        $12::bytea[], $13::bytea[], $14::text[], $15::integer[], $16::integer[], $17::boolean[])
        WITH ORDINALITY AS u(fi, rank, at, data, attachments, json, ip, ua, geo, trace, host, lo, hi, nokeys, i)
    JOIN f ON f.fi = u.fi
), fields AS (
    INSERT INTO formsapi_fields AS t (form_seq, name, first_pos, ord)
    SELECT DISTINCT ON (r.form_seq, n.name) r.form_seq, n.name, r.pos, n.ord
    FROM unnest($19::bytea[], $20::bigint[], $21::bigint[]) AS n(name, item, ord) JOIN r ON r.i = n.item
    WHERE NOT EXISTS (SELECT 1 FROM formsapi_fields x WHERE x.form_seq = r.form_seq AND x.name = n.name AND x.first_pos <= r.pos)
    ORDER BY r.form_seq, n.name, r.pos, n.ord
    ON CONFLICT (form_seq, name) DO UPDATE SET first_pos = EXCLUDED.first_pos, ord = EXCLUDED.ord
    WHERE (EXCLUDED.first_pos, EXCLUDED.ord) < (t.first_pos, t.ord)
), s AS (
    INSERT INTO formsapi_submissions
        (form_seq, feed_pos, created_at, data, attachments, json, json_version, client_ip, user_agent, geo, trace_id, host_id, find_keys, sort_keys)
    SELECT r.form_seq, r.pos, r.at, r.data, r.attachments, r.json, $23::integer, r.ip, r.ua, r.geo, r.trace, r.host,
        CASE WHEN r.nokeys THEN NULL ELSE ($18::bigint[])[r.lo:r.hi] END,
        CASE WHEN $27::boolean THEN coalesce(($24::bytea[])[($25::integer[])[r.i]:($26::integer[])[r.i]], '{}') END
    FROM r
    ORDER BY r.i
    RETURNING form_seq, created_at, seq, find_keys, sort_keys
), e AS (
    INSERT INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT s.form_seq, k, s.created_at, s.seq FROM s, unnest(s.find_keys) k WHERE k >= 0
    ON CONFLICT DO NOTHING
), tl AS (
    INSERT INTO formsapi_find_tail (form_seq, created_at, seq)
    SELECT s.form_seq, s.created_at, s.seq FROM s, v WHERE v.indexed AND s.find_keys IS NOT NULL
), o AS (
    INSERT INTO formsapi_sort (form_seq, entry, created_at, seq)
    SELECT s.form_seq, k, s.created_at, s.seq FROM s, v, unnest(s.sort_keys) k
    WHERE v.kept IS NULL OR substring(k from 1 for 8) = ANY (v.kept)
    ON CONFLICT DO NOTHING
)
SELECT FROM s`

	// The data lifecycle (lifecycle.go). Each names the form by ID and
	// owner, so another account's form is not found.
	// DataFields: the form's fields up to a position, and a row with a
	// NULL name for a form without any; no row means no form of the
	// account.
	sqlDataFields = `SELECT fl.name, fl.first_pos FROM formsapi_forms f
LEFT JOIN LATERAL (
    SELECT name, first_pos, ord FROM formsapi_fields WHERE form_seq = f.seq AND first_pos <= $3 ORDER BY first_pos, ord LIMIT $4
) fl ON true
WHERE f.id = $1 AND f.account_id = $2
ORDER BY fl.first_pos, fl.ord`

	sqlUpdateForm = `UPDATE formsapi_forms SET title = $3, icon = $4, notification_email = $5
WHERE id = $1 AND account_id = $2`

	sqlFormCreatedAt = `SELECT created_at FROM formsapi_forms WHERE id = $1 AND account_id = $2`

	// host_id <> '' (an empty ID is refused before) lets a generic plan
	// use the partial index on (form_seq, host_id); without it, such a
	// plan walks the form's submissions (TestExplain).
	sqlDeleteSubmission = `DELETE FROM formsapi_submissions
WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = $1 AND account_id = $2) AND host_id = $3 AND host_id <> ''
RETURNING form_seq`

	// A form's deletion first locks its row, the lock AddSubmission takes
	// for the feed counter, so that no submission commits between the
	// deletion of the form's submissions and that of the form, which the
	// foreign key would refuse; each statement after it, at read
	// committed, sees every submission that committed before the lock.
	sqlLockForm = `SELECT seq FROM formsapi_forms WHERE id = $1 AND account_id = $2 FOR UPDATE`

	// Before it, while the search index is off, the search lock, shared
	// (migration 0021's formsapi_search_indexed), as every deletion takes
	// it before its form's row since migration 0041: the build that turns
	// the index on holds it and then updates the forms it indexed, so a
	// form's deletion that locked the form's row first and then waited
	// for the lock in its deletion of the submissions was a deadlock,
	// which aborted the build (TestSearchIndexBuildBesideDeletion).
	sqlSearchLockFirst = `SELECT formsapi_search_indexed()`

	sqlDeleteFormSubmissions = `DELETE FROM formsapi_submissions
WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = $1 AND account_id = $2)`

	sqlDeleteForm = `DELETE FROM formsapi_forms WHERE id = $1 AND account_id = $2 RETURNING seq`

	// Erase reads the data of every submission of the account and
	// matches it in Go (stored.Holds), the one rule of all stores: a cast
	// to jsonb would fail on a \u0000 escape, which JSON allows.
	sqlAccountData = `SELECT s.seq, s.data FROM formsapi_submissions s
JOIN formsapi_forms f ON f.seq = s.form_seq
WHERE f.account_id = $1`

	// Erase by a value the index of submitted values holds (migration
	// 0014): the submissions of the account whose entries have the key
	// ($2) of the field and value, and every one not indexed yet, which
	// Erase then matches in Go as sqlAccountData's.
	sqlEraseCandidates = `SELECT s.seq, s.data FROM formsapi_forms f
JOIN formsapi_find i ON i.form_seq = f.seq AND i.key = $2
JOIN formsapi_submissions s ON s.seq = i.seq
WHERE f.account_id = $1
UNION
SELECT s.seq, s.data FROM formsapi_submissions s
WHERE s.find_keys IS NULL AND s.form_seq IN (SELECT seq FROM formsapi_forms WHERE account_id = $1)`

	sqlDeleteBySeqs = `DELETE FROM formsapi_submissions WHERE seq = ANY($1::bigint[]) RETURNING form_seq`

	sqlAddKey = `INSERT INTO formsapi_keys (key_hash, account_id, created_at, forms, expires_at) VALUES ($1, $2, $3, $4, $5)`

	// Revocation keeps the row, so the key can never be added again.
	sqlRevokeKey = `UPDATE formsapi_keys SET revoked_at = $1 WHERE key_hash = $2 AND revoked_at IS NULL`
)

// byteBounded wraps rows, a filtered walk's statement of seq,
// created_at, data, attachments and a last column named last, in page
// order, so that only its rows whose earlier rows' data and attachments
// total less than the parameter max come out: every row up to the one
// that reaches max. octet_length of a text reads only its header, so
// the rows left out are never read from their TOAST tables.
func byteBounded(rows, last, max string) string {
	return `SELECT seq, created_at, data, attachments, ` + last + ` FROM (
    SELECT r.*, sum(octet_length(r.data) + octet_length(r.attachments))
            OVER (ORDER BY r.created_at {DIR}, r.seq {DIR} ROWS UNBOUNDED PRECEDING)
        - octet_length(r.data) - octet_length(r.attachments) AS before
    FROM (` + rows + `) r
) w
WHERE before < ` + max + `
ORDER BY created_at {DIR}, seq {DIR}`
}

// Sorted pages (internal/stored/sort.go): the form's entries of one
// field in the ordered index (migration 0028) after the place $2 (the
// field's prefix and a key), $3, $4 and before the end of the field's
// run $5, in the sort's direction ({CMP}: > ascending, < descending;
// {END} the other), joined to their submissions; then the form's
// submissions in position order, which the page checks for having no
// key. Each reads $6 rows at most, the walk's batch (stored.SortSource).
const (
	// As the filters' walk (sqlFind): the entries first, by their own
	// LIMIT, then each submission by its primary key (OFFSET 0 keeps the
	// planner from flattening the probe into a hash join over every
	// submission, which it chose for a deep page's last thousand
	// entries: TestExplainSort).
	sqlSorted = `SELECT e.seq, e.created_at, substring(e.entry FROM 9), s.data, s.attachments, {X}
FROM (
    SELECT entry, created_at, seq FROM formsapi_sort
    WHERE form_seq = $1 AND (entry, created_at, seq) {CMP} ($2::bytea, $3::bigint, $4::bigint) AND entry {END} $5::bytea
    ORDER BY entry {DIR}, created_at {DIR}, seq {DIR}
    LIMIT $6
) e
CROSS JOIN LATERAL (SELECT data, attachments, json FROM formsapi_submissions WHERE seq = e.seq OFFSET 0) s
ORDER BY e.entry {DIR}, e.created_at {DIR}, e.seq {DIR}`

	sqlUnsorted = `SELECT seq, created_at, data, attachments, {X}
FROM formsapi_submissions
WHERE form_seq = $1 AND (created_at, seq) > ($2::bigint, $3::bigint) AND (created_at, seq) < ($4::bigint, $5::bigint)
ORDER BY created_at {DIR}, seq {DIR}
LIMIT $6`
)

// sortedSQL fills sqlSorted or sqlUnsorted for a direction (desc) and
// the last column: the JSON as sent (encoded) or its size.
func sortedSQL(sql string, desc, encoded bool) string {
	x, cmp, end, dir := "octet_length(s.json)", ">", "<", "ASC"
	if encoded {
		x = "s.json"
	}
	if sql == sqlUnsorted {
		x = strings.TrimPrefix(x, "s.")
		x = strings.Replace(x, "(s.", "(", 1)
	}
	if desc {
		cmp, end, dir = "<", ">", "DESC"
	}
	r := strings.NewReplacer("{X}", x, "{CMP}", cmp, "{END}", end, "{DIR}", dir)
	return r.Replace(sql)
}

// The statements made of sqlBlockEntriesAsc: a probe's and a count's
// walks of a trigram's posting blocks.
var (
	// A count's (sqlCountEntries' parameters): a range's entries, up to
	// the count's bound, a block at a time. (Read by one range of the
	// blocks' primary key instead, with the entries' LIMIT, the planner
	// chose a bitmap scan and a sort of every block of a key on most of
	// a form's rows: TestExplainFind.)
	sqlCountBlockEntries = blockEntries(sqlBlockEntriesAsc, "$1", "$6", "$2, $3", "$4, $5", stored.CountLimit)

	// A search's probe (stored.Candidates): each candidate key's entries
	// of the form ($1), up to stored.Probed, counted from the index alone,
	// and the creation time of the last of them (stored.Probe), in the
	// order of $2. Read in the index's order, as the totals' are:
	// for a key on most of the table the planner otherwise chose a
	// sequential scan (TestExplainFind).
	//
	// A trigram's entries (a negative key) are counted from its posting
	// blocks (migration 0035), oldest first: the lists' lengths of its
	// first probeBlocks blocks, as many as stored.Probed entries when they
	// are full, by one bounded range of their primary key, and the time
	// of the last entry of the last of them; a filter's from
	// formsapi_find. Each branch is gated on the key's sign (HAVING: one
	// row for the key, from one branch). A trigram's count only chooses
	// the key a search walks (a trigram is walked even without entries,
	// for its matches may be in the tail), so blocks that deletions left
	// short, counted fewer than stored.Probed, make the choice no less
	// exact: the walk checks every candidate.
	sqlProbe = `SELECT e.n, e.last FROM unnest($2::bigint[]) WITH ORDINALITY AS k(key, i),
LATERAL (
    SELECT count(*) AS n, coalesce(max(created_at), 0) AS last FROM (SELECT created_at FROM formsapi_find
        WHERE k.key >= 0 AND form_seq = $1 AND key = k.key ORDER BY created_at, seq LIMIT ` + stored.ProbedLimit + `) f
    HAVING k.key >= 0
    UNION ALL
    SELECT least(coalesce(sum(cardinality(b.seqs)), 0), ` + stored.ProbedLimit + `), coalesce(max(b.ats[cardinality(b.ats)]), 0) FROM (SELECT ats, seqs FROM formsapi_find_blocks
        WHERE k.key < 0 AND form_seq = $1 AND key = k.key ORDER BY lo_at, lo_seq LIMIT ` + strconv.Itoa(probeBlocks) + `) b
    HAVING k.key < 0
) e
ORDER BY k.i`

	// The same count of a trigram's entries, in its posting blocks
	// (oldest first, as many as the count's bound), with the form's
	// unfolded tail in the range (see sqlSearch).
	sqlCountSearchEntries = `SELECT (SELECT count(*) FROM (` + sqlCountBlockEntries + `) c) + (SELECT count(*) FROM formsapi_find_tail
WHERE form_seq = $1 AND (created_at, seq) > ($2, $3) AND (created_at, seq) < ($4, $5))`
)

// sqlNoJIT turns PostgreSQL's JIT compilation off for the rest of a
// transaction. A batch's statement of a thousand submissions is planned
// past jit_above_cost (100,000 by default), and PostgreSQL then compiled
// it with LLVM at every execution: 70% of the backend's CPU in a bulk
// ingest with the search index on, 3.6 times the batch's PostgreSQL CPU
// (BENCHMARKS.md, "JIT compilation"). SET LOCAL, not a connection
// parameter: PgBouncer refuses startup parameters it does not know, and
// a store from New shares the host's connections.
const sqlNoJIT = `SET LOCAL jit = off`

// blockSize is the most entries a posting block holds (migration 0035).
const blockSize = 56

// probeBlocks is how many of a trigram's posting blocks a search's probe
// reads: as many as hold stored.Probed entries when full, and one more.
const probeBlocks = (stored.Probed+blockSize-1)/blockSize + 1

// blockEntries fills sqlBlockEntriesAsc or sqlBlockEntriesDesc with the
// parameters of a statement: the form, the key, the range's bounds (each
// a pair of created_at and seq) and the limit, as SQL text.
func blockEntries(sql, form, key, lo, hi, limit string) string {
	return strings.NewReplacer("{FORM}", form, "{KEY}", key, "{LO}", lo, "{HI}", hi, "{LIMIT}", limit).Replace(sql)
}

// searchSQL fills a search walk's statement (sqlSearch, sqlSearchEncoded)
// for a direction: its blocks' entries and {DIR}.
func searchSQL(sql, dir string) string {
	b := sqlBlockEntriesAsc
	if dir == "DESC" {
		b = sqlBlockEntriesDesc
	}
	return ordered(strings.ReplaceAll(sql, "{BLOCKS}", blockEntries(b, "$1", "$2", "$3, $4", "$5, $6", "$7")), dir)
}

// ordered fills a list statement's {DIR} with the order of its page:
// each list is one statement, made once per order.
func ordered(sql, dir string) string { return strings.ReplaceAll(sql, "{DIR}", dir) }

// queries are the statements of one store, tables qualified by its schema.
type queries struct {
	formsDesc, formsAsc, subsDesc, subsAsc, encodedDesc, encodedAsc string
	splice                                                          string

	findEncodedDesc, findEncodedAsc, findDesc, findAsc           string
	searchEncodedDesc, searchEncodedAsc, searchDesc, searchAsc   string
	countSearchEntries                                           string
	scanEncodedDesc, scanEncodedAsc, scanDesc, scanAsc           string
	searchIndexed                                                string
	sortIndexed, sortServed                                      string
	countRows, countEntries, eraseCandidates                     string
	probe                                                        string
	formListVersion                                              string
	formOf, resolveKey, authorizeForm, authorizeBatch, listKeys  string
	round, roundLog, roundLean, roundLogLean, roundProbe         string
	touchKeys                                                    string
	addForm, addSubmission, addSubmissions, addKey, revokeKey    string
	rateLimit, rateCharge, rateTat, ratePrune                    string
	feed, feedEncoded, feedKeyed, dataFields                     string
	updateForm, formCreatedAt, deleteSubmission                  string
	deleteFormSubmissions, deleteForm, accountData, deleteBySeqs string
	lockForm, searchLockFirst                                    string
	// sorted pages, [encoded][desc]
	sorted, unsorted                             [2][2]string
	stampTombstones, purgedUpTo, purgeTombstones string
	checkWaits                                   string
}

// qualifyTables returns s with every table name in it qualified by schema.
// Every table name starts with formsapi_, and nothing else in the
// statements does.
func qualifyTables(schema, s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "formsapi_")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i+len("formsapi_"):]
		end := strings.IndexFunc(s, func(r rune) bool { return !(r == '_' || 'a' <= r && r <= 'z') })
		if end < 0 {
			end = len(s)
		}
		b.WriteString(qualify(schema, "formsapi_"+s[:end]))
		s = s[end:]
	}
}

func newQueries(schema string) queries {
	q := func(s string) string { return qualifyTables(schema, s) }
	findEncoded, find := byteBounded(sqlFindEncoded, "json", "$8"), byteBounded(sqlFind, "size", "$8")
	searchEncoded, search := byteBounded(sqlSearchEncoded, "json", "$8"), byteBounded(sqlSearch, "size", "$8")
	scanEncoded, scan := byteBounded(sqlScanEncoded, "json", "$7"), byteBounded(sqlScan, "size", "$7")
	var sorted, unsorted [2][2]string
	for e := range 2 {
		for d := range 2 {
			sorted[e][d] = q(sortedSQL(sqlSorted, d == 1, e == 1))
			unsorted[e][d] = q(sortedSQL(sqlUnsorted, d == 1, e == 1))
		}
	}
	return queries{
		sorted: sorted, unsorted: unsorted,
		formsDesc: q(ordered(sqlListForms, "DESC")), formsAsc: q(ordered(sqlListForms, "ASC")),
		subsDesc: q(ordered(sqlListSubmissions, "DESC")), subsAsc: q(ordered(sqlListSubmissions, "ASC")),
		encodedDesc: q(ordered(sqlAppendSubmissions, "DESC")), encodedAsc: q(ordered(sqlAppendSubmissions, "ASC")),
		splice: q(sqlSplice),

		findEncodedDesc: q(ordered(findEncoded, "DESC")), findEncodedAsc: q(ordered(findEncoded, "ASC")),
		findDesc: q(ordered(find, "DESC")), findAsc: q(ordered(find, "ASC")),
		searchEncodedDesc: q(searchSQL(searchEncoded, "DESC")), searchEncodedAsc: q(searchSQL(searchEncoded, "ASC")),
		searchDesc: q(searchSQL(search, "DESC")), searchAsc: q(searchSQL(search, "ASC")),
		countSearchEntries: q(sqlCountSearchEntries),
		scanEncodedDesc:    q(ordered(scanEncoded, "DESC")), scanEncodedAsc: q(ordered(scanEncoded, "ASC")),
		scanDesc: q(ordered(scan, "DESC")), scanAsc: q(ordered(scan, "ASC")),
		searchIndexed: q(sqlSearchIndexed), sortIndexed: q(sqlSortIndexed), sortServed: q(sqlSortServed),
		countRows: q(sqlCountRows), countEntries: q(sqlCountEntries), eraseCandidates: q(sqlEraseCandidates),
		probe:           q(sqlProbe),
		formListVersion: q(sqlFormListVersion), formOf: q(sqlFormOf), resolveKey: q(sqlResolveKey), authorizeForm: q(sqlAuthorizeForm), authorizeBatch: q(sqlAuthorizeBatch), round: q(sqlRound), roundLog: q(sqlRoundLog),
		roundLean: q(sqlRoundLean), roundLogLean: q(sqlRoundLogLean), roundProbe: q(sqlRoundProbe),
		listKeys: q(sqlListKeys), touchKeys: q(sqlTouchKeys),
		rateLimit: q(sqlRateLimit), rateCharge: q(sqlRateCharge), rateTat: q(sqlRateTat), ratePrune: q(sqlRatePrune),
		addForm: q(sqlAddForm), addSubmission: q(sqlAddSubmission), addSubmissions: q(sqlAddSubmissions),
		addKey: q(sqlAddKey), revokeKey: q(sqlRevokeKey),
		feed: q(sqlFeed), feedEncoded: q(sqlFeedEncoded), feedKeyed: q(sqlFeedKeyed), dataFields: q(sqlDataFields),
		updateForm: q(sqlUpdateForm), formCreatedAt: q(sqlFormCreatedAt), deleteSubmission: q(sqlDeleteSubmission),
		deleteFormSubmissions: q(sqlDeleteFormSubmissions), deleteForm: q(sqlDeleteForm), lockForm: q(sqlLockForm), searchLockFirst: q(sqlSearchLockFirst),
		accountData: q(sqlAccountData), deleteBySeqs: q(sqlDeleteBySeqs),
		stampTombstones: q(sqlStampTombstones), purgedUpTo: q(sqlPurgedUpTo), purgeTombstones: q(sqlPurgeTombstones),
		checkWaits: q(sqlCheckWaits),
	}
}
