package stored

import (
	"testing"
	"testing/fstest"
	"time"

	"github.com/formsapi/formsapi"
)

func TestReencode(t *testing.T) {
	t.Parallel()
	at := time.Date(2024, 3, 1, 9, 0, 0, 5, time.UTC)
	att := []byte(`[{"fieldName":"cv","fileUrl":"https://f.example/cv.pdf","fileSize":12,"mimeType":"application/pdf"}]`)
	want, err := formsapi.AppendSubmissionJSON(nil, formsapi.Submission{FormID: "f", Data: []byte(`{"a":1}`),
		Attachments: []formsapi.Attachment{{FieldName: "cv", FileURL: "https://f.example/cv.pdf", FileSize: 12, MIMEType: "application/pdf"}}, CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if got := Reencode("f", at.UnixNano(), []byte(`{"a":1}`), att); string(got) != string(want) {
		t.Errorf("Reencode = %s, want %s", got, want)
	}
	for _, c := range []struct{ data, att string }{{`{"a":`, `[]`}, {`{}`, `{`}, {`[]`, `[]`}} {
		if got := Reencode("f", at.UnixNano(), []byte(c.data), []byte(c.att)); len(got) != 0 {
			t.Errorf("Reencode(%s, %s) = %s, want empty (damaged)", c.data, c.att, got)
		}
	}
	for _, c := range []string{`[]`, `null`} {
		if a, err := DecodeAttachments([]byte(c)); err != nil || a == nil || len(a) != 0 {
			t.Errorf("DecodeAttachments(%s) = %v, %v; want an empty non-nil slice", c, a, err)
		}
	}
}

func TestMigrations(t *testing.T) {
	t.Parallel()
	ok := fstest.MapFS{
		"migrations/0002_b.sql": {Data: []byte("B")},
		"migrations/0001_a.sql": {Data: []byte("A")},
		"migrations/README":     {Data: []byte("not SQL")},
	}
	ms, err := Migrations(ok)
	if err != nil || len(ms) != 2 || ms[0] != (Migration{1, "0001_a.sql", "A"}) || ms[1] != (Migration{2, "0002_b.sql", "B"}) {
		t.Errorf("Migrations = %+v, %v", ms, err)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"a gap":           {"migrations/0001_a.sql": {}, "migrations/0003_c.sql": {}},
		"a shared number": {"migrations/0001_a.sql": {}, "migrations/0002_b.sql": {}, "migrations/0002_c.sql": {}},
		"no number":       {"migrations/init.sql": {}},
		"version zero":    {"migrations/0000_a.sql": {}},
	} {
		if _, err := Migrations(fsys); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestHolds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		data, field, value string
		want               bool
	}{
		{`{"email":"a@x.org"}`, "email", "a@x.org", true},
		{`{"email":"A@x.org"}`, "email", "a@x.org", false},
		{`{"email":"a\u0040x.org"}`, "email", "a@x.org", true},
		{`{"e\u006dail":"a@x.org"}`, "email", "a@x.org", true},
		{`{"email":"b@x.org","email":"a@x.org"}`, "email", "a@x.org", true},
		{`{"email":"a@x.org","email":"b@x.org"}`, "email", "a@x.org", true},
		{`{"other":"a@x.org"}`, "email", "a@x.org", false},
		{`{"nested":{"email":"a@x.org"}}`, "email", "a@x.org", false},
		{`{"email":["a@x.org"]}`, "email", "a@x.org", false},
		{`{"email":1}`, "email", "1", false},
		{`{"email":"a@x.org"`, "email", "a@x.org", false},
		{`["email","a@x.org"]`, "email", "a@x.org", false},
	} {
		if got := Holds([]byte(c.data), c.field, c.value); got != c.want {
			t.Errorf("Holds(%s, %q, %q) = %v, want %v", c.data, c.field, c.value, got, c.want)
		}
	}
}

func TestRarest(t *testing.T) {
	keys := []int64{10, 20, 30}
	for _, c := range []struct {
		name   string
		probes []Probe
		key    int64
		found  bool
	}{
		{"Fewest", []Probe{{5, 9}, {2, 1}, {3, 50}}, 20, true},
		{"NoneHasNoMatch", []Probe{{5, 9}, {0, 0}, {3, 50}}, 20, false},
		{"TiedAtTheCapSparsestWins", []Probe{{Probed, 100}, {Probed, 900}, {Probed, 400}}, 20, true},
		{"FewerBeatsSparser", []Probe{{Probed, 900}, {Probed - 1, 100}, {Probed, 950}}, 20, true},
		{"ExactEqualsFirstWins", []Probe{{Probed, 500}, {Probed, 500}, {7, 1}}, 30, true},
		{"ExactEqualsAtTheCap", []Probe{{Probed, 500}, {Probed, 500}, {Probed, 500}}, 10, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			key, found := Rarest(keys, c.probes)
			if key != c.key || found != c.found {
				t.Errorf("Rarest = %d, %t; want %d, %t", key, found, c.key, c.found)
			}
		})
	}
}
