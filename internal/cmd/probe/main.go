// Command probe is one well-behaved user of the API: one keep-alive
// connection sending a GET at a steady rate, recording each request's
// latency and status. bench/ scripts run it beside a flood to see what a
// real user gets (issue 15).
//
//	probe -url 'http://127.0.0.1:8080/v1/forms' -keyfile forms.db.demo-key -rate 8 -d 20s
//
// It prints one line:
//
//	probe: n=160 p50=0.412ms p90=0.80ms p99=1.93ms max=2.10ms statuses=200:160 ratelimit="..."
//
// ratelimit is the RateLimit header of the last answer. A request that
// fails without an answer counts as status 0. Requests are sent on a
// fixed schedule; one that is late (the previous one took longer than the
// interval) goes at once, so a slow server is not hidden by waiting.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080/v1/forms", "URL to GET")
	key := flag.String("key", "", "API key")
	keyFile := flag.String("keyfile", "", "file holding the API key (instead of -key)")
	rate := flag.Float64("rate", 8, "requests per second")
	dur := flag.Duration("d", 20*time.Second, "how long to send")
	timeout := flag.Duration("timeout", 10*time.Second, "per-request timeout")
	flag.Parse()
	if *keyFile != "" {
		b, err := os.ReadFile(*keyFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "probe:", err)
			os.Exit(1)
		}
		*key = strings.TrimSpace(string(b))
	}
	hc := &http.Client{Timeout: *timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1}}
	interval := time.Duration(float64(time.Second) / *rate)
	var lat []time.Duration
	statuses := map[int]int{}
	lastRL := ""
	start := time.Now()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if at.Sub(start) >= *dur {
			break
		}
		time.Sleep(time.Until(at))
		req, _ := http.NewRequest("GET", *url, nil)
		if *key != "" {
			req.Header.Set("Authorization", "Bearer "+*key)
		}
		t0 := time.Now()
		res, err := hc.Do(req)
		status := 0
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			status = res.StatusCode
			if rl := res.Header.Get("RateLimit"); rl != "" {
				lastRL = rl
			}
		}
		lat = append(lat, time.Since(t0))
		statuses[status]++
	}
	slices.Sort(lat)
	q := func(p float64) string {
		if len(lat) == 0 {
			return "-"
		}
		i := int(p*float64(len(lat))+0.5) - 1
		return ms(lat[min(max(i, 0), len(lat)-1)])
	}
	var codes []int
	for c := range statuses {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var st []string
	for _, c := range codes {
		st = append(st, fmt.Sprintf("%d:%d", c, statuses[c]))
	}
	fmt.Printf("probe: n=%d p50=%s p90=%s p99=%s max=%s statuses=%s ratelimit=%q\n",
		len(lat), q(0.5), q(0.9), q(0.99), q(1), strings.Join(st, ","), lastRL)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond)) }
