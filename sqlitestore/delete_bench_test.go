package sqlitestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// BenchmarkDeleteOldest measures a deletion with the search index on:
// 4,096 submissions of one form that share their words (each trigram's
// entries in some 70 posting blocks), deleted oldest first, as a
// retention purge deletes. cpu-ns/op is the process's user and system
// time per deletion. b.N is at most 4,096:
//
//	go test -run '^$' -bench DeleteOldest -benchtime 2000x ./sqlitestore/
func BenchmarkDeleteOldest(b *testing.B) {
	const rows = 4096
	if b.N > rows {
		b.Fatalf("b.N %d: at most %d", b.N, rows)
	}
	s, err := sqlitestore.Open(filepath.Join(b.TempDir(), "bench.db"), sqlitestore.WithSearchIndex(), sqlitestore.WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "purge"}); err != nil {
		b.Fatal(err)
	}
	base := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	for i := range rows {
		data := fmt.Sprintf(`{"name":"Walrus Keeper","note":"feeds the walruses at the harbour","n":%d}`, i)
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: "purge", Data: []byte(data), CreatedAt: base.Add(time.Duration(i) * time.Second)},
			formsapi.Metadata{ID: strconv.Itoa(i)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	cpu0 := processCPU()
	for i := range b.N {
		if err := s.DeleteSubmission(ctx, storetest.AccountA, "purge", strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDeleteForm measures DeleteForm of a form of 2,000
// submissions with the search index on (benchdata's submissions, loaded
// in a batch before each deletion, outside the timer):
//
//	go test -run '^$' -bench BenchmarkDeleteForm -benchtime 3x ./sqlitestore/
func BenchmarkDeleteForm(b *testing.B) {
	ctx := context.Background()
	s, err := sqlitestore.Open(filepath.Join(b.TempDir(), "bench.db"), sqlitestore.WithSearchIndex(), sqlitestore.WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if err := benchdata.Load(ctx, s, []int{2000}, "", nil); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := s.DeleteForm(ctx, benchdata.Account, benchdata.FormID(0)); err != nil {
			b.Fatal(err)
		}
	}
}
