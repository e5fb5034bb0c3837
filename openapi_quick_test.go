package formsapi_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// kin-openapi compiles the JSON Schema it validates against on every call
// of VisitJSON (its JSON Schema 2020 path, which it takes for an OpenAPI
// 3.1 document), and ValidateResponse calls it for the body and for every
// header: under -race that was more than a third of the root package's
// test CPU, most of it after the last test, checking the recorded
// exchanges.
// The quick check below compiles each schema of the document once, with
// the same library, and holds an exchange to the same rules. It decides
// only that an exchange passes: whatever it does not pass (a failure, or
// a case it does not handle, such as a body that is not JSON) goes to kin
// as before, whose verdict and message stand. So the quick check must be
// at least as strict as kin wherever it passes:
// TestOpenAPIValidatorCatchesDrift fails every drifted response both with
// the quick check and with kin alone, for the same reason, and passes
// every correct GET of a documented path through the quick check; TestMain
// has kin check again one distinct exchange in quickSample that the quick
// check passed.

// errNotQuick says the quick check leaves an exchange to kin.
var errNotQuick = errors.New("not passed by the quick check")

// quickSchemas are the compiled schemas, by the document's schema.
var quickSchemas = struct {
	sync.Mutex
	m map[*openapi3.Schema]*jsonschema.Schema // nil: could not compile, left to kin
}{m: map[*openapi3.Schema]*jsonschema.Schema{}}

// quickValidate reports whether v matches s by its compiled schema: nil
// if it does, errNotQuick (or the validation error) if it does not or s
// could not be compiled.
func (c *contract) quickValidate(s *openapi3.Schema, v any) error {
	quickSchemas.Lock()
	compiled, ok := quickSchemas.m[s]
	if !ok {
		var err error
		compiled, err = c.compile(s)
		if err != nil {
			compiled = nil
		}
		quickSchemas.m[s] = compiled
	}
	quickSchemas.Unlock()
	if compiled == nil {
		return errNotQuick
	}
	return compiled.Validate(v)
}

// validate is s.VisitJSON(v) with the contract's options, the quick check
// first.
func (c *contract) validate(s *openapi3.Schema, v any) error {
	if !c.kinOnly && c.quickValidate(s, v) == nil {
		return nil
	}
	return s.VisitJSON(v, c.schemaOpts...)
}

