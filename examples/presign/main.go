// Command presign serves the read API over a demo form whose attachments
// sit in a private S3 bucket, stored as the objects' plain URLs
// (ENDPOINT/BUCKET/KEY, which the bucket refuses to anyone), and sends each
// as a SigV4 presigned GET made by the AWS SDK for Go v2's signer
// (formsapi.WithAttachmentURLs): a URL the bucket's server accepts, with
// no public access, until it expires.
//
//	AWS_ACCESS_KEY_ID=… AWS_SECRET_ACCESS_KEY=… go run ./examples/presign -endpoint http://127.0.0.1:8333 -region us-east-1
//
// prints an API key and serves http://127.0.0.1:8081. The endpoint is
// any S3-compatible server (path-style URLs): AWS S3's own
// (https://s3.REGION.amazonaws.com), or SeaweedFS's S3 gateway. This
// example is the one package of the module that imports the AWS SDK; the
// library itself takes any signer, so a host that needs none links none.
package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
)

// unsignedPayload is what a presigned GET signs in place of the body's
// hash.
const unsignedPayload = "UNSIGNED-PAYLOAD"

// Presigner makes SigV4 presigned GETs of the objects of one bucket of
// an S3-compatible server, path-style (ENDPOINT/BUCKET/KEY), each
// account's form's files under the key prefix ACCOUNT/FORM/.
type Presigner struct {
	Endpoint    string // such as http://127.0.0.1:8333
	Bucket      string
	Region      string
	Credentials aws.Credentials
	Lifetime    time.Duration // X-Amz-Expires: at most 7 days
	signer      *v4.Signer
}

// NewPresigner returns a presigner of GETs of bucket's objects valid for
// lifetime.
func NewPresigner(endpoint, bucket, region string, creds aws.Credentials, lifetime time.Duration) *Presigner {
	return &Presigner{Endpoint: strings.TrimSuffix(endpoint, "/"), Bucket: bucket, Region: region, Credentials: creds, Lifetime: lifetime,
		signer: v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })}
}

// Sign is a formsapi.AttachmentSigner: the presigned GET of the object
// the attachment's URL (ENDPOINT/BUCKET/ACCOUNT/FORM/…) names, signed as
// of at, so valid until at plus the lifetime.
//
// An attachment stored elsewhere (another account's or form's prefix,
// another bucket, another host: a form that takes URLs from submitters
// may hold anything) is sent as stored, unsigned: the credentials could
// sign any object of the server, and a key of one account must never
// read another's files through them. The private bucket refuses such a
// URL to everyone. It is not an error either, which would fail every
// page, feed page, export and webhook event that carries the submission.
// Errors are the presigning's own.
func (p *Presigner) Sign(ctx context.Context, account, form string, a formsapi.Attachment, at time.Time) (string, error) {
	key, ok := p.objectOf(account, form, a.FileURL)
	if !ok {
		return a.FileURL, nil
	}
	return p.presign(ctx, http.MethodGet, p.Bucket, key, at)
}

// objectOf returns the key of the object stored names, if it is one of
// form's of account: ENDPOINT/BUCKET/ACCOUNT/FORM/NAME, NAME segments
// that are neither empty, . nor .., and no query or fragment.
func (p *Presigner) objectOf(account, form, stored string) (string, bool) {
	rest, ok := strings.CutPrefix(stored, p.Endpoint+"/"+p.Bucket+"/")
	if !ok || strings.ContainsAny(rest, "?#") || account == "" || form == "" || strings.Contains(account+form, "/") {
		return "", false
	}
	key, err := url.PathUnescape(rest)
	name, ok := strings.CutPrefix(key, account+"/"+form+"/")
	if err != nil || !ok {
		return "", false
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", false
		}
	}
	return key, true
}

