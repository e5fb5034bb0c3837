package formsclient_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/memstore"
)

// BenchmarkWalk walks a 2,000-submission form in 100-item pages over
// loopback, with formsclient and with the shortest hand-written loop
// (http.Get, json.Decoder, follow nextCursor): the baseline. The server
// and the network are the same in both, so the ratio is the client's own
// cost.
func BenchmarkWalk(b *testing.B) {
	const n = 2000
	s := memstore.New()
	if err := benchdata.Load(context.Background(), s, []int{n}, "bench-key", nil); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(formsapi.NewHandler(s, s))
	defer srv.Close()
	form := benchdata.FormID(0)
	ctx := context.Background()

	b.Run("baseline", func(b *testing.B) {
		for b.Loop() {
			got, cursor := 0, ""
			for {
				u := srv.URL + "/v1/forms/" + form + "/submissions?limit=100"
				if cursor != "" {
					u += "&cursor=" + url.QueryEscape(cursor)
				}
				req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
				req.Header.Set("Authorization", "Bearer bench-key")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				var page struct {
					Submissions []formsapi.Submission `json:"submissions"`
					NextCursor  string                `json:"nextCursor"`
				}
				err = json.NewDecoder(res.Body).Decode(&page)
				res.Body.Close()
				if err != nil || res.StatusCode != 200 {
					b.Fatal(res.Status, err)
				}
				got += len(page.Submissions)
				if cursor = page.NextCursor; cursor == "" {
					break
				}
			}
			if got != n {
				b.Fatal(got)
			}
		}
	})
	b.Run("formsclient", func(b *testing.B) {
		c := newClient(b, srv.URL, "bench-key")
		for b.Loop() {
			got := 0
			for _, err := range c.Submissions(ctx, form, formsclient.PageSize(100)) {
				if err != nil {
					b.Fatal(err)
				}
				got++
			}
			if got != n {
				b.Fatal(got)
			}
		}
	})
}