// compile compiles s as kin-openapi does on each call: its JSON with the
// schemas it refers to (#/components/schemas/X) copied into $defs, under
// JSON Schema 2020-12, every format the document uses asserted with
// kin's validator of that format.
func (c *contract) compile(s *openapi3.Schema) (*jsonschema.Schema, error) {
	doc, err := toJSONValue(s)
	if err != nil {
		return nil, err
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("schema is not an object")
	}
	defs := map[string]any{}
	var rewrite func(node any) error
	rewrite = func(node any) error {
		switch node := node.(type) {
		case map[string]any:
			if ref, ok := node["$ref"].(string); ok {
				name, ok := strings.CutPrefix(ref, "#/components/schemas/")
				if !ok || strings.Contains(name, "/") {
					return fmt.Errorf("reference %q", ref)
				}
				node["$ref"] = "#/$defs/" + name
				if _, done := defs[name]; !done {
					target := c.doc.Components.Schemas[name]
					if target == nil || target.Value == nil {
						return fmt.Errorf("no schema %q", name)
					}
					v, err := toJSONValue(target.Value)
					if err != nil {
						return err
					}
					defs[name] = v
					if err := rewrite(v); err != nil {
						return err
					}
				}
			}
			for _, v := range node {
				if err := rewrite(v); err != nil {
					return err
				}
			}
		case []any:
			for _, v := range node {
				if err := rewrite(v); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if _, has := root["$defs"]; has {
		return nil, fmt.Errorf("schema has $defs of its own")
	}
	if err := rewrite(root); err != nil {
		return nil, err
	}
	if len(defs) > 0 {
		root["$defs"] = defs
	}
	compiler := jsonschema.NewCompiler()
	compiler.DefaultDraft(jsonschema.Draft2020)
	formats := map[string]bool{}
	collectQuickFormats(root, formats)
	for name := range formats {
		f, ok := openapi3.SchemaStringFormats[name]
		if !ok {
			return nil, fmt.Errorf("format %q", name) // left to kin
		}
		compiler.RegisterFormat(&jsonschema.Format{Name: name, Validate: func(v any) error {
			if s, ok := v.(string); ok {
				return f.Validate(s)
			}
			return nil
		}})
	}
	compiler.AssertFormat()
	const url = "https://formsapi.test/schema.json"
	if err := compiler.AddResource(url, root); err != nil {
		return nil, err
	}
	return compiler.Compile(url)
}

// toJSONValue is s as kin-openapi writes it, decoded into maps and slices.
func toJSONValue(s *openapi3.Schema) (any, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// collectQuickFormats adds every format a schema's JSON names.
func collectQuickFormats(node any, formats map[string]bool) {
	switch node := node.(type) {
	case map[string]any:
		if f, ok := node["format"].(string); ok && f != "" {
			formats[f] = true
		}
		for _, v := range node {
			collectQuickFormats(v, formats)
		}
	case []any:
		for _, v := range node {
			collectQuickFormats(v, formats)
		}
	}
}

// quickResponse is openapi3filter.ValidateResponse (with
// IncludeResponseStatus) by the compiled schemas: nil only if the
// response passes, its status documented, each header the response
// declares present if required and matching its schema as one value, and
// a JSON body matching the schema of its content type. Anything else,
// including a body of another media type, is left to kin (errNotQuick).
func (c *contract) quickResponse(route *routers.Route, status int, h http.Header, body []byte) error {
	ref := route.Operation.Responses.Status(status)
	if ref == nil {
		ref = route.Operation.Responses.Default()
	}
	if ref == nil || ref.Value == nil {
		return errNotQuick
	}
	r := ref.Value
	for name, hr := range r.Headers {
		if strings.EqualFold(name, "Content-Type") {
			continue
		}
		if hr == nil || hr.Value == nil || hr.Value.Content != nil {
			return errNotQuick
		}
		vals := h.Values(name)
		switch {
		case len(vals) == 0 && !hr.Value.Required:
			continue
		case len(vals) != 1 || vals[0] == "":
			return errNotQuick
		}
		s := hr.Value.Schema
		if s == nil || s.Value == nil || !s.Value.Type.Is("string") {
			return errNotQuick
		}
		if err := c.quickValidate(s.Value, vals[0]); err != nil {
			return err
		}
	}
	if len(r.Content) == 0 {
		return nil
	}
	ct := h.Get("Content-Type")
	content := r.Content.Get(ct)
	if content == nil {
		return errNotQuick
	}
	if content.Schema == nil {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" || content.Schema.Value == nil {
		return errNotQuick
	}
	decode := openapi3filter.RegisteredBodyDecoder("application/json")
	if decode == nil {
		return errNotQuick
	}
	v, err := decode(bytes.NewReader(body), h, content.Schema, func(name string) *openapi3.Encoding { return content.Encoding[name] })
	if err != nil {
		return errNotQuick
	}
	return c.quickValidate(content.Schema.Value, v)
}

// quickPasses reports whether the quick check passes ex, a GET of a
// documented path: the check of TestOpenAPIValidatorCatchesDrift that the
// correct responses do not all go to kin.
func (c *contract) quickPasses(ex exchange) bool {
	body := ex.res.body
	if ex.res.header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return false
		}
		if body, err = io.ReadAll(zr); err != nil {
			return false
		}
	}
	sent, _, _ := strings.Cut(ex.target, "?")
	route, _, found := c.route(newRequest(ex.method, ex.target), sent)
	return found && ex.method == http.MethodGet && ex.res.status != http.StatusNotModified &&
		c.quickResponse(route, ex.res.status, ex.res.header, body) == nil
}
