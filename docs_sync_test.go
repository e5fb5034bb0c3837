package formsapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
)

// TestDocsSyncProgramRecovers builds the Sync program of docs/client.md
// as a reader would paste it and runs it against a real server, run
// after run, keeping its token file: it imports every submission, then a
// deletion, and after the server restarts with another cursor secret it
// empties its copy and imports everything again under the new refs,
// exiting 0 each time, where before it failed on every run.
func TestDocsSyncProgramRecovers(t *testing.T) {
	t.Parallel()
	var src string
	for _, b := range goBlocks(t) {
		if b.file == "docs/client.md" && strings.Contains(b.src, "func loadToken") {
			src = b.src
		}
	}
	if src == "" {
		t.Fatal("docs/client.md has no Sync program (a block with loadToken)")
	}
	mod := docsModule(t)
	write(t, filepath.Join(mod, "syncprogram", "main.go"), []byte(src))
	bin := filepath.Join(t.TempDir(), "syncprogram")
	if out, err := goIn(mod, "build", "-o", bin, "./syncprogram").CombinedOutput(); err != nil {
		t.Fatalf("build the program of docs/client.md: %v\n%s", err, out)
	}

	ctx := context.Background()
	store := memstore.New()
	if err := store.AddForm(ctx, "acct", formsapi.Form{ID: "contact", Title: "Contact"}); err != nil {
		t.Fatal(err)
	}
	const n = 5
	for i := range n {
		s := formsapi.Submission{FormID: "contact", Data: []byte(fmt.Sprintf(`{"n":%d}`, i))}
		if err := store.AddSubmission(ctx, s, formsapi.Metadata{ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	key, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.AddKey(ctx, key, "acct"); err != nil {
		t.Fatal(err)
	}
	var current atomic.Pointer[http.Handler]
	restart := func(secret string) {
		h := formsapi.NewHandler(store, store, formsapi.WithCursorSecret([]byte(secret)))
		current.Store(&h)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*current.Load()).ServeHTTP(w, r) }))
	defer srv.Close()
	work := t.TempDir() // the program keeps its token file in its working directory
	run := func(when string) string {
		t.Helper()
		cmd := exec.Command(bin)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "FORMS_API_URL="+srv.URL, "FORMS_API_KEY="+key)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: the program failed: %v\n%s", when, err, out)
		}
		return string(out)
	}
	count := func(out, s string) int { return strings.Count(out, s) }

	restart("the secret before the deploy, 32+ bytes")
	out := run("first run")
	if count(out, "importing ") != n || count(out, "resynchronising") != 0 {
		t.Fatalf("first run: want %d imports and no resync:\n%s", n, out)
	}
	if err := store.DeleteSubmission(ctx, "acct", "contact", "3"); err != nil {
		t.Fatal(err)
	}
	out = run("after a deletion")
	if count(out, "importing ") != 0 || count(out, "deleting ") != 1 {
		t.Fatalf("after a deletion: want one deletion and no import:\n%s", out)
	}
	restart("the secret after the deploy, also 32+ bytes")
	out = run("after a restart with another secret")
	if count(out, "resynchronising the copy from the start") != 1 || count(out, "deleting every submission kept") != 1 || count(out, "importing ") != n-1 {
		t.Fatalf("after the secret changed: want a resync that empties the copy and imports %d:\n%s", n-1, out)
	}
	out = run("the next run")
	if count(out, "importing ") != 0 || count(out, "resynchronising") != 0 {
		t.Fatalf("the run after the resync: want nothing to do:\n%s", out)
	}
}
