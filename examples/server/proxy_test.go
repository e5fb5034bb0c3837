package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi/internal/testenv"
)

// The example server behind reverse proxies, as docs/operations.md shows
// them: a client that knows only the public URL follows Link through
// every page and never leaves it, gzip passes through, the health
// checks answer through the proxy. nginx and Caddy run as real
// processes, with the configuration blocks copied out of the document
// itself, so the document cannot drift from what works.

// walk follows the next-page links from first, with key, and returns
// the submissions read and every link followed.
func walk(t *testing.T, c *http.Client, first, key string) (items int, links []string) {
	t.Helper()
	next := first
	for next != "" {
		req, _ := http.NewRequest("GET", next, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", next, res.StatusCode, b)
		}
		items += len(decodeSubmissions(t, b))
		next = ""
		if m := regexp.MustCompile(`^<([^>]+)>; rel="next"$`).FindStringSubmatch(res.Header.Get("Link")); m != nil {
			next = m[1]
			links = append(links, next)
		}
		if len(links) > 100 {
			t.Fatal("the links go round")
		}
	}
	return items, links
}

// checkBehind checks the server s as reached at public (a URL ending in
// the mount prefix, /api) through a proxy, with client c.
func checkBehind(t *testing.T, c *http.Client, s server, public string) {
	t.Helper()
	is := is.New(t)
	direct, more := walk(t, http.DefaultClient, s.base+"/v1/forms/contact/submissions?limit=1000", s.key)
	is.Equal(len(more), 0) // one page holds them all
	items, links := walk(t, c, public+"/v1/forms/contact/submissions?limit=2", s.key)
	is.Equal(items, direct) // every submission, once
	is.True(len(links) >= 2)
	for _, l := range links {
		is.True(strings.HasPrefix(l, public+"/v1/forms/contact/submissions?cursor=")) // on the public URL
	}

	req, _ := http.NewRequest("GET", public+"/v1/openapi.json", nil)
	req.Header.Set("Accept-Encoding", "gzip") // set by hand: the transport then leaves the body coded
	res, err := c.Do(req)
	is.NoErr(err)
	defer res.Body.Close()
	is.Equal(res.StatusCode, 200)
	is.Equal(res.Header.Get("Content-Encoding"), "gzip") // gzip passes through
	zr, err := gzip.NewReader(res.Body)
	is.NoErr(err)
	doc, err := io.ReadAll(zr)
	is.NoErr(err)
	is.True(strings.HasPrefix(string(doc), "{")) // once, not twice
}

// TestBehindGoReverseProxy: behind a proxy that terminates TLS and sends
// the backend's own Host (httputil.ReverseProxy's SetURL), the links
// are the backend's without -base-url, and the public https ones with it.
func TestBehindGoReverseProxy(t *testing.T) {
	is := is.New(t)
	var backend *url.URL
	front := httptest.NewUnstartedServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(backend)
		r.Out.URL.Path = strings.TrimPrefix(r.In.URL.Path, "/api")
		r.Out.URL.RawPath = ""
		r.SetXForwarded() // sent, and never read: any client can send them
	}})
	front.StartTLS()
	defer front.Close()
	public := front.URL + "/api"

	db := filepath.Join(t.TempDir(), "forms.db")
	plain := start(t, db)
	backend, _ = url.Parse(plain.base)
	_, links := walk(t, front.Client(), public+"/v1/forms/contact/submissions?limit=2", plain.key)
	is.True(strings.HasPrefix(links[0], plain.base+"/v1/")) // without -base-url: the backend's URL, in clear
	is.NoErr(plain.stop())

	s := start(t, db, "-base-url", public)
	defer s.stop()
	backend, _ = url.Parse(s.base)
	checkBehind(t, front.Client(), s, public)
}

// needProgram skips the test, in one line, without name installed;
// under CI (which installs it) it fails instead.
func needProgram(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (.ci/run installs it)", name)
		}
		pkg := name
		if name == "nginx" {
			pkg = "nginx-light"
		}
		testenv.Skip(t, fmt.Sprintf("%s is not installed (apt-get install -y %s)", name, pkg))
	}
	return path
}

// docBlock returns the block of docs/operations.md that starts with the
// line beginning with start, through its closing brace.
func docBlock(t *testing.T, start string) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	depth := 0
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if len(block) == 0 && !strings.HasPrefix(trimmed, start) {
			continue
		}
		block = append(block, line)
		depth += strings.Count(line, "{") - strings.Count(line, "}")
		if depth == 0 {
			return strings.Join(block, "\n")
		}
	}
	t.Fatalf("docs/operations.md has no block starting %q", start)
	return ""
}

// freePort returns a port free now on 127.0.0.1, for a program that
// cannot be told to pick one itself.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).AddrPort().String()
}

// runProxy runs a proxy program until the test ends and returns once the
// server's health check answers through it at public.
func runProxy(t *testing.T, public string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_DATA_HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	// Wait for the program to listen: it says so nowhere we can read.
	deadline := time.Now().Add(30 * time.Second) // only if the test is failing
	for {
		res, err := http.Get(public + "/v1/openapi.json")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("%s exited: %v\n%s", name, err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer:\n%s", name, out.String())
		}
	}
	// The health paths stay off the public address, and the proxy
	// answers them, and any other path outside the API, 404: a probe
	// aimed at the public name must never see a healthy 200.
	host := strings.TrimSuffix(public, "/api")
	for _, p := range []string{"/healthz", "/readyz", "/api/healthz", "/elsewhere"} {
		res, err := http.Get(host + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if strings.Contains(string(body), "status") || res.StatusCode != http.StatusNotFound {
			t.Errorf("%s answers %s with %d %q, want 404", name, p, res.StatusCode, body)
		}
	}
}

// TestBehindNginx runs nginx with the location block of
// docs/operations.md in front of the server.
func TestBehindNginx(t *testing.T) {
	nginx := needProgram(t, "nginx")
	port := freePort(t)
	public := "http://" + port + "/api"
	s := start(t, filepath.Join(t.TempDir(), "forms.db"), "-base-url", public)
	defer s.stop()
	backend := strings.TrimPrefix(s.base, "http://")

	dir := t.TempDir()
	location := strings.ReplaceAll(docBlock(t, "location /api/v1/ {"), "127.0.0.1:8080", backend)
	conf := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events {}
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	server {
		listen %[2]s;
		%[3]s
	}
}
`, dir, port, location)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	runProxy(t, public, nginx, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
	checkBehind(t, http.DefaultClient, s, public)
}

// TestBehindCaddy runs Caddy with the site block of docs/operations.md
// in front of the server, its address replaced by the test's.
func TestBehindCaddy(t *testing.T) {
	caddy := needProgram(t, "caddy")
	port := freePort(t)
	public := "http://" + port + "/api"
	s := start(t, filepath.Join(t.TempDir(), "forms.db"), "-base-url", public)
	defer s.stop()
	backend := strings.TrimPrefix(s.base, "http://")

	dir := t.TempDir()
	site := strings.ReplaceAll(docBlock(t, "forms.example.com {"), "127.0.0.1:8080", backend)
	site = strings.Replace(site, "forms.example.com {", "http://"+port+" {", 1)
	conf := fmt.Sprintf(`{
	admin off
	auto_https off
	storage file_system %[1]s
}
%[2]s
`, dir, site)
	confPath := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	runProxy(t, public, caddy, "run", "--config", confPath, "--adapter", "caddyfile")
	checkBehind(t, http.DefaultClient, s, public)
}
