package pgstore_test

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
)

// BenchmarkFollowRound measures what a following node's round costs
// PostgreSQL: each request of a node made WithFollow(0), one at a time,
// waits for a round of its own (its key and form in the node's copy), and
// reads a page of one of 20 forms that its cache holds. "idle": nothing
// is written, the round's statement alone; "write": another store adds a
// submission to the form just before each request, so the page is at an
// older version and the node brings it up to date (from the rows its
// round read, or by the splice statement where the node does not read
// them in its rounds). It reports the CPU time of the node's PostgreSQL
// backends per request as pg-cpu-ns/op (the writer's are not counted;
// when the server runs on this machine).
//
//	FORMSAPI_TEST_POSTGRES=... go test -run '^$' -bench FollowRound ./pgstore/
func BenchmarkFollowRound(b *testing.B) {
	dsn, schema := pgtest.Schema(b)
	writer, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
	if err != nil {
		b.Fatal(err)
	}
	defer writer.Close()
	key, err := formsapi.NewKey()
	if err != nil {
		b.Fatal(err)
	}
	if err := writer.AddKey(ctx, key, "acct"); err != nil {
		b.Fatal(err)
	}
	const forms = 20
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	add := func(form int) {
		at = at.Add(time.Second)
		s := formsapi.Submission{FormID: fmt.Sprint("form-", form), Data: []byte(`{"name":"Ada","email":"ada@example.com","message":"` + strings.Repeat("x", 300) + `"}`), CreatedAt: at}
		if err := writer.AddSubmission(ctx, s, formsapi.Metadata{}); err != nil {
			b.Fatal(err)
		}
	}
	for f := range forms {
		if err := writer.AddForm(ctx, "acct", formsapi.Form{ID: fmt.Sprint("form-", f)}); err != nil {
			b.Fatal(err)
		}
		for range 50 {
			add(f)
		}
	}
	app := "formsapi_bench_" + strings.ToLower(rand.Text()[:8])
	node, err := pgstore.Open(ctx, withAppName(dsn, app), pgstore.WithSchema(schema), pgstore.WithFollow(0))
	if err != nil {
		b.Fatal(err)
	}
	defer node.Close()
	h := formsapi.NewHandler(node, node)
	page := func(f int) {
		if res := get(h, fmt.Sprintf("/v1/forms/form-%d/submissions?limit=25", f), key); res.status != http.StatusOK {
			b.Fatalf("status %d", res.status)
		}
	}
	for f := range forms {
		page(f) // the node's copy and cache
	}
	for _, write := range []bool{false, true} {
		name := map[bool]string{false: "idle", true: "write"}[write]
		b.Run(name, func(b *testing.B) {
			before, ok := backendCPU(b, dsn, app)
			b.ResetTimer()
			for i := range b.N {
				if write {
					b.StopTimer()
					add(i % forms)
					b.StartTimer()
				}
				page(i % forms)
			}
			b.StopTimer()
			if after, ok2 := backendCPU(b, dsn, app); ok && ok2 {
				b.ReportMetric(float64(after-before)/float64(b.N), "pg-cpu-ns/op")
			}
		})
	}
}
