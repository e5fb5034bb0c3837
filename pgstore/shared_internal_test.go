package pgstore

import (
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestPublishedRoundEncoding: a published round decodes to the rows the
// leader read (the log's rows only: the snapshot's row and the lookups'
// are the leader's), and a cut or extended one is refused.
func TestPublishedRoundEncoding(t *testing.T) {
	t.Parallel()
	e := int64(-7)
	rows := []roundRow{
		{snap: pgtype.Text{String: "10:12:10", Valid: true}},
		{kind: pgtype.Int2{Int16: changeKey, Valid: true}, ref: []byte("0123456789abcdef0123456789abcdef"), account: pgtype.Text{String: "acme", Valid: true}, forms: []string{"a", "b"}, expires: &e},
		{kind: pgtype.Int2{Int16: changeKey, Valid: true}, ref: []byte("revoked-key-hash")},
		{kind: pgtype.Int2{Int16: changeForm, Valid: true}, ref: []byte("contact"), account: pgtype.Text{String: "acme", Valid: true}, seq: pgtype.Int8{Int64: 3, Valid: true}, version: pgtype.Int8{Int64: 1 << 40, Valid: true},
			base: pgtype.Int8{Int64: 2, Valid: true}, last: pgtype.Int8{Int64: 9, Valid: true}, feed: pgtype.Int8{Int64: 9, Valid: true}, at: pgtype.Int8{Int64: -5, Valid: true}, iseq: pgtype.Int8{Int64: 11, Valid: true}, json: []byte(`{"a":1}`)},
		{kind: pgtype.Int2{Int16: changeList, Valid: true}, ref: []byte("acme"), list: pgtype.Int8{Int64: 42, Valid: true}, json: []byte{}},
		{n: 1, account: pgtype.Text{String: "lookup", Valid: true}},
	}
	b := encodeRoundFrom(17, "8:9:", "10:12:10", rows)
	tk, prev, snap, got, err := decodeRound(b)
	if err != nil {
		t.Fatal(err)
	}
	if tk != 17 || prev.text != "8:9:" || snap.text != "10:12:10" || !reflect.DeepEqual(snap.xip, []string{"10"}) {
		t.Errorf("got T %d, %q, %q", tk, prev.text, snap.text)
	}
	if !reflect.DeepEqual(got, rows[1:5]) {
		t.Errorf("rows:\n%+v\nwant\n%+v", got, rows[1:5])
	}
	for _, bad := range [][]byte{nil, b[:len(b)-1], append(b[:len(b):len(b)], 0), append([]byte{2}, b[1:]...)} {
		if _, _, _, _, err := decodeRound(bad); err == nil {
			t.Errorf("decoded %q", bad)
		}
	}
	// A first round (no snapshot before it).
	if _, prev, _, _, err := decodeRound(encodeRoundFrom(0, "", "3:3:", nil)); err != nil || prev.text != "" {
		t.Errorf("a first round: %q, %v", prev.text, err)
	}
}

// TestSees: a snapshot sees another when every transaction visible in
// the other is visible in it.
func TestSees(t *testing.T) {
	t.Parallel()
	snap := func(s string) snapshot {
		t.Helper()
		v, err := parseSnapshot(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"10:12:10", "10:12:10", true},
		{"12:14:", "10:12:10", true},       // 10 committed since
		{"10:12:10", "12:14:", false},      // b sees 10..13, a not
		{"10:14:10,12", "10:12:10", true},  // 12 began after b
		{"10:14:10,11", "10:12:10", false}, // 11 visible in b, in progress in a
		{"9:10:", "10:12:10", false},
	} {
		if got := sees(snap(c.a), snap(c.b)); got != c.want {
			t.Errorf("sees(%s, %s) = %v", c.a, c.b, got)
		}
	}
}
