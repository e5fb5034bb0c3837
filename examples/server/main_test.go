package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
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

// server is one run of the example server on a free port.
type server struct {
	base, key string
	out       *syncBuffer
	stop      func() error
}

func start(t *testing.T, db string) server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-db", db}, out, io.Discard) }()
	re := regexp.MustCompile(`forms API on (http://\S+) over .*\ndemo API key: (\S+)`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := re.FindStringSubmatch(out.String()); m != nil {
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
			return server{base: m[1], key: m[2], out: out, stop: stop}
		}
		select {
		case err := <-done:
			t.Fatalf("run ended early: %v\n%s", err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not start:\n%s", out.String())
		}
	}
}

func (s server) get(t *testing.T, path, key string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.base+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func TestServerSeedsServesAndReuses(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "forms.db")

	first := start(t, db)
	is.True(strings.Contains(first.out.String(), "curl -H 'Authorization: Bearer "+first.key+"' '"+first.base+"/v1/forms'")) // ready curl line
	code, body := first.get(t, "/v1/forms", first.key)
	is.Equal(code, 200) // list forms
	var forms struct{ Forms []struct{ FormID string } }
	is.NoErr(json.Unmarshal(body, &forms))
	is.Equal(len(forms.Forms), 3) // the demo forms

	code, body = first.get(t, "/v1/forms/job-application/submissions?order=asc", first.key)
	is.Equal(code, 200)                                       // list submissions
	is.True(bytes.Contains(body, []byte(`"fieldName":"cv"`))) // with attachments
	for _, internal := range []string{"198.51.100.", "Firefox", "trace-", "London", "country"} {
		is.True(!bytes.Contains(body, []byte(internal))) // no internal metadata
	}
	code, _ = first.get(t, "/v1/forms", "fapi_wrong")
	is.Equal(code, 401)    // a wrong key
	is.NoErr(first.stop()) // graceful shutdown

	logs := first.out.String()
	is.True(strings.Contains(logs, `"msg":"request","method":"GET","path":"/v1/forms","status":200`)) // one line per request
	is.True(strings.Contains(logs, `"status":401`))
	is.True(strings.Count(logs, `"msg":"request"`) == 3) // exactly one per request
	for _, line := range strings.Split(logs, "\n") {
		if strings.HasPrefix(line, "{") {
			is.True(!strings.Contains(line, first.key)) // the key is never logged
			is.True(!strings.Contains(line, "Bearer"))  // nor the header
		}
	}
	is.True(strings.Contains(logs, `"request_id":"`)) // each line carries its request ID

	second := start(t, db)
	is.Equal(second.key, first.key) // the same demo key
	code, body = second.get(t, "/v1/forms", first.key)
	is.Equal(code, 200) // still works
	is.NoErr(json.Unmarshal(body, &forms))
	is.Equal(len(forms.Forms), 3) // nothing seeded twice
	code, body = second.get(t, "/v1/forms/contact/submissions?limit=1000", first.key)
	is.Equal(code, 200)
	is.Equal(bytes.Count(body, []byte(`"formId":"contact"`)), 6) // six contact submissions, once each
	is.NoErr(second.stop())

	var out bytes.Buffer
	is.NoErr(run(context.Background(), []string{"-db", db, "-new-key", "demo"}, &out, io.Discard)) // issue a key
	newKey := regexp.MustCompile(`fapi_\w+`).FindString(out.String())
	is.True(newKey != "" && newKey != first.key) // a fresh key
	third := start(t, db)
	code, _ = third.get(t, "/v1/forms", newKey)
	is.Equal(code, 200) // the new key works
	is.NoErr(third.stop())
}

func TestStoreBudgetBelowWriteTimeout(t *testing.T) {
	// Otherwise a slow store ends in a dropped connection, not a JSON 503.
	if storeTimeout >= writeTimeout {
		t.Fatalf("store timeout %s must be below WriteTimeout %s", storeTimeout, writeTimeout)
	}
}
