// Command slowreaders is the slow-reader attack of issue 24, in three
// steps that bench/slowreaders.sh runs against the example server:
//
//	slowreaders seed -db forms.db                      # or -postgres DSN -schema S
//	slowreaders stall -url URL -path PATH -key KEY -c 64 -hold 9s -pid PID -metrics URL
//	slowreaders read -url URL -path PATH -key KEY -c 8 -d 10s
//
// seed adds to account demo a form "big" of 40 submissions of the
// largest size the default limits accept (their JSON as the API sends it
// just under MaxSubmissionBytes, 2 MiB), 3,000 forms of about 3.6 KB,
// and two keys: a full one (written to FILE.key) and one scoped to 1,000
// of those forms (FILE.scoped-key), FILE being -db, or -schema over
// PostgreSQL.
//
// stall opens -c connections, each with a 4 KiB receive buffer, sends
// one GET of -path on each and reads nothing for -hold. Then it reads
// the server's peak resident memory (VmHWM of /proc/PID/status) and,
// on each connection, the status line the server sent, if any, and
// prints one line:
//
//	stall: conns=64 200=7 503=25 429=32 other=0 none=0 cut=7 late=0 peak_kb=98765 rss_kb=54321 end_peak_kb=99000 goroutines_idle=9 goroutines=75
//
// 200, 503, 429 count the status lines read; none the connections on
// which none came; cut the 200s whose body ended early (the server cut
// the connection off); late the 200s still unfinished when the client's
// own read deadline (30 s after the hold) ran out, a long body (an
// export) on a slow socket, not a cut. peak_kb and rss_kb are the
// server's at the end of the hold, end_peak_kb its peak once every
// connection was read too (a stream goes on as its client reads).
// goroutines_idle and goroutines are the server's go_goroutines from its
// Prometheus metrics at -metrics (the example server's -metrics-addr)
// before the first connection and at the end of the hold; -1 without
// -metrics. read has -c clients read -path (following
// nextCursor, then starting over) for -d, each reading every body
// whole, and prints requests, bytes and statuses.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/internal/steps"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/sqlitestore"
)

func main() {
	steps.Main("slowreaders",
		steps.Step{Name: "seed", Run: seed},
		steps.Step{Name: "stall", Run: stall},
		steps.Step{Name: "read", Run: read},
	)
}

// seedStore is what seed needs of a store.
type seedStore interface {
	formsapi.Writer
	AddKeyWith(ctx context.Context, key, accountID string, o formsapi.KeyOptions) error
}

