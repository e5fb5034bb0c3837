package formsapi

// The summary of a form (GET /v1/forms/{formId}/summary): how many
// submissions its list holds, how many came in each hour, day or week of
// a range, and for each top-level data field how many submissions have
// it and its most frequent values; each figure with the kind of a Total
// (exact, at_least, estimate). The list is the submissions list's, read
// by the same parameters (since, until, filter, q: params.go), through
// the same reader (the stores' fast path, or checkedReader over a host's
// store), newest first, at most summaryScan submissions of it; what the
// read did not reach is counted by the store's Counter where that is
// bounded, or said to be a lower bound.
//
// A summary is kept by the handler under the form's version as the store
// reads it (storecontract.Reader.FormVersion, the version its read cache
// keys pages by), and served again only while the form has that version:
// a dashboard that polls it costs a key lookup and a map lookup between
// writes, and a 304 to a client that names its ETag.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/formsapi/formsapi/observe"
)

// The summary's bounds. The first two are limits of a request, each a
// 400 naming it; the others bound the work of one summary and are
// reported in its figures' kinds.
const (
	// maxSummaryBuckets is the most intervals a summary counts (the
	// summary buckets limit): a year of days.
	maxSummaryBuckets = 366
	// maxSummaryTop is the most values a field's top list holds (the
	// summary top limit); defaultSummaryTop when top is not given.
	maxSummaryTop     = 20
	defaultSummaryTop = 5
	// defaultSummaryBuckets is how many intervals the buckets span when
	// since is not given: up to until, or to the end of the interval of
	// the list's newest submission.
	defaultSummaryBuckets = 30
	// summaryScan is the most submissions a summary reads, newest first,
	// in reads of summaryPage; summaryReads bounds the reads (a filtered
	// page may come back short).
	summaryScan  = 10000
	summaryPage  = 1000
	summaryReads = 40
	// summaryFields is the most fields a summary reports (those first
	// seen, newest first), summaryValues the most distinct values it
	// tallies per field, and summaryValueBytes the longest value (its
	// canonical JSON text) it tallies.
	summaryFields     = 100
	summaryValues     = 1000
	summaryValueBytes = 256
	// summaryTallyBytes bounds the text of the names and values a
	// summary keeps, all fields together: a page's byte budget, about
	// what the request's room holds for it (the fields and values limits
	// alone let 25 MB through).
	summaryTallyBytes = DefaultPageBytes
	// summaryCounts is the most counts (Counter.CountSubmissions) a
	// summary asks for the buckets its read did not reach, and
	// summaryCountRows the most rows those counts may have counted
	// together before it asks for no more.
	summaryCounts    = 64
	summaryCountRows = 1000000
	// summaryCacheBytes bounds the summaries a handler keeps.
	summaryCacheBytes = 8 << 20
)

// msgSummary is the message of a summary's answer.
const msgSummary = "summary retrieved"

// The intervals of the buckets.
const (
	intervalHour = "hour"
	intervalDay  = "day"
	intervalWeek = "week"
)

// summaryListParams are the list parameters the summary reads, parsed
// as the submissions list parses them (parseListParams).
var summaryListParams = []string{"since", "until", "filter", "q"}

// summaryParams are the summary's query parameters.
var summaryParams = append(slices.Clone(summaryListParams), "interval", "top")

// summaryRequest is a request of the summary, with what parseSummary read.
type summaryRequest struct {
	request
	q        Query  // the list: since, until, filters and search
	interval string // intervalHour, intervalDay or intervalWeek
	top      int    // values per field
}

func (req *summaryRequest) base() *request { return &req.request }