// presign signs method on BUCKET/KEY as of at.
func (p *Presigner) presign(ctx context.Context, method, bucket, key string, at time.Time) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.Endpoint+"/"+bucket+"/"+pathEscape(key), nil)
	if err != nil {
		return "", fmt.Errorf("presign: %w", err)
	}
	q := req.URL.Query()
	q.Set("X-Amz-Expires", strconv.Itoa(int(p.Lifetime/time.Second)))
	req.URL.RawQuery = q.Encode()
	signed, _, err := p.signer.PresignHTTP(ctx, p.Credentials, req, unsignedPayload, "s3", p.Region, at.UTC())
	if err != nil {
		return "", fmt.Errorf("presign: %w", err)
	}
	return signed, nil
}

// pathEscape escapes each segment of an object key.
func pathEscape(key string) string {
	parts := strings.Split(key, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// Verify checks a URL Sign made, the way an S3 server does, with the same
// SDK: it signs the request again as of the URL's X-Amz-Date and compares
// the signatures, then checks that now is within X-Amz-Expires of that
// date. A URL changed in any part (the object, the expiry, the date) or
// signed with other credentials fails.
func (p *Presigner) Verify(ctx context.Context, signed string, now time.Time) error {
	u, err := url.Parse(signed)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	q := u.Query()
	at, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil {
		return errors.New("verify: no X-Amz-Date")
	}
	expires, err := strconv.Atoi(q.Get("X-Amz-Expires"))
	if err != nil {
		return errors.New("verify: no X-Amz-Expires")
	}
	sig := q.Get("X-Amz-Signature")
	for _, k := range []string{"X-Amz-Signature", "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Security-Token"} {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	again, _, err := p.signer.PresignHTTP(ctx, p.Credentials, req, unsignedPayload, "s3", p.Region, at)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	a, err := url.Parse(again)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	want := a.Query().Get("X-Amz-Signature")
	if sha256.Sum256([]byte(sig)) != sha256.Sum256([]byte(want)) { // equal lengths, no early exit on content
		return errors.New("verify: the signature does not match")
	}
	if now.Before(at.Add(-15*time.Minute)) || !now.Before(at.Add(time.Duration(expires)*time.Second)) {
		return errors.New("verify: the URL has expired")
	}
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "presign:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:8081", "address to listen on")
	endpoint := flag.String("endpoint", "http://127.0.0.1:8333", "the S3-compatible server's URL, path-style")
	region := flag.String("region", "us-east-1", "the region to sign for")
	bucket := flag.String("bucket", "forms", "the private bucket the demo's attachments are stored in")
	lifetime := flag.Duration("lifetime", 10*time.Minute, "how long a presigned URL is valid; every URL a client receives is valid for at least half of it")
	flag.Parse()
	creds := aws.Credentials{AccessKeyID: os.Getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey: os.Getenv("AWS_SECRET_ACCESS_KEY")}
	if creds.AccessKeyID == "" || creds.SecretAccessKey == "" {
		return errors.New("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	p := NewPresigner(*endpoint, *bucket, *region, creds, *lifetime)
	ctx := context.Background()
	store := memstore.New()
	key, err := seed(ctx, store, p.Endpoint, p.Bucket)
	if err != nil {
		return err
	}
	h := formsapi.NewHandler(store, store, formsapi.WithAttachmentURLs(p.Sign, *lifetime))
	log.Printf("curl -H 'Authorization: Bearer %s' 'http://%s/v1/forms/files/submissions'", key, *addr)
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	return srv.ListenAndServe()
}

// seed adds the demo form "files" of the account "demo" with one
// submission whose attachment is the object
// ENDPOINT/BUCKET/demo/files/1/cv.pdf, and returns a new key of the
// account.
func seed(ctx context.Context, store *memstore.Store, endpoint, bucket string) (string, error) {
	if err := store.AddForm(ctx, "demo", formsapi.Form{ID: "files", Title: "Files"}); err != nil {
		return "", err
	}
	sub := formsapi.Submission{FormID: "files", Data: []byte(`{"name":"Ada"}`),
		Attachments: []formsapi.Attachment{{FieldName: "cv", FileURL: endpoint + "/" + bucket + "/demo/files/1/cv.pdf", FileSize: 6, MIMEType: "application/pdf"}}}
	if err := store.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
		return "", err
	}
	key, err := formsapi.NewKey()
	if err != nil {
		return "", err
	}
	return key, store.AddKey(ctx, key, "demo")
}