func seed(args []string) error {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	db := fs.String("db", "forms.db", "SQLite database file")
	dsn := fs.String("postgres", "", "seed PostgreSQL at this DSN instead")
	schema := fs.String("schema", "", "with -postgres: the schema")
	subs := fs.Int("submissions", 40, "submissions of form big")
	forms := fs.Int("forms", 3000, "forms of about 3.6 KB")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	var s seedStore
	file := *db
	if *dsn != "" {
		var opts []pgstore.Option
		if *schema != "" {
			opts = append(opts, pgstore.WithSchema(*schema))
		}
		pg, err := pgstore.Open(ctx, *dsn, opts...)
		if err != nil {
			return err
		}
		defer pg.Close()
		s, file = pg, *schema
	} else {
		sq, err := sqlitestore.Open(*db)
		if err != nil {
			return err
		}
		defer sq.Close()
		s = sq
	}
	const account = "demo"
	if err := s.AddForm(ctx, account, formsapi.Form{ID: "big", Title: "Big submissions"}); err != nil && !errors.Is(err, formsapi.ErrFormExists) {
		return err
	}
	sub := largest()
	// 16 a batch: each is about 2 MiB, and pgstore holds its batch in memory.
	if err := benchdata.AddAll(ctx, s, *subs, 16, func(int) (formsapi.Submission, formsapi.Metadata) { return sub, formsapi.Metadata{} }, nil); err != nil {
		return err
	}
	title := strings.Repeat("t", 3500)
	var ids []string
	for i := range *forms {
		id := formsapi.NewFormID()
		if err := s.AddForm(ctx, account, formsapi.Form{ID: id, Title: title, Icon: "📋", NotificationEmail: "owner@example.com"}); err != nil {
			return err
		}
		if i%3 == 0 && len(ids) < formsapi.DefaultLimits.MaxKeyForms {
			ids = append(ids, id)
		}
	}
	full, err := formsapi.NewKey()
	if err != nil {
		return err
	}
	if err := s.AddKey(ctx, full, account); err != nil {
		return err
	}
	scoped, err := formsapi.NewKey()
	if err != nil {
		return err
	}
	if err := s.AddKeyWith(ctx, scoped, account, formsapi.KeyOptions{Forms: ids}); err != nil {
		return err
	}
	if err := os.WriteFile(file+".key", []byte(full), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(file+".scoped-key", []byte(scoped), 0o600); err != nil {
		return err
	}
	b, _ := formsapi.AppendSubmissionJSON(nil, sub)
	fmt.Printf("seeded: %d submissions of %d bytes as sent into form big, %d forms, a key scoped to %d of them\n", *subs, len(b), *forms, len(ids))
	return nil
}

// largest returns a submission of form big whose JSON as the API sends
// it is as large as the default limits let it be, give or take an
// attachment: the most data they allow, and attachments whose strings
// are sent escaped, six bytes for one.
func largest() formsapi.Submission {
	l := formsapi.DefaultLimits
	pad := strings.Repeat("x", l.MaxDataBytes-len(`{"pad":""}`))
	s := formsapi.Submission{FormID: "big", Data: []byte(`{"pad":"` + pad + `"}`)}
	const prefix = "https://files.example/f?"
	at := formsapi.Attachment{
		FieldName: strings.Repeat("<", l.MaxAttachmentString),
		FileURL:   prefix + strings.Repeat("&", l.MaxAttachmentString-len(prefix)),
		FileSize:  1,
		MIMEType:  "text/plain",
	}
	for len(s.Attachments) < l.MaxAttachments {
		next := append(s.Attachments, at)
		b, err := formsapi.AppendSubmissionJSON(nil, formsapi.Submission{FormID: s.FormID, Data: s.Data, Attachments: next})
		if err != nil || len(b) > l.MaxSubmissionBytes {
			break
		}
		s.Attachments = next
	}
	return s
}

// rcvbuf4k makes a dialed socket's receive buffer 4 KiB, before it
// connects, so its window stays small.
func rcvbuf4k(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
	}); err != nil {
		return err
	}
	return serr
}

