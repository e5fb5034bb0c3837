package formsapi

// The export: all of a form's submissions in commit order as one
// streamed file, JSON Lines or CSV. It is the sync feed read to a fixed
// end, the form's feed head when the export began (its as-of position):
// every line carries the submission's ref and its export position, from
// which after= resumes the very same export, and the Sync-Token header is
// the feed's token at the as-of position, so that the file plus the feed
// from that token is the form. The body is written in chunks of
// exportChunk bytes, each under a write deadline of its own, so a long
// export is not cut by the server's WriteTimeout and a slow reader holds
// at most a page and a chunk of the server's memory, within the
// handler's bytes in flight (room.go: the route reserves a page's room
// for its whole stream). A filter or search (filter[<field>],
// filter[<field>][<op>], q, read as the lists read them) narrows the file
// to the lines of the submissions the lists' matcher keeps (writeMatch),
// every entry of the feed checked and its work charged (walked).

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/token"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/formsapi/formsapi/observe"
)

// Export formats.
const (
	formatJSONL = "jsonl"
	formatCSV   = "csv"
)

// exportListParams are the list parameters the export reads, parsed as
// the submissions list parses them (parseListParams): its filters and
// its search narrow the file to the submissions they keep.
var exportListParams = []string{"filter", "q"}

// exportParams are the export's query parameters, in the order they are
// checked.
var exportParams = append([]string{"format", "after", "bom", "formulas"}, exportListParams...)

// export is what parseExport read from an export request.
type export struct {
	format     string // formatJSONL or formatCSV
	bom        bool   // CSV: start with a UTF-8 byte order mark
	keepFormat bool   // CSV: formulas=keep, no ' before a formula-like cell
	after      int64  // the feed position to continue after, 0 from the start
	asOf       int64  // from after's position: the as-of of the export it resumes
	incTag     uint32 // from after's position: the incarnation tag of its form
	// list holds the filters and the search (Filters, Search), none for
	// the whole form.
	list Query
}

// filtered reports whether the export keeps only some submissions.
func (e export) filtered() bool { return len(e.list.Filters) > 0 || e.list.Search != "" }

// parseExport is the export route's parse: unlike the lists, which
// ignore unknown parameters, it refuses them (a misspelt after would
// otherwise restart a long export from the beginning).
func (a *api) parseExport(raw string, base request) (req exportRequest, msg string) {
	req.request = base
	return req, a.readExport(raw, &req)
}

// exportRequest is a request of the export, with what parseExport read.
type exportRequest struct {
	request
	export export
}

// readExport reads the query string into req (parseExport).
func (a *api) readExport(raw string, req *exportRequest) string {
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return "the query string is malformed: check its percent-encoding"
	}
	for name, vs := range vals {
		if strings.HasPrefix(name, filterPrefix) {
			continue // parseFilters says what is wrong with it
		}
		if !contains(exportParams, name) {
			return fmt.Sprintf("invalid %s: the export takes only format, after, bom, formulas, filter[<field>] and q", truncateName(name))
		}
		if len(vs) > 1 {
			return fmt.Sprintf("invalid %s: the parameter is given more than once", name)
		}
	}
	e := export{format: formatJSONL}
	switch f := vals.Get("format"); f {
	case "", formatJSONL:
	case formatCSV:
		e.format = formatCSV
	default:
		return `invalid format: must be "jsonl" (JSON Lines, the default) or "csv"`
	}
	if v, ok := vals["bom"]; ok {
		switch {
		case e.format != formatCSV:
			return "invalid bom: only a CSV export (format=csv) has a byte order mark"
		case v[0] == "true":
			e.bom = true
		case v[0] != "false":
			return `invalid bom: must be "true" or "false"`
		}
	}
	if v, ok := vals["formulas"]; ok {
		switch {
		case e.format != formatCSV:
			return "invalid formulas: only a CSV export (format=csv) escapes formulas; JSON Lines are always raw"
		case v[0] == "keep":
			e.keepFormat = true
		case v[0] != "escape":
			return `invalid formulas: must be "escape" (the default: a ' before a cell that a spreadsheet would run) or "keep"`
		}
	}
	if v, ok := vals["after"]; ok {
		// A position as a CSV export's cell gives it: with the ' of the
		// formula rule before one that begins with '-'.
		pos, asOf, tag, ok := a.tokens.Positions(req.list).Open(strings.TrimPrefix(v[0], "'"))
		if !ok || req.route.kind("after") != token.ExportPosition {
			return "invalid after: use the position of a line of an export of this form"
		}
		e.after, e.asOf, e.incTag = pos, asOf, tag
	}
	if msg := parseListParams(vals, exportListParams, &e.list); msg != "" {
		return msg
	}
	req.export = e
	return ""
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// msgAfterOfGone answers an after= of an export of another incarnation
// of the form.
const msgAfterOfGone = "invalid after: the position is of an export of a form deleted since, whose ID a new form took; export again without after"

// truncateName bounds a parameter name a 400 quotes back.
func truncateName(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(s)
}

