package webhook_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi/internal/testenv"
	"github.com/formsapi/formsapi/webhook"
)

// receiverCase is one delivery for the docs' receivers, and the id they
// must return ("" for a refusal).
type receiverCase struct {
	Name    string            `json:"name"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"` // base64
	Secrets []string          `json:"secrets"`
	Now     int64             `json:"now"`
	Want    string            `json:"want"`
}

// receiverCases signs deliveries with the package and tampers with some.
func receiverCases(t *testing.T) []receiverCase {
	old, current, other := mustSecret(t), mustSecret(t), mustSecret(t)
	at := time.Unix(1_767_225_600, 0)
	body := []byte(`{"type":"submission.created","timestamp":"2026-01-01T00:00:00Z","data":{"formId":"contact","name":"Zoë \u00e9 \"q\" \\ 😀","n":1.50}}`)
	id := webhook.MessageID("submission.created", "q3vbP0Qm5a0CwR0oI3QJxA")
	sign := func(id string, body []byte, secrets ...webhook.Secret) map[string]string {
		h := http.Header{}
		if err := webhook.Sign(h, id, at, body, secrets...); err != nil {
			t.Fatal(err)
		}
		return map[string]string{"webhook-id": h.Get("webhook-id"), "webhook-timestamp": h.Get("webhook-timestamp"), "webhook-signature": h.Get("webhook-signature")}
	}
	with := func(h map[string]string, k, v string) map[string]string {
		c := map[string]string{}
		for kk, vv := range h {
			c[kk] = vv
		}
		if v == "" {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	b64 := base64.StdEncoding.EncodeToString
	good := sign(id, body, current)
	rotation := sign(id, body, current, old)
	secrets := func(s ...webhook.Secret) []string {
		var out []string
		for _, x := range s {
			out = append(out, x.Reveal())
		}
		return out
	}
	now := at.Unix()
	tampered := bytes.Replace(body, []byte("1.50"), []byte("1.5"), 1)
	return []receiverCase{
		{"authentic", good, b64(body), secrets(current), now, id},
		{"rotation, old secret", rotation, b64(body), secrets(old), now, id},
		{"rotation, new secret", rotation, b64(body), secrets(current), now, id},
		{"second of two secrets", good, b64(body), secrets(other, current), now, id},
		{"5 minutes late", good, b64(body), secrets(current), now + 300, id},
		{"5 minutes early", good, b64(body), secrets(current), now - 300, id},
		{"re-encoded body", good, b64(tampered), secrets(current), now, ""},
		{"one byte more", good, b64(append(bytes.Clone(body), '\n')), secrets(current), now, ""},
		{"another id", with(good, "webhook-id", "msg_other"), b64(body), secrets(current), now, ""},
		{"another timestamp", with(good, "webhook-timestamp", "1767225601"), b64(body), secrets(current), now, ""},
		{"another secret", good, b64(body), secrets(other), now, ""},
		{"too old", good, b64(body), secrets(current), now + 301, ""},
		{"too new", good, b64(body), secrets(current), now - 301, ""},
		{"no signature", with(good, "webhook-signature", ""), b64(body), secrets(current), now, ""},
		{"no id", with(good, "webhook-id", ""), b64(body), secrets(current), now, ""},
		{"v1a only", with(good, "webhook-signature", "v1a"+strings.TrimPrefix(good["webhook-signature"], "v1")), b64(body), secrets(current), now, ""},
		{"among other entries", with(good, "webhook-signature", "v1a,xyz v1,AAAA "+good["webhook-signature"]), b64(body), secrets(current), now, id},
		{"timestamp with a sign", with(good, "webhook-timestamp", "+1767225600"), b64(body), secrets(current), now, ""},
	}
}

// docBlock returns the one fenced block of lang in docs/webhooks.md.
func docBlock(t *testing.T, lang string) string {
	t.Helper()
	text, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?ms)^```"+lang+"\n(.*?)^```").FindAllSubmatch(text, -1)
	if len(blocks) != 1 {
		t.Fatalf("docs/webhooks.md: %d ```%s blocks, want 1", len(blocks), lang)
	}
	return string(blocks[0][1])
}

// TestDocsReceivers runs the Node and Python receivers of
// docs/webhooks.md on deliveries this package signed: each returns the id
// of every authentic one and refuses every other. Each runs where its
// interpreter is installed.
func TestDocsReceivers(t *testing.T) {
	t.Parallel()
	cases := receiverCases(t)
	input, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	runners := []struct {
		lang, interpreter, pkg, file, harness string
	}{
		{"js", "node", "nodejs", "receiver.js", `
const fs = require("node:fs");
const { verifyWebhook } = require(process.argv[1]);
const out = JSON.parse(fs.readFileSync(0)).map((c) => {
  try { return verifyWebhook(c.headers, Buffer.from(c.body, "base64"), c.secrets, c.now); } catch { return ""; }
});
console.log(JSON.stringify(out));`},
		{"python", "python3", "python3", "receiver.py", `
import base64, importlib.util, json, sys
spec = importlib.util.spec_from_file_location("receiver", sys.argv[1])
receiver = importlib.util.module_from_spec(spec)
spec.loader.exec_module(receiver)
out = []
for c in json.load(sys.stdin):
    try:
        out.append(receiver.verify_webhook(c["headers"], base64.b64decode(c["body"]), c["secrets"], c["now"]))
    except ValueError:
        out.append("")
print(json.dumps(out))`},
	}
	for _, r := range runners {
		t.Run(r.interpreter, func(t *testing.T) {
			t.Parallel()
			src := docBlock(t, r.lang)
			bin, err := exec.LookPath(r.interpreter)
			if err != nil {
				if os.Getenv("CI") != "" { // .ci/run installs both: a skip there would hide an untested page
					t.Fatalf("%s is not installed (.ci/run installs it)", r.interpreter)
				}
				testenv.Skip(t, r.interpreter+" is not installed (apt-get install -y "+r.pkg+")")
			}
			file := filepath.Join(t.TempDir(), r.file)
			if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			var args []string
			if r.lang == "js" {
				args = []string{"-e", r.harness, file}
			} else {
				args = []string{"-c", r.harness, file}
			}
			cmd := exec.Command(bin, args...)
			cmd.Stdin = bytes.NewReader(input)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", r.interpreter, err, out)
			}
			var got []string
			if err := json.Unmarshal(out, &got); err != nil || len(got) != len(cases) {
				t.Fatalf("%s printed %s", r.interpreter, out)
			}
			for i, c := range cases {
				if got[i] != c.Want {
					t.Errorf("%s, %s: returned %q, want %q", r.interpreter, c.Name, got[i], c.Want)
				}
			}
		})
	}
}
