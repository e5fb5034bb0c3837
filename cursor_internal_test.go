package formsapi

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestCursorLastCharacterIsStrict checks that a cursor is accepted in
// exactly one spelling: base64's last character has unused low bits,
// and a decoder that ignores them would accept several strings for one
// cursor.
func TestCursorLastCharacterIsStrict(t *testing.T) {
	t.Parallel()
	c := newCursorCodec([]byte("test secret"))
	l := listID{account: "acct", formID: "form"}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	tried := 0
	for n := 0; n < 6; n++ {
		tok := c.seal(l, Query{}, strings.Repeat("p", n))
		if _, ok := c.open(l, tok); !ok {
			t.Fatalf("a cursor the codec sealed does not open: %q", tok)
		}
		if len(tok)%4 == 0 {
			continue // whole groups of three bytes: no unused bits
		}
		tried++
		last := strings.IndexByte(alphabet, tok[len(tok)-1])
		twin := tok[:len(tok)-1] + string(alphabet[last^1]) // flip the lowest, unused, bit
		if raw, err := base64.RawURLEncoding.DecodeString(twin); err != nil || string(raw) != mustDecode(t, tok) {
			t.Fatalf("test setup: %q is not a lax spelling of the same bytes", twin)
		}
		if _, ok := c.open(l, twin); ok {
			t.Errorf("cursor %q opened with its last character's unused bits changed (%q)", tok, twin)
		}
	}
	if tried == 0 {
		t.Fatal("no cursor length with unused bits was tried")
	}
}

func mustDecode(t *testing.T, tok string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
