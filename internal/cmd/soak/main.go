// Command soak drives a running example server for a fixed time with
// keep-alive clients sending a mix of valid, invalid and foreign requests,
// while it adds submissions to the same SQLite file from this second
// process. It counts transport errors and statuses that differ from the
// expected one for each kind of request, samples the server's memory, and
// ends with PRAGMA integrity_check. bench/soak.sh runs it.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/sqlitestore"
	_ "modernc.org/sqlite"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// kind is one sort of request and the status it must get.
type kind struct {
	name   string
	status int
	do     func(c *client) (int, error)
}

type client struct {
	http      *http.Client
	base, key string
	r         *rand.Rand
	cursor    string // of the walk in progress, if any
}

func (c *client) get(method, path, key string) (int, []byte, error) {
	req, err := http.NewRequest(method, c.base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

func status(c *client, method, path, key string) (int, error) {
	code, _, err := c.get(method, path, key)
	return code, err
}

func run(args []string) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:18093", "base URL of the running server")
	db := fs.String("db", "", "the server's database file, written to by this process")
	key := fs.String("key", benchdata.Key, "a key of account "+benchdata.Account)
	foreign := fs.String("foreign-form", "contact", "a form of another account")
	duration := fs.Duration("duration", 60*time.Second, "how long to run")
	clients := fs.Int("clients", 32, "concurrent keep-alive clients")
	pid := fs.Int("pid", 0, "the server's process ID, to sample its memory")
	writeEvery := fs.Duration("write-every", 5*time.Millisecond, "pause between submissions the writer adds")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sub := "/v1/forms/" + benchdata.FormID(0) + "/submissions"
	kinds := []kind{
		{"forms", 200, func(c *client) (int, error) { return status(c, "GET", "/v1/forms", c.key) }},
		{"page walk", 200, func(c *client) (int, error) {
			path := sub + "?limit=50"
			if c.cursor != "" {
				path += "&cursor=" + url.QueryEscape(c.cursor)
			}
			code, body, err := c.get("GET", path, c.key)
			var page struct{ NextCursor string }
			if err == nil && code == 200 {
				err = json.Unmarshal(body, &page)
			}
			c.cursor = page.NextCursor
			return code, err
		}},
		{"window asc", 200, func(c *client) (int, error) {
			return status(c, "GET", sub+"?order=asc&limit=100&since=2024-01-01T10:00:00Z&until=2024-01-01T11:00:00Z", c.key)
		}},
		{"head", 200, func(c *client) (int, error) { return status(c, "HEAD", "/v1/forms", c.key) }},
		{"foreign form", 404, func(c *client) (int, error) { return status(c, "GET", "/v1/forms/"+*foreign+"/submissions", c.key) }},
		{"unknown form", 404, func(c *client) (int, error) {
			return status(c, "GET", "/v1/forms/nope-"+fmt.Sprint(c.r.IntN(1000))+"/submissions", c.key)
		}},
		{"no key", 401, func(c *client) (int, error) { return status(c, "GET", sub, "") }},
		{"wrong key", 401, func(c *client) (int, error) { return status(c, "GET", sub, "fapi_wrong"+fmt.Sprint(c.r.IntN(1000))) }},
		{"bad limit", 400, func(c *client) (int, error) { return status(c, "GET", sub+"?limit=0", c.key) }},
		{"forged cursor", 400, func(c *client) (int, error) {
			return status(c, "GET", sub+"?cursor=AAAA"+fmt.Sprint(c.r.IntN(1000)), c.key)
		}},
		{"unknown path", 404, func(c *client) (int, error) { return status(c, "GET", "/v1/nope", c.key) }},
		{"post", 405, func(c *client) (int, error) { return status(c, "POST", "/v1/forms", c.key) }},
	}
	var (
		total      atomic.Int64
		transport  atomic.Int64
		unexpected atomic.Int64
		byKind     = make([]atomic.Int64, len(kinds))
		firstBad   sync.Once
	)
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()

	// The writer: a second process adding submissions to the same file.
	var written atomic.Int64
	writerErr := make(chan error, 1)
	go func() {
		if *db == "" {
			writerErr <- nil
			return
		}
		store, err := sqlitestore.Open(*db)
		if err != nil {
			writerErr <- err
			return
		}
		defer store.Close()
		for i := 1_000_000; ctx.Err() == nil; i++ {
			s, m := benchdata.Submission(benchdata.FormID(0), i)
			s.CreatedAt = time.Time{} // now: the newest end of the list
			if err := store.AddSubmission(context.Background(), s, m); err != nil {
				writerErr <- err
				return
			}
			written.Add(1)
			time.Sleep(*writeEvery)
		}
		writerErr <- nil
	}()

	// Memory samples of the server.
	var rss []string
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if *pid != 0 {
					rss = append(rss, readRSS(*pid))
				}
			}
		}
	}()

	var wg sync.WaitGroup
	for i := 0; i < *clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := &client{http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 10 * time.Second},
				base: *base, key: *key, r: rand.New(rand.NewPCG(uint64(i), 1))}
			for ctx.Err() == nil {
				k := c.r.IntN(len(kinds))
				code, err := kinds[k].do(c)
				total.Add(1)
				byKind[k].Add(1)
				switch {
				case err != nil && ctx.Err() == nil:
					transport.Add(1)
					firstBad.Do(func() { fmt.Fprintf(os.Stderr, "first transport error (%s): %v\n", kinds[k].name, err) })
				case err == nil && code != kinds[k].status:
					unexpected.Add(1)
					firstBad.Do(func() { fmt.Fprintf(os.Stderr, "first unexpected status (%s): %d\n", kinds[k].name, code) })
				}
			}
		}(i)
	}
	wg.Wait()
	<-sampled
	if err := <-writerErr; err != nil {
		return fmt.Errorf("writer: %w", err)
	}

	fmt.Printf("soak: %s, %d clients: %d requests (%.0f/s), %d transport errors, %d unexpected statuses; writer added %d submissions\n",
		*duration, *clients, total.Load(), float64(total.Load())/duration.Seconds(), transport.Load(), unexpected.Load(), written.Load())
	for i, k := range kinds {
		fmt.Printf("  %-14s want %d: %d requests\n", k.name, k.status, byKind[i].Load())
	}
	if len(rss) > 0 {
		fmt.Printf("server RSS every 5 s (KiB): %s\n", strings.Join(rss, " "))
	}
	if *db != "" {
		check, err := integrity(*db)
		if err != nil {
			return err
		}
		fmt.Printf("PRAGMA integrity_check: %s\n", check)
		if check != "ok" {
			return fmt.Errorf("integrity check failed")
		}
	}
	if transport.Load() > 0 || unexpected.Load() > 0 {
		return fmt.Errorf("%d transport errors, %d unexpected statuses", transport.Load(), unexpected.Load())
	}
	return nil
}

func readRSS(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			return strings.Fields(line)[1]
		}
	}
	return "?"
}

func integrity(path string) (string, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return "", err
	}
	defer db.Close()
	var res string
	err = db.QueryRow("PRAGMA integrity_check").Scan(&res)
	return res, err
}
