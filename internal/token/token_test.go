package token

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

var testSecret = []byte("test secret")

// Tokens and a ref that the codec made, in root's cursor.go, before it
// moved here (ff675d3): every token a secret sealed keeps opening, and
// every ref keeps its value, whatever this package becomes.
const (
	fixtureFormsCursor = "i5tRkBPUSj5IcgeG7vHMWY_9mQQUhot6tf90kot5X5EpFjPf"                 // acct's forms list, payload 000000 "fpos"
	fixtureSubsCursor  = "u8HPa7m3dRrh_oE7l13a2INUwDTJFhtYw4T2gkyVTTIkMGcHHCPr_YUZ4uC7Qp7n" // acct's form, payload below + "spos"
	fixtureSubsKey     = "00010000000065937d250000000600"                                   // Newest, since 2024-01-02T03:04:05.000000006Z
	fixtureSync        = "5PrLO8l3Cjf8Skqn1qBXLzNlJBv1UlzEt-ix6K8N"                         // acct's form, position 42
	fixtureSyncFloor   = "XKkaib2V2Qkit1WTN_pkI5yhICctGBEiwzieryKrAQ"                       // acct's form, position 42, floor 7
	fixtureRef         = "gPUDChZdjWg7TRU8pULfsg"                                           // acct's form, position 42
)

var (
	formsList = List{Account: "acct"}
	subsList  = List{Account: "acct", FormID: "form"}
)

func TestTokensOfEarlierVersionsOpen(t *testing.T) {
	t.Parallel()
	c := New(testSecret)
	if p, ok := c.OpenCursor(formsList, fixtureFormsCursor); !ok || string(p) != "\x00\x00\x00fpos" {
		t.Errorf("forms cursor: got (%q, %v), want the payload 000000 fpos", p, ok)
	}
	key, _ := hex.DecodeString(fixtureSubsKey)
	if p, ok := c.OpenCursor(subsList, fixtureSubsCursor); !ok || !bytes.Equal(p, append(key, "spos"...)) {
		t.Errorf("submissions cursor: got (%x, %v), want %s + spos", p, ok, fixtureSubsKey)
	}
	if s, ok := c.OpenSync(subsList, fixtureSync); !ok || s != (Sync{Pos: 42}) {
		t.Errorf("sync token: got (%+v, %v), want position 42", s, ok)
	}
	if s, ok := c.OpenSync(subsList, fixtureSyncFloor); !ok || s != (Sync{Pos: 42, Floor: 7}) {
		t.Errorf("sync token with a floor: got (%+v, %v), want position 42, floor 7", s, ok)
	}
	if got := string(c.AppendRef(nil, subsList, 42)); got != fixtureRef {
		t.Errorf("ref of position 42: got %s, want %s", got, fixtureRef)
	}
}

func TestRoundTrips(t *testing.T) {
	t.Parallel()
	c, same, other := New(testSecret), New(testSecret), New([]byte("another secret"))
	for _, payload := range [][]byte{nil, []byte("p"), bytes.Repeat([]byte{0xff}, 300)} {
		tok := c.SealCursor(subsList, payload)
		if p, ok := same.OpenCursor(subsList, tok); !ok || !bytes.Equal(p, payload) {
			t.Errorf("cursor of %x: a codec of the same secret opened (%x, %v)", payload, p, ok)
		}
		if _, ok := other.OpenCursor(subsList, tok); ok {
			t.Errorf("cursor of %x: a codec of another secret opened it", payload)
		}
	}
	for _, s := range []Sync{{}, {Pos: 1}, {Pos: 1 << 62, Floor: 1 << 61}, {Pos: 0, Floor: 3}} {
		tok := c.SealSync(subsList, s)
		if got, ok := same.OpenSync(subsList, tok); !ok || got != s {
			t.Errorf("sync token of %+v: opened (%+v, %v)", s, got, ok)
		}
		if _, ok := other.OpenSync(subsList, tok); ok {
			t.Errorf("sync token of %+v: a codec of another secret opened it", s)
		}
	}
	if string(c.AppendRef(nil, subsList, 1)) != string(same.AppendRef(nil, subsList, 1)) {
		t.Error("two codecs of one secret make different refs")
	}
	if string(c.AppendRef(nil, subsList, 1)) == string(other.AppendRef(nil, subsList, 1)) {
		t.Error("two secrets make the same ref")
	}
}

// TestBoundToTheList checks that a token of one list opens for no other,
// the field boundary between account and form included.
func TestBoundToTheList(t *testing.T) {
	t.Parallel()
	c := New(testSecret)
	lists := []List{formsList, subsList, {Account: "acct2", FormID: "form"}, {Account: "acctf", FormID: "orm"}, {Account: "acctform"}}
	for i, l := range lists {
		cur, sync := c.SealCursor(l, []byte("p")), c.SealSync(l, Sync{Pos: 5})
		for j, m := range lists {
			_, ok := c.OpenCursor(m, cur)
			_, syncOK := c.OpenSync(m, sync)
			if ok != (i == j) || syncOK != (i == j) {
				t.Errorf("tokens of %+v open for %+v: cursor %v, sync %v", l, m, ok, syncOK)
			}
		}
	}
}

func TestRefusesMalformed(t *testing.T) {
	t.Parallel()
	c := New(testSecret)
	tok := c.SealCursor(subsList, nil)
	long := c.SealCursor(subsList, bytes.Repeat([]byte("x"), MaxLength))
	for _, bad := range []string{"", "a", "!!!!", tok + "=", tok[:len(tok)-1], tok + "AAAA", long, strings.Repeat("A", MaxLength+4)} {
		if _, ok := c.OpenCursor(subsList, bad); ok {
			t.Errorf("cursor %.40q opened", bad)
		}
		if _, ok := c.OpenSync(subsList, bad); ok {
			t.Errorf("sync token %.40q opened", bad)
		}
	}
}

// TestLastCharacterIsStrict checks that a token is accepted in exactly
// one spelling: base64's last character has unused low bits, and a
// decoder that ignores them would accept several strings for one token.
func TestLastCharacterIsStrict(t *testing.T) {
	t.Parallel()
	c := New(testSecret)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	tried := 0
	for n := 0; n < 6; n++ {
		tok := c.SealCursor(subsList, []byte(strings.Repeat("p", n)))
		if _, ok := c.OpenCursor(subsList, tok); !ok {
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
		if _, ok := c.OpenCursor(subsList, twin); ok {
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
