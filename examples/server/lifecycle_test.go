package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
)

// feedPage is a page of the sync feed as the server sends it.
type feedPage struct {
	Submissions []struct{ Data json.RawMessage }
	Refs        []string
	Deleted     []string
	SyncToken   string
	HasMore     bool
}

func (s server) feed(t *testing.T, formID, token string) feedPage {
	t.Helper()
	code, body := s.get(t, "/v1/forms/"+formID+"/submissions?limit=1000&sync="+url.QueryEscape(token), s.key)
	if code != 200 {
		t.Fatalf("feed of %s: %d %s", formID, code, body)
	}
	var p feedPage
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// command runs the server's command line with args and returns its
// stdout, or the error.
func command(args ...string) (string, error) {
	var out bytes.Buffer
	err := run(context.Background(), args, &out, io.Discard)
	return out.String(), err
}

// TestDeleteAndEraseFromTheCommandLine: the demo's submissions have IDs,
// and -delete and -erase, run beside a running server as -new-key is,
// delete what they name; the server's sync feed shows each deletion's
// ref under "deleted" on its next request (and the ref leaves "refs"),
// and the curl lines they print, run through a shell, show it. Mistakes
// are errors that say what to give.
func TestDeleteAndEraseFromTheCommandLine(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "forms.db")
	s := start(t, db)
	defer s.stop()
	addr := strings.TrimPrefix(s.base, "http://")
	is.True(strings.Contains(s.term.String(), "go run ./examples/server -db '"+db+"' -delete contact/contact-2\n"))    // the banner's lines
	is.True(strings.Contains(s.term.String(), "go run ./examples/server -db '"+db+"' -erase email=ada@example.com\n")) // name this database

	before := s.feed(t, "contact", "start")
	is.Equal(len(before.Refs), 6)
	is.Equal(len(before.Deleted), 0)

	out, err := command("-db", db, "-addr", addr, "-delete", "contact/contact-2")
	is.NoErr(err)
	is.True(strings.Contains(out, `deleted submission "contact-2" of form "contact" (account "demo")`))
	after := s.feed(t, "contact", before.SyncToken)   // the running server, from the token it gave before
	is.Equal(after.Deleted, []string{before.Refs[1]}) // the second submission's ref, now deleted
	is.Equal(len(after.Submissions), 0)
	again := s.feed(t, "contact", "start")
	is.Equal(len(again.Refs), 5)
	is.True(!slices.Contains(again.Refs, before.Refs[1])) // gone from refs
	is.Equal(again.Deleted, []string{before.Refs[1]})     // and listed as deleted
	if _, err := exec.LookPath("curl"); err == nil {
		line := regexp.MustCompile(`curl -H .*sync=start'`).FindString(out)
		is.True(line != "") // the printed line
		cmd := exec.Command("sh", "-c", line+" -s")
		cmd.Dir = t.TempDir()
		printed, err := cmd.Output()
		is.NoErr(err)
		is.True(strings.Contains(string(printed), `"deleted":["`+before.Refs[1]+`"]`)) // shows the deletion
	}

	_, err = command("-db", db, "-delete", "contact/contact-2")
	is.True(err != nil && strings.Contains(err.Error(), `form "contact" has no submission "contact-2"`)) // deleted already
	_, err = command("-db", db, "-delete", "nosuchform/x")
	is.True(err != nil && strings.Contains(err.Error(), `account "demo" has no form "nosuchform"`))
	_, err = command("-db", db, "-delete", "contact/contact-3", "-account", "someone-else")
	is.True(err != nil && strings.Contains(err.Error(), "has no form")) // another account's form is not found
	for _, bad := range []string{"contact", "contact/", "/contact-3"} {
		_, err = command("-db", filepath.Join(t.TempDir(), "never.db"), "-delete", bad)
		is.True(err != nil && strings.Contains(err.Error(), "want FORM/ID")) // refused before anything is opened
	}
	_, err = os.Stat(filepath.Join(filepath.Dir(db), "never.db"))
	is.True(os.IsNotExist(err))

	newsletter := s.feed(t, "newsletter", "start")
	out, err = command("-db", db, "-addr", addr, "-erase", "email=ada@example.com")
	is.NoErr(err)
	is.True(strings.Contains(out, `erased 3 submissions of account "demo" whose "email" is "ada@example.com"`)) // contact, newsletter, job application
	is.Equal(strings.Count(out, "sync=start'"), 3)                                                              // a feed line per form
	erased := s.feed(t, "newsletter", newsletter.SyncToken)
	is.Equal(erased.Deleted, []string{newsletter.Refs[0]}) // Ada's sign-up, the first
	out, err = command("-db", db, "-erase", "email=ada@example.com")
	is.NoErr(err)
	is.True(strings.Contains(out, "erased nothing")) // nothing left to erase, and it says so
	for _, bad := range []string{"email", "=x", "email="} {
		_, err = command("-db", db, "-erase", bad)
		is.True(err != nil && strings.Contains(err.Error(), "want FIELD=VALUE"))
	}
	_, err = command("-db", db, "-delete", "contact/contact-3", "-erase", "email=x")
	is.True(err != nil && strings.Contains(err.Error(), "one of -new-key, -delete, -erase and -migrate"))
	_, err = command("-db", db, "contact/contact-3")
	is.True(err != nil && strings.Contains(err.Error(), "unexpected argument")) // a flag forgotten
}

