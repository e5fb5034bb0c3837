// Package skipper is a package whose tests skip for something missing,
// for internal/testenv's test of the line go test then shows.
package skipper

import (
	"testing"

	"github.com/formsapi/formsapi/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestNeedsAServer(t *testing.T) {
	testenv.Skip(t, "set SKIPPER_SERVER=x to run the tests that need it")
}

func TestNeedsItToo(t *testing.T) {
	t.Run("a", func(t *testing.T) { testenv.Skip(t, "set SKIPPER_SERVER=x to run the tests that need it") })
	t.Run("b", func(t *testing.T) { testenv.Skip(t, "caddy is not installed") })
}

func TestRuns(t *testing.T) {}
