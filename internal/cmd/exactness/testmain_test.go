package main

import (
	"testing"

	"github.com/formsapi/formsapi/internal/testenv"
)

// TestMain runs the tests, then says in one line, which go test shows
// without -v, how many skipped for a missing server or program and how
// to enable them (see testenv.Main).
func TestMain(m *testing.M) { testenv.Main(m) }
