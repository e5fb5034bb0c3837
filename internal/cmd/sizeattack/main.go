// Command sizeattack re-runs the size attack of issue 12 against a running
// server and reports the server's peak memory. It has two steps:
//
//	go run ./internal/cmd/sizeattack -seed 200 -db forms.db            # 200 submissions of 1 MiB into form "big" of account demo
//	go run ./internal/cmd/sizeattack -url http://127.0.0.1:8080 -key "$(cat forms.db.demo-key)" -pid $PID -c 32 -walks 2
//
// The second step has -c clients each walk every page of the form -walks
// times with limit=1000, reading each body whole, and then prints the
// server's VmHWM (peak resident memory) and VmRSS from /proc/PID/status.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/sqlitestore"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sizeattack:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("sizeattack", flag.ContinueOnError)
	seed := fs.Int("seed", 0, "add this many submissions of the largest data the default limits accept to form big, then exit")
	db := fs.String("db", "forms.db", "database file to seed")
	base := fs.String("url", "http://127.0.0.1:8080", "server to attack")
	key := fs.String("key", "", "API key of account demo")
	pid := fs.Int("pid", 0, "server process whose peak memory to report")
	clients := fs.Int("c", 4, "concurrent clients")
	walks := fs.Int("walks", 1, "walks of the whole form per client")
	limit := fs.Int("limit", 1000, "limit parameter of each request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *seed > 0 {
		return seedBig(*db, *seed)
	}
	if *key == "" {
		return fmt.Errorf("-key is required")
	}
	var pages, bytes, largest atomic.Int64
	var failed atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range *walks {
				if err := walk(*base, *key, *limit, &pages, &bytes, &largest); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return err
	}
	elapsed := time.Since(start)
	fmt.Printf("clients %d, walks %d, limit %d: %d pages, %.1f MiB in %.1f s, largest page %.2f MiB\n",
		*clients, *walks, *limit, pages.Load(), float64(bytes.Load())/(1<<20), elapsed.Seconds(), float64(largest.Load())/(1<<20))
	if *pid > 0 {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", *pid))
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "VmHWM") || strings.HasPrefix(line, "VmRSS") {
				fmt.Println(strings.Join(strings.Fields(line), " "))
			}
		}
	}
	return nil
}

// walk reads every page of form big.
func walk(base, key string, limit int, pages, bytes, largest *atomic.Int64) error {
	cursor := ""
	for {
		u := fmt.Sprintf("%s/v1/forms/big/submissions?limit=%d", base, limit)
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			return err
		}
		if res.StatusCode != 200 {
			return fmt.Errorf("status %d: %.200s", res.StatusCode, body)
		}
		pages.Add(1)
		bytes.Add(int64(len(body)))
		for {
			old := largest.Load()
			if int64(len(body)) <= old || largest.CompareAndSwap(old, int64(len(body))) {
				break
			}
		}
		var page struct{ NextCursor string }
		if err := json.Unmarshal(body, &page); err != nil {
			return err
		}
		if cursor = page.NextCursor; cursor == "" {
			return nil
		}
	}
}

// seedBig adds n submissions whose data is as large as
// formsapi.DefaultLimits allows to form big of account demo.
func seedBig(db string, n int) error {
	ctx := context.Background()
	s, err := sqlitestore.Open(db)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.AddForm(ctx, "demo", formsapi.Form{ID: "big", Title: "Big submissions"}); err != nil && !errors.Is(err, formsapi.ErrFormExists) {
		return err
	}
	pad := strings.Repeat("x", formsapi.DefaultLimits.MaxDataBytes-len(`{"i":"000000","pad":""}`))
	// 16 a batch: each is about 1 MiB.
	return benchdata.AddAll(ctx, s, n, 16, func(i int) (formsapi.Submission, formsapi.Metadata) {
		return formsapi.Submission{FormID: "big", Data: []byte(fmt.Sprintf(`{"i":"%06d","pad":"%s"}`, i, pad))}, formsapi.Metadata{}
	}, nil)
}
