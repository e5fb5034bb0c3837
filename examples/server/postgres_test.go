package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi/internal/pgtest"
)

// startArgs runs the server with args on a free port. The demo key is
// read from the banner on the run that creates it, and from the key file
// the banner names on later runs.
func startArgs(t *testing.T, args ...string) server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, term := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), out, term) }()
	re := regexp.MustCompile(`forms API on (http://\S+) over .*\ndemo API key(?: \(shown this once[^)]*\): (\S+)|: in (.*) \(not printed again\))\n`)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := re.FindStringSubmatch(term.String()); m != nil {
			stop := func() error {
				cancel()
				select {
				case err := <-done:
					return err
				case <-time.After(20 * time.Second):
					t.Fatal("run did not return after cancel")
					return nil
				}
			}
			key := m[2]
			if key == "" {
				b, err := os.ReadFile(m[3])
				if err != nil {
					t.Fatal(err)
				}
				key = strings.TrimSpace(string(b))
			}
			return server{base: m[1], key: key, out: out, term: term, stop: stop}
		}
		select {
		case err := <-done:
			t.Fatalf("run ended early: %v\n%s%s", err, out.String(), term.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not start:\n%s%s", out.String(), term.String())
		}
	}
}

// TestPostgresTwoServersSeedOnce starts two servers together on a
// PostgreSQL schema that does not exist yet, as two nodes deploying at
// once: the demo data is seeded exactly once, both serve it with the same
// demo key, and with one shared cursor secret a cursor from one server
// works on the other.
func TestPostgresTwoServersSeedOnce(t *testing.T) {
	is := is.New(t)
	dsn, schema := pgtest.Name(t)
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "cursor-secret")
	is.NoErr(os.WriteFile(secretFile, []byte("0123456789abcdefghijklmnopqrstuvwxyz\n"), 0o600))
	args := []string{"-postgres", dsn, "-schema", schema, "-demo-key-file", filepath.Join(dir, "demo-key"), "-cursor-secret-file", secretFile, "-access-log=false"}

	servers := make([]server, 2)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[i] = startArgs(t, args...)
		}()
	}
	wg.Wait()
	a, b := servers[0], servers[1]
	is.True(strings.HasPrefix(a.key, "fapi_")) // a demo key, not a hint to issue one
	is.Equal(a.key, b.key)                     // both servers know the one demo key
	is.True(strings.Contains(a.term.String(), "over PostgreSQL schema "+schema))
	for _, s := range servers {
		is.True(!strings.Contains(s.out.String()+s.term.String(), dsn)) // the DSN is not printed
		is.True(!strings.Contains(s.out.String(), a.key))               // nor the key logged
	}
	is.Equal(strings.Count(a.term.String()+b.term.String(), "shown this once"), 1) // the key printed by the one server that made it

	for _, s := range servers {
		code, body := s.get(t, "/v1/forms", a.key)
		is.Equal(code, 200)
		var forms struct{ Forms []struct{ FormID string } }
		is.NoErr(json.Unmarshal(body, &forms))
		is.Equal(len(forms.Forms), 3) // the demo forms, once
		code, body = s.get(t, "/v1/forms/contact/submissions?limit=1000", a.key)
		is.Equal(code, 200)
		is.Equal(bytes.Count(body, []byte(`"formId":"contact"`)), 6) // six contact submissions, once each
	}

	code, body := a.get(t, "/v1/forms/contact/submissions?limit=2", a.key)
	is.Equal(code, 200)
	var page struct{ NextCursor string }
	is.NoErr(json.Unmarshal(body, &page))
	is.True(page.NextCursor != "")
	code, _ = b.get(t, "/v1/forms/contact/submissions?limit=2&cursor="+url.QueryEscape(page.NextCursor), a.key)
	is.Equal(code, 200) // the other server accepts the cursor

	var out bytes.Buffer
	is.NoErr(run(context.Background(), []string{"-postgres", dsn, "-schema", schema, "-new-key", "demo"}, &out, io.Discard)) // issue a key
	newKey := regexp.MustCompile(`fapi_\w+`).FindString(out.String())
	is.True(newKey != "" && newKey != a.key) // a fresh key
	code, _ = b.get(t, "/v1/forms", newKey)
	is.Equal(code, 200) // works at once on a running server

	is.NoErr(a.stop())
	is.NoErr(b.stop())
}

func TestCursorSecretSources(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	is.NoErr(os.WriteFile(short, []byte("too short\n"), 0o600))
	_, err := cursorSecret(short)
	is.True(err != nil) // a short secret is refused
	_, err = cursorSecret(filepath.Join(dir, "missing"))
	is.True(err != nil) // a missing file is an error, not a random secret
	t.Setenv("FORMSAPI_CURSOR_SECRET", "  "+strings.Repeat("s", 40)+"\n")
	secret, err := cursorSecret("")
	is.NoErr(err)
	is.Equal(string(secret), strings.Repeat("s", 40)) // from the environment, trimmed
	t.Setenv("FORMSAPI_CURSOR_SECRET", "")
	secret, err = cursorSecret("")
	is.NoErr(err)
	is.Equal(secret, nil) // neither: a random secret per process
}