// exportChunk is the most body bytes the export holds before it writes
// them: a slow reader holds at most this much of the server's memory,
// besides the page being read.
const exportChunk = 32 << 10

// gzipState is about what a gzip writer at gzipLevel holds besides its
// output: counted in the export's share of the room when it compresses.
const gzipState = 300 << 10

// exportPage is how many feed entries one read of the export takes; the
// page's byte budget (WithPageBytes) bounds it too.
const exportPage = 1000

// serveExport answers an export: its headers, once the form's feed head
// and the first page are read (so a missing form or a failing store is a
// clean error answer), then its lines as they are read.
func (a *api) serveExport(w http.ResponseWriter, r *http.Request, req exportRequest) {
	if a.feed == nil {
		a.fail(w, r, errNoFeed)
		return
	}
	e := req.export
	var form *wire.Form
	if a.feedForm {
		form = req.form
	}
	// The head is read even to resume (the as-of position is then the
	// resumed export's): it checks that the form is there, and the tag
	// changes with it.
	ctx, done := a.observeCall(req.ctx, observe.OpFeedHead, req.account, req.list.FormID)
	head, inc, err := a.feed.FeedHead(ctx, req.account, req.list.FormID, form)
	done(err)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if head > token.MaxPosition {
		a.fail(w, r, fmt.Errorf("export: feed position %d past %d", head, token.MaxPosition))
		return
	}
	asOf := e.asOf
	if asOf == 0 {
		asOf = head
	}
	// A position of an export of a form deleted since, whose ID a new
	// form took: the new form's feed positions mean other submissions, so
	// resuming would splice two forms into one file. Its incarnation tag
	// tells, and so does an as-of position the form's feed never reached
	// (a feed's head only grows), for a store that tells no incarnation.
	if e.after != 0 && (e.incTag != token.IncarnationTag(inc) || asOf > head) {
		a.fail(w, r, badRequest(msgAfterOfGone))
		return
	}
	tag := a.exportTag(req, head, inc, asOf, acceptsGzip(r.Header.Values("Accept-Encoding")))
	// Nothing the export would send has changed while the form's head
	// has not (submissions never change, and every addition and deletion
	// moves it): a 304 reads no row.
	if notModified(w, r, tag, cachePage, varyPage) {
		return
	}
	x := &exporter{a: a, req: req.request, e: e, asOf: asOf, positions: a.tokens.Positions(req.list), refs: a.tokens.Refs(req.list, inc), inc: inc, incTag: token.IncarnationTag(inc), form: form}
	if e.filtered() {
		x.clauses, x.term = e.list.clauses(), e.list.Search
		x.keys, x.keyed = find.ClauseKeys(x.clauses), find.KeyedClause(x.clauses)
		if x.keyed >= 0 {
			x.values = x.clauses[x.keyed].Values
			if x.clauses[x.keyed].Op == find.OpEq {
				x.values = []string{x.clauses[x.keyed].Value}
			}
		}
		if len(x.clauses) <= find.MaxClauses {
			x.locate = make([]string, len(x.clauses))
			for i, c := range x.clauses {
				x.locate[i] = c.Field
			}
		}
	}
	if e.format == formatCSV {
		columns := x.columns
		if a.fields != nil {
			columns = x.fieldColumns
		}
		if err := columns(); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	// The first page is read before the status line, so that a failure
	// there is still an error answer.
	x.next, x.done, x.first = e.after, false, true
	if err := x.read(); err != nil {
		a.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/jsonl; charset=utf-8")
	if e.format == formatCSV {
		h.Set("Content-Type", "text/csv; charset=utf-8; header=present")
	}
	h.Set("Content-Disposition", `attachment; filename="`+req.list.FormID+"."+e.format+`"`)
	h.Set("Cache-Control", cachePage)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", tag)
	h.Set("Vary", varyPage)
	h.Set("Accept-Ranges", "none")
	floor := int64(0)
	if e.after == 0 {
		floor = x.purged // as a reader from sync=start (see listFeed)
	}
	// The token carries the form's incarnation, as the feed's own do: read
	// after the form was deleted and created again, it is a 410.
	sync := a.tokens.SealSync(req.list, token.Sync{Pos: asOf, Floor: floor, Incarnation: inc})
	h.Set("Sync-Token", sync)
	h.Set("Link", "<"+a.linkBase(r)+req.path()+"?"+url.Values{"sync": {sync}}.Encode()+`>; rel="next"`)
	gz := acceptsGzip(r.Header.Values("Accept-Encoding"))
	if gz {
		h.Set("Content-Encoding", "gzip")
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	// Past the status line, a panic (a host's store or signer) must break
	// the response too: recoverPanics's error answer would be written into
	// the file, which would then end as if complete.
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				a.log(w, r, slog.LevelError, "formsapi: panic serving request",
					slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
			}
			panic(http.ErrAbortHandler)
		}
	}()
	x.out = &chunkWriter{w: w, rc: http.NewResponseController(w), stall: a.cfg.access.stall, now: a.cfg.deadlineNow}
	// The status line and headers go at once: the client has its first
	// byte, and the Sync-Token, before the first chunk is full.
	if err := x.out.deadline(); err != nil {
		panic(http.ErrAbortHandler)
	}
	if err := x.out.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		panic(http.ErrAbortHandler)
	}
	x.out.sent = x.out.clock()
	if gz {
		req.room.grow(gzipState)
		zw := gzipPool.Get().(*gzip.Writer)
		zw.Reset(x.out)
		defer gzipPool.Put(zw)
		x.dst = zw
	} else {
		x.dst = x.out
	}
	if err := x.stream(); err != nil {
		// Past the status line, the only way to tell the client that the
		// file is incomplete is to break the response: a client resumes
		// from the last complete line.
		switch {
		case errors.Is(err, errRateLimited):
			a.log(w, r, slog.LevelInfo, "formsapi: export stopped by the rate limit")
		case errors.Is(err, ErrInvalidKey) || errors.Is(err, ErrFormNotFound):
			a.log(w, r, slog.LevelInfo, "formsapi: export stopped: its key no longer reads the form, or the form was deleted (and perhaps created again)")
		case r.Context().Err() == nil:
			a.logThrottled(logStoreFailed, w, r, slog.LevelError, "formsapi: export stopped", slog.Any("err", err))
		}
		panic(http.ErrAbortHandler)
	}
	if zw, ok := x.dst.(*gzip.Writer); ok {
		if err := zw.Close(); err != nil {
			panic(http.ErrAbortHandler)
		}
	}
	if err := x.out.flush(); err != nil {
		panic(http.ErrAbortHandler)
	}
}

