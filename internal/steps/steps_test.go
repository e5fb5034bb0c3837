package steps

import (
	"errors"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var got []string // the step run and its arguments
	steps := []Step{
		{"seed", func(args []string) error { got = append([]string{"seed"}, args...); return nil }},
		{"get", func(args []string) error { got = append([]string{"get"}, args...); return errors.New("refused") }},
	}
	for _, c := range []struct {
		args   []string
		status int
		stderr string
		ran    string
	}{
		{nil, 2, "usage: bench seed|get [flags]\n", ""},
		{[]string{"seed", "-n", "3"}, 0, "", "seed -n 3"},
		{[]string{"seed"}, 0, "", "seed"},
		{[]string{"get", "-x"}, 1, "bench: refused\n", "get -x"},
		{[]string{"walk", "-n", "3"}, 1, "bench: unknown step \"walk\": want seed, get\n", ""},
		{[]string{"-n"}, 1, "bench: unknown step \"-n\": want seed, get\n", ""},
	} {
		got = nil
		var stderr strings.Builder
		if status := run(&stderr, "bench", c.args, steps); status != c.status {
			t.Errorf("%q: status %d, want %d", c.args, status, c.status)
		}
		if stderr.String() != c.stderr {
			t.Errorf("%q: stderr %q, want %q", c.args, stderr.String(), c.stderr)
		}
		if ran := strings.Join(got, " "); ran != c.ran {
			t.Errorf("%q: ran %q, want %q", c.args, ran, c.ran)
		}
	}
}
