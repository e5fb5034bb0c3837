package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
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
	// The whole banner, through the blank line after the curl lines: the
	// test waits for writes, so it must not stop at the banner's first
	// lines.
	re := regexp.MustCompile(`forms API on (http://\S+) over .*\ndemo API key(?: \(shown this once[^)]*\): (\S+)|: in (.*) \(not printed again\))\n\ntry:\n(?:  curl .*\n){6}\ndelete a submission.*\n(?:  go run .*\n){2}\n`)
	timeout := time.After(60 * time.Second) // only if the test is failing
	for {
		grown := term.grown() // before reading, so no write falls between
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
		case <-grown: // the banner may be complete now
		case <-timeout:
			t.Fatalf("the server did not start:\n%s%s", out.String(), term.String())
		}
	}
}

// TestPostgresServersSeedOnce starts four servers together on a
// PostgreSQL schema that does not exist yet, as four nodes deploying at
// once, with a DSN in the README's form, pool_max_conns included: the
// demo data is seeded exactly once, all serve it with the same demo key,
// and with one shared cursor secret a cursor from one server works on
// the others.
func TestPostgresServersSeedOnce(t *testing.T) {
	is := is.New(t)
	dsn, schema := pgtest.Name(t)
	dsn += "&pool_max_conns=4" // pgxpool's, which the server must not send to PostgreSQL
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "cursor-secret")
	is.NoErr(os.WriteFile(secretFile, []byte("0123456789abcdefghijklmnopqrstuvwxyz\n"), 0o600))
	args := []string{"-postgres", dsn, "-schema", schema, "-demo-key-file", filepath.Join(dir, "demo-key"), "-cursor-secret-file", secretFile, "-access-log=false"}

	servers := make([]server, 4)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[i] = startArgs(t, args...)
		}()
	}
	wg.Wait()
	a, b := servers[0], servers[len(servers)-1]
	is.True(strings.HasPrefix(a.key, "fapi_")) // a demo key, not a hint to issue one
	is.True(strings.Contains(a.term.String(), "over PostgreSQL schema "+schema))
	shown := 0
	for _, s := range servers {
		is.Equal(s.key, a.key)                                          // every server knows the one demo key
		is.True(!strings.Contains(s.out.String()+s.term.String(), dsn)) // the DSN is not printed
		is.True(!strings.Contains(s.out.String(), a.key))               // nor the key logged
		shown += strings.Count(s.term.String(), "shown this once")
	}
	is.Equal(shown, 1) // the key printed by the one server that made it

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

	for _, s := range servers {
		is.NoErr(s.stop())
	}
}

// TestPostgresSeedLockWaitEndsWithCtx starts a server while another
// holds the seed lock. The server waits for it in a transaction, with
// pg_advisory_xact_lock (a session-level lock would stay held by an idle
// pooled connection behind a transaction-mode pooler), gives up when its
// ctx ends, and leaves nothing behind: once the lock is free, the next
// server to start seeds.
func TestPostgresSeedLockWaitEndsWithCtx(t *testing.T) {
	is := is.New(t)
	bg := context.Background()
	dsn, schema := pgtest.Name(t)
	app := "formsapi_seed_" + strings.ToLower(rand.Text()[:10])
	args := []string{"-postgres", dsn + "&pool_max_conns=2&application_name=" + app, "-schema", schema,
		"-demo-key-file", filepath.Join(t.TempDir(), "demo-key"), "-access-log=false"}

	conn, err := pgx.Connect(bg, dsn)
	is.NoErr(err)
	defer conn.Close(bg)
	tx, err := conn.Begin(bg)
	is.NoErr(err)
	defer tx.Rollback(bg)
	_, err = tx.Exec(bg, "SELECT pg_advisory_xact_lock($1)", seedLockKey(schema))
	is.NoErr(err) // another server is seeding

	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), io.Discard, io.Discard) }()
	// An advisory lock's wait: while many tests create tables at once,
	// the server's migration may also wait a moment on a catalog's
	// relation extension lock (a flake in .ci/run).
	query := pgtest.WaitForLock(t, dsn, "application_name = $1 AND wait_event = 'advisory'", app)
	if !strings.Contains(query, "pg_advisory_xact_lock") { // a transaction-level lock
		t.Fatalf("the server waits on a lock in %q, want the seed lock (pg_advisory_xact_lock)", query)
	}
	cancel()
	select {
	case err := <-done:
		is.True(errors.Is(err, context.Canceled)) // the start gave up
	case <-time.After(30 * time.Second):
		t.Fatal("the server still waits for the seed lock after its ctx ended")
	}
	is.NoErr(tx.Rollback(bg)) // the other server is done

	s := startArgs(t, args...)                                    // fails if the lock were still held
	is.True(strings.Contains(s.term.String(), "shown this once")) // it seeded
	is.NoErr(s.stop())
}

// TestCursorSecretSources: a file named by -cursor-secret-file must
// exist and hold a long enough secret; $FORMSAPI_CURSOR_SECRET comes
// next; then a file an earlier version of the server kept beside the
// data, so that its tokens keep working; with none of them the handler
// uses the store's own secret, and no file is made.
func TestCursorSecretSources(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	legacy := filepath.Join(dir, "forms.db.cursor-secret")
	short := filepath.Join(dir, "short")
	is.NoErr(os.WriteFile(short, []byte("too short\n"), 0o600))
	_, _, err := cursorSecret(short, legacy)
	is.True(err != nil) // a short secret is refused
	_, _, err = cursorSecret(filepath.Join(dir, "missing"), legacy)
	is.True(err != nil) // a missing file is an error, not the store's secret
	t.Setenv("FORMSAPI_CURSOR_SECRET", "  "+strings.Repeat("s", 40)+"\n")
	secret, from, err := cursorSecret("", legacy)
	is.NoErr(err)
	is.Equal(string(secret), strings.Repeat("s", 40)) // from the environment, trimmed
	is.Equal(from, "$FORMSAPI_CURSOR_SECRET")
	t.Setenv("FORMSAPI_CURSOR_SECRET", "")
	secret, from, err = cursorSecret("", legacy)
	is.NoErr(err)
	is.Equal(secret, nil) // neither: the store's
	is.Equal(from, "store")
	_, err = os.Stat(legacy)
	is.True(errors.Is(err, fs.ErrNotExist)) // and no file is made
	is.NoErr(os.WriteFile(legacy, []byte(strings.Repeat("k", 43)+"\n"), 0o600))
	secret, from, err = cursorSecret("", legacy)
	is.NoErr(err)
	is.Equal(string(secret), strings.Repeat("k", 43)) // an earlier version's file is kept
	is.Equal(from, legacy)
}

// TestPostgresWebhookRefsAreTheFeeds is TestWebhookRefsAreTheFeeds over
// PostgreSQL.
func TestPostgresWebhookRefsAreTheFeeds(t *testing.T) {
	dsn, schema := pgtest.Name(t)
	args := []string{"-postgres", dsn, "-schema", schema, "-demo-key-file", filepath.Join(t.TempDir(), "demo-key")}
	checkWebhookRefs(t, args, func(t *testing.T) formsapi.Writer {
		s, err := pgstore.Open(context.Background(), dsn, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
