package pgstore_test

import (
	"testing"

	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

// TestReencodesStaleRowsAtOpen marks every row as written in another
// encoding, with JSON this release does not write, and opens the schema
// again as a node starting would: the migration rewrites the rows from
// their source columns before anything is served.
func TestReencodesStaleRowsAtOpen(t *testing.T) {
	t.Parallel()
	dsn, schema := pooledSchema(t)
	first, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Close() })
	load(t, first, storetest.DefaultSeed())
	target := "/v1/forms/" + storetest.FormBusy + "/submissions?limit=1000"
	h := newNode(t, dsn, schema, []byte("secret")).handler
	want := get(h, target, storetest.KeyA)
	if _, err := pgstore.Pool(first).Exec(ctx, "UPDATE "+quote(schema)+`.formsapi_submissions SET json = '{"stale":true}', json_version = 0`); err != nil {
		t.Fatal(err)
	}
	if got := get(h, target, storetest.KeyA); string(got.body) == string(want.body) {
		t.Fatal("the damage did not show: the test proves nothing")
	}
	reopened := newNode(t, dsn, schema, []byte("secret")).handler
	if got := get(reopened, target, storetest.KeyA); got.status != 200 || string(got.body) != string(want.body) {
		t.Errorf("after a node opened the schema:\n got %d %s\nwant %s", got.status, got.body, want.body)
	}
	var stale int
	if err := pgstore.Pool(first).QueryRow(ctx, "SELECT count(*) FROM "+quote(schema)+".formsapi_submissions WHERE json_version <> 1").Scan(&stale); err != nil || stale != 0 {
		t.Errorf("%d rows still stale (%v)", stale, err)
	}
}