// parseSummary is the summary route's parse.
func (a *api) parseSummary(raw string, base request) (req summaryRequest, msg string) {
	req.request = base
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return req, "the query string is malformed: check its percent-encoding"
	}
	for _, name := range []string{"since", "until", "q", "interval", "top"} {
		if len(vals[name]) > 1 {
			return req, fmt.Sprintf("invalid %s: the parameter is given more than once", name)
		}
	}
	if msg := parseListParams(vals, summaryListParams, &req.q); msg != "" {
		return req, msg
	}
	req.interval = intervalDay
	switch v := vals.Get("interval"); v {
	case "", intervalDay:
	case intervalHour, intervalWeek:
		req.interval = v
	default:
		return req, `invalid interval: must be "hour", "day" (the default) or "week"`
	}
	req.top = defaultSummaryTop
	if v := vals.Get("top"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxSummaryTop {
			return req, fmt.Sprintf("invalid top: must be a whole number from 0 to %d (the summary top limit)", maxSummaryTop)
		}
		req.top = n
	}
	if q := req.q; !q.Since.IsZero() && !q.Until.IsZero() {
		if n := bucketsBetween(req.interval, q.Since, q.Until); n > maxSummaryBuckets {
			return req, fmt.Sprintf("invalid until: from since to until are %d intervals of a %s, more than %d (the summary buckets limit): narrow the range or take a longer interval", n, req.interval, maxSummaryBuckets)
		}
	}
	return req, ""
}

