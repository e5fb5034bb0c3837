// Command embedded shows a host application that mounts the forms API
// under /api/ in its own ServeMux, next to routes of its own, over the
// in-memory store. It seeds a demo account and prints a key and curl lines
// to the terminal (stderr): stdout carries only the log, which log
// collectors keep, and a key has no place there.
//
//	go run ./examples/embedded
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "embedded:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, logging to stdout; the banner with the demo
// key goes to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("embedded", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8081", "address to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}

	store := memstore.New()
	key, err := seed(ctx, store)
	if err != nil {
		return err
	}

	logger := slog.New(slog.NewTextHandler(stdout, nil))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "the host's own home page\n")
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.Handle("/api/", http.StripPrefix("/api", formsapi.NewHandler(store, store,
		formsapi.WithLogger(logger), formsapi.WithStoreTimeout(5*time.Second))))

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *addr, err)
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    128 << 10, // the longest nextCursor the API hands out is about 92 KB (docs/api.md, Limits)
	}
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(stderr, "forms API mounted at %s/api/v1/\ndemo API key: %s\n\n", base, key)
	fmt.Fprintf(stderr, "curl -H 'Authorization: Bearer %s' %s/api/v1/forms\n", key, base)
	fmt.Fprintf(stderr, "curl -H 'Authorization: Bearer %s' '%s/api/v1/forms/newsletter/submissions?limit=2'\n\n", key, base)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// seed adds a demo account with one form and three submissions and returns
// a fresh key for it.
func seed(ctx context.Context, s *memstore.Store) (string, error) {
	now := time.Now().UTC().Truncate(time.Second)
	if err := s.AddForm(ctx, "demo", formsapi.Form{ID: "newsletter", Title: "Newsletter sign-up", Icon: "mail",
		NotificationEmail: "team@example.com", CreatedAt: now.Add(-72 * time.Hour)}); err != nil {
		return "", err
	}
	for i, name := range []string{"Ada", "Grace", "Linus"} {
		sub := formsapi.Submission{FormID: "newsletter", CreatedAt: now.Add(time.Duration(i-3) * time.Hour),
			Data: []byte(fmt.Sprintf(`{"name":%q,"email":"%s@example.com"}`, name, name))}
		if err := s.AddSubmission(ctx, sub, formsapi.Metadata{ClientIP: "192.0.2.1", UserAgent: "demo"}); err != nil {
			return "", err
		}
	}
	key, err := formsapi.NewKey()
	if err != nil {
		return "", err
	}
	return key, s.AddKey(ctx, key, "demo")
}
