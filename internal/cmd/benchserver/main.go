// Command benchserver serves load-run targets beside the example server:
//
//	-mode static   the baseline: plain net/http writing a precomputed page,
//	               the same bytes and headers as a real 100-item page
//	-mode mem      the real handler over memstore with benchdata's data
//
// Both answer GET /v1/forms/{formId}/submissions like the API does, with
// the same server settings as examples/server.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/memstore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchserver:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("benchserver", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8090", "address to listen on")
	mode := fs.String("mode", "static", "static (precomputed bytes) or mem (handler over memstore)")
	big := fs.Int("big", 100_000, "submissions of the big form (mem mode)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var h http.Handler
	switch *mode {
	case "static":
		page, err := firstPage()
		if err != nil {
			return err
		}
		h = static(page)
	case "mem":
		s := memstore.New()
		if err := benchdata.Load(ctx, s, []int{*big}, benchdata.Key, nil); err != nil {
			return err
		}
		h = formsapi.NewHandler(s, s, formsapi.WithLogger(slog.New(slog.DiscardHandler)))
	default:
		return fmt.Errorf("unknown mode %q", *mode)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10}
	fmt.Printf("benchserver -mode %s on http://%s\n", *mode, ln.Addr())
	go func() {
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// firstPage renders a real first page of 100 submissions through the
// handler, so the baseline sends exactly as many bytes.
func firstPage() ([]byte, error) {
	s := memstore.New()
	if err := benchdata.Load(context.Background(), s, []int{1000}, benchdata.Key, nil); err != nil {
		return nil, err
	}
	r := httptest.NewRequest("GET", "/v1/forms/"+benchdata.FormID(0)+"/submissions?limit=100", nil)
	r.Header.Set("Authorization", "Bearer "+benchdata.Key)
	w := httptest.NewRecorder()
	formsapi.NewHandler(s, s).ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		return nil, fmt.Errorf("first page: status %d", w.Code)
	}
	return w.Body.Bytes(), nil
}

func static(page []byte) http.Handler {
	mux := http.NewServeMux()
	length := strconv.Itoa(len(page))
	mux.HandleFunc("GET /v1/forms/{formId}/submissions", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Length", length)
		w.Write(page)
	})
	return mux
}
