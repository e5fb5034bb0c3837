package formsapi

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/formsapi/formsapi/internal/find"
)

// The parameters that select a list (order and the filters), each
// described once: how it is read from the query string into a Query, and
// its canonical bytes. Everything else takes them from this table: the
// sealed cursor (so a page reached through a cursor keeps every
// parameter), the cursor's check against the request's own parameters,
// the page's ETag, and the cache keys of stores ([Query.AppendKey]).
// limit, cursor and sync are not here: they say which page, not which
// list. TestEveryQueryFieldIsAParameter fails for a Query field that
// selects a list and is not in this table.
var listParams = []listParam{
	{
		name: "order", field: "Order", sample: "asc",
		parse: func(v string, q *Query) string {
			switch v {
			case "desc":
				q.Order = Newest
			case "asc":
				q.Order = Oldest
			default:
				return `must be "desc" (newest first) or "asc" (oldest first)`
			}
			return ""
		},
		append: func(b []byte, q Query) []byte { return append(b, byte(q.Order)) },
		read: func(b []byte, q *Query) ([]byte, bool) {
			if len(b) < 1 || b[0] > byte(Oldest) {
				return nil, false
			}
			q.Order = Order(b[0])
			return b[1:], true
		},
	},
	timeParam("since", "Since", func(q *Query) *time.Time { return &q.Since }),
	timeParam("until", "Until", func(q *Query) *time.Time { return &q.Until }),
	{
		// filter[<field>]=<value> and filter[<field>][<op>]=<value>,
		// each once: see parseFilters.
		name: "filter", field: "Filters", sample: "filter[email]=a%40b.example&filter[age][gte]=42",
		given:    givenFilters,
		parseAll: parseFilters,
		append:   appendFilters,
		read:     readFilters,
	},
	{
		// q=<term>: a search of the submissions' values (find.ParseTerm).
		name: "q", field: "Search", sample: "Zo%C3%AB",
		parse: func(v string, q *Query) string {
			t, msg := find.ParseTerm(v)
			if msg != "" {
				return msg
			}
			q.Search = t
			return ""
		},
		append: func(b []byte, q Query) []byte { return appendLenString(b, q.Search) },
		read: func(b []byte, q *Query) ([]byte, bool) {
			n, k := binary.Uvarint(b)
			if k <= 0 || n > find.MaxTermBytes || uint64(len(b)-k) < n {
				return nil, false
			}
			q.Search = string(b[k : k+int(n)])
			return b[k+int(n):], true
		},
	},
	sortParam,
	fieldsParam,
}

// sortParam is sort=<field> (ascending) or sort=-<field> (descending):
// the list ordered by a top-level member of the submissions' data
// (find.ParseSort). Its bytes in a key are a marker byte, 0xFF, then the
// value: nothing at all without a sort, so that the keys, cursors and
// tags of every other list are what they were before sort existed. It
// comes before fields, whose first byte is a count of at most 32, so the
// marker is never mistaken for it.
var sortParam = listParam{
	name: "sort", field: "Sort", sample: "-age",
	parse: func(v string, q *Query) string {
		if _, _, msg := find.ParseSort(v); msg != "" {
			return msg
		}
		q.Sort = v
		return ""
	},
	append: func(b []byte, q Query) []byte {
		if q.Sort == "" {
			return b
		}
		return appendLenString(append(b, sortMarker), q.Sort)
	},
	read: func(b []byte, q *Query) ([]byte, bool) {
		if len(b) == 0 || b[0] != sortMarker {
			return b, true
		}
		s, rest, ok := readString(b[1:])
		if !ok {
			return nil, false
		}
		if _, _, msg := find.ParseSort(s); msg != "" {
			return nil, false
		}
		q.Sort = s
		return rest, true
	},
}

// sortMarker starts a sort's bytes in a key (sortParam).
const sortMarker = 0xFF

// listParam is one parameter that selects a list.
type listParam struct {
	name   string // in the query string, and in the 400's message
	field  string // the Query field it sets
	sample string // a valid value other than the default, for tests
	// parse sets the field in q from a non-empty value, or returns what
	// is wrong with the value, for the message of the 400.
	parse func(v string, q *Query) string
	// given and parseAll, when set, replace parse for a parameter that
	// spans several names of the query string (filter[<field>]): given
	// reports whether the request has it, and parseAll sets the field
	// from all of them or returns the whole message of the 400.
	given    func(vals url.Values) bool
	parseAll func(vals url.Values, q *Query) string
	// list marks a comma-separated list (fields): given more than once,
	// its values are one list, as if joined by commas, so the repeated
	// form (fields=email&fields=name, what OpenAPI's explode and most
	// generated clients send) and the joined one (fields=email,name) ask
	// for the same list, with the same canonical bytes, cursor and tag.
	list bool
	// append appends the field's value in q in a canonical form; read
	// reads it back into q, returning the rest of b.
	append func(b []byte, q Query) []byte
	read   func(b []byte, q *Query) ([]byte, bool)
}