// exportTag is the strong ETag of an export (a weak one, covering the
// signing window too, when WithAttachmentURLs signs its URLs): a MAC, under the cursor
// secret, of the account, the form, the feed's head (every addition
// and deletion moves it), the form's incarnation (a form created again
// with the ID of a deleted one may reach the same head with other
// submissions), the as-of position, where it starts, the format with its
// options, and the content coding (a strong tag names one byte
// sequence).
func (a *api) exportTag(req exportRequest, head int64, inc uint64, asOf int64, gz bool) string {
	m := hmac.New(sha256.New, a.tags.exportKey[:])
	for _, s := range []string{req.list.Account, req.list.FormID, req.export.format} {
		m.Write(binary.BigEndian.AppendUint64(nil, uint64(len(s))))
		m.Write([]byte(s))
	}
	var b []byte
	b = binary.BigEndian.AppendUint64(b, uint64(head))
	b = binary.BigEndian.AppendUint64(b, inc)
	b = binary.BigEndian.AppendUint64(b, uint64(asOf))
	b = binary.BigEndian.AppendUint64(b, uint64(req.export.after))
	for _, f := range []bool{req.export.bom, req.export.keepFormat, gz} {
		if f {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	if req.export.filtered() {
		// The filters and the search, canonical (as a cursor seals
		// them); nothing for the whole form, whose tags stay what they
		// were.
		b = req.export.list.AppendKey(b)
	}
	if s := a.cfg.signer; s != nil {
		// Signed URLs change from window to window: the tag does too, and
		// is weak, since an export that outlasts a window signs its later
		// lines in the next (attachments.go).
		b = binary.BigEndian.AppendUint64(b, uint64(s.windowAt(a.now()).UnixNano()))
		m.Write(b)
		return `W/"` + base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16]) + `"`
	}
	m.Write(b)
	return `"` + base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16]) + `"`
}

// exporter streams one export.
type exporter struct {
	a         *api
	req       request
	e         export
	asOf      int64
	positions token.Positions
	inc       uint64 // the form's incarnation, as FeedHead read it (0: not known)
	incTag    uint32 // the form's incarnation tag, in every position
	form      *wire.Form

	page   wire.Page // the page read last, not yet written
	next   int64     // the position the next read starts after
	done   bool      // the page read last reaches the as-of position
	first  bool      // the next read is the stream's first
	purged int64     // the store's Purged at the stream's first page

	cols  map[string]int // CSV: data member → column
	names []string       // CSV: data columns in order
	other bool           // CSV: members past maxColumns, in a last column

	// A filtered export's matcher: the clauses, prepared once, and the
	// search term ("" for none); and the index keys of which a
	// submission must hold one to match (find.ClauseKeys, nil for none),
	// by which a store that keeps each submission's keys leaves out, unread,
	// those that hold none (wire.FeedQuery.Keys), and that clause's
	// values, by which a store may leave out, by a byte search, those
	// whose stored JSON holds none (wire.FeedQuery.Values).
	clauses []find.Clause
	term    string
	keys    []int64
	values  []string
	keyed   int  // find.KeyedClause: the clause keys came from
	allRows bool // columns is reading the form: every submission, whatever the filter
	// The clauses' fields, which the store's page finds in the pass
	// that checks each object (wire.Page.Locate; nil for none), and
	// whether the page read last has their offsets for every object.
	locate  []string
	located bool
	obj     int // the index on the page of the object each is at

	sent     int   // submissions sent since the rate limiter was last asked
	examined int   // a filtered export: entries checked since then
	work     int64 // a filtered export: their work (find.Examined) since then
	pending  bool  // a filtered export: lines written since the last flush
	out      *chunkWriter
	dst      io.Writer

	// Buffers reused from line to line: a line is written with none
	// allocated (BenchmarkExport).
	refs     *token.Refs
	line     []byte   // the line
	ref, pos []byte   // its ref and position
	tmp      []byte   // CSV: a decoded or compacted value
	cells    [][]byte // CSV: the data columns' values
	otherBuf []byte   // CSV: the otherData cell
	signed   []byte   // the submission with its attachments' URLs signed
}

