package main

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/internal/redistest"
)

// TestSharedRoundsFlag: two PostgreSQL servers with -follow and
// -shared-rounds on one Redis prefix, as two nodes of a fleet: both
// answer, one of them leads and publishes its rounds, the other is
// served by them, and each says so in its log at exit. -shared-rounds
// without -redis or -follow stops the server at start.
func TestSharedRoundsFlag(t *testing.T) {
	is := is.New(t)
	dsn, schema := pgtest.Name(t)
	prefix := redistest.Prefix(t)
	dir := t.TempDir()
	args := []string{"-postgres", dsn, "-schema", schema, "-demo-key-file", filepath.Join(dir, "demo-key"), "-access-log=false",
		"-follow", "0", "-redis", redistest.URL(t), "-redis-prefix", prefix, "-shared-rounds"}
	a := startArgs(t, args...)
	b := startArgs(t, args...)
	for range 3 {
		for _, s := range []server{a, b} {
			code, _ := s.get(t, "/v1/forms/contact/submissions?limit=2", a.key)
			is.Equal(code, 200)
		}
	}
	var stats []map[string]any
	for _, s := range []server{a, b} {
		is.NoErr(s.stop())
		for line := range strings.SplitSeq(s.out.String(), "\n") {
			if strings.Contains(line, `"msg":"follow rounds"`) {
				var v map[string]any
				is.NoErr(json.Unmarshal([]byte(line), &v))
				stats = append(stats, v)
			}
		}
	}
	is.Equal(len(stats), 2)
	// a, started first, led and published its rounds; b was served by
	// them. (Whether each led at exit depends on the order they stop.)
	is.True(stats[0]["published"].(float64) > 0)
	is.True(stats[1]["tickets"].(float64) > 0)
	is.Equal(stats[1]["published"].(float64), 0.0)

	for _, bad := range [][]string{{"-follow", "0", "-shared-rounds"}, {"-redis", redistest.URL(t), "-shared-rounds"}} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := run(ctx, append([]string{"-postgres", dsn, "-schema", schema, "-addr", "127.0.0.1:0"}, bad...), io.Discard, io.Discard)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "-shared-rounds") {
			t.Errorf("%v: %v, want an error about -shared-rounds", bad, err)
		}
	}
}
