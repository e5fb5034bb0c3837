package formsclient_test

// Tests of WithMaxResponseSize against bodies as sent and as decoded.

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/formsapi/formsapi/formsclient"
)

// gz is s gzip-coded at level.
func gz(t *testing.T, s string, level int) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, level)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, s); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// bomb is a gzip body of about 256 KiB that inflates to 256 MiB of
// spaces: 256 gzip members of 1 MiB each, one after the other, which a
// gzip reader decodes as one stream.
func bomb(t *testing.T) []byte {
	member := gz(t, strings.Repeat(" ", 1<<20), gzip.BestCompression)
	return bytes.Repeat(member, 256)
}

func writeGzip(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Encoding", "gzip")
	w.WriteHeader(status)
	w.Write(body)
}

// A hostile server's gzip bomb is refused having allocated about the
// limit, not what it inflates to: the client reads the decoded stream
// through the limit, and the smaller requests that follow the oversized
// page (the default 100 items, then 50, 25, 12, 6, 3, 1) read into the
// same memory. It holds through the client's own gzip decoding and
// through a transport that decodes gzip itself.
//
// Not parallel: it measures the process's allocations, which parallel
// tests would add to (they run after this one).
func TestGzipBombAllocatesAboutTheLimit(t *testing.T) {
	body := bomb(t)
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) { writeGzip(w, 200, body) })
	const limit = 8 << 20
	// A transport that decodes gzip transparently: the one the client
	// gets when its Accept-Encoding is taken off the request.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	decoding := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Del("Accept-Encoding")
		res, err := tr.RoundTrip(r)
		if err == nil && !res.Uncompressed {
			t.Errorf("the transport did not decode the body")
		}
		return res, err
	})}
	for _, tc := range []struct {
		name string
		opts []formsclient.Option
		msg  string
	}{
		{"the client decodes", nil, fmt.Sprintf("the gzip-coded response is larger than %d bytes once decompressed (see WithMaxResponseSize)", limit)},
		{"the transport decodes", []formsclient.Option{formsclient.WithHTTPClient(decoding)}, fmt.Sprintf("the response is larger than %d bytes (see WithMaxResponseSize)", limit)},
	} {
		c := newClient(t, f.URL, key, append(tc.opts, formsclient.WithMaxResponseSize(limit))...)
		before := f.requests.Load()
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		items, err := collect(t, c.Submissions(context.Background(), "contact"))
		runtime.ReadMemStats(&m1)
		alloc := m1.TotalAlloc - m0.TotalAlloc
		var e *formsclient.Error
		if !errors.As(err, &e) || e.StatusCode != 200 || e.Message != tc.msg || len(items) != 0 {
			t.Errorf("%s: %d items, %v; want an *Error saying %q", tc.name, len(items), err, tc.msg)
		}
		if n := f.requests.Load() - before; n != 7 {
			t.Errorf("%s: %d requests, want 7 (100 items, then 50, 25, 12, 6, 3, 1)", tc.name, n)
		}
		t.Logf("%s: %.1f MiB allocated reading a 256 MiB bomb within %d MiB", tc.name, float64(alloc)/(1<<20), limit>>20)
		if alloc > 2*limit {
			t.Errorf("%s: %.1f MiB allocated, want about the limit of %d MiB (at most twice it)", tc.name, float64(alloc)/(1<<20), limit>>20)
		}
	}
}

