package formsapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/formsapi/formsapi/internal/token"
)

// routeNamed returns the route of the table with that name.
func routeNamed(name string) *route {
	for _, rt := range routes {
		if rt.name == name {
			return rt
		}
	}
	panic("no route " + name)
}

// openAPIOperations reads, from the embedded document, each path's
// operations by method: their operationId and query parameters.
func openAPIOperations(t *testing.T) map[string]map[string]openAPIOperation {
	t.Helper()
	var doc struct {
		Paths      map[string]map[string]json.RawMessage
		Components struct {
			Parameters map[string]struct{ Name, In string }
		}
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	ops := map[string]map[string]openAPIOperation{}
	for path, methods := range doc.Paths {
		ops[path] = map[string]openAPIOperation{}
		for method, raw := range methods {
			var op struct {
				OperationID string
				Parameters  []struct {
					Ref      string `json:"$ref"`
					Name, In string
				}
			}
			if json.Unmarshal(raw, &op) != nil || op.OperationID == "" {
				continue
			}
			o := openAPIOperation{id: op.OperationID}
			for _, p := range op.Parameters {
				if p.Ref != "" {
					c := doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
					p.Name, p.In = c.Name, c.In
				}
				if p.In == "query" {
					o.query = append(o.query, p.Name)
				}
			}
			ops[path][method] = o
		}
	}
	return ops
}

type openAPIOperation struct {
	id    string
	query []string
}

// missingPieces returns what rt lacks of the route checklist
// (docs/architecture.md), each as a sentence; every route of the table
// must have none. ops are the OpenAPI document's operations, and kinds
// counts the routes that take each token kind.
func missingPieces(rt *route, ops map[string]map[string]openAPIOperation, kinds map[token.Kind]int) []string {
	var miss []string
	for i, method := range []string{"get", "head"} {
		op, ok := ops[rt.path][method]
		switch {
		case rt.operations[i] == "":
			miss = append(miss, fmt.Sprintf("no OpenAPI operation for %s", strings.ToUpper(method)))
		case !ok || op.id != rt.operations[i]:
			miss = append(miss, fmt.Sprintf("openapi.json has no %s %s with operationId %q", strings.ToUpper(method), rt.path, rt.operations[i]))
		case !sameSet(op.query, rt.params):
			miss = append(miss, fmt.Sprintf("openapi.json's %s %s has the query parameters %v, the route %v", strings.ToUpper(method), rt.path, op.query, rt.params))
		}
	}
	if rt.rate == 0 {
		miss = append(miss, "no rate accounting")
	}
	if !rt.keyed {
		if rt.static == nil {
			miss = append(miss, "no handler")
		}
		if len(rt.params) > 0 || len(rt.tokens) > 0 || rt.link != nil || rt.rate != rateKeyless {
			miss = append(miss, "a route without a key that reads parameters, takes tokens, sends a Link or is counted")
		}
		return miss
	}
	if rt.serve == nil {
		miss = append(miss, "no handler (keyed: its parse and serve)")
	}
	if rt.rate == rateKeyless {
		miss = append(miss, "a keyed route that the rate limiter does not count")
	}
	if rt.room == 0 {
		miss = append(miss, "no room decision: a keyed route reserves room for what it holds before it reads (roomPage; see room.go)")
	}
	if rt.whole {
		if len(rt.tokens) > 0 || rt.link != nil {
			miss = append(miss, "a whole answer (nothing to resume) that takes a token or sends a Link")
		}
		return miss
	}
	if len(rt.tokens) == 0 {
		miss = append(miss, "no cursor kind: every keyed route takes a token of its own to resume from, unless its answer is whole (whole)")
	}
	for param, k := range rt.tokens {
		switch {
		case !slices.Contains(rt.params, param):
			miss = append(miss, fmt.Sprintf("a token kind for %s, which is not one of its parameters", param))
		case k == 0:
			miss = append(miss, fmt.Sprintf("no cursor kind for %s", param))
		case kinds[k] > 1:
			miss = append(miss, fmt.Sprintf("the %s it takes in %s is taken by another route or parameter too", k, param))
		}
	}
	if rt.link == nil {
		miss = append(miss, "no Link path")
	} else if p := rt.link("f1"); !strings.HasPrefix(p, "/v1/") || strings.Contains(p, "{") {
		miss = append(miss, fmt.Sprintf("a Link path %q that is not a path of the API", p))
	}
	return miss
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func tokenKinds(rs []*route) map[token.Kind]int {
	kinds := map[token.Kind]int{}
	for _, rt := range rs {
		for _, k := range rt.tokens {
			kinds[k]++
		}
	}
	return kinds
}

// TestEveryRouteHasEveryPiece holds every route of the table to the
// checklist of docs/architecture.md, as TestEveryQueryFieldIsAParameter
// holds Query's fields: an OpenAPI operation for GET and HEAD whose query
// parameters are the route's, a token kind of its own for each
// parameter that takes a token, the path its Link points at, and how the
// rate limiter counts it.
func TestEveryRouteHasEveryPiece(t *testing.T) {
	ops := openAPIOperations(t)
	kinds := tokenKinds(routes)
	names, paths := map[string]bool{}, map[string]bool{}
	for _, rt := range routes {
		if names[rt.name] || paths[rt.path] {
			t.Errorf("route %s: its name or path %s is another route's too", rt.name, rt.path)
		}
		names[rt.name], paths[rt.path] = true, true
		for _, m := range missingPieces(rt, ops, kinds) {
			t.Errorf("route %s: %s", rt.name, m)
		}
	}
}

// TestAMissingPieceFails shows what TestEveryRouteHasEveryPiece reports
// when a route leaves a piece out: each piece taken from a real route in
// turn is reported, by name.
func TestAMissingPieceFails(t *testing.T) {
	ops := openAPIOperations(t)
	for _, c := range []struct {
		name  string
		cut   func(rt *route)
		other *route // a second route beside it, or nil
		want  string
	}{
		{"no GET operation", func(rt *route) { rt.operations[0] = "" }, nil, "no OpenAPI operation for GET"},
		{"no HEAD operation", func(rt *route) { rt.operations[1] = "" }, nil, "no OpenAPI operation for HEAD"},
		{"an operation openapi.json lacks", func(rt *route) { rt.operations[0] = "exportSubmissions" }, nil, "openapi.json has no GET"},
		{"a parameter openapi.json lacks", func(rt *route) { rt.params = append(slices.Clone(rt.params), "format") }, nil, "has the query parameters"},
		{"no cursor kind", func(rt *route) { rt.tokens = nil }, nil, "no cursor kind"},
		{"a zero cursor kind", func(rt *route) { rt.tokens = map[string]token.Kind{"cursor": 0} }, nil, "no cursor kind for cursor"},
		{"another route's cursor kind", func(*route) {}, &route{tokens: map[string]token.Kind{"cursor": token.SubmissionsCursor}}, "is taken by another route"},
		{"no Link path", func(rt *route) { rt.link = nil }, nil, "no Link path"},
		{"a Link path with a wildcard", func(rt *route) { rt.link = func(string) string { return pathSubmissions } }, nil, "not a path of the API"},
		{"no rate accounting", func(rt *route) { rt.rate = 0 }, nil, "no rate accounting"},
		{"a keyed route not counted", func(rt *route) { rt.rate = rateKeyless }, nil, "does not count"},
		{"no room decision", func(rt *route) { rt.room = 0 }, nil, "no room decision"},
		{"a whole answer with a cursor", func(rt *route) { rt.whole = true }, nil, "a whole answer"},
	} {
		rt := *routeNamed("submissions")
		c.cut(&rt)
		rs := []*route{&rt}
		if c.other != nil {
			rs = append(rs, c.other)
		}
		miss := missingPieces(&rt, ops, tokenKinds(rs))
		if !slices.ContainsFunc(miss, func(m string) bool { return strings.Contains(m, c.want) }) {
			t.Errorf("%s: reported %q, want a report containing %q", c.name, miss, c.want)
		}
	}
}

// TestNotFoundNamesEveryRoute: the 404 of a path the API does not serve
// lists every route of the table, a route added to it too.
func TestNotFoundNamesEveryRoute(t *testing.T) {
	msg := noRouteMessage()
	if !strings.HasPrefix(msg, "not found: the API serves GET ") { // formsclient tells a wrong base URL by it
		t.Errorf("message %q", msg)
	}
	for _, rt := range routes {
		if !strings.Contains(msg, "GET "+rt.path) {
			t.Errorf("message %q does not name route %s (%s)", msg, rt.name, rt.path)
		}
	}
	saved := routes
	t.Cleanup(func() { routes = saved })
	routes = append(slices.Clone(saved), &route{name: "new", path: "/v1/new"})
	if msg := noRouteMessage(); !strings.HasSuffix(msg, ", GET /v1/openapi.json and GET /v1/new") {
		t.Errorf("with a route added: %q", msg)
	}
}
