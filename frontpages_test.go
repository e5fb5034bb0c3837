package formsapi_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeMaxLines is how long the README may grow: a page a newcomer
// reads to the end (docs/decisions.md, "What a document may say").
const readmeMaxLines = 150

// TestFrontPages holds the two pages a newcomer meets first to their
// shape. The README fits in readmeMaxLines and shows the two commands,
// the example server and the tests, each in a block of its own.
// BENCHMARKS.md opens with its table of current figures, every row with
// a command, a date and a link to the section it comes from, and the
// history after it.
func TestFrontPages(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move what a newcomer does not need first to docs/", n, readmeMaxLines)
	}
	for _, cmd := range []string{"go run ./examples/server", "go test -race ./..."} {
		if !strings.Contains(string(readme), "```\n"+cmd+"\n```\n") {
			t.Errorf("README.md does not show %q in a block of its own", cmd)
		}
	}

	bench, err := os.ReadFile("BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	for _, m := range regexp.MustCompile(`(?m)^## (.+)$`).FindAllStringSubmatch(string(withoutCode(bench)), -1) {
		sections = append(sections, m[1])
	}
	if len(sections) < 2 || sections[0] != "Current figures" || !slices.Contains(sections, "History") {
		t.Fatalf("BENCHMARKS.md's sections begin %q: want Current figures first, and a History", sections[:min(len(sections), 3)])
	}
	_, table, _ := strings.Cut(string(bench), "\n## Current figures\n")
	table, _, _ = strings.Cut(table, "\n## ")
	date := regexp.MustCompile(`\b20\d\d-\d\d-\d\d\b`)
	rows := 0
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| what ") {
			continue
		}
		rows++
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		switch {
		case len(cells) != 5:
			t.Errorf("BENCHMARKS.md: a row of %d cells, want 5 (what, figure, command, measured on, details): %s", len(cells), line)
		case !strings.Contains(cells[2], "`"):
			t.Errorf("BENCHMARKS.md: a current figure without its command: %s", line)
		case !date.MatchString(cells[3]):
			t.Errorf("BENCHMARKS.md: a current figure without its date: %s", line)
		case !strings.Contains(cells[4], "](#"):
			t.Errorf("BENCHMARKS.md: a current figure without a link to its section: %s", line)
		}
	}
	if rows < 20 {
		t.Errorf("BENCHMARKS.md's table of current figures has %d rows: the table or its reading is broken", rows)
	}
}
