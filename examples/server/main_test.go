package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/matryer/is"
)

// syncBuffer is an io.Writer the test can read while run writes to it,
// and wait on for the next write.
type syncBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	grew chan struct{} // closed by the next Write; nil until grown asks
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grew != nil {
		close(s.grew)
		s.grew = nil
	}
	return s.b.Write(p)
}

// grown returns a channel closed by the next Write.
func (s *syncBuffer) grown() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grew == nil {
		s.grew = make(chan struct{})
	}
	return s.grew
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// server is one run of the example server on a free port.
type server struct {
	base, key string
	out, term *syncBuffer // stdout (the JSON log) and stderr (the terminal)
	stop      func() error
}

// start runs the server on db, with extra flags.
func start(t *testing.T, db string, extra ...string) server {
	t.Helper()
	return startArgs(t, append([]string{"-db", db}, extra...)...)
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
	is.True(strings.Contains(first.term.String(), "curl -H 'Authorization: Bearer "+first.key+"' '"+first.base+"/v1/forms'")) // ready curl line
	is.Equal(strings.Count(first.term.String(), first.key), 7)                                                                // the key and six curl lines, once
	is.True(strings.Contains(first.term.String(), "/v1/forms/contact/export?format=csv' > contact.csv"))                      // an export
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
	is.True(!strings.Contains(logs, first.key)) // the key never reaches stdout, the log stream
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var v map[string]any
		is.NoErr(json.Unmarshal([]byte(line), &v)) // stdout is JSON lines only
	}
	is.True(strings.Contains(logs, `"msg":"listening","url":"`+first.base+`"`))                       // where it listens, as a log line
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
	is.Equal(second.key, first.key)                                       // the same demo key, in the file
	is.True(!strings.Contains(second.term.String(), first.key))           // not printed again
	is.True(!strings.Contains(second.out.String(), first.key))            // anywhere
	is.True(strings.Contains(second.term.String(), "in "+db+".demo-key")) // the banner points to the file
	is.True(strings.Contains(second.term.String(), `curl -H "Authorization: Bearer $(cat '`+db+`.demo-key')" '`+second.base+`/v1/forms'`))
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

// TestCurlLineFromKeyFileWorks runs the curl line a later run prints,
// through a shell, from another directory than the server's, when curl
// and sh are installed. The database is named by a relative path, which
// the line must not repeat as it is.
func TestCurlLineFromKeyFileWorks(t *testing.T) {
	is := is.New(t)
	needProgram(t, "curl") // a skip outside CI, a failure in it
	t.Chdir(t.TempDir())
	db := "it's forms.db" // a quote, to check the quoting
	first := start(t, db)
	is.NoErr(first.stop())
	second := start(t, db)
	defer second.stop()
	line := regexp.MustCompile(`curl -H .*/v1/forms'`).FindString(second.term.String())
	is.True(line != "") // a curl line
	cmd := exec.Command("sh", "-c", line+" -s")
	cmd.Dir = t.TempDir() // elsewhere
	out, err := cmd.Output()
	is.NoErr(err)                                                // it runs
	is.True(strings.Contains(string(out), `"formId":"contact"`)) // and lists the demo forms
}

// TestPortTakenMakesNoKey: a first run that cannot listen stops before it
// makes the demo key, so the run after it shows the key rather than
// pointing to a file made by a run whose banner nobody saw.
func TestPortTakenMakesNoKey(t *testing.T) {
	is := is.New(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	defer taken.Close()
	db := filepath.Join(t.TempDir(), "forms.db")
	var term bytes.Buffer
	err = run(context.Background(), []string{"-db", db, "-addr", taken.Addr().String()}, io.Discard, &term)
	is.True(err != nil)                                // the port is taken
	is.True(strings.Contains(err.Error(), "listen"))   // and it says so
	is.True(!strings.Contains(term.String(), "fapi_")) // no key shown
	_, err = os.Stat(db + ".demo-key")
	is.True(errors.Is(err, fs.ErrNotExist)) // and none kept
	s := start(t, db)
	defer s.stop()
	is.True(strings.Contains(s.term.String(), "shown this once")) // the next run shows it
	code, _ := s.get(t, "/v1/forms", s.key)
	is.Equal(code, 200)
}

func TestAccessLogTruncatesLongPaths(t *testing.T) {
	is := is.New(t)
	s := start(t, filepath.Join(t.TempDir(), "forms.db"))
	long := "/v1/forms/" + strings.Repeat("é", 5000) + "/submissions"
	code, _ := s.get(t, long, s.key)
	is.Equal(code, 404) // a malformed form ID
	code, _ = s.get(t, "/v1/forms", s.key)
	is.Equal(code, 200)
	is.NoErr(s.stop())
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.out.String()), "\n") {
		var v map[string]any
		is.NoErr(json.Unmarshal([]byte(line), &v))
		if v["msg"] == "request" {
			lines = append(lines, v)
		}
	}
	is.Equal(len(lines), 2) // one line per request
	path := lines[0]["path"].(string)
	is.True(len(path) <= maxLoggedPath+len("…[truncated]"))                                // cut
	is.True(strings.HasSuffix(path, "…[truncated]"))                                       // and marked
	is.True(utf8.ValidString(path))                                                        // at a character boundary
	is.True(strings.HasPrefix(path, "/v1/forms/éé"))                                       // keeping the start
	is.Equal(lines[0]["path_bytes"], float64(len("/v1/forms/")+10000+len("/submissions"))) // with the whole length
	is.Equal(lines[1]["path"], "/v1/forms")                                                // short paths whole
	_, has := lines[1]["path_bytes"]
	is.True(!has) // and without a length
}

