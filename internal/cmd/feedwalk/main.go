// Command feedwalk measures the server's peak memory while concurrent
// clients walk a form of the largest submissions the default limits
// accept, by list cursor or by sync feed (bench/feedwalk.sh runs it; issue
// 15, "every guarantee on every path"). It has three steps:
//
//	feedwalk seed -db forms.db -n 100 -keyfile big.key                 # or -postgres DSN -schema S
//	feedwalk walk -url http://127.0.0.1:8080 -keyfile big.key -mode feed -c 32 -pid $PID -want 100
//	feedwalk sync -url http://127.0.0.1:8080 -keyfile big.key -want 100
//
// seed adds form "big" to account "bench" with n submissions, each as
// large as formsapi.DefaultLimits accept: data of MaxDataBytes, and
// MaxAttachments attachments whose fieldName, fileUrl and mimeType are
// as long as the limits then allow and full of '<', which JSON-escapes to
// six bytes (\u003c), the most a stored byte grows on the wire. It issues
// the account a key (from formsapi.NewKey) and writes it to -keyfile.
//
// walk has -c clients each walk the whole form once with limit=1000: by
// following nextCursor (-mode list) or syncToken while hasMore (-mode
// feed), reading every body whole. It checks that every walk saw -want
// submissions and prints pages, bytes, the largest page and the server's
// VmHWM (peak resident memory) from /proc/PID/status. A 503 is asked again
// after a second (up to nine times); -timeout stops the walks. A walk that
// fails still prints those figures, for how far it got, before the error.
//
// sync reads the form's feed with formsclient's Sync and default options,
// as an integration would, and prints how many submissions it got.
package main

import (
	"bytes"
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
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/internal/steps"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/sqlitestore"
)

const (
	account = "bench"
	formID  = "big"
)

func main() {
	steps.Main("feedwalk",
		steps.Step{Name: "seed", Run: seed},
		steps.Step{Name: "walk", Run: walkCmd},
		steps.Step{Name: "sync", Run: syncCmd},
	)
}

type store interface {
	formsapi.Writer
	Close() error
}

func seed(args []string) error {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	db := fs.String("db", "forms.db", "SQLite file to seed")
	dsn := fs.String("postgres", "", "seed PostgreSQL at this DSN instead of SQLite")
	schema := fs.String("schema", "", "with -postgres: the schema")
	n := fs.Int("n", 100, "submissions to add")
	keyFile := fs.String("keyfile", "big.key", "where to write the key of account bench")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	var s store
	if *dsn != "" {
		var opts []pgstore.Option
		if *schema != "" {
			opts = append(opts, pgstore.WithSchema(*schema))
		}
		pg, err := pgstore.Open(ctx, *dsn, opts...)
		if err != nil {
			return err
		}
		s = pgCloser{pg}
	} else {
		lite, err := sqlitestore.Open(*db)
		if err != nil {
			return err
		}
		s = lite
	}
	defer s.Close()
	sub, err := largest()
	if err != nil {
		return err
	}
	wire, err := formsapi.AppendSubmissionJSON(nil, sub)
	if err != nil {
		return err
	}
	if err := s.AddForm(ctx, account, formsapi.Form{ID: formID, Title: "Largest submissions"}); err != nil && !errors.Is(err, formsapi.ErrFormExists) {
		return err
	}
	start := time.Now()
	// 16 a batch: each is about 2 MiB, and pgstore holds its batch in memory.
	err = benchdata.AddAll(ctx, s, *n, 16, func(i int) (formsapi.Submission, formsapi.Metadata) {
		sub := sub
		sub.Data, sub.CreatedAt = data(i), time.Time{}
		return sub, formsapi.Metadata{}
	}, nil)
	if err != nil {
		return err
	}
	key, err := formsapi.NewKey()
	if err != nil {
		return err
	}
	if err := s.(interface {
		AddKey(context.Context, string, string) error
	}).AddKey(ctx, key, account); err != nil {
		return err
	}
	if err := os.WriteFile(*keyFile, []byte(key+"\n"), 0o600); err != nil {
		return err
	}
	at := sub.Attachments[0]
	fmt.Printf("seeded form %s of account %s: %d submissions in %.1f s, each %d bytes of data and %d attachments of strings %d/%d/%d bytes ('<' but for the URL's and media type's heads): %d bytes stored as given, %d bytes (%.2f MiB) as the API sends it\n",
		formID, account, *n, time.Since(start).Seconds(), len(sub.Data), len(sub.Attachments),
		len(at.FieldName), len(at.FileURL), len(at.MIMEType), rawSize(sub), len(wire), float64(len(wire))/(1<<20))
	return nil
}