// maxColumns bounds the CSV's data columns: the members of data past the
// first maxColumns names go, as one JSON object, in a last column
// otherData.
const maxColumns = 1000

// read reads the page after e.next, within the as-of position; it sets
// done when nothing of the export remains after it.
func (x *exporter) read() error {
	x.page = wire.Page{Body: x.page.Body[:0], Form: x.form, Positions: x.page.Positions[:0], Ends: x.page.Ends[:0], Located: x.page.Located[:0]}
	if !x.allRows {
		x.page.Locate = x.locate
	}
	if x.next >= x.asOf {
		x.done = true
		return nil
	}
	ctx, cancel := x.a.storeContext(x.req)
	defer cancel()
	if !x.first {
		if err := x.recheck(ctx); err != nil {
			return err
		}
	}
	keys, values := x.keys, x.values
	if x.allRows {
		keys, values = nil, nil // the CSV's columns are read from every submission
	}
	next, more, err := x.a.feed.AppendFeed(ctx, x.req.account, x.req.list.FormID, wire.FeedQuery{After: x.next, Limit: exportPage, MaxBytes: x.a.cfg.pageBytes, Keys: keys, Values: values}, &x.page)
	if err != nil {
		return err
	}
	if len(x.page.Positions) != x.page.Objects() || len(x.page.Ends) != len(x.page.Positions) {
		return fmt.Errorf("export: the store gave %d positions for %d submissions", len(x.page.Positions), x.page.Objects())
	}
	if otherIncarnation(x.inc, x.page.Incarnation) {
		// The form was deleted and created again since the export
		// began: the page is another form's, whose refs and positions
		// are not the ones this export makes.
		return fmt.Errorf("export: the form was created again: %w", ErrFormNotFound)
	}
	if x.first {
		x.purged, x.first = x.page.Purged, false
	}
	x.next = next
	x.done = !more || next >= x.asOf
	x.located = x.page.Locate != nil && len(x.page.Located) == len(x.page.Positions)*wire.LocatedStride(len(x.page.Locate))
	return nil
}

// walkedExcluded counts the submissions of the page read last that the
// store left out by their keys (wire.Page.Excluded) as entries a
// filtered export checked (walked): each as its share of their bytes.
func (x *exporter) walkedExcluded() error {
	n, size := int64(x.page.Excluded), x.page.ExcludedBytes
	for i := range n {
		if err := x.walked(size*(i+1)/n - size*i/n); err != nil {
			return err
		}
	}
	return nil
}

// recheck looks the export's key up again, before every page read past
// the first: a key revoked or expired while its export runs, or whose
// scope no longer holds the form, stops the export at its next page (a
// broken response, as for any export that stops), as a page of a list
// would be refused to it; the client's resume then gets the 401 (or 404)
// any request of that key gets. One key lookup per page of up to
// exportPage submissions.
func (x *exporter) recheck(ctx context.Context) error {
	g, _, err := x.a.lookup(ctx, x.req.key, x.req.list.FormID, true)
	if err != nil {
		return fmt.Errorf("export: the key looked up again: %w", err)
	}
	if g.AccountID != x.req.account || !g.Allows(x.req.list.FormID) {
		return fmt.Errorf("export: the key looked up again: %w", ErrFormNotFound)
	}
	return nil
}

// storeContext is the context of one store call of a streamed answer:
// WithStoreTimeout bounds each call, not the whole stream.
func (a *api) storeContext(req request) (context.Context, context.CancelFunc) {
	if a.cfg.storeTimeout > 0 {
		return context.WithTimeout(req.httpCtx, a.cfg.storeTimeout)
	}
	return req.httpCtx, func() {}
}

// each calls fn with every submission of the page read last within the
// as-of position: its feed position and its JSON object.
func (x *exporter) each(fn func(pos int64, obj []byte) error) error {
	start := 0
	for i, pos := range x.page.Positions {
		end := x.page.Ends[i]
		obj := x.page.Body[start:end]
		if len(obj) > 0 && obj[0] == ',' {
			obj = obj[1:]
		}
		start = end
		if pos > x.asOf {
			return nil
		}
		x.obj = i
		if err := fn(pos, obj); err != nil {
			return err
		}
	}
	return nil
}

