package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/matryer/is"
)

// TestSignedAttachmentURLs: with -attachment-secret-file, every
// attachment of a page is a URL of the server's /files route that the
// route serves, while the same URL with its signature changed, or with
// its stored URL swapped for another, is refused (403); and a URL past
// its expiry is refused, by the signer's own check on a clock moved past
// it.
func TestSignedAttachmentURLs(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	secret := filepath.Join(dir, "files.secret")
	is.NoErr(os.WriteFile(secret, []byte("a demo secret of at least 32 characters\n"), 0o600))
	s := start(t, filepath.Join(dir, "forms.db"), "-attachment-secret-file", secret, "-attachment-url-lifetime", "4m")
	defer s.stop()
	code, body := s.get(t, "/v1/forms/job-application/submissions?order=asc", s.key)
	is.Equal(code, 200)
	var page struct {
		Submissions []struct {
			Attachments []struct{ FileURL string }
		}
	}
	is.NoErr(json.Unmarshal(body, &page))
	n := 0
	for _, sub := range page.Submissions {
		for _, a := range sub.Attachments {
			is.True(strings.HasPrefix(a.FileURL, s.base+"/files?")) // a URL of the server's route
			res, err := http.Get(a.FileURL)
			is.NoErr(err)
			res.Body.Close()
			is.Equal(res.StatusCode, 200)                                 // served
			is.Equal(res.Header.Get("X-Content-Type-Options"), "nosniff") // the stored URL it names is a submitter's text

			u, err := url.Parse(a.FileURL)
			is.NoErr(err)
			q := u.Query()
			is.True(strings.HasPrefix(q.Get("u"), "https://files.example.com/uploads/")) // names the stored URL
			for _, bad := range []func(url.Values){
				func(q url.Values) { q.Set("sig", strings.Repeat("A", len(q.Get("sig")))) },
				func(q url.Values) { q.Set("u", "https://files.example.com/uploads/9999/cv.pdf") },
				func(q url.Values) { q.Set("exp", "99999999999") },
			} {
				q := u.Query()
				bad(q)
				res, err := http.Get(s.base + "/files?" + q.Encode())
				is.NoErr(err)
				res.Body.Close()
				is.Equal(res.StatusCode, 403) // a URL the server did not sign
			}
			n++
		}
	}
	is.True(n >= 2) // the demo's job applications carry attachments

	// Expiry, on the signer's own clock: valid until the lifetime ends.
	now := time.Now()
	f := &fileSigner{key: []byte("k"), base: "http://x", lifetime: 4 * time.Minute, now: func() time.Time { return now }}
	signed, err := f.sign(t.Context(), "acct", "form", formsAttachment("https://files.example.com/a.pdf"), now)
	is.NoErr(err)
	u, err := url.Parse(signed)
	is.NoErr(err)
	_, err = f.verify(u.Query())
	is.NoErr(err) // valid now
	now = now.Add(4*time.Minute - time.Nanosecond)
	_, err = f.verify(u.Query())
	is.NoErr(err) // and to the end of its lifetime
	now = now.Add(time.Second + time.Nanosecond)
	_, err = f.verify(u.Query())
	is.Equal(err, errExpired) // then expired
}

func formsAttachment(u string) formsapi.Attachment {
	return formsapi.Attachment{FieldName: "cv", FileURL: u, FileSize: 1, MIMEType: "application/pdf"}
}
