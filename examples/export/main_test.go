package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
)

// api serves the seeded API under /api and returns its base URL.
func api(t *testing.T) string {
	t.Helper()
	s := memstore.New()
	if err := storetest.Load(context.Background(), s, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", formsapi.NewHandler(s, s, formsapi.WithPageSize(5, 1000))))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/api"
}

// readLines decodes a JSON Lines file.
func readLines(t *testing.T, path string) []formsapi.Submission {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var subs []formsapi.Submission
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var s formsapi.Submission
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("line %d: %v", len(subs)+1, err)
		}
		subs = append(subs, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return subs
}

func TestExportWritesEverySubmissionOldestFirst(t *testing.T) {
	t.Parallel()
	base := api(t)
	path := filepath.Join(t.TempDir(), "contact.jsonl")
	c, err := formsclient.New(base, storetest.KeyA)
	if err != nil {
		t.Fatal(err)
	}
	n, err := export(context.Background(), c, storetest.FormBusy, path)
	if err != nil {
		t.Fatal(err)
	}
	var want []formsapi.Submission
	for s, err := range c.Submissions(context.Background(), storetest.FormBusy, formsclient.Oldest(), formsclient.PageSize(1000)) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, s)
	}
	got := readLines(t, path)
	if n != 23 || len(want) != 23 {
		t.Fatalf("exported %d, the API has %d; the seed has 23", n, len(want))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("file differs from the API (-api +file):\n%s", diff)
	}
	raw, _ := os.ReadFile(path)
	if !bytes.Contains(raw, []byte("Hello <b>")) {
		t.Error("HTML characters were escaped")
	}
	if _, err := os.Stat(path + ".partial"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file left behind: %v", err)
	}
}

func TestFailedExportLeavesNoFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.jsonl")
	c, err := formsclient.New(api(t), storetest.KeyA)
	if err != nil {
		t.Fatal(err)
	}
	_, err = export(context.Background(), c, storetest.FormB, path)
	if !errors.Is(err, formsapi.ErrFormNotFound) {
		t.Errorf("another account's form: %v", err)
	}
	for _, p := range []string{path, path + ".partial"} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestMainExports(t *testing.T) {
	path := filepath.Join(t.TempDir(), "signup.jsonl")
	t.Setenv("FORMS_API_URL", api(t))
	t.Setenv("FORMS_API_KEY", storetest.KeyA)
	args := os.Args
	defer func() { os.Args = args }()
	os.Args = []string{"export", storetest.FormSmall, path}
	main()
	if got := readLines(t, path); len(got) != 3 || !got[0].CreatedAt.Before(got[2].CreatedAt) {
		t.Errorf("%d submissions: %+v", len(got), got)
	}
}

// docs/client.md shows this very program: it compiles because it is this file.
func TestDocsShowThisProgram(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../docs/client.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)\n```go\n(// Command export .*?)```\n").FindSubmatch(readme)
	if m == nil {
		t.Fatal(`docs/client.md has no Go block starting "// Command export"`)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(src), string(m[1])); diff != "" {
		t.Errorf("docs/client.md's example differs from examples/export/main.go (-main.go +docs):\n%s", diff)
	}
}

// TestMainSaysWhatIsMissing runs main in a child process (it exits
// through log.Fatal) with the environment a newcomer gets wrong first:
// nothing set, a URL without its scheme, an empty key. Each message says
// what to set, and none quotes the key.
func TestMainSaysWhatIsMissing(t *testing.T) {
	if os.Getenv("EXPORT_TEST_MAIN") == "1" {
		os.Args = []string{"export", "contact", filepath.Join(t.TempDir(), "contact.jsonl")}
		main()
		return
	}
	t.Parallel()
	for _, tc := range []struct{ url, key, want string }{
		{"", "", "set FORMS_API_URL (where the API is mounted, such as http://127.0.0.1:8080) and FORMS_API_KEY"},
		{"http://127.0.0.1:8080", "", "set FORMS_API_URL"},
		{"127.0.0.1:8080", storetest.KeyA, `base URL "127.0.0.1:8080": must start with https:// or http://`},
		{"http://127.0.0.1:8080", "not a key", "the API key is malformed"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMainSaysWhatIsMissing$")
		cmd.Env = append(os.Environ(), "EXPORT_TEST_MAIN=1", "FORMS_API_URL="+tc.url, "FORMS_API_KEY="+tc.key)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "not a key") {
			t.Errorf("URL %q, key %q: %v\n%s\nwant a failure saying %q", tc.url, tc.key, err, out, tc.want)
		}
	}
}
