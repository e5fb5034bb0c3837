package pgstore

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi/internal/pgtest"
)

// TestInt8ArrayText: PostgreSQL reads int8ArrayText's text as the
// bigint[] it was made of, the extremes included, and nil as NULL.
func TestInt8ArrayText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, a := range [][]int64{nil, {}, {0}, {-1, 1, 42}, {math.MinInt64, math.MaxInt64, -9, 10}} {
		var got []int64
		var null bool
		if err := conn.QueryRow(ctx, `SELECT $1::bigint[], $1::bigint[] IS NULL`, int8ArrayText(a)).Scan(&got, &null); err != nil {
			t.Fatalf("%v: %v", a, err)
		}
		if null != (a == nil) || !slices.Equal(got, a) {
			t.Errorf("%v: got %v (NULL %v)", a, got, null)
		}
	}
}
