package webhook

import (
	"fmt"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
)

// ParseFilter checks filter, an endpoint's filter: the filter parameters
// and q of the submissions list written as its query string
// ("filter[rating][gte]=4&filter[status][in]=open,new&q=zoe"), read by
// the list's own parser (formsapi.Query.ParseFilter) under the list's
// limits. It returns the filter's canonical text (formsapi.Query.FilterText),
// which is what an endpoint keeps and shows back, "" for none; or an
// error wrapping ErrInvalidEndpoint and formsapi.ErrInvalidInput whose
// text is the list's 400 message, naming the clause at fault.
// Endpoints.AddFiltered and SetFilter call it: hosts that take a filter
// from their users may call it first to answer them.
func ParseFilter(filter string) (string, error) {
	if filter == "" {
		return "", nil
	}
	var q formsapi.Query
	if err := q.ParseFilter(filter); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidEndpoint, err)
	}
	return q.FilterText(), nil
}

// matcher is an endpoint's filter, read once per pass: nil keeps every
// addition.
type matcher struct {
	clauses []find.Clause // prepared
	term    string        // q's normal form, "" for none
}

// newMatcher reads an endpoint's stored filter; "" is nil, which keeps
// every addition. A stored filter that no longer parses is an error.
func newMatcher(filter string) (*matcher, error) {
	if filter == "" {
		return nil, nil
	}
	var q formsapi.Query
	if err := q.ParseFilter(filter); err != nil {
		return nil, err
	}
	if len(q.Filters) == 0 && q.Search == "" {
		return nil, nil
	}
	cs := make([]find.Clause, len(q.Filters))
	for i, f := range q.Filters {
		cs[i] = find.Clause{Field: f.Field, Op: string(f.Op), Value: f.Value, Values: f.Values}
	}
	return &matcher{clauses: find.Prepare(cs), term: q.Search}, nil
}

// keeps reports whether the endpoint receives the addition of s: s
// satisfies every clause and contains the term, as the submissions list
// with the same parameters would list it (formsapi.Query.Finds: the
// attachments' file names as stored, before any signing).
func (m *matcher) keeps(s formsapi.Submission) bool {
	if m == nil {
		return true
	}
	if !find.Match(s.Data, m.clauses) {
		return false
	}
	if m.term == "" {
		return true
	}
	files := make([]string, len(s.Attachments))
	for i, a := range s.Attachments {
		files[i] = a.FileURL
	}
	return find.SearchMatch(s.Data, files, m.term)
}
