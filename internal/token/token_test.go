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
// moved here and before tokens had kinds (ff675d3): every token a secret
// sealed then keeps opening as what it was, and every ref keeps its value.
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

// exportPosition stands for the kind of a route added later: it too is
// refused as every other kind, and they as it.
const exportPosition Kind = 4

var kinds = []Kind{FormsCursor, SubmissionsCursor, SyncToken, exportPosition}

func TestTokensOfEarlierVersionsOpen(t *testing.T) {
	t.Parallel()
	c := New(testSecret)
	if inc, p, ok := c.Open(FormsCursor, formsList, fixtureFormsCursor); !ok || inc != 0 || string(p) != "\x00\x00\x00fpos" {
		t.Errorf("forms cursor: got (%d, %q, %v), want (0, 000000 fpos, true)", inc, p, ok)
	}
	key, _ := hex.DecodeString(fixtureSubsKey)
	if inc, p, ok := c.Open(SubmissionsCursor, subsList, fixtureSubsCursor); !ok || inc != 0 || !bytes.Equal(p, append(key, "spos"...)) {
		t.Errorf("submissions cursor: got (%d, %x, %v), want (0, %s + spos, true)", inc, p, ok, fixtureSubsKey)
	}
	if s, ok := c.OpenSync(subsList, fixtureSync); !ok || s != (Sync{Pos: 42}) {
		t.Errorf("sync token: got (%+v, %v), want position 42", s, ok)
	}
	if s, ok := c.OpenSync(subsList, fixtureSyncFloor); !ok || s != (Sync{Pos: 42, Floor: 7}) {
		t.Errorf("sync token with a floor: got (%+v, %v), want position 42, floor 7", s, ok)
	}
	if got := string(c.AppendRef(nil, subsList, 0, 42)); got != fixtureRef {
		t.Errorf("ref of position 42: got %s, want %s", got, fixtureRef)
	}
	// Each opens as its own kind alone.
	for _, f := range []struct {
		tok  string
		kind Kind
	}{{fixtureFormsCursor, FormsCursor}, {fixtureSubsCursor, SubmissionsCursor}, {fixtureSync, SyncToken}, {fixtureSyncFloor, SyncToken}} {
		for _, k := range kinds {
			for _, l := range []List{formsList, subsList} {
				if _, _, ok := c.Open(k, l, f.tok); ok && k != f.kind {
					t.Errorf("a %v of an earlier version opens as a %v of %+v", f.kind, k, l)
				}
			}
		}
	}
}

// TestKindsAreBound seals a token of each kind and opens it as every
// kind, for its own list and for another: only its own kind and list
// open it.
func TestKindsAreBound(t *testing.T) {
	t.Parallel()
	c := New(testSecret)
	lists := []List{formsList, subsList}
	for _, k := range kinds {
		for _, l := range lists {
			tok := c.Seal(k, l, 7, []byte("payload"))
			for _, k2 := range kinds {
				for _, l2 := range lists {
					inc, p, ok := c.Open(k2, l2, tok)
					want := k2 == k && l2 == l
					if ok != want {
						t.Errorf("a %v of %+v opened as a %v of %+v: %v, want %v", k, l, k2, l2, ok, want)
					}
					if ok && (inc != 7 || string(p) != "payload") {
						t.Errorf("a %v of %+v opened as (%d, %q), want (7, payload)", k, l, inc, p)
					}
				}
			}
			if k != SyncToken {
				if _, ok := c.OpenSync(l, tok); ok {
					t.Errorf("a %v of %+v opened as a sync token", k, l)
				}
			}
		}
	}
	if _, _, ok := c.Open(0, subsList, c.Seal(SubmissionsCursor, subsList, 0, nil)); ok {
		t.Error("a cursor opened as the zero Kind")
	}
}

func TestRoundTrips(t *testing.T) {
	t.Parallel()
	c, same, other := New(testSecret), New(testSecret), New([]byte("another secret"))
	for _, inc := range []uint64{0, 1, 1 << 63, ^uint64(0)} {
		for _, payload := range [][]byte{nil, []byte("p"), bytes.Repeat([]byte{0xff}, 300)} {
			tok := c.Seal(SubmissionsCursor, subsList, inc, payload)
			if gotInc, p, ok := same.Open(SubmissionsCursor, subsList, tok); !ok || gotInc != inc || !bytes.Equal(p, payload) {
				t.Errorf("cursor of %d, %x: a codec of the same secret opened (%d, %x, %v)", inc, payload, gotInc, p, ok)
			}
			if _, _, ok := other.Open(SubmissionsCursor, subsList, tok); ok {
				t.Errorf("cursor of %d, %x: a codec of another secret opened it", inc, payload)
			}
		}
	}
	for _, s := range []Sync{{}, {Pos: 1}, {Pos: 1 << 62, Floor: 1 << 61, Incarnation: 1 << 63}, {Floor: 3, Incarnation: 9}} {
		tok := c.SealSync(subsList, s)
		if got, ok := same.OpenSync(subsList, tok); !ok || got != s {
			t.Errorf("sync token of %+v: opened (%+v, %v)", s, got, ok)
		}
		if _, ok := other.OpenSync(subsList, tok); ok {
			t.Errorf("sync token of %+v: a codec of another secret opened it", s)
		}
	}
	// A sync token's payload is two positions, nothing more.
	for _, payload := range [][]byte{nil, {1}, {1, 2, 3}, {0xff}} {
		if s, ok := c.OpenSync(subsList, c.Seal(SyncToken, subsList, 0, payload)); ok {
			t.Errorf("a sync token of payload %x opened as %+v", payload, s)
		}
	}
	if string(c.AppendRef(nil, subsList, 0, 1)) != string(same.AppendRef(nil, subsList, 0, 1)) {
		t.Error("two codecs of one secret make different refs")
	}
	if string(c.AppendRef(nil, subsList, 0, 1)) == string(other.AppendRef(nil, subsList, 0, 1)) {
		t.Error("two secrets make the same ref")
	}
}

