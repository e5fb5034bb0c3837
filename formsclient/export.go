package formsclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ExportOptions selects an export's format and its options (see the
// API's GET /v1/forms/{formId}/export in docs/api.md). The zero value is
// JSON Lines.
type ExportOptions struct {
	// CSV asks for CSV instead of JSON Lines.
	CSV bool
	// BOM starts a CSV with a UTF-8 byte order mark.
	BOM bool
	// KeepFormulas writes CSV cells that begin with =, +, -, @, tab, CR or
	// NUL as they are, without the ' the server puts before them by
	// default.
	KeepFormulas bool
	// Filters narrows the export to the submissions they keep, as they
	// narrow Submissions: [Filter], [Where], [WhereIn], [WhereExists] and
	// [Search]; any other list option is an error before any request.
	// The file is the whole export's lines that they keep, and a resume
	// asks with the same filters.
	Filters []ListOption
}

// Export writes all of formID's submissions to w, in commit order, as the
// one file the server streams (JSON Lines, or CSV with opts.CSV), and
// returns the sync token the file is as of: read the feed with Sync from
// it to keep the copy current. It writes only complete lines to w. When
// the connection drops, or the server stops the export (its rate limit),
// Export asks again from the last complete line it wrote, after the
// client's backoff or the server's Retry-After, so that w receives the
// very bytes of an uninterrupted export; it gives up after the client's
// tries (WithRetries) in a row without a new line. Errors of the server
// are *Error values, as for Submissions. A line (one submission) longer
// than [WithMaxResponseSize] ends the export with an *Error, so that a
// broken or hostile server cannot make it hold more than about that.
func (c *Client) Export(ctx context.Context, formID string, w io.Writer, opts ExportOptions) (syncToken string, err error) {
	if err := c.ready(); err != nil {
		return "", err
	}
	q := url.Values{}
	if len(opts.Filters) > 0 {
		lq := listOptions(opts.Filters)
		if lq.err != nil {
			return "", lq.err
		}
		for _, name := range lq.given {
			switch name {
			case "Filter", "Where", "WhereIn", "WhereExists", "Search":
			default:
				return "", fmt.Errorf("formsclient: export of %s: %s does not apply to an export (Filter, Where, WhereIn, WhereExists and Search do)", formID, name)
			}
		}
		for k, v := range lq.filters {
			q[k] = v
		}
	}
	if opts.CSV {
		q.Set("format", "csv")
		if opts.BOM {
			q.Set("bom", "true")
		}
		if opts.KeepFormulas {
			q.Set("formulas", "keep")
		}
	}
	x := exportState{csv: opts.CSV}
	fails := 0
	for {
		if x.after != "" {
			q.Set("after", x.after)
		}
		token, progressed, retryAfter, err := c.exportOnce(ctx, formID, q, w, &x)
		if syncToken == "" {
			syncToken = token
		}
		if err == nil {
			return syncToken, nil
		}
		var e *Error
		var re *redirectError
		if errors.As(err, &e) && e.StatusCode != http.StatusTooManyRequests && e.StatusCode != http.StatusServiceUnavailable || ctx.Err() != nil || errors.Is(err, errWrite) || errors.As(err, &re) {
			return "", err
		}
		if progressed {
			fails = 0
		}
		fails++
		if fails >= c.maxTries || retryAfter > c.maxWait {
			return "", fmt.Errorf("formsclient: export of %s: %w", formID, err)
		}
		if err := c.sleep(ctx, c.wait(fails, retryAfter)); err != nil {
			return "", err
		}
	}
}

// errWrite marks an error of the caller's writer: never retried.
var errWrite = errors.New("formsclient: export: writing the file")

// exportState is what Export keeps across its requests: the position of
// the last complete line written, and for a CSV whether its header was
// written and the quoting state of the row being read.
type exportState struct {
	csv    bool
	after  string // position of the last complete line written; "" for none
	header bool   // CSV: the header row is written
}

