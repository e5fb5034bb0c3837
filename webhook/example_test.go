package webhook_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"

	"github.com/formsapi/formsapi/webhook"
)

// A receiver's handler: verify from the raw body, then act once per
// webhook-id.
func ExampleVerify() {
	secret, err := webhook.ParseSecret(os.Getenv("FORMS_WEBHOOK_SECRET"))
	if err != nil {
		log.Fatal(err) // the error never quotes the secret
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/forms", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err := webhook.Verify(r.Header, body, secret); err != nil {
			http.Error(w, "unverified delivery", http.StatusUnauthorized)
			return
		}
		// Skip r.Header.Get(webhook.HeaderID) if already processed; act
		// on body otherwise; then answer 2xx.
		w.WriteHeader(http.StatusNoContent)
	})
}

func ExampleMessageID() {
	fmt.Println(webhook.MessageID("submission.created", "q3vbP0Qm5a0CwR0oI3QJxA"))
	fmt.Println(webhook.MessageID("submission.deleted", "q3vbP0Qm5a0CwR0oI3QJxA"))
	// Output:
	// msg_7snBAN4NpngWC_s7mbsCCQmfTL8
	// msg_hbbFv6WShn-TQ7EcKsYymmiyWZM
}

func ExampleEgress_CheckURL() {
	var production webhook.Egress // the zero value: https, port 443, public hosts
	for _, raw := range []string{
		"https://hooks.example.com/forms?token=abc",
		"http://hooks.example.com/forms",
		"https://hooks.example.com:8443/forms",
		"https://169.254.169.254/latest/meta-data/",
		"https://user:pass@hooks.example.com/",
	} {
		_, err := production.CheckURL(raw)
		fmt.Println(err == nil, errors.Is(err, webhook.ErrRefusedAddress))
	}
	// Output:
	// true false
	// false false
	// false false
	// false true
	// false false
}