type pgCloser struct{ *pgstore.Store }

func (p pgCloser) Close() error { p.Store.Close(); return nil }

// data is submission i's data: an object of exactly MaxDataBytes bytes.
func data(i int) json.RawMessage {
	head := fmt.Sprintf(`{"i":"%06d","pad":"`, i)
	pad := formsapi.DefaultLimits.MaxDataBytes - len(head) - len(`"}`)
	return json.RawMessage(head + strings.Repeat("x", pad) + `"}`)
}

// largest returns the largest submission the default limits accept with
// data of MaxDataBytes and MaxAttachments attachments whose strings are
// all '<' but for what a URL and a media type need: the longest strings
// formsapi.DefaultLimits.PrepareSubmission accepts, found by bisection,
// so that it stays the largest whatever further limits (on the
// submission as sent, say) the library adds.
func largest() (formsapi.Submission, error) {
	lim := formsapi.DefaultLimits
	const urlHead, mimeHead = "https://files.example/", `application/pdf; x="`
	shortest := max(len(urlHead), len(mimeHead)+1) + 1
	build := func(n int) formsapi.Submission {
		s := formsapi.Submission{FormID: formID, Data: data(0)}
		at := formsapi.Attachment{
			FieldName: strings.Repeat("<", n),
			FileURL:   urlHead + strings.Repeat("<", n-len(urlHead)),
			FileSize:  1 << 30,
			MIMEType:  mimeHead + strings.Repeat("<", n-len(mimeHead)-1) + `"`,
		}
		for range lim.MaxAttachments {
			s.Attachments = append(s.Attachments, at)
		}
		return s
	}
	ok := func(n int) bool {
		s := build(n)
		return formsapi.DefaultLimits.PrepareSubmission(&s, &formsapi.Metadata{}) == nil
	}
	lo, hi := shortest, lim.MaxAttachmentString
	if !ok(lo) {
		s := build(lo)
		return s, fmt.Errorf("the smallest attachments are refused: %w", formsapi.DefaultLimits.PrepareSubmission(&s, &formsapi.Metadata{}))
	}
	if ok(hi) {
		return build(hi), nil
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return build(lo), nil
}

func rawSize(s formsapi.Submission) int {
	n := len(s.Data)
	for _, a := range s.Attachments {
		n += len(a.FieldName) + len(a.FileURL) + len(a.MIMEType)
	}
	return n
}

func readKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

func walkCmd(args []string) error {
	fs := flag.NewFlagSet("walk", flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:8080", "server")
	keyFile := fs.String("keyfile", "big.key", "file holding the key of account bench")
	mode := fs.String("mode", "list", "list: follow nextCursor; feed: follow syncToken while hasMore")
	clients := fs.Int("c", 32, "concurrent clients, each walking the form once")
	limit := fs.Int("limit", 1000, "limit parameter of each request")
	pid := fs.Int("pid", 0, "server process whose peak memory to report")
	want := fs.Int("want", 0, "submissions each walk must see (0: do not check)")
	timeout := fs.Duration("timeout", 0, "stop the walks after this long, and fail (0: no limit)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	if *mode != "list" && *mode != "feed" {
		return fmt.Errorf("-mode %q: want list or feed", *mode)
	}
	key, err := readKey(*keyFile)
	if err != nil {
		return err
	}
	var pages, bytes, largest, items, retries atomic.Int64
	errs := make(chan error, *clients)
	start := time.Now()
	var wg sync.WaitGroup
	for range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := walk(ctx, *base, key, *mode, *limit, &pages, &bytes, &largest, &retries)
			items.Add(int64(n))
			if err == nil && *want > 0 && n != *want {
				err = fmt.Errorf("a %s walk saw %d submissions, want %d", *mode, n, *want)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	failed := <-errs
	fmt.Printf("walk %s: clients %d, limit %d: %d pages, %d submissions, %.1f MiB in %.1f s, largest page %.2f MiB, %d retried after 503\n",
		*mode, *clients, *limit, pages.Load(), items.Load(), float64(bytes.Load())/(1<<20), time.Since(start).Seconds(), float64(largest.Load())/(1<<20), retries.Load())
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
	return failed // after the figures, which say how far the walks got
}

// itemStart begins every submission on a page and nothing else in this
// form's pages: inside JSON strings a quote is always escaped, and the
// seeded data has no key "formId".
var itemStart = []byte(`{"formId":"` + formID + `"`)

// walk reads the whole form once and returns how many submissions it saw.
// The envelope's fields after the items (nextCursor, or syncToken and
// hasMore) are read from the body's tail, so that the client's own CPU
// goes to reading bodies, not to decoding megabytes of JSON it ignores.
func walk(ctx context.Context, base, key, mode string, limit int, pages, nbytes, largest, retries *atomic.Int64) (int, error) {
	items := 0
	next := "start"
	if mode == "list" {
		next = ""
	}
	for {
		u := fmt.Sprintf("%s/v1/forms/%s/submissions?limit=%d", base, formID, limit)
		switch {
		case mode == "feed":
			u += "&sync=" + url.QueryEscape(next)
		case next != "":
			u += "&cursor=" + url.QueryEscape(next)
		}
		body, err := get(ctx, u, key, retries)
		if err != nil {
			return items, err
		}
		pages.Add(1)
		nbytes.Add(int64(len(body)))
		for {
			old := largest.Load()
			if int64(len(body)) <= old || largest.CompareAndSwap(old, int64(len(body))) {
				break
			}
		}
		items += bytes.Count(body, itemStart)
		if mode == "list" && bytes.HasSuffix(body, []byte("]}")) {
			return items, nil // the last page of a list has no nextCursor
		}
		i := bytes.LastIndex(body, []byte(`],"`))
		if i < 0 {
			return items, fmt.Errorf("a page that does not end as the API's do: %.100q", body[max(0, len(body)-100):])
		}
		var tail struct {
			NextCursor string
			SyncToken  string
			HasMore    *bool
		}
		if err := json.Unmarshal(append([]byte("{"), body[i+2:]...), &tail); err != nil {
			return items, fmt.Errorf("page tail %.100q: %w", body[i:], err)
		}
		if mode == "list" {
			if next = tail.NextCursor; next == "" {
				return items, nil
			}
			continue
		}
		if tail.SyncToken == "" || tail.HasMore == nil {
			return items, fmt.Errorf("a feed page without syncToken and hasMore: %.100q", body[i:])
		}
		next = tail.SyncToken
		if !*tail.HasMore {
			return items, nil
		}
	}
}

// get reads u whole. A 503 (the server's store timeout, which 32
// clients of megabyte pages on two shared cores can reach) is asked
// again after a second, as a client would, and counted in retries.
func get(ctx context.Context, u, key string, retries *atomic.Int64) ([]byte, error) {
	for try := 1; ; try++ {
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			return nil, err
		}
		switch {
		case res.StatusCode == 200:
			return body, nil
		case res.StatusCode == 503 && try < 10:
			retries.Add(1)
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Second):
			}
		default:
			return nil, fmt.Errorf("status %d: %.200s", res.StatusCode, body)
		}
	}
}

func syncCmd(args []string) error {
	fs := flag.NewFlagSet("sync", flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:8080", "server")
	keyFile := fs.String("keyfile", "big.key", "file holding the key of account bench")
	want := fs.Int("want", 0, "submissions the feed must hand over (0: do not check)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	key, err := readKey(*keyFile)
	if err != nil {
		return err
	}
	c, err := formsclient.New(*base, key)
	if err != nil {
		return err
	}
	n, size := 0, 0
	start := time.Now()
	token, err := c.Sync(context.Background(), formID, formsclient.SyncStart, func(ch formsclient.Change) error {
		n++
		b, err := formsapi.AppendSubmissionJSON(nil, ch.Submission)
		size = max(size, len(b))
		return err
	})
	fmt.Printf("formsclient Sync (default options): %d submissions in %.1f s, largest %.2f MiB as sent, token %d characters\n",
		n, time.Since(start).Seconds(), float64(size)/(1<<20), len(token))
	if err != nil {
		return err
	}
	if *want > 0 && n != *want {
		return fmt.Errorf("formsclient Sync handed over %d submissions, want %d", n, *want)
	}
	return nil
}
