package receiver_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi/webhook/receiver"
)

// TestLinksNoDelivery: a receiver that imports this package alone links
// nothing of the dispatcher (package webhook), its SSRF-guarded dialer
// (code.dny.dev/ssrf) or the API's handler (the root package).
func TestLinksNoDelivery(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/formsapi/formsapi/webhook/receiver").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list listed too little to prove anything: %v", deps)
	}
	for _, dep := range deps {
		switch dep {
		case "github.com/formsapi/formsapi/webhook", "code.dny.dev/ssrf", "github.com/formsapi/formsapi":
			t.Errorf("a receiver links %s", dep)
		}
	}
}

// TestVerifyRoundTrip: what Signature signs, Verify accepts, and a
// changed body or another secret it refuses.
func TestVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	secret, err := receiver.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	other, err := receiver.ParseSecret("whsec_" + strings.Repeat("A", 32))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_700_000_000, 0)
	body := []byte(`{"type":"submission.created"}`)
	sig, err := receiver.Signature("msg_1", at, body, secret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(receiver.HeaderID, "msg_1")
	h.Set(receiver.HeaderTimestamp, "1700000000")
	h.Set(receiver.HeaderSignature, sig)
	v := receiver.Verifier{Secrets: []receiver.Secret{secret}, Now: func() time.Time { return at }}
	if err := v.Verify(h, body); err != nil {
		t.Errorf("Verify of what Signature signed: %v", err)
	}
	if err := v.Verify(h, append(body, ' ')); !errors.Is(err, receiver.ErrNoValidSignature) {
		t.Errorf("Verify of a changed body: %v, want ErrNoValidSignature", err)
	}
	v.Secrets = []receiver.Secret{other}
	if err := v.Verify(h, body); !errors.Is(err, receiver.ErrNoValidSignature) {
		t.Errorf("Verify with another secret: %v, want ErrNoValidSignature", err)
	}
}

// A receiver's handler: read the raw body (bounded), verify it before
// anything else, act only on a nil error, and answer anything else with
// 400.
func Example() {
	secret, err := receiver.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") // the endpoint's, as the host gave it
	if err != nil {
		panic(err)
	}
	http.HandleFunc("POST /webhooks/forms", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil || receiver.Verify(r.Header, body, secret) != nil {
			http.Error(w, "not verified", http.StatusBadRequest)
			return
		}
		// De-duplicate by r.Header.Get(receiver.HeaderID), then act on body.
		w.WriteHeader(http.StatusNoContent)
	})
	fmt.Println("ready")
	// Output: ready
}