// timeParam is a bound on createdAt, an RFC 3339 time.
func timeParam(name, field string, at func(*Query) *time.Time) listParam {
	return listParam{
		name: name, field: field, sample: "2024-05-01T12:00:00.5+02:00",
		parse: func(v string, q *Query) string {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return "must be an RFC 3339 time such as 2024-05-01T12:00:00Z (percent-encode a + in the offset as %2B)"
			}
			if t.IsZero() {
				// Query's zero time is no bound: taken as given, this
				// instant would be read as none (until would list
				// everything, not nothing), so it is refused instead.
				return zeroTimeMessage(name)
			}
			*at(q) = t.UTC()
			return ""
		},
		append: func(b []byte, q Query) []byte { return appendTime(b, *at(&q)) },
		read:   func(b []byte, q *Query) ([]byte, bool) { return readTime(b, at(q)) },
	}
}

// zeroTimeMessage is the 400 of since or until at 0001-01-01T00:00:00Z
// (in any offset), the zero time, which a Query cannot hold as a bound:
// its zero Since or Until is none. No stored submission is created
// before it (the stores keep createdAt in Unix nanoseconds, from 1677 on).
func zeroTimeMessage(name string) string {
	if name == "since" {
		return "0001-01-01T00:00:00Z, the zero time, is not taken as a bound (it would read as none): leave since out, which keeps every submission, none being created before it"
	}
	return "0001-01-01T00:00:00Z, the zero time, is not taken as a bound (it would read as none): no submission is created before it, so there is nothing to list"
}

// AppendKey appends to b a canonical encoding of what selects q's list:
// its order and filters, not its limit, cursor or byte budget. Queries
// with the same key list the same items in the same order. A store that
// caches pages keys them by it (with the list's owner and position), so
// that a parameter added to Query later can never be left out of its
// keys.
func (q Query) AppendKey(b []byte) []byte {
	for _, p := range listParams {
		b = p.append(b, q)
	}
	return b
}

// readKey reads into q what AppendKey wrote, returning the rest of b.
func readKey(b []byte, q *Query) ([]byte, bool) {
	for _, p := range listParams {
		var ok bool
		if b, ok = p.read(b, q); !ok {
			return nil, false
		}
	}
	return b, true
}

// isGiven reports whether vals give p.
func (p listParam) isGiven(vals url.Values) bool {
	if p.given != nil {
		return p.given(vals)
	}
	return p.value(vals) != ""
}

// value is p's value in vals: the first one, or for a list every one
// joined by commas ("" when none is given or each is empty, as an empty
// parameter is an absent one; an empty one beside others is an empty
// name of the list).
func (p listParam) value(vals url.Values) string {
	if !p.list {
		return vals.Get(p.name)
	}
	vs := vals[p.name]
	if !slices.ContainsFunc(vs, func(v string) bool { return v != "" }) {
		return ""
	}
	return strings.Join(vs, ",")
}

// sampleQuery is a query string that gives p its sample value.
func (p listParam) sampleQuery() string {
	if p.parseAll != nil {
		return p.sample
	}
	return url.Values{p.name: {p.sample}}.Encode()
}

// pageParams are every parameter of a list request.
var pageParams = func() []string {
	names := []string{"limit", "cursor"}
	for _, p := range listParams {
		names = append(names, p.name)
	}
	return append(names, "total", "sync", "wait")
}()

// onceParams are those of pageParams that may be given once at most, in
// the order they are checked: all but the lists, whose repetitions are
// one list. Given twice, any other would be ambiguous (which order,
// which since?), and is a 400.
var onceParams = slices.DeleteFunc(slices.Clone(pageParams), func(name string) bool {
	return slices.ContainsFunc(listParams, func(p listParam) bool { return p.name == name && p.list })
})