// TestBoundToTheList checks that a token of one list opens for no other,
// the field boundary between account and form included.
func TestBoundToTheList(t *testing.T) {
	t.Parallel()
	c := New(testSecret)
	lists := []List{formsList, subsList, {Account: "acct2", FormID: "form"}, {Account: "acctf", FormID: "orm"}, {Account: "acctform"}, {}}
	for i, l := range lists {
		cur, sync := c.Seal(SubmissionsCursor, l, 0, []byte("p")), c.SealSync(l, Sync{Pos: 5})
		for j, m := range lists {
			_, _, ok := c.Open(SubmissionsCursor, m, cur)
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
	tok := c.Seal(SubmissionsCursor, subsList, 0, nil)
	long := c.Seal(SubmissionsCursor, subsList, 0, bytes.Repeat([]byte("x"), MaxLength))
	for _, bad := range []string{"", "a", "!!!!", tok + "=", tok[:len(tok)-1], tok + "AAAA", long, strings.Repeat("A", MaxLength+4)} {
		if _, _, ok := c.Open(SubmissionsCursor, subsList, bad); ok {
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
		tok := c.Seal(SubmissionsCursor, subsList, 0, []byte(strings.Repeat("p", n)))
		if _, _, ok := c.Open(SubmissionsCursor, subsList, tok); !ok {
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
		if _, _, ok := c.Open(SubmissionsCursor, subsList, twin); ok {
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

// TestSealSyncStable: the same position gives the same token every time,
// which OpenSync opens like any other, bound to its list; another
// position or list gives another.
func TestSealSyncStable(t *testing.T) {
	t.Parallel()
	c := New([]byte("a secret of the test, long enough"))
	l := List{Account: "a", FormID: "f"}
	s := Sync{Pos: 41}
	tok := c.SealSyncStable(l, s)
	if again := c.SealSyncStable(l, s); again != tok {
		t.Errorf("two tokens of one position differ: %s, %s", tok, again)
	}
	if got, ok := c.OpenSync(l, tok); !ok || got != s {
		t.Errorf("OpenSync: %+v, %v; want %+v", got, ok, s)
	}
	if _, ok := c.OpenSync(List{Account: "a", FormID: "g"}, tok); ok {
		t.Errorf("a stable token opens for another form")
	}
	if c.SealSyncStable(l, Sync{Pos: 42}) == tok || c.SealSyncStable(List{Account: "b", FormID: "f"}, s) == tok {
		t.Errorf("another position or list gave the same token")
	}
	if New([]byte("another secret, just as long as that")).SealSyncStable(l, s) == tok {
		t.Errorf("another secret gave the same token")
	}
}

// TestRefsMakeAppendRefs: a Refs gives, position after position and
// without a new hash for each, the refs AppendRef gives, the fixture's
// included; another list's Refs gives other refs.
func TestRefsMakeAppendRefs(t *testing.T) {
	t.Parallel()
	c := New(testSecret)
	const marked = RefIncarnation | 12345
	for _, inc := range []uint64{0, 7, marked} {
		refs, other := c.Refs(subsList, inc), c.Refs(List{Account: "acct", FormID: "form2"}, inc)
		if got := string(refs.Append(nil, 42)); inc&RefIncarnation == 0 && got != fixtureRef {
			t.Fatalf("ref of 42, incarnation %d: %s, want the fixture %s", inc, got, fixtureRef)
		}
		buf := []byte("prefix:")
		for _, pos := range []int64{1, 2, 42, 1 << 20, MaxPosition, 3} {
			want := string(c.AppendRef(nil, subsList, inc, pos))
			if got := string(refs.Append(buf[:7], pos)); got != "prefix:"+want {
				t.Errorf("ref of %d, incarnation %d: %s, want prefix:%s", pos, inc, got, want)
			}
			if got := string(other.Append(nil, pos)); got == want {
				t.Errorf("ref of %d, incarnation %d: another form's Refs gave the same %s", pos, inc, got)
			}
		}
	}
}

// TestRefsOfIncarnations: a form's refs are those of its account, form
// and position alone (the fixture's) for an incarnation without
// RefIncarnation, 0 included, so the refs of forms made before stores
// marked incarnations never change; with it, each incarnation of a form
// (one created again with a deleted form's ID) has refs of its own, none
// another incarnation's or an unmarked one's, at any position
// (RELIABILITY case 101).
func TestRefsOfIncarnations(t *testing.T) {
	t.Parallel()
	c := New(testSecret)
	for _, inc := range []uint64{0, 1, 1 << 62, RefIncarnation - 1} {
		if got := string(c.AppendRef(nil, subsList, inc, 42)); got != fixtureRef {
			t.Errorf("ref of 42, unmarked incarnation %#x: %s, want the fixture %s", inc, got, fixtureRef)
		}
	}
	seen := map[string]uint64{}
	for _, inc := range []uint64{0, RefIncarnation, RefIncarnation | 1, RefIncarnation | 2, RefIncarnation | 1<<40, ^uint64(0)} {
		for pos := int64(1); pos <= 50; pos++ {
			ref := string(c.AppendRef(nil, subsList, inc, pos))
			if was, ok := seen[ref]; ok {
				t.Fatalf("ref %s of position %d, incarnation %#x, is one incarnation %#x had", ref, pos, inc, was)
			}
			seen[ref] = inc
		}
	}
}