// exportOnce makes one request of the export, writes its complete lines
// to w, and returns the export's Sync-Token, whether a line was written,
// the server's Retry-After, and nil once the file ended cleanly.
func (c *Client) exportOnce(ctx context.Context, formID string, q url.Values, w io.Writer, x *exportState) (string, bool, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint("/v1/forms/"+url.PathEscape(formID)+"/export", q), nil)
	if err != nil {
		return "", false, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("User-Agent", c.userAgent)
	// Accept-Encoding is left to the transport, which asks for gzip and
	// decodes it as the body streams.
	res, err := c.hc.Do(req)
	if err != nil {
		return "", false, 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		e := newError(res) // with the same status, request ID and waits as a page's
		e.op = "export " + formID
		body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		var env struct{ Message string }
		api := jsonContent(res.Header.Get("Content-Type")) && json.Unmarshal(body, &env) == nil && env.Message != ""
		if api {
			e.Message = env.Message
		} else {
			e.Message = notJSON(res)
		}
		// As a page's: only the API's 404 for the form, not a proxy's page
		// or the API's 404 for a path it does not serve (a wrong base URL).
		e.formNotFound = api && res.StatusCode == http.StatusNotFound && !strings.HasPrefix(e.Message, msgNoRoutePrefix)
		return "", false, e.RetryAfter, e
	}
	token := res.Header.Get("Sync-Token")
	skipHeader := x.csv && x.header && x.after == "" // a fresh start repeats a header already written
	progressed := false
	var pending []byte // a line not yet complete
	quoted := false    // CSV: inside a quoted cell
	buf := make([]byte, 32<<10)
	for {
		n, rerr := res.Body.Read(buf)
		chunk := buf[:n]
		for len(chunk) > 0 {
			end := -1
			for i, b := range chunk {
				if x.csv && b == '"' {
					quoted = !quoted
				}
				if b == '\n' && !quoted {
					end = i
					break
				}
			}
			if end < 0 {
				if int64(len(pending)+len(chunk)) > c.maxBody {
					// A line is one submission: a line without end (or a
					// CSV quote never closed) must not take the memory.
					return token, progressed, 0, &Error{StatusCode: http.StatusOK, RequestID: res.Header.Get("X-Request-Id"), op: "export " + formID,
						Message: fmt.Sprintf("a line of the export is larger than %d bytes (see WithMaxResponseSize)", c.maxBody)}
				}
				pending = append(pending, chunk...)
				break
			}
			line := append(pending, chunk[:end+1]...)
			chunk, pending = chunk[end+1:], pending[:0]
			if x.csv && !x.header || skipHeader {
				// The header row (or its repetition, skipped).
				if !skipHeader {
					if _, err := w.Write(line); err != nil {
						return token, progressed, 0, fmt.Errorf("%w: %w", errWrite, err)
					}
				}
				x.header, skipHeader = true, false
				continue
			}
			pos, ok := linePosition(line, x.csv)
			if !ok {
				return token, progressed, 0, &Error{StatusCode: http.StatusOK, Message: "a line of the export has no position", op: "export " + formID}
			}
			if _, err := w.Write(line); err != nil {
				return token, progressed, 0, fmt.Errorf("%w: %w", errWrite, err)
			}
			x.after, progressed = pos, true
		}
		switch {
		case rerr == io.EOF && len(pending) == 0:
			return token, progressed, 0, nil
		case rerr == io.EOF:
			return token, progressed, 0, io.ErrUnexpectedEOF
		case rerr != nil:
			return token, progressed, 0, rerr
		}
	}
}

// linePosition returns the position a line of the export carries: the
// "position" member of a JSON line, the second cell of a CSV row (the
// ref and the position never need quotes).
func linePosition(line []byte, csv bool) (string, bool) {
	if csv {
		_, rest, ok := bytes.Cut(line, []byte(","))
		pos, _, ok2 := bytes.Cut(rest, []byte(","))
		return string(pos), ok && ok2 && len(pos) > 0
	}
	var v struct {
		Position string `json:"position"`
	}
	if json.Unmarshal(line, &v) != nil || v.Position == "" {
		return "", false
	}
	return v.Position, true
}
