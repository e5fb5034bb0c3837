package formsapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/formsapi/formsapi/internal/find"
)

// TestCanonicalTextIsFinds: the summary's shortcut gives find.Canonical's
// text for every value, those it takes as they are and those it does not.
func TestCanonicalTextIsFinds(t *testing.T) {
	for _, raw := range []string{`"plain"`, `"a<b>&c"`, `""`, `"tab\t"`, `"é"`, `"\u00e9"`, `"\u2028"`, `"quote\""`, "\"\x7f\"",
		`0`, `-0`, `42`, `-42`, `042`, `42.0`, `4.2e1`, `123456789012345`, `1234567890123456789`, `-`, `true`, `false`, `null`, `{}`, `[1]`} {
		want, wantOK := find.Canonical([]byte(raw))
		got, ok := canonicalText([]byte(raw))
		if ok != wantOK || string(got) != want {
			t.Errorf("%s: got %q %v, want %q %v", raw, got, ok, want, wantOK)
		}
	}
}

// TestSummaryTallyBounded: submissions built to fill every tally (100
// fields, each with 1,000 distinct values of 250 bytes) keep at most
// summaryTallyBytes of names and values; past it a field's distinct is
// a lower bound. Before the bound the tally held 25 MB for one request
// while the request's room was one page (4 MiB).
func TestSummaryTallyBounded(t *testing.T) {
	tl := &summaryTally{named: map[string]*fieldTally{}}
	pad := strings.Repeat("v", 240)
	for i := range 1000 {
		var b []byte
		b = fmt.Appendf(b, `{"createdAt":"2025-01-01T00:00:00Z","data":{`)
		for f := range summaryFields {
			if f > 0 {
				b = append(b, ',')
			}
			b = fmt.Appendf(b, `"f%03d":"%s%06d"`, f, pad, i)
		}
		b = append(b, "}}"...)
		if err := tl.addPage(b); err != nil {
			t.Fatal(err)
		}
	}
	kept, overflow := 0, 0
	for _, f := range tl.fields {
		kept += len(f.name)
		for v := range f.values {
			kept += len(v)
		}
		if f.overflow {
			overflow++
		}
	}
	if kept > summaryTallyBytes {
		t.Errorf("the tally keeps %d bytes of names and values, want at most %d", kept, summaryTallyBytes)
	}
	if overflow == 0 {
		t.Errorf("no field's distinct is a lower bound, though values were left out")
	}
	if len(tl.fields) != summaryFields {
		t.Errorf("%d fields, want all %d (their names are small)", len(tl.fields), summaryFields)
	}
}

// TestSummaryCacheCountsKeys: the summaries kept, their keys included,
// stay within summaryCacheBytes. A key's parameters (eight clauses of
// in lists) can be 64 KiB while its summary is a few hundred bytes;
// before, only bodies were counted, and a client asking for small
// summaries under large filters made the handler keep a GiB of keys.
func TestSummaryCacheCountsKeys(t *testing.T) {
	var c summaryCache
	params := strings.Repeat("p", 64<<10)
	body := []byte(strings.Repeat("b", 300))
	for i := range 2000 {
		k := summaryKey{account: "acct", formID: "form", seq: int64(i), params: params}
		c.put(k, &summaryEntry{version: 1, body: body, tag: `W/"tag"`})
	}
	held := 0
	for k, e := range c.m {
		held += len(k.params) + len(e.body)
	}
	if held > summaryCacheBytes {
		t.Errorf("the cache holds %d bytes of keys and bodies in %d entries, want at most %d", held, len(c.m), summaryCacheBytes)
	}
	if len(c.m) == 0 {
		t.Error("the cache kept nothing")
	}
}
