package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/formsapi/formsapi/sqlitestore"
)

// docLine is one command line of the docs that runs the example server.
type docLine struct {
	where    string   // file:line
	args     []string // after "go run ./examples/server"
	synopsis bool     // with [optional] flags and placeholders
}

func (l docLine) String() string {
	return l.where + ": go run ./examples/server " + strings.Join(l.args, " ")
}

// goRunServer starts a command line that runs the example server.
var goRunServer = regexp.MustCompile(`go run \./examples/server\b`)

// docLines returns every command line of the README, docs/*.md and this
// command's doc comment that runs the example server, in a fenced
// block or in `code`, with its arguments as a shell would pass them (a
// synopsis's [optional] flags unbracketed).
func docLines(t *testing.T) []docLine {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md", "main.go"}, files...)
	var lines []docLine
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if f == "main.go" {
			text, _, _ = strings.Cut(text, "\npackage main") // its doc comment
		}
		for _, m := range goRunServer.FindAllStringIndex(text, -1) {
			lineStart := strings.LastIndexByte(text[:m[0]], '\n') + 1
			rest := text[m[1]:]
			if strings.Count(text[lineStart:m[0]], "`")%2 == 1 {
				// In `code`, which may go on over a line break.
				rest, _, _ = strings.Cut(rest, "`")
				rest = strings.ReplaceAll(rest, "\n", " ")
			} else {
				rest, _, _ = strings.Cut(rest, "\n")
			}
			where := strings.TrimPrefix(f, "../../") + ":" + strconv.Itoa(1+strings.Count(text[:m[0]], "\n"))
			args, err := shellWords(rest)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			lines = append(lines, docLine{where, args, strings.Contains(rest, "[-")})
		}
	}
	return lines
}

// shellWords splits s as sh would split a simple command, up to the
// end of the command (an unquoted ")", ";", "&&", "|" or "#"); brackets
// around a synopsis's optional flags are dropped.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	in := false // inside a word
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				w.WriteByte(c)
			}
			continue
		case c == '\'' || c == '"':
			quote, in = c, true
			continue
		case c == ' ' || c == '\t':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
			continue
		case c == ')' || c == ';' || c == '|' || c == '&' || c == '#' && !in:
			i = len(s)
			continue
		}
		w.WriteByte(c)
		in = true
	}
	if quote != 0 {
		return nil, errors.New("a quote is not closed")
	}
	if in {
		words = append(words, w.String())
	}
	optional := false // inside [-flag value]
	for i, word := range words {
		if strings.HasPrefix(word, "[-") {
			word, optional = word[1:], true
		}
		if optional && strings.HasSuffix(word, "]") {
			word, optional = strings.TrimSuffix(word, "]"), false
		}
		words[i] = word
	}
	return words, nil
}

// terminating are the flags that make the server do one thing and exit.
var terminating = []string{"-new-key", "-new-endpoint", "-list-endpoints", "-delete", "-erase"}

// TestDocsCommandLines: every command line of the docs that runs the
// example server parses against its real flags (docs/webhooks-hosts.md
// told hosts to run `webhook add` and `-issue-key`, which it answers with
// an error), and those that do one thing and exit (-new-key,
// -new-endpoint, -list-endpoints, -delete, -erase) run, each on a new
// SQLite database seeded with the demo data, without an error.
func TestDocsCommandLines(t *testing.T) {
	lines := docLines(t)
	if len(lines) < 10 {
		t.Fatalf("only %d command lines found: the extraction is broken", len(lines))
	}
	ran := 0
	for _, l := range lines {
		// Parsed to the end, a trailing -h stops run with flag.ErrHelp
		// before it does anything; an unknown flag, a bad value or a
		// stray word is another error.
		if err := run(context.Background(), append(slices.Clone(l.args), "-h"), io.Discard, io.Discard); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s\n\tdoes not parse: %v", l, err)
			continue
		}
		if !slices.ContainsFunc(l.args, func(a string) bool { return slices.Contains(terminating, a) }) {
			continue
		}
		if l.synopsis || slices.ContainsFunc(l.args, func(a string) bool { return strings.HasPrefix(a, "-postgres") }) {
			continue // placeholders, or PostgreSQL
		}
		args := slices.Clone(l.args)
		for i, a := range args {
			if a == "ACCOUNT" {
				args[i] = demoAccount
			}
		}
		db := filepath.Join(t.TempDir(), "forms.db")
		seedFile(t, db)
		// The database is the test's, whatever the line says.
		if _, err := command(append(args, "-db", db, "-postgres=")...); err != nil {
			t.Errorf("%s\n\tfails: %v", l, err)
		}
		ran++
	}
	if ran < 5 {
		t.Errorf("ran %d command lines that exit, want at least 5 (-new-key, -new-endpoint, -list-endpoints, -delete, -erase)", ran)
	}
}

