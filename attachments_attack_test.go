package formsapi_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
)

// TestSignerErrorsAreInternal: whatever error a signer returns, the
// answer is the 500 docs/api.md promises (503 for one that timed out),
// never another status its error happens to wrap (a signer that reports formsapi.ErrInvalidKey
// must not tell the client its key is invalid, nor ErrFormNotFound that
// the form is gone), and the error is not shown.
func TestSignerErrorsAreInternal(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	if err := storetest.Load(context.Background(), st, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	addSignedForm(t, st)
	quiet := formsapi.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, cause := range []error{formsapi.ErrInvalidKey, formsapi.ErrFormNotFound, formsapi.ErrInvalidCursor, formsapi.ErrInvalidInput, context.DeadlineExceeded, errors.New("bucket secret-bucket-name unreachable")} {
		sign := func(context.Context, string, string, formsapi.Attachment, time.Time) (string, error) {
			return "", fmt.Errorf("presign: %w", cause)
		}
		h := formsapi.NewHandler(st, st, formsapi.WithAttachmentURLs(sign, time.Minute), quiet)
		for _, target := range []string{"/v1/forms/" + signedForm + "/submissions", "/v1/forms/" + signedForm + "/submissions?sync=start"} {
			w := getSigned(t, h, target)
			want := http.StatusInternalServerError
			if errors.Is(cause, context.DeadlineExceeded) {
				want = http.StatusServiceUnavailable // a signer that timed out, as a store that did
			}
			if w.Code != want || w.Header().Get("WWW-Authenticate") != "" || strings.Contains(w.Body.String(), "presign") || strings.Contains(w.Body.String(), "bucket") {
				t.Errorf("a signer failing with %v: %s answered %d %s %s", cause, target, w.Code, w.Header(), w.Body)
			}
		}
	}
}

// TestSignerPanicBreaksTheExport: a signer that panics in the middle of
// an export breaks the response, as any failure past the status line
// does, so that a client knows the file is incomplete and resumes; the
// export must not end as if complete with an error message in its last
// line.
func TestSignerPanicBreaksTheExport(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	if err := storetest.Load(context.Background(), st, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	addSignedForm(t, st)
	var calls atomic.Int64
	sign := func(_ context.Context, _, _ string, a formsapi.Attachment, _ time.Time) (string, error) {
		if calls.Add(1) == 3 {
			panic("the presigner's library panicked")
		}
		return a.FileURL, nil
	}
	quiet := formsapi.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(formsapi.NewHandler(st, st, formsapi.WithAttachmentURLs(sign, time.Minute), quiet))
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest("GET", srv.URL+"/v1/forms/"+signedForm+"/export", nil)
	req.Header.Set("Authorization", "Bearer "+storetest.KeyA)
	req.Header.Set("Accept-Encoding", "identity")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err == nil {
		t.Errorf("the export ended cleanly after the signer panicked; its body:\n%s", body)
	}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"success":false`) {
			t.Errorf("an error envelope inside the export: %s", sc.Text())
		}
	}
}
