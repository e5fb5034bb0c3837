package formsapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
)

// exampleStore is a store with one account, one form and one submission.
func exampleStore() *memstore.Store {
	ctx := context.Background()
	s := memstore.New()
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	must(s.AddForm(ctx, "acct-1", formsapi.Form{ID: "contact", Title: "Contact", Icon: "mail", NotificationEmail: "me@example.com", CreatedAt: at}))
	must(s.AddSubmission(ctx, formsapi.Submission{FormID: "contact", Data: []byte(`{"name":"Ada","message":"Hi"}`), CreatedAt: at.Add(time.Hour)},
		formsapi.Metadata{ClientIP: "198.51.100.7", UserAgent: "curl/8"}))
	must(s.AddKey(ctx, "demo-key", "acct-1"))
	return s
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func ExampleNewHandler() {
	store := exampleStore()
	h := formsapi.NewHandler(store, store) // memstore is also a KeyResolver

	for _, path := range []string{"/v1/forms", "/v1/forms/contact/submissions", "/v1/forms/other/submissions"} {
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("Authorization", "Bearer demo-key")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Body.String())
	}
	// Output:
	// 200 {"success":true,"message":"forms retrieved","forms":[{"formId":"contact","title":"Contact","icon":"mail","notificationEmail":"me@example.com","createdAt":"2024-05-01T12:00:00Z"}]}
	// 200 {"success":true,"message":"submissions retrieved","submissions":[{"formId":"contact","data":{"name":"Ada","message":"Hi"},"attachments":[],"createdAt":"2024-05-01T13:00:00Z"}]}
	// 404 {"success":false,"message":"form not found"}
}

// Mount the API under /api/ in a host's own mux: strip the prefix so the
// handler sees /v1/....
func ExampleNewHandler_stripPrefix() {
	store := exampleStore()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.Handle("/api/", http.StripPrefix("/api", formsapi.NewHandler(store, store)))

	srv := httptest.NewServer(mux)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/forms", nil)
	req.Header.Set("Authorization", "Bearer demo-key")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	fmt.Println(res.StatusCode, res.Header.Get("Content-Type"))
	fmt.Println(string(body))
	// Output:
	// 200 application/json; charset=utf-8
	// {"success":true,"message":"forms retrieved","forms":[{"formId":"contact","title":"Contact","icon":"mail","notificationEmail":"me@example.com","createdAt":"2024-05-01T12:00:00Z"}]}
}
