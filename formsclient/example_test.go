package formsclient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/memstore"
)

// exampleServer serves the API under /api over a store with one form and
// three submissions, the way a host mounts it, and returns its base URL.
func exampleServer() (baseURL string, close func()) {
	ctx := context.Background()
	s := memstore.New()
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	must(s.AddForm(ctx, "acct-1", formsapi.Form{ID: "contact", Title: "Contact", CreatedAt: at}))
	for i, name := range []string{"Ada", "Grace", "Edsger"} {
		data := fmt.Sprintf(`{"name":%q}`, name)
		must(s.AddSubmission(ctx, formsapi.Submission{FormID: "contact", Data: []byte(data), CreatedAt: at.Add(time.Duration(i) * time.Hour)}, formsapi.Metadata{}))
	}
	must(s.AddKey(ctx, "demo-key", "acct-1"))
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", formsapi.NewHandler(s, s)))
	srv := httptest.NewServer(mux)
	return srv.URL + "/api", srv.Close
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func Example() {
	baseURL, close := exampleServer() // "https://forms.example.com/api" in real life
	defer close()
	ctx := context.Background()

	c, err := formsclient.New(baseURL, "demo-key")
	if err != nil {
		fmt.Println("error:", err) // a malformed base URL, key or option
		return
	}
	for f, err := range c.Forms(ctx) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println("form", f.ID, f.Title)
	}
	// Two submissions a request, oldest first: the loop never sees a cursor.
	for s, err := range c.Submissions(ctx, "contact", formsclient.Oldest(), formsclient.PageSize(2)) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println(s.CreatedAt.Format(time.RFC3339), string(s.Data))
	}
	// Output:
	// form contact Contact
	// 2024-05-01T12:00:00Z {"name":"Ada"}
	// 2024-05-01T13:00:00Z {"name":"Grace"}
	// 2024-05-01T14:00:00Z {"name":"Edsger"}
}

func ExampleClient_Submissions_since() {
	baseURL, close := exampleServer()
	defer close()

	c, err := formsclient.New(baseURL, "demo-key")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	since := time.Date(2024, 5, 1, 13, 0, 0, 0, time.UTC)
	for s, err := range c.Submissions(context.Background(), "contact", formsclient.Since(since)) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println(string(s.Data)) // newest first
	}
	// Output:
	// {"name":"Edsger"}
	// {"name":"Grace"}
}

func ExampleError() {
	baseURL, close := exampleServer()
	defer close()

	c, err := formsclient.New(baseURL, "demo-key")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	for _, err := range c.Submissions(context.Background(), "no-such-form") {
		var e *formsclient.Error
		switch {
		case errors.Is(err, formsapi.ErrFormNotFound):
			fmt.Println("no such form")
		case errors.Is(err, formsapi.ErrInvalidKey):
			fmt.Println("the key is unknown or revoked")
		case errors.As(err, &e):
			fmt.Println("the server answered", e.StatusCode, e.Message, "request", e.RequestID)
		case err != nil:
			fmt.Println("no answer:", err)
		}
	}
	// Output:
	// no such form
}

func ExampleNew() {
	_, err := formsclient.New("forms.example.com/api", "demo-key")
	fmt.Println(err)
	_, err = formsclient.New("https://forms.example.com/api", "demo-key", formsclient.WithRetries(0, time.Second, time.Minute))
	fmt.Println(err)
	// Output:
	// formsclient: base URL "forms.example.com/api": must start with https:// or http://
	// formsclient: WithRetries(0, 1s, 1m0s): maxTries must be at least 1 (1 turns retries off)
}

func ExampleClient_Sync() {
	baseURL, close := exampleServer()
	defer close()
	ctx := context.Background()

	c, err := formsclient.New(baseURL, "demo-key")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	token := formsclient.SyncStart // the first time; then the token stored last
	token, err = c.Sync(ctx, "contact", token, func(ch formsclient.Change) error {
		fmt.Println(string(ch.Submission.Data)) // in commit order
		return nil
	}, formsclient.PageSize(2))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	// Store token; the next Sync from it hands over only what was
	// committed since.
	n := 0
	_, err = c.Sync(ctx, "contact", token, func(formsclient.Change) error { n++; return nil })
	fmt.Println(n, "new,", err)

	// The feed cannot filter: Since is refused, not ignored.
	_, err = c.Sync(ctx, "contact", token, func(formsclient.Change) error { return nil }, formsclient.Since(time.Now()))
	fmt.Println(err)
	// Output:
	// {"name":"Ada"}
	// {"name":"Grace"}
	// {"name":"Edsger"}
	// 0 new, <nil>
	// formsclient: sync submissions of form "contact": Since cannot be used with Sync: the feed comes in commit order and cannot be filtered or reordered (of the list options only PageSize and Wait apply)
}
