package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi/internal/redistest"
)

// TestRedisServersShareTheRateLimit: two servers, each over its own SQLite
// file with the demo account (two nodes of a fleet), share the account's
// budget through Redis: -rate-limit 3 lets three requests through over
// both, then both answer 429. The Redis URL, password and all, is never
// printed or logged.
func TestRedisServersShareTheRateLimit(t *testing.T) {
	is := is.New(t)
	u, err := url.Parse(redistest.URL(t))
	is.NoErr(err)
	if u.User == nil {
		// A server without a password takes any for its default user,
		// so the test can check that the password is not printed.
		u.User = url.UserPassword("default", "redis-pw-never-printed")
	}
	password, _ := u.User.Password()
	redisURL := u.String()
	prefix := redistest.Prefix(t)
	dir := t.TempDir()
	var nodes []server
	for _, name := range []string{"a", "b"} {
		nodes = append(nodes, start(t, filepath.Join(dir, name+".db"), "-redis", redisURL, "-redis-prefix", prefix,
			"-rate-limit", "3", "-rate-window", "1h"))
	}
	a, b := nodes[0], nodes[1]
	is.True(a.key != b.key) // two databases, each with its own demo key for the account demo

	for i, s := range []server{a, b, a} {
		res := s.do(t, "/v1/forms", s.key)
		is.Equal(res.StatusCode, 200)                                                      // within the shared quota, on either node
		is.Equal(res.Header.Get("RateLimit-Policy"), `"default";q=3;w=3600`)               // the flags' policy
		is.True(strings.Contains(res.Header.Get("RateLimit"), fmt.Sprintf(";r=%d;", 2-i))) // one fewer left each time
	}
	for _, s := range []server{b, a} {
		res := s.do(t, "/v1/forms", s.key)
		is.Equal(res.StatusCode, 429)                   // spent, on both nodes
		is.Equal(res.Header.Get("Retry-After"), "1200") // an hour / 3
	}
	keys, err := redistest.Keys(context.Background(), redistest.Client(t), prefix)
	is.NoErr(err)
	is.Equal(keys, []string{prefix + "default:account:demo"}) // one bucket, under -redis-prefix

	for _, s := range nodes {
		is.NoErr(s.stop())
		printed := s.out.String() + s.term.String()
		is.True(strings.Contains(s.out.String(), `"rate_limiter":"redis"`)) // the log says which limiter
		is.True(!strings.Contains(printed, password))                       // but never the password
		is.True(!strings.Contains(printed, redisURL))                       // nor the URL
	}
}

// TestServerRefusesBadRedis: a URL that does not parse, and a Redis that
// does not answer, stop the server at start, with errors that quote
// neither the URL nor its password.
func TestServerRefusesBadRedis(t *testing.T) {
	db := filepath.Join(t.TempDir(), "forms.db")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	const password = "redis-pw-never-printed"
	for _, u := range []string{
		"redis://default:" + password + "@127.0.0.1:notaport/0",
		"mysql://default:" + password + "@127.0.0.1:6379/0",
		"redis://default:" + password + "@" + closed + "/0",
	} {
		// A server that took the URL would serve until the context ends,
		// and then return nil.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var term syncBuffer
		err := run(ctx, []string{"-db", db, "-addr", "127.0.0.1:0", "-redis", u}, io.Discard, &term)
		cancel()
		t.Logf("-redis %s: %v", u, err)
		switch {
		case err == nil || !strings.HasPrefix(err.Error(), "-redis: "):
			t.Errorf("%s: %v, want an error about -redis", u, err)
		case strings.Contains(err.Error()+term.String(), password):
			t.Errorf("the password is printed: %v\n%s", err, term.String())
		}
	}
}