func TestStoreBudgetBelowWriteTimeout(t *testing.T) {
	is := is.New(t)
	// Otherwise a slow store ends in a dropped connection, not a JSON 503.
	is.True(storeTimeout < writeTimeout) // the store timeout is below WriteTimeout
}

func TestServerRateLimitsAndScopedKeys(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "forms.db")
	s := start(t, db, "-rate-limit", "3", "-rate-window", "1h")
	for i := 0; i < 3; i++ {
		code, _ := s.get(t, "/v1/forms", s.key)
		is.Equal(code, 200) // within the limit
	}
	res := s.do(t, "/v1/forms", s.key)
	is.Equal(res.StatusCode, 429)                                        // the fourth request is over the limit
	is.Equal(res.Header.Get("Retry-After"), "1200")                      // an hour / 3
	is.Equal(res.Header.Get("RateLimit-Policy"), `"default";q=3;w=3600`) // the flags' policy
	is.NoErr(s.stop())

	var out bytes.Buffer
	is.NoErr(run(context.Background(), []string{"-db", db, "-new-key", "demo", "-key-forms", "contact,newsletter", "-key-ttl", "1h"}, &out, io.Discard))
	scoped := regexp.MustCompile(`fapi_\w+`).FindString(out.String())
	s = start(t, db, "-rate-limit", "0")
	code, body := s.get(t, "/v1/forms", scoped)
	is.Equal(code, 200) // the scoped key works
	var forms struct{ Forms []struct{ FormID string } }
	is.NoErr(json.Unmarshal(body, &forms))
	is.Equal(len(forms.Forms), 2) // and lists only its two forms
	code, _ = s.get(t, "/v1/forms/job-application/submissions", scoped)
	is.Equal(code, 404) // the third is not found for it
	for i := 0; i < 5; i++ {
		code, _ = s.get(t, "/v1/forms", s.key)
		is.Equal(code, 200) // -rate-limit 0: no limit
	}
	is.NoErr(s.stop())

	s = start(t, db, "-rate-limit", "4", "-rate-window", "1h", "-rate-limit-key", "1")
	res = s.do(t, "/v1/forms", scoped)
	is.Equal(res.StatusCode, 200)                                            // the scoped key's one request
	is.Equal(res.Header.Get("RateLimit-Policy"), `"default-key";q=1;w=3600`) // under -rate-limit-key
	is.Equal(s.do(t, "/v1/forms", scoped).StatusCode, 429)                   // and no more
	for i := 0; i < 3; i++ {
		code, _ = s.get(t, "/v1/forms", s.key)
		is.Equal(code, 200) // the account's own key has the rest
	}
	is.NoErr(s.stop())
}

// do sends one GET and returns the response with its body closed.
func (s server) do(t *testing.T, path, key string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", s.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

func TestServerRefusesBadRateFlags(t *testing.T) {
	db := filepath.Join(t.TempDir(), "forms.db")
	for _, flags := range [][]string{
		{"-rate-limit", "10", "-rate-limit-key", "11"},
		{"-rate-limit", "10", "-rate-limit-key", "-1"},
		{"-rate-limit", "10", "-rate-window", "1500ms"},
		{"-rate-limit-timeout", "0"},
	} {
		// A server that took the flags would serve until the context
		// ends, and then return nil.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := run(ctx, append([]string{"-db", db, "-addr", "127.0.0.1:0"}, flags...), io.Discard, io.Discard)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "rate") {
			t.Errorf("%v: %v, want an error about the rate flags", flags, err)
		}
	}
}

func TestRateLimitTimeoutBelowStoreTimeout(t *testing.T) {
	is := is.New(t)
	// A limiter that hangs must cost a request less than a store that does.
	is.True(defaultRateLimitTimeout < storeTimeout)
}
