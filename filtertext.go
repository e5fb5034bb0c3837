package formsapi

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/formsapi/formsapi/internal/find"
)

// A filter outside a request: the filter parameters and q of the
// submissions list written as one query string, as a webhook endpoint
// keeps its filter (package webhook). It is read by the list's own
// parser (parseListParams with the export's parameters), so it takes
// exactly what a list takes, under the same limits, with the same
// messages.

// filterTextParams are the parameters a filter's text may hold.
var filterTextParams = []string{"filter", "q"}

// maxFilterText bounds a filter's text before it is parsed: what Go's
// HTTP server takes of a request's head (http.DefaultMaxHeaderBytes), so
// no filter a list request can carry is refused, and none much larger is
// read.
const maxFilterText = 1 << 20

// ParseFilter sets q's Filters and Search from text, the filter
// parameters and q of the submissions list written as a query string
// ("filter[rating][gte]=4&filter[status][in]=open,new&q=zoe"; "" for
// none), read by the parser the list and the export use, under their
// limits (clauses, field and value lengths, list lengths, the term's
// length). Anything else is an error wrapping [ErrInvalidInput] whose
// text is the list's 400 message, naming the clause at fault (or a
// parameter the filter does not take, or malformed percent-encoding);
// q is then unchanged. [Query.FilterText] writes q's back.
func (q *Query) ParseFilter(text string) error {
	if len(text) > maxFilterText {
		return fmt.Errorf("%w: a filter is longer than %d bytes", ErrInvalidInput, maxFilterText)
	}
	vals, err := url.ParseQuery(text)
	if err != nil {
		return fmt.Errorf("%w: the filter is not a query string: check its percent-encoding and use & between parameters", ErrInvalidInput)
	}
	for _, name := range slices.Sorted(maps.Keys(vals)) {
		switch {
		case name == "q":
			if len(vals[name]) > 1 {
				return fmt.Errorf("%w: invalid q: the parameter is given more than once", ErrInvalidInput)
			}
		case name == "filter" || strings.HasPrefix(name, filterPrefix):
			// parseFilters says what is wrong with it
		default:
			return fmt.Errorf("%w: invalid %s: a filter takes only filter[<field>], filter[<field>][<op>] and q", ErrInvalidInput, truncateName(name))
		}
	}
	var c Query
	if msg := parseListParams(vals, filterTextParams, &c); msg != "" {
		return fmt.Errorf("%w: %s", ErrInvalidInput, msg)
	}
	q.Filters, q.Search = c.Filters, c.Search
	return nil
}

// FilterText returns q's Filters and Search as the query string that
// [Query.ParseFilter] reads back to the same Filters and Search: each
// clause's parameter with its canonical value (a string in JSON quotes,
// a number as encoding/json writes it, a prefix and the search term in
// their normal form), percent-encoded, the parameters in name order; ""
// when q has neither. Two filters that keep the same submissions by the
// same clauses have the same text.
func (q Query) FilterText() string {
	vals := url.Values{}
	for _, f := range q.Filters {
		name := filterPrefix + f.Field + "]"
		if f.Op != FilterEq {
			name += "[" + string(f.Op) + "]"
		}
		v := f.Value
		switch f.Op {
		case FilterIn:
			v = strings.Join(f.Values, ",")
		case FilterPrefix:
			v = find.String(f.Value) // quoted: a normal form may start with a quote
		}
		vals.Set(name, v)
	}
	if q.Search != "" {
		vals.Set("q", q.Search)
	}
	return vals.Encode()
}