// fieldColumns reads the CSV's columns from the store's fields
// (FieldStore), in one call before the first byte: the fields whose
// first position is at most the as-of position, in the order of their
// first positions (see docs/api.md). A resumed export has the as-of
// position of the export it continues, so its rows have the same
// columns.
func (x *exporter) fieldColumns() error {
	ctx, cancel := x.a.storeContext(x.req)
	defer cancel()
	names, first, err := x.a.fields.DataFields(ctx, x.req.account, x.req.list.FormID, x.asOf, maxColumns+1)
	if err != nil {
		return err
	}
	if len(first) != len(names) || len(names) > maxColumns+1 {
		return fmt.Errorf("export: the store gave %d fields and %d positions for a limit of %d", len(names), len(first), maxColumns+1)
	}
	x.cols = make(map[string]int, len(names))
	for i, name := range names {
		if first[i] > x.asOf || i > 0 && first[i] < first[i-1] {
			return fmt.Errorf("export: the store gave field %d at position %d, after %d, as of %d", i, first[i], first[max(i-1, 0)], x.asOf)
		}
		if _, dup := x.cols[name]; dup {
			return fmt.Errorf("export: the store gave field %d twice", i)
		}
		if i == maxColumns {
			x.other = true
			break
		}
		x.cols[name] = i
		x.names = append(x.names, name)
	}
	return nil
}

