package formsapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// benchItems returns the items of a page of n submissions with one
// attachment each, shaped as internal/benchdata's.
func benchItems(tb testing.TB, n int) []byte {
	tb.Helper()
	var b []byte
	for i := range n {
		s := Submission{
			FormID: "bench-form-000",
			Data: fmt.Appendf(nil, `{"name":"Person %d","email":"person%d@example.com","company":"Example Holdings %d Ltd","message":"Hello, I would like to know more about your plans for teams of %d people. Could someone call me back this week?"}`,
				i, i, i%97, i%50+2),
			Attachments: []Attachment{{FieldName: "attachment", FileURL: fmt.Sprintf("https://files.example.com/uploads/bench-form-000/%d/brief.pdf", i), FileSize: int64(20000 + i), MIMEType: "application/pdf"}},
			CreatedAt:   time.Date(2024, 1, 1, 0, 0, i, 0, time.UTC),
		}
		var err error
		if b, err = AppendSubmissionJSON(appendComma(b, i), s); err != nil {
			tb.Fatal(err)
		}
	}
	return b
}

func benchSigner() AttachmentSigner {
	key := []byte("a benchmark's signing key")
	return func(_ context.Context, account, form string, a Attachment, at time.Time) (string, error) {
		exp := strconv.FormatInt(at.Add(10*time.Minute).Unix(), 10)
		m := hmac.New(sha256.New, key)
		m.Write([]byte(account + "\x00" + form + "\x00" + a.FileURL + "\x00" + exp))
		return a.FileURL + "?exp=" + exp + "&sig=" + base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
	}
}

// BenchmarkSignPage measures signing alone, for the page of
// BenchmarkSignedPage (100 submissions, one attachment each): Kept is a
// page signed already in its window (every request after the window's
// first), Cold one signed afresh (each URL signed by an HMAC-SHA256
// presigner). Compare each to BenchmarkSignedPage's Unsigned:
//
//	go test -run '^$' -bench 'BenchmarkSignPage|BenchmarkSignedPage' -benchmem -count 10 .
func BenchmarkSignPage(b *testing.B) {
	items := benchItems(b, 100)
	body := append([]byte(`{"success":true,"message":"submissions retrieved","submissions":[`), items...)
	start := len(body) - len(items)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		step time.Duration
	}{{"Kept", 0}, {"Cold", 5 * time.Minute}} {
		b.Run(c.name, func(b *testing.B) {
			s := &urlSigner{sign: benchSigner(), window: 5 * time.Minute}
			// The page as the store wrote it, and the buffer it is signed
			// in: each signed page takes the place of the one before, as
			// the kept page would take the place of the stored items.
			buf := append(make([]byte, 0, 2*len(body)), body...)
			end := len(body)
			b.ReportAllocs()
			for b.Loop() {
				at = at.Add(c.step)
				if c.step != 0 {
					buf, end = append(buf[:0], body...), len(body)
				}
				out, err := s.signPage(context.Background(), "acct", "bench-form-000", `W/"tag"`, at, buf, start, end)
				if err != nil || len(out) <= len(body) {
					b.Fatal(err, len(out))
				}
				buf, end = out, len(out)
			}
		})
	}
}