// The limit holds for the bytes as sent too: a gzip body whose decoded
// bytes fit but whose coded ones do not (stored, uncompressed blocks add
// a few bytes) is refused, and so is one whose Content-Length is over.
func TestGzipBodiesWithinAndOverTheLimit(t *testing.T) {
	t.Parallel()
	plain := page("", 3, 2, 1)
	plain += strings.Repeat(" ", 1000-len(plain)) // exactly the limit
	stored := gz(t, plain, gzip.NoCompression)    // more than the limit
	small := gz(t, plain, gzip.BestCompression)
	if len(stored) <= 1000 || len(small) >= 1000 {
		t.Fatalf("coded sizes %d and %d", len(stored), len(small))
	}
	for _, tc := range []struct {
		name  string
		serve func(w http.ResponseWriter)
		items int
		msg   string
	}{
		{"decoded and sent within", func(w http.ResponseWriter) { writeGzip(w, 200, small) }, 3, ""},
		{"x-gzip", func(w http.ResponseWriter) {
			w.Header().Set("Content-Encoding", "x-gzip")
			writeJSON(w, 200, string(small))
		}, 3, ""},
		{"sent over", func(w http.ResponseWriter) { writeGzip(w, 200, stored) }, 0,
			"the gzip-coded response is larger than 1000 bytes as sent (see WithMaxResponseSize)"},
		{"Content-Length over", func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", "1001")
			writeGzip(w, 200, append(small, make([]byte, 1001-len(small))...))
		}, 0, "the gzip-coded response is larger than 1000 bytes as sent"},
		{"plain, one byte over", func(w http.ResponseWriter) { writeJSON(w, 200, plain+" ") }, 0,
			"the response is larger than 1000 bytes (see WithMaxResponseSize)"},
		{"plain, exactly the limit", func(w http.ResponseWriter) { writeJSON(w, 200, plain) }, 3, ""},
		{"a coding not asked for", func(w http.ResponseWriter) {
			w.Header().Set("Content-Encoding", "br")
			writeJSON(w, 200, "xx")
		}, 0, `the answer has Content-Encoding "br", which the client did not ask for and cannot decode`},
		{"not gzip", func(w http.ResponseWriter) { writeGzip(w, 200, []byte(plain)) }, 0, "decoding its gzip: gzip: invalid header"},
		{"gzip cut short", func(w http.ResponseWriter) { writeGzip(w, 200, small[:len(small)-10]) }, 0, "decoding its gzip: unexpected EOF"},
		{"gzip with a bad checksum", func(w http.ResponseWriter) {
			bad := bytes.Clone(small)
			bad[len(bad)-5] ^= 1
			writeGzip(w, 200, bad)
		}, 0, "decoding its gzip: gzip: invalid checksum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var accept string
			f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				accept = r.Header.Get("Accept-Encoding")
				mu.Unlock()
				tc.serve(w)
			})
			c := newClient(t, f.URL, key, formsclient.WithMaxResponseSize(1000), formsclient.WithRetries(1, 0, 0))
			items, err := collect(t, c.Submissions(context.Background(), "contact", formsclient.PageSize(1)))
			if tc.msg == "" && (err != nil || len(items) != tc.items) {
				t.Errorf("%d items, %v; want %d", len(items), err, tc.items)
			}
			if tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg) || len(items) != 0) {
				t.Errorf("%d items, %v; want an error with %q", len(items), err, tc.msg)
			}
			mu.Lock()
			defer mu.Unlock()
			if accept != "gzip" {
				t.Errorf("Accept-Encoding %q, want gzip", accept)
			}
		})
	}
}

// Error answers are read within their own small bound, gzip-coded or not,
// and their message and Retry-After still come through.
func TestGzipErrorAnswers(t *testing.T) {
	t.Parallel()
	msg := `{"success":false,"message":"down for maintenance` + strings.Repeat(" ", 2000) + `"}`
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		switch n {
		case 1:
			writeGzip(w, 503, gz(t, msg, gzip.BestSpeed))
		default:
			writeGzip(w, 503, bomb(t)[:64<<10])
		}
	})
	c := newClient(t, f.URL, key, formsclient.WithRetries(1, 0, 0))
	var e *formsclient.Error
	_, err := collect(t, c.Forms(context.Background()))
	if !errors.As(err, &e) || !strings.HasPrefix(e.Message, "down for maintenance") || e.RetryAfter.Seconds() != 7 {
		t.Errorf("a gzip-coded 503: %v", err)
	}
	_, err = collect(t, c.Forms(context.Background()))
	if !errors.As(err, &e) || e.StatusCode != 503 || !strings.Contains(e.Message, "not the API's JSON") || e.RetryAfter.Seconds() != 7 {
		t.Errorf("a 503 that inflates past the error bound: %v", err)
	}
}