// columns reads the export once, before its first byte, for the CSV's
// header, when the store keeps no fields (FieldStore): the top-level
// members of data, in the order of their first appearance in commit
// order. A resumed export reads them from the beginning too, so that its
// rows have the columns of the export it continues.
func (x *exporter) columns() error {
	x.cols = map[string]int{}
	x.next = 0
	x.allRows = true
	defer func() { x.allRows = false }()
	for {
		if err := x.read(); err != nil {
			return err
		}
		err := x.each(func(_ int64, obj []byte) error {
			var s struct{ Data json.RawMessage }
			if err := json.Unmarshal(obj, &s); err != nil {
				return fmt.Errorf("export: decode a stored submission: %w", err)
			}
			err := wire.Members(s.Data, func(name string, _ json.RawMessage) {
				if _, ok := x.cols[name]; ok {
					return
				}
				if len(x.names) == maxColumns {
					x.other = true
					return
				}
				x.cols[name] = len(x.names)
				x.names = append(x.names, name)
			})
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if x.done {
			return nil
		}
	}
}

// stream writes the whole export: the CSV header, then the lines of the
// page read already and of every page after it.
func (x *exporter) stream() error {
	if x.e.format == formatCSV && x.e.after == 0 { // a resumed file has its header already
		if err := x.header(); err != nil {
			return err
		}
	}
	line := x.writeLine
	if x.e.filtered() {
		line = x.writeMatch
		// A filter may keep nothing for a long walk: what the file opens
		// with (the CSV's header, the gzip header) goes at once.
		x.pending = true
		if err := x.flushMatches(); err != nil {
			return err
		}
	}
	for {
		if err := x.walkedExcluded(); err != nil {
			return err
		}
		if err := x.each(line); err != nil {
			return err
		}
		if x.done {
			return nil
		}
		if err := x.flushMatches(); err != nil {
			return err
		}
		if err := x.keepAlive(); err != nil {
			return err
		}
		if err := x.read(); err != nil {
			return err
		}
	}
}

// exportKeepAlive is how long a filtered, gzip-coded export's walk goes
// without sending a byte before it sends an empty gzip block: within the
// idle timeouts of common proxies and load balancers (60 s and more).
const exportKeepAlive = 15 * time.Second

// keepAlive sends, between two pages of a filtered export coded with
// gzip, an empty deflate block (a sync flush: 5 bytes that decode to
// nothing, valid anywhere in the stream) when nothing was sent for
// exportKeepAlive, so that a proxy that cuts a response idle for longer
// does not cut a walk between two kept lines. The file's bytes are the
// same once decoded. An export without gzip has no such bytes in its
// format (a JSON Lines line or a CSV row is a submission): it sends what
// it opens with at once, and nothing between lines (docs/api.md).
func (x *exporter) keepAlive() error {
	zw, ok := x.dst.(*gzip.Writer)
	if !ok || !x.e.filtered() || x.out.clock().Sub(x.out.sent) < exportKeepAlive {
		return nil
	}
	if err := zw.Flush(); err != nil {
		return err
	}
	return x.out.flush()
}

// writeMatch is writeLine for a filtered export: it checks the
// submission at pos against the filters and the search, with the
// matcher of the lists (find.MatchWork and find.Search, as the stores
// filter pages), counts the check's work, and writes the line of a
// submission they keep.
func (x *exporter) writeMatch(pos int64, obj []byte) error {
	var data, att []byte
	var keep, checked bool
	var matched int
	var err error
	if x.located {
		n := wire.LocatedStride(len(x.locate))
		data, att, keep, matched, checked = matchLocated(obj, x.page.Located[x.obj*n:(x.obj+1)*n], x.clauses)
	}
	switch {
	case checked:
	case x.page.KeysChecked:
		// The store left out what holds none of the keys: the check need
		// not look for their values' bytes first, and is made in the
		// walk that finds data, one pass over it.
		data, att, keep, matched, checked, err = matchParts(obj, x.clauses, x.keyed, &x.tmp)
	default:
		data, att, _, err = submissionParts(obj, &x.tmp)
	}
	if err != nil {
		return err
	}
	switch {
	case checked:
	case x.page.KeysChecked:
		keep, matched = find.MatchKeyed(data, x.clauses, x.keyed)
	default:
		keep, matched = find.MatchValid(data, x.clauses)
	}
	normalized := matched
	if keep && x.term != "" {
		var n int
		keep, n = find.Search(data, attachmentURLs(att), x.term)
		normalized += n
	}
	if err := x.walked(find.Examined(len(data)+len(att), normalized)); err != nil {
		return err
	}
	if !keep {
		return nil
	}
	x.pending = true
	return x.writeLine(pos, obj)
}

// attachmentURLs are the fileUrl of each attachment of a submission's
// JSON array att, for the search's file names (none when it does not
// decode, as internal/stored.FileURLs).
func attachmentURLs(att []byte) []string {
	if len(att) == 0 || string(att) == "[]" {
		return nil
	}
	var as []Attachment
	if json.Unmarshal(att, &as) != nil {
		return nil
	}
	urls := make([]string, len(as))
	for i, a := range as {
		urls[i] = a.FileURL
	}
	return urls
}

// walked counts an entry a filtered export checked, of work bytes
// (find.Examined), and asks the rate limiter again, as a page's worth is
// reached, what a filtered page of the list costs at most: find.MaxExamined
// entries checked, or chargeBytes of their work (charge.go), whichever
// comes first, past the first such (which the request's own decision
// covered). So a filter that keeps nothing still costs its walk, and
// stops, as any export does, when the limiter refuses.
func (x *exporter) walked(work int64) error {
	x.examined++
	x.work += work
	if x.examined <= find.MaxExamined && x.work <= chargeBytes {
		return nil
	}
	x.examined, x.work = 1, work
	return x.ask()
}

// flushMatches sends, between two pages of a filtered export, the lines
// written since the last flush that are still held (in the chunk, and in
// the gzip writer): a filter that keeps few submissions would otherwise
// hold them until 32 KiB have gathered, pages and pages later, and a
// client cut off meanwhile would resume from further back. At most one
// write per page read (1,000 entries), and none for pages without a
// match.
func (x *exporter) flushMatches() error {
	if !x.pending {
		return nil
	}
	x.pending = false
	if zw, ok := x.dst.(*gzip.Writer); ok {
		if err := zw.Flush(); err != nil {
			return err
		}
	}
	return x.out.flush()
}

// writeLine writes the line of the submission at pos, obj its JSON.
func (x *exporter) writeLine(pos int64, obj []byte) error {
	if err := x.account(); err != nil {
		return err
	}
	if s := x.a.cfg.signer; s != nil {
		// Signed as of the window the line is sent in: a long export's
		// later lines carry URLs as fresh as its first (attachments.go).
		var err error
		x.signed, err = s.appendSignedObject(x.req.httpCtx, x.signed[:0], x.req.account, x.req.list.FormID, s.windowAt(x.a.now()), obj)
		if err != nil {
			return err
		}
		obj = x.signed
	}
	b := x.line[:0]
	x.ref = x.refs.Append(x.ref[:0], pos)
	x.pos = x.positions.Append(x.pos[:0], pos, x.asOf, x.incTag)
	ref, position := x.ref, x.pos
	if x.e.format == formatJSONL {
		b = append(b, `{"ref":"`...)
		b = append(b, ref...)
		b = append(b, `","position":"`...)
		b = append(b, position...)
		b = append(b, `",`...)
		b = appendOneLine(b, obj[1:])
		b = append(b, '\n')
	} else {
		var err error
		if b, err = x.csvRow(b, ref, position, obj); err != nil {
			return err
		}
	}
	x.line = b
	_, err := x.dst.Write(b)
	return err
}

// appendOneLine appends JSON text obj with U+0085, U+2028 and U+2029
// escaped (\u0085, \u2028, \u2029), as JSON allows: readers that split
// lines as Unicode does (Python's str.splitlines) would end a JSON Lines
// line at each (RELIABILITY 109). In JSON text they appear only inside
// strings, and in UTF-8 their bytes (C2 85, E2 80 A8, E2 80 A9) start no
// other character, so a byte search finds exactly them.
func appendOneLine(b, obj []byte) []byte {
	c2, e2 := indexFrom(obj, 0, 0xC2), indexFrom(obj, 0, 0xE2)
	start := 0
	for c2 >= 0 || e2 >= 0 {
		i, n := 0, 0 // a terminator's first byte and length; n == 0: none at i
		if c2 >= 0 && (e2 < 0 || c2 < e2) {
			i = c2
			if i+1 < len(obj) && obj[i+1] == 0x85 {
				n = 2
			}
			c2 = indexFrom(obj, i+1, 0xC2)
		} else {
			i = e2
			if i+2 < len(obj) && obj[i+1] == 0x80 && obj[i+2]&^1 == 0xA8 {
				n = 3
			}
			e2 = indexFrom(obj, i+1, 0xE2)
		}
		if n == 0 {
			continue
		}
		b = append(b, obj[start:i]...)
		if n == 2 {
			b = append(b, `\u0085`...)
		} else {
			b = append(b, '\\', 'u', '2', '0', '2', '8'+obj[i+2]-0xA8)
		}
		start = i + n
	}
	return append(b, obj[start:]...)
}

// indexFrom is the index of the first c in b at or past from, or -1.
func indexFrom(b []byte, from int, c byte) int {
	if j := bytes.IndexByte(b[from:], c); j >= 0 {
		return from + j
	}
	return -1
}

// account asks the rate limiter again for every page's worth of
// submissions sent past the first (which the request's own decision
// covered): an export costs what paging through the same submissions
// with the default limit costs. A refusal ends the export; the client
// resumes from its last line once the window allows.
func (x *exporter) account() error {
	x.sent++
	if x.sent <= x.a.cfg.defaultLimit {
		return nil
	}
	x.sent = 1
	return x.ask()
}

// ask asks the rate limiter for one more unit of an export's stream.
func (x *exporter) ask() error {
	if x.a.cfg.access.limiter == nil {
		return nil
	}
	d, err := x.a.decide(x.req.httpCtx, x.req.key, x.req.grant)
	if err != nil && !x.a.cfg.access.failClosed && x.req.httpCtx.Err() == nil {
		return nil // failing open, as a request would be served
	}
	if err != nil {
		return fmt.Errorf("export: rate limiter: %w", err)
	}
	if !d.Allowed {
		return errRateLimited
	}
	return nil
}

// header writes the CSV's header row.
func (x *exporter) header() error {
	var b []byte
	if x.e.bom {
		b = append(b, "\uFEFF"...)
	}
	b = append(b, "ref,position,createdAt"...)
	for _, n := range x.names {
		b = append(b, ',')
		b = appendCSVCell(b, "data."+n, !x.e.keepFormat)
	}
	if x.other {
		b = append(b, ",otherData"...)
	}
	b = append(b, ",attachments\r\n"...)
	_, err := x.dst.Write(b)
	return err
}

// csvRow appends the CSV row of one submission (see docs/api.md for the
// rules): ref, position, createdAt, a cell per data column, otherData
// when there is one, and attachments. It reads obj in one pass, with
// x's buffers (csvjson.go).
func (x *exporter) csvRow(b, ref, position, obj []byte) ([]byte, error) {
	data, att, created, err := submissionParts(obj, &x.tmp)
	if err != nil {
		return b, err
	}
	if cap(x.cells) < len(x.names) {
		x.cells = make([][]byte, len(x.names))
	}
	cells := x.cells[:len(x.names)]
	clear(cells)
	other := x.otherBuf[:0]
	m := members{b: data}
	if !m.open() {
		return b, errDataNotObject
	}
	for {
		raw, escaped, v, more, err := m.next()
		if err != nil {
			return b, err
		}
		if !more {
			break
		}
		name, ok := jsonText(raw, escaped, &x.tmp)
		if !ok {
			return b, errStoredJSON
		}
		if i, ok := x.cols[string(name)]; ok {
			cells[i] = v // the last of duplicates wins, as encoding/json's
			continue
		}
		// A member past maxColumns goes to otherData; so would one the
		// header does not have (a store that breaks the FieldStore
		// contract), were there that column.
		if len(other) == 0 {
			other = append(other, '{')
		} else {
			other = append(other, ',')
		}
		other = appendString(other, string(name))
		other = append(other, ':')
		other = appendCompact(other, v)
	}
	x.otherBuf = other
	// The ref and the position are base64url, which a '-' may start: the
	// formula rule covers them too (RELIABILITY 108), and after= takes a
	// position with its ' (parseExport).
	escape := !x.e.keepFormat
	b = appendCSVCell(b, ref, escape)
	b = append(b, ',')
	b = appendCSVCell(b, position, escape)
	b = append(b, ',')
	if len(created) > 0 && created[0] == '"' {
		text, ok := jsonText(created[1:len(created)-1], bytes.IndexByte(created, '\\') >= 0, &x.tmp)
		if !ok {
			return b, errStoredJSON
		}
		b = append(b, text...)
	} else if len(created) > 0 && string(created) != "null" {
		return b, errStoredJSON
	}
	for _, v := range cells {
		b = append(b, ',')
		b = appendJSONCell(b, v, escape, &x.tmp)
	}
	if x.other {
		b = append(b, ',')
		if len(other) > 0 {
			b = appendCSVCell(b, append(other, '}'), escape)
		}
	}
	b = append(b, ',')
	if len(att) > 0 {
		x.tmp = appendCompact(x.tmp[:0], att)
		if string(x.tmp) != "[]" {
			b = appendCSVCell(b, x.tmp, escape)
		}
	}
	return append(b, "\r\n"...), nil
}

// appendJSONCell appends the cell of one data member's JSON value v (nil:
// absent, an empty cell): a string as its text, a number as written, true
// and false as such, null as an empty cell, an object or array as its
// compact JSON. tmp is scratch space, grown as needed.
func appendJSONCell(b, v []byte, escape bool, tmp *[]byte) []byte {
	if len(v) == 0 {
		return b
	}
	switch v[0] {
	case '"':
		if len(v) < 2 {
			return b
		}
		text, ok := jsonText(v[1:len(v)-1], bytes.IndexByte(v, '\\') >= 0, tmp)
		if !ok {
			return b
		}
		return appendCSVCell(b, text, escape)
	case 'n':
		return b
	case 't', 'f', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return append(b, v...) // numbers untouched, never escaped
	}
	*tmp = appendCompact((*tmp)[:0], v)
	return appendCSVCell(b, *tmp, escape)
}

// formulaTriggers are the first characters that make a spreadsheet read
// a cell as a formula (OWASP ASVS 5.0, 1.2.10; CWE-1236).
const formulaTriggers = "=+-@\t\r\x00"

// formulaLike reports whether text s would be read as a formula: its first
// character, past any leading spaces (U+0020) and byte order marks
// (U+FEFF, which readers drop or trim as they do spaces), is one of
// formulaTriggers. Only these ASCII characters count: a full-width ＝
// (U+FF1D) or another look-alike starts no formula.
func formulaLike[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == ' ':
		case s[i] == 0xEF && i+2 < len(s) && s[i+1] == 0xBB && s[i+2] == 0xBF:
			i += 2
		default:
			return strings.IndexByte(formulaTriggers, s[i]) >= 0
		}
	}
	return false
}

