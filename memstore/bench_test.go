package memstore_test

import (
	"context"
	"testing"

	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/memstore"
)

// go test -run '^$' -bench . -benchmem ./memstore/
func BenchmarkHandler(b *testing.B) {
	const perForm = 100_000
	s := memstore.New()
	if err := benchdata.Load(context.Background(), s, []int{perForm, 1000, 1000}, benchdata.Key, nil); err != nil {
		b.Fatal(err)
	}
	benchdata.RunHandler(b, s, s, perForm)
}