func stall(args []string) error {
	fs := flag.NewFlagSet("stall", flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:8080", "the server")
	path := fs.String("path", "/v1/forms/big/submissions?limit=1000", "what each connection asks for")
	key := fs.String("key", "", "API key")
	conns := fs.Int("c", 64, "connections that read nothing")
	hold := fs.Duration("hold", 9*time.Second, "how long they read nothing")
	pid := fs.Int("pid", 0, "the server process, for its peak memory")
	metrics := fs.String("metrics", "", "the server's Prometheus metrics URL, for its goroutines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := url.Parse(*base)
	if err != nil {
		return err
	}
	idleG, err := goroutines(*metrics)
	if err != nil {
		return err
	}
	d := net.Dialer{Control: rcvbuf4k, Timeout: 10 * time.Second}
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nUser-Agent: slowreaders\r\n\r\n", *path, u.Host, *key)
	cs := make([]net.Conn, 0, *conns)
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range *conns {
		c, err := d.Dial("tcp", u.Host)
		if err != nil {
			return err
		}
		cs = append(cs, c)
		if _, err := io.WriteString(c, req); err != nil {
			return err
		}
	}
	time.Sleep(*hold) // the attack: nothing read for this long
	peak, rss := memory(*pid)
	heldG, err := goroutines(*metrics)
	if err != nil {
		return err
	}
	counts := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := outcome(c)
			mu.Lock()
			counts[st]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	endPeak, _ := memory(*pid)
	fmt.Printf("stall: conns=%d 200=%d 503=%d 429=%d other=%d none=%d cut=%d late=%d peak_kb=%d rss_kb=%d end_peak_kb=%d goroutines_idle=%d goroutines=%d\n",
		*conns, counts["200"]+counts["cut"]+counts["late"], counts["503"], counts["429"], counts["other"], counts["none"], counts["cut"], counts["late"], peak, rss, endPeak, idleG, heldG)
	return nil
}

// outcome reads what the server sent on c once the client starts
// reading: "200", "503", "429" or "other" for a whole answer of that
// status, "cut" for a 200 whose body ended early, "late" for one still
// coming when c's read deadline ran out, "none" when no status line
// came.
func outcome(c net.Conn) string {
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "none"
	}
	defer res.Body.Close()
	_, err = io.Copy(io.Discard, res.Body)
	switch {
	case res.StatusCode == 200 && errors.Is(err, os.ErrDeadlineExceeded):
		return "late"
	case res.StatusCode == 200 && err != nil:
		return "cut"
	case res.StatusCode == 200, res.StatusCode == 503, res.StatusCode == 429:
		return strconv.Itoa(res.StatusCode)
	}
	return "other"
}

// memory returns VmHWM and VmRSS of pid in kB, 0 without one.
// goroutines returns go_goroutines of the Prometheus metrics at u, or -1
// when u is "".
func goroutines(u string) (int, error) {
	if u == "" {
		return -1, nil
	}
	res, err := http.Get(u)
	if err != nil {
		return 0, fmt.Errorf("metrics: %w", err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("metrics: go_goroutines %q: %w", v, err)
			}
			return int(n), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("metrics: %w", err)
	}
	return 0, errors.New("metrics: no go_goroutines")
}

func memory(pid int) (peak, rss int) {
	if pid == 0 {
		return 0, 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "VmHWM:":
			peak = n
		case "VmRSS:":
			rss = n
		}
	}
	return peak, rss
}

func read(args []string) error {
	fs := flag.NewFlagSet("read", flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:8080", "the server")
	path := fs.String("path", "/v1/forms/big/submissions?limit=1000", "what the readers read, following nextCursor or syncToken")
	key := fs.String("key", "", "API key")
	clients := fs.Int("c", 8, "readers")
	dur := fs.Duration("d", 10*time.Second, "how long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	end := time.Now().Add(*dur)
	var requests, bytes atomic.Int64
	var mu sync.Mutex
	statuses := map[int]int{}
	var failed atomic.Value
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *clients}}
	var wg sync.WaitGroup
	for range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := *base + *path
			for time.Now().Before(end) {
				req, _ := http.NewRequest("GET", u, nil)
				req.Header.Set("Authorization", "Bearer "+*key)
				res, err := client.Do(req)
				if err != nil {
					failed.Store(err)
					return
				}
				body, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err != nil {
					failed.Store(err)
					return
				}
				requests.Add(1)
				bytes.Add(int64(len(body)))
				mu.Lock()
				statuses[res.StatusCode]++
				mu.Unlock()
				u = *base + *path // from the start again, unless a page follows
				var page struct {
					NextCursor string
					SyncToken  string
					HasMore    bool
				}
				if res.StatusCode == 200 && json.Unmarshal(body, &page) == nil {
					switch {
					case page.NextCursor != "":
						u += "&cursor=" + url.QueryEscape(page.NextCursor)
					case page.HasMore:
						u = *base + strings.Replace(*path, "sync=start", "sync="+url.QueryEscape(page.SyncToken), 1)
					}
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return err
	}
	var st []string
	for code, n := range statuses {
		st = append(st, fmt.Sprintf("%d:%d", code, n))
	}
	fmt.Printf("read: clients=%d seconds=%.1f requests=%d MiB=%.1f rps=%.1f statuses=%s\n", *clients, dur.Seconds(), requests.Load(),
		float64(bytes.Load())/(1<<20), float64(requests.Load())/dur.Seconds(), strings.Join(st, ","))
	return nil
}
