package stored

import (
	"testing"
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
