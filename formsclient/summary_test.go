package formsclient_test

import (
	"context"
	"errors"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/storetest"
)

// TestSummary: Summary against the real handler over every backend: the
// count is the list's, the filter narrows it, the buckets count it all,
// a page option is refused before any request, and another account's
// form is not found.
func TestSummary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			store, keys := b.open(t)
			srv := serve(t, formsapi.NewHandler(store, keys), "")
			c := newClient(t, srv.base, storetest.KeyA)
			all := mustCollect(t, c.Submissions(ctx, storetest.FormBusy, formsclient.PageSize(1000)))
			s, err := c.Summary(ctx, storetest.FormBusy, "hour", 3)
			if err != nil {
				t.Fatal(err)
			}
			if s.FormID != storetest.FormBusy || s.Count != (formsapi.Total{Value: int64(len(all)), Kind: formsapi.TotalExact}) || !s.Read.Complete || s.Interval != "hour" {
				t.Errorf("summary %+v %+v %+v %q, want %d submissions, exact", s.FormID, s.Count, s.Read, s.Interval, len(all))
			}
			var n int64
			for _, bk := range s.Buckets {
				n += bk.Count.Value
			}
			if n != int64(len(all)) || len(s.Fields) == 0 || len(s.Fields[0].Top) > 3 {
				t.Errorf("buckets count %d of %d; %d fields", n, len(all), len(s.Fields))
			}
			one, err := c.Summary(ctx, storetest.FormBusy, "", 5, formsclient.Filter("email", "p7@example.com"))
			if err != nil || one.Count.Value != 1 || one.Interval != "day" {
				t.Errorf("filtered: %+v, %v; want a count of 1", one.Count, err)
			}
			if _, err := c.Summary(ctx, storetest.FormBusy, "", 5, formsclient.PageSize(2)); err == nil {
				t.Error("PageSize: no error")
			}
			if _, err := c.Summary(ctx, storetest.FormB, "", 5); !errors.Is(err, formsapi.ErrFormNotFound) {
				t.Errorf("another account's form: %v, want ErrFormNotFound", err)
			}
			var e *formsclient.Error
			if _, err := c.Summary(ctx, storetest.FormBusy, "month", 5); !errors.As(err, &e) || e.StatusCode != 400 {
				t.Errorf("interval month: %v, want a 400", err)
			}
		})
	}
}