// parseListParams sets q's order and filters from the query string's
// values, those of the parameters the route reads (params), or returns
// the message of a 400.
func parseListParams(vals url.Values, params []string, q *Query) string {
	for _, p := range listParams {
		if !slices.Contains(params, p.name) || !p.isGiven(vals) {
			continue
		}
		if p.parseAll != nil {
			if msg := p.parseAll(vals, q); msg != "" {
				return msg
			}
			continue
		}
		if msg := p.parse(p.value(vals), q); msg != "" {
			return fmt.Sprintf("invalid %s: %s", p.name, msg)
		}
	}
	if q.Sort != "" && vals.Get("order") != "" && slices.Contains(params, "order") {
		return "invalid order: it cannot be combined with sort, whose direction orders ties too (sort=<field>: oldest first, sort=-<field>: newest first)"
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return "invalid until: must be later than since"
	}
	return ""
}

// fromCursor takes the list's order and filters, and its position, from
// the cursor's c: a request may repeat them, but one it gives differently
// is a 400, whose message it returns.
func fromCursor(vals url.Values, q *Query, c Query) string {
	for _, p := range listParams {
		if p.isGiven(vals) && !bytes.Equal(p.append(nil, *q), p.append(nil, c)) {
			return fmt.Sprintf("invalid cursor: it was issued for another %s", p.name)
		}
	}
	c.Limit, c.MaxBytes = q.Limit, q.MaxBytes
	*q = c
	return ""
}

// appendTime encodes t as a presence byte, then Unix seconds and
// nanoseconds, which covers every year time.Parse accepts.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, uint64(t.Unix()))
	return binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
}

func readTime(b []byte, t *time.Time) ([]byte, bool) {
	if len(b) < 1 {
		return nil, false
	}
	if b[0] == 0 {
		return b[1:], true
	}
	if len(b) < 13 {
		return nil, false
	}
	*t = time.Unix(int64(binary.BigEndian.Uint64(b[1:9])), int64(binary.BigEndian.Uint32(b[9:13]))).UTC()
	return b[13:], true
}

// The filter parameter: filter[<field>]=<value>, an equality on the
// top-level member <field> of a submission's data, and
// filter[<field>][<op>]=<value>, an operator (find.Ops: ne, gt, gte, lt,
// lte, in, exists, prefix, and eq, equality spelled out), several ANDed.
// The value is a JSON literal (a number, true, false, null, or a string
// in double quotes), or else bare text, which is a string
// (find.ParseValue); each operator reads its own (find.ParseClause). An
// operator is a second pair of brackets, never a prefix of the value, so
// that every value equality took before means what it meant: "gte.4" is
// still a string to equal.

// filterPrefix starts every name of the filter parameter.
const filterPrefix = "filter["

func givenFilters(vals url.Values) bool {
	for name := range vals {
		if strings.HasPrefix(name, filterPrefix) || name == "filter" {
			return true
		}
	}
	return false
}

func parseFilters(vals url.Values, q *Query) string {
	var fs []Filter
	type clause struct{ field, op string }
	names := map[clause]string{} // the parameter of each field and operator
	// In name order, so that a request with two faults always hears of
	// the same one.
	for _, name := range slices.Sorted(maps.Keys(vals)) {
		vs := vals[name]
		if name == "filter" {
			return "invalid filter: name the field in brackets, as filter[email]=a@b.example"
		}
		if !strings.HasPrefix(name, filterPrefix) {
			continue
		}
		if !strings.HasSuffix(name, "]") || len(name) == len(filterPrefix) {
			return fmt.Sprintf("invalid %s: a filter is filter[field]=value, the field in brackets", quoteParam(name))
		}
		field := name[len(filterPrefix) : len(name)-1]
		op := find.OpEq
		if f, o, ok := strings.Cut(field, "]["); ok {
			var known bool
			if op, known = find.ParseOp(o); !known {
				return fmt.Sprintf("invalid %s: unknown operator %s: the operators are %s", quoteParam(name), quoteOp(o), strings.Join(find.Ops, ", "))
			}
			field = f
		}
		switch {
		case field == "":
			return fmt.Sprintf("invalid %s: the field name is empty", quoteParam(name))
		case !utf8.ValidString(field):
			// No submission's data has such a member: it is valid UTF-8.
			return fmt.Sprintf("invalid %s: the field name is not valid UTF-8", quoteParam(name))
		case len(field) > find.MaxFieldBytes:
			return fmt.Sprintf("invalid filter: a field name is longer than %d bytes (the filter field length limit)", find.MaxFieldBytes)
		case len(vs) > 1:
			return fmt.Sprintf("invalid %s: the parameter is given more than once", quoteParam(name))
		}
		c, msg := find.ParseClause(field, op, vs[0])
		if msg != "" {
			return fmt.Sprintf("invalid %s: the value %s", quoteParam(name), msg)
		}
		k := clause{field, op}
		if other, ok := names[k]; ok {
			// filter[a]=1 beside filter[a][eq]=1.
			return fmt.Sprintf("invalid %s: %s gives the same field and operator", quoteParam(name), quoteParam(other))
		}
		names[k] = name
		if len(names) > find.MaxClauses {
			return fmt.Sprintf("invalid filter: more than %d clauses (the filter clauses limit)", find.MaxClauses)
		}
		fs = append(fs, Filter{Field: field, Op: FilterOp(op), Value: c.Value, Values: c.Values})
	}
	slices.SortFunc(fs, compareFilters)
	q.Filters = fs
	return ""
}

