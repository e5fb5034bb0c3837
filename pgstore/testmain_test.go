package pgstore_test

import (
	"os"
	"testing"

	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/internal/testenv"
)

// TestMain runs the tests, drops the schemas the contract's stores
// reused (pgtest.Pooled), stops the primary and standby that the
// replica tests started (internal/pgtest's Replica), then says in one
// line, which go test shows without -v, how many skipped for a missing
// server or program and how to enable them (see testenv.Main).
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.DropPooled()
	pgtest.StopReplica()
	testenv.Report()
	os.Exit(code)
}
