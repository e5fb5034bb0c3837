package formsclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
)

// cutting breaks the response of every export request but the last
// ones after a number of bytes, as a dropped connection would.
type cutting struct {
	http.ResponseWriter
	left   int
	broken *atomic.Int64
}

func (c *cutting) Write(p []byte) (int, error) {
	if len(p) > c.left {
		c.ResponseWriter.Write(p[:c.left])
		c.ResponseWriter.(http.Flusher).Flush()
		c.broken.Add(1)
		panic(http.ErrAbortHandler)
	}
	c.left -= len(p)
	return c.ResponseWriter.Write(p)
}

func (c *cutting) Flush() { c.ResponseWriter.(http.Flusher).Flush() }

// TestExportResumes: an export whose connection drops again and again
// (after 1,000 to 10,000 bytes of its gzip coding, mid-line) resumes by itself, and the file
// written is byte for byte the uninterrupted export, in both formats.
func TestExportResumes(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	ctx := context.Background()
	if err := storetest.Load(ctx, s, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		data := fmt.Sprintf(`{"i":%d,"t":"%s","f":"=%d"}`, i, strings.Repeat(`a,\"\n`, i%13), i)
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: json.RawMessage(data)}, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	h := formsapi.NewHandler(s, s)
	var cuts, requests, broken atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if n := cuts.Add(-1); n >= 0 {
			w = &cutting{ResponseWriter: w, left: 1000 + int(n)*1000, broken: &broken}
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c, err := formsclient.New(srv.URL, storetest.KeyA, formsclient.WithRetries(3, time.Millisecond, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	formsclient.SetSleep(c, func(context.Context, time.Duration) error { return nil })
	for _, opts := range []formsclient.ExportOptions{{}, {CSV: true, BOM: true}} {
		var whole bytes.Buffer
		cuts.Store(0)
		token, err := c.Export(ctx, storetest.FormBusy, &whole, opts)
		if err != nil || token == "" {
			t.Fatalf("%+v uninterrupted: %v, token %q", opts, err, token)
		}
		cuts.Store(10)
		requests.Store(0)
		broken.Store(0)
		var resumed bytes.Buffer
		if _, err := c.Export(ctx, storetest.FormBusy, &resumed, opts); err != nil {
			t.Fatalf("%+v with cuts: %v", opts, err)
		}
		if requests.Load() != broken.Load()+1 || broken.Load() < 5 {
			t.Errorf("%+v: %d requests, %d of them broken; want at least 5 broken, and one more request", opts, requests.Load(), broken.Load())
		}
		if !bytes.Equal(resumed.Bytes(), whole.Bytes()) {
			t.Errorf("%+v: the resumed file (%d bytes) is not the uninterrupted one (%d)", opts, resumed.Len(), whole.Len())
		}
	}
	// Filtered: the uninterrupted file's lines that the filter keeps,
	// through the same cuts.
	var all, some bytes.Buffer
	cuts.Store(0)
	if _, err := c.Export(ctx, storetest.FormBusy, &all, formsclient.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	cuts.Store(10)
	broken.Store(0)
	filters := []formsclient.ListOption{formsclient.Where("i", formsclient.Gte, 1500), formsclient.WhereExists("f", true)}
	if _, err := c.Export(ctx, storetest.FormBusy, &some, formsclient.ExportOptions{Filters: filters}); err != nil {
		t.Fatalf("filtered, with cuts: %v", err)
	}
	var want bytes.Buffer
	for _, line := range bytes.SplitAfter(all.Bytes(), []byte("\n")) {
		var l struct{ Data struct{ I *int } }
		if json.Unmarshal(line, &l) == nil && l.Data.I != nil && *l.Data.I >= 1500 {
			want.Write(line)
		}
	}
	if broken.Load() < 2 || want.Len() == 0 || !bytes.Equal(some.Bytes(), want.Bytes()) {
		t.Errorf("filtered: %d bytes through %d cuts, want the %d bytes of the whole file's lines it keeps", some.Len(), broken.Load(), want.Len())
	}
	// A list option that selects no submissions is refused before any
	// request.
	requests.Store(0)
	if _, err := c.Export(ctx, storetest.FormBusy, io.Discard, formsclient.ExportOptions{Filters: []formsclient.ListOption{formsclient.PageSize(2)}}); err == nil || requests.Load() != 0 {
		t.Errorf("PageSize as an export's filter: %v after %d requests, want an error before any", err, requests.Load())
	}
	// A missing form is the API's 404, not retried.
	if _, err := c.Export(ctx, storetest.FormNone, io.Discard, formsclient.ExportOptions{}); !isNotFound(err) {
		t.Errorf("a missing form: %v", err)
	}
}

func isNotFound(err error) bool {
	var e *formsclient.Error
	return errors.As(err, &e) && e.StatusCode == http.StatusNotFound
}