// TestTokensOutliveARestart: with no secret given, cursors and sync
// tokens of one run are taken by the next (the store keeps the secret in
// the database), no secret file is made, and the log says whose secret
// is used; an earlier version's file beside the data is still used.
func TestTokensOutliveARestart(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "forms.db")
	first := start(t, db)
	p := first.feed(t, "contact", "start")
	code, body := first.get(t, "/v1/forms/contact/submissions?limit=2", first.key)
	is.Equal(code, 200)
	var page struct{ NextCursor string }
	is.NoErr(json.Unmarshal(body, &page))
	is.NoErr(first.stop())
	is.True(strings.Contains(first.out.String(), `"cursor_secret":"store"`))

	second := start(t, db)
	defer second.stop()
	code, _ = second.get(t, "/v1/forms/contact/submissions?limit=2&cursor="+url.QueryEscape(page.NextCursor), second.key)
	is.Equal(code, 200)                                             // the cursor
	is.Equal(second.feed(t, "contact", p.SyncToken).HasMore, false) // the token
	is.Equal(second.feed(t, "contact", "start").Refs, p.Refs)       // the refs
	entries, err := os.ReadDir(dir)
	is.NoErr(err)
	for _, e := range entries {
		is.True(!strings.Contains(e.Name(), "secret")) // no file made
	}

	legacy := filepath.Join(t.TempDir(), "old.db")
	is.NoErr(os.WriteFile(legacy+".cursor-secret", []byte(strings.Repeat("x", 43)+"\n"), 0o600))
	old := start(t, legacy)
	defer old.stop()
	is.True(strings.Contains(old.out.String(), `"cursor_secret":"`+legacy+`.cursor-secret"`)) // the earlier version's file
	store, err := sqlitestore.Open(legacy)
	is.NoErr(err)
	defer store.Close()
	cursor := func(opts ...formsapi.Option) string {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/v1/forms/contact/submissions?limit=2", nil)
		r.Header.Set("Authorization", "Bearer "+old.key)
		formsapi.NewHandler(store, store, opts...).ServeHTTP(w, r)
		var page struct{ NextCursor string }
		is.NoErr(json.Unmarshal(w.Body.Bytes(), &page))
		return url.QueryEscape(page.NextCursor)
	}
	code, _ = old.get(t, "/v1/forms/contact/submissions?limit=2&cursor="+cursor(formsapi.WithCursorSecret([]byte(strings.Repeat("x", 43)))), old.key)
	is.Equal(code, 200) // sealed with the file's secret, as an earlier run's
	code, _ = old.get(t, "/v1/forms/contact/submissions?limit=2&cursor="+cursor(), old.key)
	is.Equal(code, 400) // not with the store's
}