// serverFlags are the names of the server's flags, as -h lists them.
func serverFlags(t *testing.T) map[string]bool {
	t.Helper()
	var usage strings.Builder
	if err := run(context.Background(), []string{"-h"}, io.Discard, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`).FindAllStringSubmatch(usage.String(), -1) {
		names[m[1]] = true
	}
	if !names["new-key"] || !names["addr"] {
		t.Fatalf("-h lists no -new-key or -addr: the extraction is broken\n%s", usage.String())
	}
	return names
}

// flagSpan is a `-flag`, `-flag value` or `-flag=value` code span.
var flagSpan = regexp.MustCompile("`-([a-z][a-z0-9-]*)(?:[ =][^`]*)?`")

// othersFlags are flags of other commands that docs/example-server.md
// names beside the server's: curl's -g (no globbing of brackets).
var othersFlags = map[string]bool{"g": true}

// TestDocsNameRealFlags: every flag a doc names in `code` where it speaks
// of the example server (all of docs/example-server.md, and each
// paragraph elsewhere that names examples/server or links
// example-server.md) is one of the server's flags: docs/webhooks-hosts.md
// told hosts to issue keys with -issue-key, which is none.
func TestDocsNameRealFlags(t *testing.T) {
	flags := serverFlags(t)
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range append([]string{"../../README.md"}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, "../../")
		for _, para := range strings.Split(withoutFences(string(b)), "\n\n") {
			if name != "docs/example-server.md" && !strings.Contains(para, "examples/server") && !strings.Contains(para, "example-server.md") {
				continue
			}
			for _, m := range flagSpan.FindAllStringSubmatch(para, -1) {
				checked++
				if !flags[m[1]] && !othersFlags[m[1]] {
					t.Errorf("%s names -%s, which the example server does not have (in %q)", name, m[1], m[0])
				}
			}
		}
	}
	if checked < 30 {
		t.Errorf("only %d flags checked: the extraction is broken", checked)
	}
}

// withoutFences is text with its fenced blocks blanked out, so that
// what is left splits into paragraphs at blank lines.
func withoutFences(text string) string {
	var out strings.Builder
	in := false
	for _, l := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " "), "```") {
			in = !in
			out.WriteString("\n")
			continue
		}
		if in {
			out.WriteString("\n")
			continue
		}
		out.WriteString(l)
	}
	return out.String()
}

// seedFile creates the SQLite database db with the demo data.
func seedFile(t *testing.T, db string) {
	t.Helper()
	s, err := sqlitestore.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := seedDemo(context.Background(), s, db+".demo-key"); err != nil {
		t.Fatal(err)
	}
}

// TestShellWords: what the docs' command lines need of a shell.
func TestShellWords(t *testing.T) {
	for in, want := range map[string][]string{
		` -db "$OLDPWD/forms.db")`:                            {"-db", "$OLDPWD/forms.db"},
		` -erase email=ada@example.com  # erase one`:          {"-erase", "email=ada@example.com"},
		` [-addr 127.0.0.1:8080] [-access-log=true] -x 'a b'`: {"-addr", "127.0.0.1:8080", "-access-log=true", "-x", "a b"},
		` -webhooks && curl …`:                                {"-webhooks"},
		``:                                                    nil,
	} {
		got, err := shellWords(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("shellWords(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
