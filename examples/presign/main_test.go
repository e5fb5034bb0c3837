package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/testenv"
	"github.com/formsapi/formsapi/memstore"
)

// TestPresignedAttachmentURLs: the API sends the demo's attachment
// as a SigV4 presigned GET of the object that the SDK's own signature
// check accepts from the answer to the end of its lifetime and refuses
// after it; the same URL for another object, with a later expiry, or
// checked with other credentials is refused. Every request of one window
// gets the same URL (SigV4 signs the window's start, a function of its
// inputs).
func TestPresignedAttachmentURLs(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	const lifetime = 10 * time.Minute
	p := NewPresigner("http://127.0.0.1:8333", "forms", "us-east-1", aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}, lifetime)
	key, err := seed(ctx, store, p.Endpoint, p.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	h := formsapi.NewHandler(store, store, formsapi.WithAttachmentURLs(p.Sign, lifetime))
	get := func() string {
		r := httptest.NewRequest("GET", "/v1/forms/files/submissions", nil)
		r.Header.Set("Authorization", "Bearer "+key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var page struct{ Submissions []formsapi.Submission }
		if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil || w.Code != 200 || len(page.Submissions) != 1 || len(page.Submissions[0].Attachments) != 1 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		return page.Submissions[0].Attachments[0].FileURL
	}
	now := time.Now()
	signed := get()
	if !strings.HasPrefix(signed, "http://127.0.0.1:8333/forms/demo/files/1/cv.pdf?") || !strings.Contains(signed, "X-Amz-Signature=") {
		t.Fatalf("not a presigned GET of the object: %s", signed)
	}
	u, _ := url.Parse(signed)
	windowStart, err := time.Parse("20060102T150405Z", u.Query().Get("X-Amz-Date"))
	if err != nil || windowStart.After(now) || windowStart.Add(lifetime).Before(now.Add(lifetime/2)) {
		t.Fatalf("signed as of %v at %v: want the start of the window, at most %v before", windowStart, now, lifetime/2)
	}
	if again := get(); again != signed && strings.Contains(again, u.Query().Get("X-Amz-Date")) {
		t.Fatalf("another URL within the window:\n%s\n%s", again, signed)
	}
	for _, at := range []time.Time{now, windowStart.Add(lifetime - time.Second)} {
		if err := p.Verify(ctx, signed, at); err != nil {
			t.Fatalf("at %v: %v", at, err)
		}
	}
	if err := p.Verify(ctx, signed, windowStart.Add(lifetime)); err == nil {
		t.Fatal("accepted at the end of its lifetime")
	}
	for name, bad := range map[string]func() (*Presigner, string){
		"another object": func() (*Presigner, string) {
			v := *u
			v.Path = "/forms/demo/files/2/cv.pdf"
			return p, v.String()
		},
		"a later expiry": func() (*Presigner, string) {
			v := *u
			q := v.Query()
			q.Set("X-Amz-Expires", "604800")
			v.RawQuery = q.Encode()
			return p, v.String()
		},
		"other credentials": func() (*Presigner, string) {
			return NewPresigner(p.Endpoint, p.Bucket, p.Region, aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "another secret"}, lifetime), signed
		},
	} {
		q, s := bad()
		if err := q.Verify(ctx, s, now); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestSDKLinkedOnlyHere checks that the library's packages (the root,
// the stores, ratelimit, observe) link nothing of the AWS SDK, which
// this example brings: a host that signs attachment URLs otherwise, or
// not at all, never builds it.
func TestSDKLinkedOnlyHere(t *testing.T) {
	testenv.LinkedOnlyThrough(t, "github.com/formsapi/formsapi/examples/presign", "github.com/aws/aws-sdk-go-v2/aws/signer/v4", func(dep string) bool {
		return strings.HasPrefix(dep, "github.com/aws/")
	})
}

// TestForeignAttachmentsAreNotSigned: an attachment whose stored URL is
// not an object of the form's own prefix in the bucket (another
// account's object, another bucket, another host: what a submitter may
// have put in a form that takes URLs) is sent as stored, unsigned, so
// that no key holder reads another tenant's files through the presigner;
// and the page, with the form's good attachments signed, is still
// answered, not failed, so that one such submission does not take the
// form's lists, feed, export and webhook stream down with it.
func TestForeignAttachmentsAreNotSigned(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	p := NewPresigner("http://127.0.0.1:8333", "forms", "us-east-1", aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}, 10*time.Minute)
	key, err := seed(ctx, store, p.Endpoint, p.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	foreign := []string{
		p.Endpoint + "/forms/other-account/files/1/secret.pdf",
		p.Endpoint + "/forms/demo/other-form/1/secret.pdf",
		p.Endpoint + "/other-bucket/demo/files/1/secret.pdf",
		p.Endpoint + "/forms/demo/files/../../other-account/files/1/secret.pdf",
		"https://elsewhere.example/demo/files/1/cv.pdf",
	}
	var atts []formsapi.Attachment
	for _, u := range foreign {
		atts = append(atts, formsapi.Attachment{FieldName: "cv", FileURL: u, FileSize: 1, MIMEType: "application/pdf"})
	}
	if err := store.AddSubmission(ctx, formsapi.Submission{FormID: "files", Data: []byte(`{"name":"Eve"}`), Attachments: atts}, formsapi.Metadata{}); err != nil {
		t.Fatal(err)
	}
	h := formsapi.NewHandler(store, store, formsapi.WithAttachmentURLs(p.Sign, p.Lifetime))
	r := httptest.NewRequest("GET", "/v1/forms/files/submissions?order=asc", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var page struct{ Submissions []formsapi.Submission }
	if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil || w.Code != 200 || len(page.Submissions) != 2 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if got := page.Submissions[0].Attachments[0].FileURL; !strings.Contains(got, "X-Amz-Signature=") {
		t.Errorf("the form's own attachment is not signed: %s", got)
	}
	for i, a := range page.Submissions[1].Attachments {
		if a.FileURL != foreign[i] {
			t.Errorf("a foreign attachment was sent as %s, want %s as stored", a.FileURL, foreign[i])
		}
	}
}
