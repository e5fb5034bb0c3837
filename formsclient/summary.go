package formsclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/formsapi/formsapi"
)

// Summary is the summary of a form's submissions, as
// GET /v1/forms/{formId}/summary answers it (docs/api.md): each figure a
// formsapi.Total, whose Kind ("exact", "at_least" or "estimate") says how
// far to trust its Value.
type Summary struct {
	FormID string `json:"formId"`
	// Count is how many submissions the list holds.
	Count formsapi.Total `json:"count"`
	// Read is how many submissions the server read for the summary,
	// newest first (at most 10,000), and whether they were the whole
	// list: then every figure is exact.
	Read SummaryRead `json:"read"`
	// Interval is the buckets' length: "hour", "day" or "week".
	Interval string `json:"interval"`
	// Buckets are the list's submissions per interval, oldest first.
	Buckets []SummaryBucket `json:"buckets"`
	// Fields are the top-level data fields of the submissions read, the
	// most present first, at most 100; MoreFields reports that there
	// were more.
	Fields     []SummaryField `json:"fields"`
	MoreFields bool           `json:"moreFields"`
}

// SummaryRead is what the server read for a [Summary].
type SummaryRead struct {
	Value    int64 `json:"value"`
	Complete bool  `json:"complete"`
}

// SummaryBucket is one interval of a [Summary]: its start, in UTC, and
// how many submissions of the list it holds.
type SummaryBucket struct {
	Start time.Time      `json:"start"`
	Count formsapi.Total `json:"count"`
}

// SummaryField is one data field of a [Summary]: how many submissions
// have it (not null), how many distinct scalar values it has, and its
// most frequent values.
type SummaryField struct {
	Name     string         `json:"name"`
	Present  formsapi.Total `json:"present"`
	Distinct formsapi.Total `json:"distinct"`
	Top      []SummaryValue `json:"top"`
}

// SummaryValue is one of a field's most frequent values, as canonical
// JSON (numbers by value), and how many submissions have it.
type SummaryValue struct {
	Value json.RawMessage `json:"value"`
	Count formsapi.Total  `json:"count"`
}

// Summary returns the summary of the form formID, its buckets interval
// long ("hour", "day" or "week"; "" is the server's default, day), each
// field's top most frequent values (0 to 20; the server's default is 5).
// Of the list options it takes those that select the list, [Since],
// [Until], [Filter], [Where], [WhereIn], [WhereExists] and [Search]; the
// others are an error before any request. A form that is not the key's
// account's is an [*Error] matching formsapi.ErrFormNotFound, as for
// [Client.Submissions].
func (c *Client) Summary(ctx context.Context, formID, interval string, top int, opts ...ListOption) (Summary, error) {
	l := submissionsList(fmt.Sprintf("summary of form %q", formID), formID)
	if err := c.ready(); err != nil {
		return Summary{}, err
	}
	q := listOptions(opts)
	if err := l.refuse(q, false); err != nil {
		return Summary{}, err
	}
	for _, name := range q.given {
		switch name {
		case "Since", "Until", "Filter", "Where", "WhereIn", "WhereExists", "Search":
		default:
			return Summary{}, fmt.Errorf("formsclient: %s: %s does not apply to a summary (Since, Until, Filter, Where, WhereIn, WhereExists and Search do)", l.op, name)
		}
	}
	p := url.Values{}
	q.setSelection(p)
	if interval != "" {
		p.Set("interval", interval)
	}
	p.Set("top", strconv.Itoa(top))
	path := "/v1/forms/" + url.PathEscape(formID) + "/summary"
	res, err := c.get(ctx, c.endpoint(path, p), true, "", nil)
	if e, ok := err.(*Error); ok {
		e.op = l.op
		return Summary{}, e
	}
	if err != nil {
		return Summary{}, fmt.Errorf("formsclient: %s: %w", l.op, err)
	}
	var env struct {
		Success *bool    `json:"success"`
		Summary *Summary `json:"summary"`
	}
	if err := json.Unmarshal(res.body, &env); err != nil || env.Success == nil || !*env.Success || env.Summary == nil {
		return Summary{}, &Error{StatusCode: res.status, Message: "the response is not a summary of the API", RequestID: res.requestID, op: l.op}
	}
	return *env.Summary, nil
}
