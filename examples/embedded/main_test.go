package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestRunServesTheMountedAPI(t *testing.T) {
	is := is.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-addr", "127.0.0.1:0"}, pw); pw.Close() }()

	var base, key string
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
}
