// Package testenv finds the services a test needs (PostgreSQL, Redis)
// through environment variables, one rule for all of them.
package testenv

import (
	"os"
	"testing"
)

// SkipMessage is what a test says when the variable name is not set:
// how to set it, with example as its value, to run the test.
func SkipMessage(name, example string) string {
	return "set " + name + "=" + example + " to run the tests that need it"
}

// Get returns the value of the environment variable name. Without one
// the test is skipped (by Skip, so counted), saying how to enable it, or
// fails when CI is set:
// in CI a skipped test would hide that nothing was tested.
func Get(t testing.TB, name, example string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but " + name + " is not: " + SkipMessage(name, example))
		}
		Skip(t, SkipMessage(name, example))
	}
	return v
}
