package webhook_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/formsapi/formsapi/webhook"
	"github.com/matryer/is"
)

func mustSecret(t testing.TB) webhook.Secret {
	t.Helper()
	s, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewSecret(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	seen := map[string]bool{}
	for range 100 {
		s := mustSecret(t)
		text := s.Reveal()
		is.True(strings.HasPrefix(text, "whsec_")) // the Standard Webhooks prefix
		key, err := base64.StdEncoding.Strict().DecodeString(strings.TrimPrefix(text, "whsec_"))
		is.NoErr(err)          // standard base64
		is.Equal(len(key), 32) // 32 random bytes
		is.True(!seen[text])   // every secret differs
		seen[text] = true
		back, err := webhook.ParseSecret(text)
		is.NoErr(err)                 // a new secret parses
		is.Equal(back.Reveal(), text) // and round-trips
		is.True(!s.IsZero() && !back.IsZero())
	}
	is.True(webhook.Secret{}.IsZero()) // the zero Secret
	is.Equal(webhook.Secret{}.Reveal(), "")
}

func TestParseSecret(t *testing.T) {
	t.Parallel()
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa7}, n)) }
	for _, n := range []int{24, 32, 64} {
		is := is.New(t)
		s, err := webhook.ParseSecret("whsec_" + b64(n))
		is.NoErr(err) // 24 to 64 bytes
		is.Equal(s.Reveal(), "whsec_"+b64(n))
	}
	// The official library's test secret: 24 bytes.
	_, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	is.New(t).NoErr(err)

	bad := map[string]string{
		"empty":              "",
		"prefix only":        "whsec_",
		"no prefix":          b64(32),
		"other prefix":       "whsk_" + b64(32),
		"uppercase prefix":   "WHSEC_" + b64(32),
		"23 bytes":           "whsec_" + b64(23),
		"65 bytes":           "whsec_" + b64(65),
		"a megabyte":         "whsec_" + strings.Repeat("A", 1<<20),
		"unpadded":           "whsec_" + strings.TrimRight(b64(32), "="),
		"url alphabet":       "whsec_" + strings.NewReplacer("+", "-", "/", "_").Replace(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff}, 16))),
		"inner space":        "whsec_" + b64(16) + " " + b64(16),
		"trailing newline":   "whsec_" + b64(32) + "\n",
		"inner CR LF":        "whsec_" + b64(30)[:20] + "\r\n" + b64(30)[20:],
		"leading space":      " whsec_" + b64(32),
		"not base64 at all":  "whsec_" + strings.Repeat("é", 22),
		"non-canonical tail": "whsec_" + b64(32)[:42] + "B=", // bits after the last byte set
	}
	for name, text := range bad {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			s, err := webhook.ParseSecret(text)
			is.True(errors.Is(err, webhook.ErrInvalidSecret)) // refused
			is.True(s.IsZero())                               // and no secret
			if body := strings.TrimPrefix(strings.TrimSpace(text), "whsec_"); len(body) >= 8 {
				is.True(!strings.Contains(err.Error(), body[:8])) // the error never quotes the secret
			}
		})
	}
}

// TestSecretNeverPrints: fmt's verbs, a struct holding a secret, JSON and
// log/slog show nothing of the secret's text or bytes.
func TestSecretNeverPrints(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustSecret(t)
	text := s.Reveal()
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(text, "whsec_"))
	type endpoint struct {
		URL    string
		Secret webhook.Secret
	}
	e := endpoint{"https://example.com/hook", s}
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%o", "%b", "%T %v"} {
		out = append(out, fmt.Sprintf(verb, s), fmt.Sprintf(verb, e), fmt.Sprintf(verb, &e))
	}
	out = append(out, fmt.Sprint(s), fmt.Sprintln(e))
	j, err := json.Marshal(e)
	is.NoErr(err)
	out = append(out, string(j))
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("endpoint", "secret", s, "endpoint", e)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("endpoint", "secret", s)
	out = append(out, logged.String())
	all := strings.Join(out, "\n")
	is.True(strings.Contains(all, "whsec_[REDACTED]")) // it says a secret was there
	is.True(!strings.Contains(all, text[6:14]))        // but not its text
	is.True(!strings.Contains(all, fmt.Sprint(key[:4])))
	is.True(!strings.Contains(all, fmt.Sprintf("%x", key[:4])))
	is.True(!strings.Contains(all, fmt.Sprintf("%X", key[:4])))
}