// bucketStart is the start of the interval that holds t, in UTC: the
// hour, the day, or the week from Monday.
func bucketStart(interval string, t time.Time) time.Time {
	t = t.UTC()
	switch interval {
	case intervalHour:
		return t.Truncate(time.Hour)
	case intervalWeek:
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// nextBucket is the start of the interval after the one starting at b.
func nextBucket(interval string, b time.Time) time.Time {
	switch interval {
	case intervalHour:
		return b.Add(time.Hour)
	case intervalWeek:
		return b.AddDate(0, 0, 7)
	}
	return b.AddDate(0, 0, 1)
}

// bucketsBetween is how many intervals the times from since to before
// until touch.
func bucketsBetween(interval string, since, until time.Time) int {
	if !until.After(since) {
		return 0
	}
	// In whole seconds, not a time.Duration: one saturates at 292 years,
	// and a range of centuries must count as the many intervals it is.
	unit := map[string]int64{intervalHour: 3600, intervalDay: 24 * 3600, intervalWeek: 7 * 24 * 3600}[interval]
	lo := bucketStart(interval, since) // a whole second
	secs := until.Unix() - lo.Unix()
	n := secs / unit
	if secs%unit != 0 || until.Nanosecond() != 0 {
		n++
	}
	return int(n)
}

// serveSummary answers a summary: from the handler's summaries when it
// holds this one at the form's version, else read.
func (a *api) serveSummary(w http.ResponseWriter, r *http.Request, req summaryRequest) {
	formID := req.list.FormID
	ctx, done := a.observeCall(req.ctx, observe.OpFormVersion, req.account, formID)
	form, err := a.pages.FormVersion(ctx, req.account, formID, req.form)
	done(err)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	key := summaryKey{account: req.account, formID: formID, seq: form.Seq, inc: form.Incarnation, params: string(req.appendKey(nil))}
	cacheable := form.Found && form.Version != 0
	seen := observedIn(req.ctx)
	if cacheable {
		if e := a.summaries.get(key, form.Version); e != nil {
			seen.cache = observe.CacheHit
			a.respondSummary(w, r, req, e)
			return
		}
	}
	if form.Found {
		req.form = &form // the pages read at the version read, without reading it again
	}
	ctx, meter := wire.WithMeter(req.ctx)
	body, read, err := a.summarize(ctx, req)
	a.chargeWork(w, r, req.request, meter.Examined()+read)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	sum := sha256.Sum256(body)
	e := &summaryEntry{version: form.Version, body: body, tag: weakTag(sum[:16])}
	if cacheable {
		seen.cache = observe.CacheMiss
		a.summaries.put(key, e)
	}
	a.respondSummary(w, r, req, e)
}

// respondSummary answers e, or 304 when the request names its tag.
func (a *api) respondSummary(w http.ResponseWriter, r *http.Request, req summaryRequest, e *summaryEntry) {
	if notModified(w, r, e.tag, cachePage, varyPage) {
		return
	}
	a.writePage(w, r, req.request, e.tag, e.body)
}

// appendKey appends the canonical bytes of what the summary req asks for.
func (req *summaryRequest) appendKey(b []byte) []byte {
	b = req.q.AppendKey(b)
	b = append(b, req.interval...)
	return binary.BigEndian.AppendUint32(b, uint32(req.top))
}

// summaryTally is what a summary's read found.
type summaryTally struct {
	read     int         // submissions read
	complete bool        // the read reached the end of the list
	times    []time.Time // the createdAt of each, newest first
	fields   []*fieldTally
	named    map[string]*fieldTally
	more     bool // a field past summaryFields (or summaryTallyBytes) was left out
	bytes    int  // the names and values kept: summaryTallyBytes at most
}

// fieldTally is one field's figures in a summaryTally.
type fieldTally struct {
	name     string
	present  int64             // submissions whose data has it, not null
	values   map[string]*int64 // by canonical JSON text, summaryValues at most
	overflow bool              // a value was not tallied (too many, too long)
}

// summarize reads req's list and encodes its summary. It returns the
// body and how many bytes of submissions it read.
func (a *api) summarize(ctx context.Context, req summaryRequest) ([]byte, int64, error) {
	formID := req.list.FormID
	t := &summaryTally{named: map[string]*fieldTally{}}
	q := req.q
	q.Limit, q.MaxBytes = summaryPage, a.cfg.pageBytes
	var read int64
	var inc uint64
	var buf []byte
	for reads := 0; ; reads++ {
		if reads == summaryReads || t.read >= summaryScan {
			break
		}
		p := wire.Page{Body: buf[:0], Form: req.form}
		if err := a.pages.AppendSubmissions(ctx, req.account, formID, q, &p); err != nil {
			return nil, 0, err
		}
		if reads > 0 && otherIncarnation(inc, p.Incarnation) {
			return nil, 0, fmt.Errorf("summary: the form was created again while it was read")
		}
		inc, buf = p.Incarnation, p.Body
		read += int64(len(p.Body))
		if err := t.addPage(p.Body); err != nil {
			return nil, 0, err
		}
		if p.NextCursor == "" {
			t.complete = true
			break
		}
		q.Cursor = p.NextCursor
	}
	counts, err := a.summaryCounts(ctx, req, t)
	if err != nil {
		return nil, 0, err
	}
	b := appendSummaryJSON(nil, req, t, counts)
	return b, read, nil
}

// summaryFigures are the figures a summary takes from the store's
// Counter: the list's count, and the buckets the read did not reach.
type summaryFigures struct {
	count   Total
	buckets []bucketFigure
	from    time.Time // the start of the first bucket; zero when none
}

type bucketFigure struct {
	start time.Time
	count Total
}

// kindOf is the kind of a figure of the read: exact when it reached the
// end of the list, else a lower bound.
func (t *summaryTally) kindOf() string {
	if t.complete {
		return TotalExact
	}
	return TotalAtLeast
}

// summaryCounts works out the list's count and the buckets.
func (a *api) summaryCounts(ctx context.Context, req summaryRequest, t *summaryTally) (summaryFigures, error) {
	var f summaryFigures
	q := req.q
	filtered := len(q.Filters) > 0 || q.Search != ""
	f.count = Total{Value: int64(t.read), Kind: t.kindOf()}
	if !t.complete && a.count != nil {
		c, err := a.count.CountSubmissions(ctx, req.account, req.list.FormID, q, !filtered)
		if err != nil {
			return f, fmt.Errorf("count submissions: %w", err)
		}
		if c.Value >= int64(t.read) {
			f.count = c
		}
	}
	// The range of the buckets.
	var to time.Time
	switch {
	case !q.Until.IsZero():
		to = q.Until
		if b := bucketStart(req.interval, to); b.Before(to) {
			to = nextBucket(req.interval, b)
		}
	case len(t.times) > 0:
		to = nextBucket(req.interval, bucketStart(req.interval, t.times[0]))
	default:
		return f, nil // no submission, no bucket
	}
	var from time.Time
	if q.Since.IsZero() {
		from = to
		for range defaultSummaryBuckets {
			from = bucketStart(req.interval, from.Add(-time.Nanosecond))
		}
	} else {
		from = bucketStart(req.interval, q.Since)
		// Without until, the newest maxSummaryBuckets of the range: at
		// most that many steps back from to, however far back since is.
		oldest := to
		for range maxSummaryBuckets {
			oldest = bucketStart(req.interval, oldest.Add(-time.Nanosecond))
		}
		if from.Before(oldest) {
			from = oldest
		}
	}
	f.from = from
	// The read's counts: t.times is newest first.
	var oldest time.Time // the createdAt of the last submission read
	if n := len(t.times); n > 0 {
		oldest = t.times[n-1]
	}
	i := 0
	counts, rows := 0, int64(0)
	for b := from; b.Before(to); b = nextBucket(req.interval, b) {
		f.buckets = append(f.buckets, bucketFigure{start: b})
	}
	// Count the read's submissions into their buckets, newest first.
	for j := len(f.buckets) - 1; j >= 0; j-- {
		fb := &f.buckets[j]
		end := nextBucket(req.interval, fb.start)
		for i < len(t.times) && !t.times[i].Before(end) {
			i++
		}
		var n int64
		for i < len(t.times) && !t.times[i].Before(fb.start) {
			n++
			i++
		}
		fb.count = Total{Value: n, Kind: TotalExact}
		// Every submission after oldest was read; one at it may not be.
		if t.complete || fb.start.After(oldest) {
			continue
		}
		fb.count.Kind = TotalAtLeast
		if filtered || a.count == nil || counts == summaryCounts || rows >= summaryCountRows {
			continue
		}
		bq := Query{Since: fb.start, Until: end}
		if !q.Since.IsZero() && q.Since.After(bq.Since) {
			bq.Since = q.Since
		}
		if !q.Until.IsZero() && q.Until.Before(bq.Until) {
			bq.Until = q.Until
		}
		c, err := a.count.CountSubmissions(ctx, req.account, req.list.FormID, bq, true)
		if err != nil {
			return f, fmt.Errorf("count submissions: %w", err)
		}
		counts++
		rows += c.Value
		if c.Value >= n {
			fb.count = c
		}
	}
	return f, nil
}

// addPage tallies the submissions of a page's items, JSON objects
// separated by commas, as the stores encode them (valid JSON).
func (t *summaryTally) addPage(b []byte) error {
	for i := 0; ; {
		i = wire.SkipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i++
			continue
		}
		if i >= len(b) {
			return nil
		}
		if b[i] != '{' {
			return fmt.Errorf("summary: a page's item is not a JSON object")
		}
		end := wire.ValueEnd(b, i)
		if err := t.add(b[i:end]); err != nil {
			return err
		}
		i = end
	}
}

// add tallies one submission, its JSON as the API sends it.
func (t *summaryTally) add(obj []byte) error {
	var created time.Time
	var data []byte
	eachMember(obj, func(name, value []byte) {
		switch string(name) {
		case `"createdAt"`:
			if plainString(value) {
				created, _ = time.Parse(time.RFC3339Nano, string(value[1:len(value)-1]))
			}
		case `"data"`:
			data = value
		}
	})
	if created.IsZero() {
		return fmt.Errorf("summary: a submission without its createdAt")
	}
	t.read++
	t.times = append(t.times, created.UTC())
	if len(data) == 0 || data[0] != '{' {
		return nil
	}
	// A member named twice counts by its last value, as in encoding/json
	// and the filters.
	type member struct {
		name  string
		value []byte
	}
	var ms []member
	var at map[string]int // past a few members, where each name is in ms
	eachMember(data, func(rawName, value []byte) {
		name := string(rawName[1 : len(rawName)-1])
		if slices.Contains(rawName, '\\') && json.Unmarshal(rawName, &name) != nil {
			return
		}
		if at == nil && len(ms) == 16 {
			at = make(map[string]int, 32)
			for i, m := range ms {
				at[m.name] = i
			}
		}
		if at != nil {
			if i, ok := at[name]; ok {
				ms[i].value = value
				return
			}
			at[name] = len(ms)
		} else if i := slices.IndexFunc(ms, func(m member) bool { return m.name == name }); i >= 0 {
			ms[i].value = value
			return
		}
		ms = append(ms, member{name, value})
	})
	for _, m := range ms {
		t.addMember(m.name, m.value)
	}
	return nil
}

// addMember tallies one member of a submission's data.
func (t *summaryTally) addMember(name string, value []byte) {
	if string(value) == "null" {
		return
	}
	f := t.named[name]
	if f == nil {
		if len(t.fields) == summaryFields || t.bytes+len(name) > summaryTallyBytes {
			t.more = true
			return
		}
		f = &fieldTally{name: name, values: map[string]*int64{}}
		t.fields = append(t.fields, f)
		t.named[name] = f
		t.bytes += len(name)
	}
	f.present++
	raw, ok := canonicalText(value)
	switch {
	case !ok: // an object or an array: present, not a value
	case len(raw) > summaryValueBytes:
		f.overflow = true
	default:
		if n := f.values[string(raw)]; n != nil { // no allocation for the lookup
			*n++
		} else if len(f.values) < summaryValues && t.bytes+len(raw) <= summaryTallyBytes {
			one := int64(1)
			f.values[string(raw)] = &one
			t.bytes += len(raw)
		} else {
			f.overflow = true
		}
	}
}

// canonicalText is find.Canonical, without its cost for what most
// values are: a string of printable ASCII without escapes, and a whole
// number of a few digits, are their own canonical text.
func canonicalText(raw []byte) ([]byte, bool) {
	if plainString(raw) || plainInteger(raw) {
		return raw, true
	}
	v, ok := find.Canonical(raw)
	return []byte(v), ok
}

// plainString reports whether raw is a JSON string of printable ASCII
// without a backslash or a character encoding/json escapes (<, >, &,
// which find.String does not escape, are fine).
func plainString(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c >= 0x7f || c == '\\' || c == '"' {
			return false
		}
	}
	return true
}