// appendCSVCell appends text s as one RFC 4180 cell: quoted, its quotes
// doubled, when it holds a comma, a quote, CR or LF (or starts or ends
// with a space, which some readers trim); with escape, a ' before it when
// it is formulaLike.
func appendCSVCell[T string | []byte](b []byte, s T, escape bool) []byte {
	if len(s) == 0 {
		return b
	}
	prefix := escape && formulaLike(s)
	quote := !prefix && s[0] == ' ' || s[len(s)-1] == ' '
	for i := 0; i < len(s) && !quote; i++ {
		switch s[i] {
		case ',', '"', '\r', '\n':
			quote = true
		}
	}
	if quote {
		b = append(b, '"')
	}
	if prefix {
		b = append(b, '\'')
	}
	if !quote {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// chunkWriter holds up to exportChunk bytes, then writes them under a
// write deadline of their own, the stall timeout from the write's start
// (WithRateLimit's StallTimeout; none when it is off), and flushes them
// to the client. Unlike a page's (writeChunked), the deadline is not
// bounded by the server's WriteTimeout: an export takes as long as its
// client keeps reading.
type chunkWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
	now   func() time.Time // the clock of deadlines; nil means time.Now (a test's)
	buf   []byte
	sent  time.Time // when bytes last went to the client (by now)
}

// clock returns the time by c's clock.
func (c *chunkWriter) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	if len(c.buf) >= exportChunk {
		if err := c.flush(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// deadline sets the write deadline of the next write: the stall timeout
// from now, or none. It is set as each write starts, however long the
// export read (a filtered export's walk between two matches) since the
// last: the stall timeout bounds a write, not the time between writes.
func (c *chunkWriter) deadline() error {
	var d time.Time
	if c.stall > 0 {
		d = c.clock().Add(c.stall)
	}
	// A writer without deadlines (a test's recorder) has no timeout to
	// renew either.
	if err := c.rc.SetWriteDeadline(d); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// flush writes what c holds and flushes it, under a fresh deadline.
func (c *chunkWriter) flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	if err := c.deadline(); err != nil {
		return err
	}
	if _, err := c.w.Write(c.buf); err != nil {
		return err
	}
	c.buf, c.sent = c.buf[:0], c.clock()
	if err := c.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// headChunk is how many entries one call of a host's FeedStore reads
// when FeedHead walks its feed.
const headChunk = 1000

// FeedHead walks a host's feed to its end, keeping nothing but where it
// ends and the form's incarnation (FeedPage.Incarnation, 0 when the store
// does not tell): a FeedStore has no cheaper way to say it. Its cost is a
// read of the whole feed, in calls of headChunk entries; a walk that
// meets another incarnation (the form was created again meanwhile) starts
// over, up to maxRecuts times.
func (c checkedReader) FeedHead(ctx context.Context, accountID, formID string, _ *wire.Form) (int64, uint64, error) {
	var next int64
	var inc uint64
	for walks := 0; ; {
		page, err := c.feed.SyncSubmissions(ctx, accountID, formID, next, headChunk)
		if err != nil {
			return 0, 0, err
		}
		if otherIncarnation(inc, page.Incarnation) {
			if walks++; walks == maxRecuts {
				return 0, 0, fmt.Errorf("sync submissions: the form was created again %d times while its feed was walked", walks)
			}
			next, inc = 0, 0
			continue
		}
		if page.Next < next || (page.Next == next && page.More) {
			return 0, 0, fmt.Errorf("sync submissions: the store moved from position %d to %d", next, page.Next)
		}
		next, inc = page.Next, max(inc, page.Incarnation) // 0 on a page, of a store that does not tell, leaves it
		if !page.More {
			return next, inc, nil
		}
	}
}
