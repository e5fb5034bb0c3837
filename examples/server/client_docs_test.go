package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// clientPrograms are the programs of docs/client.md, each known by a
// line of its source, with what it must print on the demo data: each
// finds something there (docs/client.md's examples once asked for last
// week's submissions of data from 2024, and filtered on a field no demo
// form has, and found nothing).
var clientPrograms = []struct {
	marker string   // a line of its source
	args   []string // its command line
	want   map[string]int
}{
	{marker: "c.Forms(ctx)", want: map[string]int{
		"contact Contact us": 1, "newsletter Newsletter sign-up": 1, "job-application Job application": 1,
		`"subject":"Question`: 2, // the contact submissions of 6 September 2024
	}},
	{marker: "func loadToken", want: map[string]int{"importing ": 6}},
	{marker: `formsclient.Search("zoe")`, want: map[string]int{
		"3 applications for Backend engineer": 1, `"email":`: 3,
		`found: {"name":"Ada Lovelace","referee":"Zoë Ünal"}`: 1,
	}},
	{marker: "// Command export", args: []string{"contact", "contact.jsonl"}, want: map[string]int{"wrote 6 submissions to contact.jsonl": 1}},
}

// TestDocsClientProgramsFindDemoData builds every program of
// docs/client.md as a reader would paste it and runs it against the
// example server on its demo data, with FORMS_API_URL and FORMS_API_KEY
// set as the page says: each prints what it finds, which must be there.
func TestDocsClientProgramsFindDemoData(t *testing.T) {
	text, err := os.ReadFile("../../docs/client.md")
	if err != nil {
		t.Fatal(err)
	}
	programs := mainBlocks(string(text))
	if len(programs) < 3 {
		t.Fatalf("%d programs in docs/client.md: the extraction is broken", len(programs))
	}
	s := start(t, filepath.Join(t.TempDir(), "forms.db"), "-access-log=false")
	defer s.stop()
	dir := t.TempDir()
	for i, src := range programs {
		found := false
		for _, p := range clientPrograms {
			if !strings.Contains(src, p.marker) {
				continue
			}
			found = true
			file := filepath.Join(dir, fmt.Sprint("program", i), "main.go")
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(filepath.Dir(file), "program")
			// Built from this module, as a file outside it: the program
			// imports formsclient from the working tree.
			if out, err := exec.Command("go", "build", "-o", bin, file).CombinedOutput(); err != nil {
				t.Fatalf("build the program of docs/client.md with %q: %v\n%s", p.marker, err, out)
			}
			cmd := exec.Command(bin, p.args...)
			cmd.Dir = filepath.Dir(file) // the Sync program keeps its token there
			cmd.Env = append(os.Environ(), "FORMS_API_URL="+s.base, "FORMS_API_KEY="+s.key)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("the program of docs/client.md with %q failed: %v\n%s", p.marker, err, out)
				continue
			}
			for line, n := range p.want {
				if got := strings.Count(string(out), line); got != n {
					t.Errorf("the program of docs/client.md with %q prints %q %d times, want %d:\n%s", p.marker, line, got, n, out)
				}
			}
		}
		if !found {
			t.Errorf("docs/client.md has a program the test does not know; add it to clientPrograms:\n%s", src)
		}
	}
}

// goFence opens a ```go block, indented in a list item or not.
var goFence = regexp.MustCompile("(?m)^( *)```go\n")

// mainBlocks returns the ```go blocks of a document that are programs
// (package main), without their list item's indentation.
func mainBlocks(text string) []string {
	var blocks []string
	for _, m := range goFence.FindAllStringSubmatchIndex(text, -1) {
		indent := text[m[2]:m[3]]
		body, _, ok := strings.Cut(text[m[1]:], "\n"+indent+"```")
		if !ok {
			continue
		}
		src := strings.ReplaceAll("\n"+body+"\n", "\n"+indent, "\n")[1:]
		if strings.HasPrefix(src, "package main\n") || strings.Contains(src, "\npackage main\n") {
			blocks = append(blocks, src)
		}
	}
	return blocks
}