// plainInteger reports whether raw is a JSON integer of at most 15
// digits without a leading zero: exact as a float64, and written back as
// it is.
func plainInteger(raw []byte) bool {
	d := raw
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 15 || (d[0] == '0' && len(d) > 1) || (d[0] == '0' && len(raw) > 1) {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// eachMember calls fn with each member of the JSON object obj (valid JSON):
// its name as the raw JSON string, and its value.
func eachMember(obj []byte, fn func(name, value []byte)) {
	i := wire.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = wire.SkipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return
		}
		nameEnd := wire.ValueEnd(obj, i)
		name := obj[i:nameEnd]
		i = wire.SkipSpace(obj, nameEnd)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = wire.SkipSpace(obj, i+1)
		if i >= len(obj) {
			return
		}
		end := wire.ValueEnd(obj, i)
		fn(name, obj[i:end])
		i = wire.SkipSpace(obj, end)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

// appendSummaryJSON encodes the summary of req from what its read found
// and counted.
func appendSummaryJSON(b []byte, req summaryRequest, t *summaryTally, f summaryFigures) []byte {
	b = append(b, `{"success":true,"message":`...)
	b = appendString(b, msgSummary)
	b = append(b, `,"summary":{"formId":`...)
	b = appendString(b, req.list.FormID)
	b = append(b, `,"count":`...)
	b = appendFigure(b, f.count)
	b = append(b, `,"read":{"value":`...)
	b = strconv.AppendInt(b, int64(t.read), 10)
	b = append(b, `,"complete":`...)
	b = strconv.AppendBool(b, t.complete)
	b = append(b, `},"interval":`...)
	b = appendString(b, req.interval)
	b = append(b, `,"buckets":[`...)
	for i, fb := range f.buckets {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"start":"`...)
		b = fb.start.AppendFormat(b, time.RFC3339)
		b = append(b, `","count":`...)
		b = appendFigure(b, fb.count)
		b = append(b, '}')
	}
	b = append(b, `],"fields":[`...)
	kind := t.kindOf()
	// The most present first, then by name: the same order whatever
	// order the store read them in.
	slices.SortFunc(t.fields, func(x, y *fieldTally) int {
		if x.present != y.present {
			if x.present > y.present {
				return -1
			}
			return 1
		}
		return strings.Compare(x.name, y.name)
	})
	for i, fd := range t.fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendString(b, fd.name)
		b = append(b, `,"present":`...)
		b = appendFigure(b, Total{Value: fd.present, Kind: kind})
		dk := kind
		if fd.overflow {
			dk = TotalAtLeast
		}
		b = append(b, `,"distinct":`...)
		b = appendFigure(b, Total{Value: int64(len(fd.values)), Kind: dk})
		b = append(b, `,"top":[`...)
		for j, v := range topValues(fd.values, req.top) {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"value":`...)
			b = append(b, v...)
			b = append(b, `,"count":`...)
			b = appendFigure(b, Total{Value: *fd.values[v], Kind: kind})
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	b = append(b, `],"moreFields":`...)
	b = strconv.AppendBool(b, t.more)
	return append(b, "}}"...)
}

// appendFigure appends a figure: {"value": N, "kind": K}.
func appendFigure(b []byte, t Total) []byte {
	b = append(b, `{"value":`...)
	b = strconv.AppendInt(b, t.Value, 10)
	b = append(b, `,"kind":`...)
	b = appendString(b, t.Kind)
	return append(b, '}')
}

// topValues returns the n most frequent of values, the most frequent
// first, equal counts by their text.
func topValues(values map[string]*int64, n int) []string {
	vs := make([]string, 0, len(values))
	for v := range values {
		vs = append(vs, v)
	}
	slices.SortFunc(vs, func(x, y string) int {
		if c := cmp.Compare(*values[y], *values[x]); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	return vs[:min(n, len(vs))]
}

// summaryKey names a summary the handler keeps: the form (its row in the
// store, as the stores' page caches key pages, and its incarnation) and
// what the request asks for.
type summaryKey struct {
	account, formID string
	seq             int64
	inc             uint64
	params          string
}

// summaryEntry is a summary kept, at the form's version when it was read.
type summaryEntry struct {
	version int64
	body    []byte // never changes once kept
	tag     string
	// keyBytes are those of its key (its parameters may be tens of KiB
	// for a body of a few hundred bytes), set by put.
	keyBytes int
}

func (e *summaryEntry) size() int {
	return len(e.body) + len(e.tag) + e.keyBytes + 128
}

// summaryCache keeps summaries under the version of their form: one is
// served only at the version it was kept at, which the store read
// before the summary's reads (so the summary is at least as new as its
// version, and any write since has changed the version: exact, as the
// stores' page caches are). A version lower than the one kept means the
// database went back in time (a restore): the summary is dropped.
// Eviction is random, within summaryCacheBytes, which counts each
// summary's key as well as its body. The zero value is empty
// and ready; it is safe for concurrent use.
type summaryCache struct {
	mu    sync.Mutex
	m     map[summaryKey]*summaryEntry
	bytes int
}

// get returns the summary kept for k at version v, or nil.
func (c *summaryCache) get(k summaryKey, v int64) *summaryEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[k]
	switch {
	case e == nil:
		return nil
	case e.version > v:
		delete(c.m, k)
		c.bytes -= e.size()
		return nil
	case e.version < v:
		return nil
	}
	return e
}

// put keeps e under k, unless a summary of a later version is kept.
func (c *summaryCache) put(k summaryKey, e *summaryEntry) {
	e.keyBytes = len(k.account) + len(k.formID) + len(k.params)
	if e.size() > summaryCacheBytes/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[summaryKey]*summaryEntry{}
	}
	if old := c.m[k]; old != nil {
		if old.version > e.version {
			return
		}
		delete(c.m, k)
		c.bytes -= old.size()
	}
	for k2, old := range c.m { // a map's order is random: random eviction
		if c.bytes+e.size() <= summaryCacheBytes {
			break
		}
		delete(c.m, k2)
		c.bytes -= old.size()
	}
	c.m[k] = e
	c.bytes += e.size()
}

// FormVersion over a host's store: it cannot tell (Version 0), so no
// summary of it is kept; the reads that follow check the form.
func (c checkedReader) FormVersion(context.Context, string, string, *wire.Form) (wire.Form, error) {
	return wire.Form{}, nil
}
