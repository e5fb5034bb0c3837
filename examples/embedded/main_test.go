package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
)

// syncBuffer is an io.Writer the test can read while run writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunServesTheMountedAPI reads the banner from stderr, calls the
// host's route and the mounted API with the demo key, and checks that
// the key never reached stdout, the log stream.
func TestRunServesTheMountedAPI(t *testing.T) {
	is := is.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stdout := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-addr", "127.0.0.1:0"}, stdout, pw); pw.Close() }()

	var base, key string
	banner := make(chan struct{})
	go func() {
		defer close(banner)
		sc := bufio.NewScanner(pr)
		for sc.Scan() && (base == "" || key == "") {
			if m := regexp.MustCompile(`mounted at (http://\S+)/api/v1/`).FindStringSubmatch(sc.Text()); m != nil {
				base = m[1]
			}
			if m := regexp.MustCompile(`demo API key: (\S+)`).FindStringSubmatch(sc.Text()); m != nil {
				key = m[1]
			}
		}
		go io.Copy(io.Discard, pr)
	}()
	select {
	case <-banner:
	case err := <-done:
		t.Fatalf("run ended before its banner: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("no banner with the URL and the key on stderr; stdout has:\n%s", stdout.String())
	}
	is.True(key != "") // the banner, on stderr, gave the key

	get := func(path, key string) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := http.DefaultClient.Do(req)
		is.NoErr(err) // request
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, body := get("/health", "")
	is.Equal(code, 200) // the host's own route
	is.Equal(body, "ok\n")
	code, body = get("/api/v1/forms/newsletter/submissions?limit=2", key)
	is.Equal(code, 200)                                                             // the mounted API
	is.True(regexp.MustCompile(`"name":"Linus".*"name":"Grace"`).MatchString(body)) // newest first
	code, _ = get("/api/v1/forms", "")
	is.Equal(code, 401) // needs the key

	cancel()
	select {
	case err := <-done:
		is.NoErr(err) // clean shutdown
	case <-time.After(10 * time.Second):
		is.Fail() // run did not return within 10 s of cancel
	}
	is.True(!strings.Contains(stdout.String(), key))    // the key never reaches stdout, the log
	is.True(!strings.Contains(stdout.String(), "curl")) // nor the curl lines
}
