package formsapi

import (
	"bytes"
	"net/url"
	"reflect"
	"slices"
	"testing"

	"github.com/formsapi/formsapi/internal/token"
)

// pageFields are the Query fields that say which page of a list, not
// which list: everything else is a list parameter and must be in
// listParams.
var pageFields = map[string]bool{"Limit": true, "Cursor": true, "MaxBytes": true}

// TestEveryQueryFieldIsAParameter is the check behind the rule that a
// query parameter is added in one place: a Query field that selects a
// list must be described in listParams, and each parameter there must
// set its field alone, survive the sealed cursor (so page 2 keeps it),
// change the page's tag and change Query.AppendKey (every store's cache
// key).
func TestEveryQueryFieldIsAParameter(t *testing.T) {
	byField := map[string]listParam{}
	for _, p := range listParams {
		byField[p.field] = p
	}
	qt := reflect.TypeFor[Query]()
	for i := range qt.NumField() {
		f := qt.Field(i)
		if _, ok := byField[f.Name]; !ok && !pageFields[f.Name] {
			t.Errorf("Query.%s selects a list but has no entry in listParams: add one, and it is parsed, sealed in cursors, tagged and cache-keyed", f.Name)
		}
	}
	a := newAPI(stubStore{}, blockingKeys{})
	l := token.List{Account: "acct", FormID: "form"}
	for _, p := range listParams {
		var q Query
		if msg := parseListParams(mustQuery(t, p.sampleQuery()), []string{p.name}, &q); msg != "" {
			t.Errorf("%s: the sample %q does not parse: %s", p.name, p.sample, msg)
			continue
		}
		got, zero := reflect.ValueOf(q), reflect.ValueOf(Query{})
		for i := range qt.NumField() {
			changed := !reflect.DeepEqual(got.Field(i).Interface(), zero.Field(i).Interface())
			if name := qt.Field(i).Name; changed != (name == p.field) {
				t.Errorf("%s: parsing %q changed Query.%s: %v, want only %s", p.name, p.sample, name, changed, p.field)
			}
		}
		if bytes.Equal(q.AppendKey(nil), Query{}.AppendKey(nil)) {
			t.Errorf("%s: AppendKey is the same with and without it", p.name)
		}
		opened, inc, ok := a.tokens.open(token.SubmissionsCursor, l, a.tokens.seal(token.SubmissionsCursor, l, 7, q, "pos"))
		if !ok || inc != 7 || opened.Cursor != "pos" || !bytes.Equal(opened.AppendKey(nil), q.AppendKey(nil)) {
			t.Errorf("%s: the cursor does not carry it: sealed %+v, opened %+v", p.name, q, opened)
		}
		if a.pageTag(listRequest{request: request{list: l}, q: q}, "", nil, pageItems{}) == a.pageTag(listRequest{request: request{list: l}}, "", nil, pageItems{}) {
			t.Errorf("%s: the page tag is the same with and without it", p.name)
		}
		// Through the query string, and through a cursor on page 2.
		var base request
		base.list, base.route = l, routeNamed("submissions")
		if req, msg := a.parseQuery(p.sampleQuery(), base); msg != "" || !bytes.Equal(req.q.AppendKey(nil), q.AppendKey(nil)) {
			t.Errorf("%s: the query string gives %+v (%s), want %+v", p.name, req.q, msg, q)
		}
		if next, msg := a.parseQuery("cursor="+a.tokens.seal(token.SubmissionsCursor, l, 0, q, "pos"), base); msg != "" || !bytes.Equal(next.q.AppendKey(nil), q.AppendKey(nil)) {
			t.Errorf("%s: a cursor alone gives %+v (%s), want %+v", p.name, next.q, msg, q)
		}
	}
}

func mustQuery(t *testing.T, raw string) url.Values {
	t.Helper()
	v, err := url.ParseQuery(raw)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFilterKeyEncoding: equalities alone encode as they did before
// operators (count, then each field and value, length-prefixed), so their
// cursors, tags and cache keys stay valid; every operator reads back as
// it was written; and a change of any part changes the key.
func TestFilterKeyEncoding(t *testing.T) {
	eq := Query{Filters: []Filter{{Field: "a", Value: "1"}, {Field: "b", Value: `"x"`}}}
	if got, want := appendFilters(nil, eq), []byte("\x02\x01a\x011\x01b\x03\"x\""); !bytes.Equal(got, want) {
		t.Errorf("equalities encode as %q, want %q as before operators", got, want)
	}
	all := Query{Filters: []Filter{
		{Field: "a", Op: FilterEq, Value: "1"}, {Field: "a", Op: FilterNe, Value: "null"},
		{Field: "b", Op: FilterGt, Value: "1"}, {Field: "b", Op: FilterGte, Value: `"2024-05-01T12:00:00Z"`},
		{Field: "c", Op: FilterLt, Value: `"x"`}, {Field: "c", Op: FilterLte, Value: "2"},
		{Field: "d", Op: FilterIn, Values: []string{`"a"`, "1"}}, {Field: "e", Op: FilterExists, Value: "false"},
	}}
	for _, q := range []Query{eq, all, {Filters: []Filter{{Field: "p", Op: FilterPrefix, Value: "zoe"}}}} {
		b := appendFilters(nil, q)
		var back Query
		rest, ok := readFilters(append(b, 'z'), &back)
		if !ok || string(rest) != "z" || !reflect.DeepEqual(back.Filters, q.Filters) {
			t.Errorf("%+v reads back as %+v (%t, rest %q)", q.Filters, back.Filters, ok, rest)
		}
	}
	seen := map[string]bool{string(appendFilters(nil, all)): true}
	for i := range all.Filters {
		for _, change := range []func(*Filter){
			func(f *Filter) { f.Field += "x" },
			func(f *Filter) {
				f.Op = map[FilterOp]FilterOp{FilterIn: FilterEq, FilterEq: FilterIn}[f.Op]
				if f.Op == FilterIn {
					f.Values = []string{f.Value}
				} else {
					f.Values = nil
				}
			},
			func(f *Filter) { f.Value += "0"; f.Values = append(slices.Clone(f.Values), "0") },
		} {
			q := Query{Filters: slices.Clone(all.Filters)}
			change(&q.Filters[i])
			k := string(appendFilters(nil, q))
			if seen[k] {
				t.Errorf("clause %d changed, the key is one seen before: %+v", i, q.Filters[i])
			}
			seen[k] = true
		}
	}
}