// compareFilters orders clauses by field, then operator.
func compareFilters(a, b Filter) int {
	if c := strings.Compare(a.Field, b.Field); c != 0 {
		return c
	}
	return strings.Compare(string(a.Op), string(b.Op))
}

// quoteOp is an operator's name as a message shows it.
func quoteOp(op string) string {
	if len(op) > 16 || strings.ContainsFunc(op, func(r rune) bool { return r < ' ' || r == 0x7f || r == '\uFFFD' || r == '[' || r == ']' }) || !utf8.ValidString(op) {
		return "(not shown)"
	}
	return op
}

// quoteParam is a parameter's name as a message shows it: as given,
// unless it is long or not printable text.
func quoteParam(name string) string {
	if len(name) > len(filterPrefix)+find.MaxFieldBytes+len("][prefix]") || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f || r == '\uFFFD' }) {
		return "filter[…]"
	}
	return name
}

// appendFilters encodes the clauses. Equalities alone are their count,
// then each field and value, length-prefixed, as before operators
// existed, so that their cursors, tags and cache keys stay what they
// were. With an operator, the count has its high bit set (filterOps),
// and each clause is its operator's index in find.Ops (0, eq, for
// equality), its field, and its value, or for in the count of its values
// and each of them.
func appendFilters(b []byte, q Query) []byte {
	ops := slices.ContainsFunc(q.Filters, func(f Filter) bool { return f.Op != FilterEq })
	if !ops {
		b = append(b, byte(len(q.Filters)))
		for _, f := range q.Filters {
			b = appendLenString(b, f.Field)
			b = appendLenString(b, f.Value)
		}
		return b
	}
	b = append(b, filterOps|byte(len(q.Filters)))
	for _, f := range q.Filters {
		b = append(b, byte(opIndex(f.Op)))
		b = appendLenString(b, f.Field)
		if f.Op == FilterIn {
			b = append(b, byte(len(f.Values)))
			for _, v := range f.Values {
				b = appendLenString(b, v)
			}
			continue
		}
		b = appendLenString(b, f.Value)
	}
	return b
}

// filterOps marks the encoding of clauses with operators (appendFilters).
const filterOps = 0x80

// opIndex is op's index in find.Ops, equality's ("eq") 0.
func opIndex(op FilterOp) int {
	if op == FilterEq {
		return 0
	}
	return slices.Index(find.Ops, string(op))
}

func readFilters(b []byte, q *Query) ([]byte, bool) {
	if len(b) < 1 {
		return nil, false
	}
	n, ops := int(b[0]&^filterOps), b[0]&filterOps != 0
	if n > find.MaxClauses {
		return nil, false
	}
	b = b[1:]
	if n == 0 {
		q.Filters = nil
		return b, true
	}
	fs := make([]Filter, n)
	for i := range fs {
		var ok bool
		if ops {
			if len(b) < 1 || int(b[0]) >= len(find.Ops) {
				return nil, false
			}
			if b[0] > 0 {
				fs[i].Op = FilterOp(find.Ops[b[0]])
			}
			b = b[1:]
		}
		if fs[i].Field, b, ok = readString(b); !ok {
			return nil, false
		}
		if fs[i].Op == FilterIn {
			if len(b) < 1 || int(b[0]) > find.MaxListValues {
				return nil, false
			}
			fs[i].Values = make([]string, b[0])
			b = b[1:]
			for j := range fs[i].Values {
				if fs[i].Values[j], b, ok = readString(b); !ok {
					return nil, false
				}
			}
			continue
		}
		if fs[i].Value, b, ok = readString(b); !ok {
			return nil, false
		}
	}
	q.Filters = fs
	return b, true
}

// readString reads a length-prefixed string.
func readString(b []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}
