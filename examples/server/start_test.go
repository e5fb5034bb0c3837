package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestAnswersWhileTheStoreOpens: the server listens before its store
// opens; while the store opens (held by the test, as a long migration or
// search index build would hold it), /healthz answers 200, /readyz 503
// "starting" without logging the store as failing, and the API 503 with
// Retry-After and the API's JSON error; once the store is open, the
// banner comes, /readyz answers 200 and the API serves.
func TestAnswersWhileTheStoreOpens(t *testing.T) {
	is := is.New(t)
	holding, release := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), beforeOpen{}, func() {
		close(holding)
		<-release
	}))
	defer cancel()
	out, term := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-db", filepath.Join(t.TempDir(), "forms.db")}, out, term)
	}()
	select {
	case <-holding:
	case err := <-done:
		t.Fatalf("run ended before opening the store: %v\n%s", err, term.String())
	}
	m := regexp.MustCompile(`forms API starting on (http://\S+):`).FindStringSubmatch(term.String())
	is.True(m != nil) // the URL, before the store opens
	base := m[1]
	is.True(strings.Contains(out.String(), `"msg":"starting","url":"`+base+`"`)) // and in the log

	code, body, _ := health(t, "GET", base+"/healthz")
	is.Equal(code, 200)
	is.Equal(body, `{"status":"live"}`+"\n")
	code, body, _ = health(t, "GET", base+"/readyz")
	is.Equal(code, 503)
	is.Equal(body, `{"status":"starting"}`+"\n")
	for _, method := range []string{"GET", "HEAD"} {
		code, body, h := health(t, method, base+"/v1/forms")
		is.Equal(code, 503)                 // the API, while the store opens
		is.Equal(h.Get("Retry-After"), "5") // when to come back
		is.Equal(h.Get("Cache-Control"), "no-store")
		if method == "GET" {
			is.True(strings.HasPrefix(body, `{"success":false,"message":"service unavailable: the server is starting`)) // the API's error
		}
	}
	is.True(!strings.Contains(out.String(), "not ready")) // starting is not failing

	close(release)
	banner := regexp.MustCompile(`forms API on (http://\S+) over .*\ndemo API key \(shown this once[^)]*\): (\S+)\n\ntry:\n(?:  curl .*\n){6}`)
	timeout := time.After(60 * time.Second) // only if the test is failing
	var key string
	for key == "" {
		grown := term.grown()
		if m := banner.FindStringSubmatch(term.String()); m != nil {
			is.Equal(m[1], base)
			key = m[2]
			break
		}
		select {
		case <-grown:
		case err := <-done:
			t.Fatalf("run ended: %v\n%s", err, term.String())
		case <-timeout:
			t.Fatalf("no banner:\n%s", term.String())
		}
	}
	code, _, _ = health(t, "GET", base+"/readyz")
	is.Equal(code, 200)
	s := server{base: base}
	code, _ = s.get(t, "/v1/forms", key)
	is.Equal(code, 200)
	cancel()
	is.NoErr(<-done)
}

// TestMigrateFlag: -migrate brings a new file to the current schema with
// the search index, says so and exits, without seeding or making a key;
// the server started on the file then seeds it, with no start step left
// to log.
func TestMigrateFlag(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "forms.db")
	out, term := &syncBuffer{}, &syncBuffer{}
	is.NoErr(run(context.Background(), []string{"-migrate", "-db", db}, out, term))
	is.Equal(term.String(), "migrated "+db+" to this version; search index on\n")
	is.True(strings.Contains(out.String(), `"msg":"migrated"`))
	_, err := os.Stat(db + ".demo-key")
	is.True(os.IsNotExist(err)) // no demo key: nothing seeded
	_, err = os.Stat(db)
	is.NoErr(err) // the file

	s := start(t, db)
	is.True(s.key != "")                                      // seeded on the first serve
	is.True(!strings.Contains(s.out.String(), "start: step")) // nothing left to do
	code, _ := s.get(t, "/v1/forms/contact/submissions?q=zoe", s.key)
	is.Equal(code, 200)
}
