package pgstore_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/pgstore"
)

// TestPagesReadOnlyWhatFits: a page statement, and a feed statement, with
// a limit far above what the byte budget lets through, return only the
// rows that fit and the first that does not, so a page of large
// submissions never reads (or sends) the rows after it, whatever the
// limit.
func TestPagesReadOnlyWhatFits(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t, pgstore.WithCacheSize(0))
	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "big"}))
	const n, size, room = 40, 50_000, 120_000
	for i := range n {
		data := fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("x", size))
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "big", Data: []byte(data)}, formsapi.Metadata{}))
	}
	args, err := pgstore.ListArgs(formsapi.Query{Limit: 1000, Order: formsapi.Oldest})
	is.NoErr(err)
	rows, err := pgstore.Pool(s).Query(ctx, pgstore.ListSQL(s, "encoded", formsapi.Oldest), append([]any{"big", "acct"}, append(args, room)...)...)
	is.NoErr(err)
	var got, total int64
	for rows.Next() {
		var formSeq, version, incarnation, seq, at, tot, base, last, anchorAt, anchor any
		var encoded []byte
		is.NoErr(rows.Scan(&formSeq, &version, &incarnation, &seq, &at, &encoded, &tot, &base, &last, &anchorAt, &anchor))
		got++
		total = tot.(int64)
	}
	is.NoErr(rows.Err())
	is.Equal(got, int64(room/size+1)) // the rows that fit and the first that does not
	is.Equal(total, int64(n))         // of the 40 the limit lets through

	feed := pgstore.FeedSQL(s)[1]
	rows, err = pgstore.Pool(s).Query(ctx, feed, "big", "acct", 0, 1001, room)
	is.NoErr(err)
	got = 0
	for rows.Next() {
		got++
	}
	is.NoErr(rows.Err())
	is.Equal(got, int64(room/size+1)+1) // the feed too, after the form's own row (its feed_purged)
}

// TestDamagedRowsDoNotEndTheWalk: a damaged row the page leaves out still
// counts against the statement's byte bound, but not against the store's
// budget; where the statement stops early for it, the page ends with a
// cursor rather than looking like the end of the list, and the walk, and
// the feed, give every intact submission exactly once.
func TestDamagedRowsDoNotEndTheWalk(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t, pgstore.WithCacheSize(0))
	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "big"}))
	key := "a-host-key"
	is.NoErr(s.AddKey(ctx, key, "acct"))
	const n = 12
	for i := range n {
		data := fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("x", 20_000))
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "big", Data: []byte(data)}, formsapi.Metadata{}))
	}
	// Rows 3 and 4 (oldest first) become large and damaged.
	_, err := pgstore.Pool(s).Exec(ctx, `UPDATE `+quote(s.Schema())+`.formsapi_submissions SET json = $1 WHERE feed_pos IN (3, 4)`,
		[]byte(`{"broken":`+strings.Repeat(" ", 60_000)))
	is.NoErr(err)
	h := formsapi.NewHandler(s, s, formsapi.WithPageBytes(50_000))
	for _, walk := range []struct{ first, next string }{
		{"/v1/forms/big/submissions?order=asc&limit=1000", "/v1/forms/big/submissions?order=asc&limit=1000&cursor="},
		{"/v1/forms/big/submissions?limit=1000&sync=start", "/v1/forms/big/submissions?limit=1000&sync="},
	} {
		var seen []string
		target := walk.first
		for pages := 0; target != ""; pages++ {
			is.True(pages < 3*n) // the walk ends
			res := get(h, target, key)
			is.Equal(res.status, 200)
			var p struct {
				Submissions []struct{ Data struct{ I int } }
				NextCursor  string
				SyncToken   string
				HasMore     bool
			}
			is.NoErr(json.Unmarshal(res.body, &p))
			for _, sub := range p.Submissions {
				seen = append(seen, fmt.Sprint(sub.Data.I))
			}
			target = ""
			if p.NextCursor != "" {
				target = walk.next + url.QueryEscape(p.NextCursor)
			} else if p.HasMore {
				target = walk.next + url.QueryEscape(p.SyncToken)
			}
		}
		is.Equal(strings.Join(seen, ","), "0,1,4,5,6,7,8,9,10,11") // every intact one, once (feed positions 3 and 4 are items 2 and 3)
	}
}
