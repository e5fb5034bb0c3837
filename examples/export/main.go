// Command export writes every submission of one form to a JSON Lines file,
// oldest first, one submission per line:
//
//	FORMS_API_URL=https://forms.example.com/api FORMS_API_KEY=fapi_… go run ./examples/export contact contact.jsonl
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/formsapi/formsapi/formsclient"
)

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: export FORM-ID FILE.jsonl (with FORMS_API_URL and FORMS_API_KEY set)")
	}
	base, key := os.Getenv("FORMS_API_URL"), os.Getenv("FORMS_API_KEY")
	if base == "" || key == "" {
		log.Fatal("set FORMS_API_URL (where the API is mounted, such as http://127.0.0.1:8080) and FORMS_API_KEY (an API key)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c, err := formsclient.New(base, key, formsclient.WithUserAgent("forms-export/1"))
	if err != nil {
		log.Fatal(err) // FORMS_API_URL or FORMS_API_KEY is malformed: the error says which
	}
	n, err := export(ctx, c, os.Args[1], os.Args[2])
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %d submissions to %s", n, os.Args[2])
}

// export writes the submissions of formID to path. It writes to a
// temporary file first and renames it at the end, so a failed export never
// leaves a partial file that looks complete.
func export(ctx context.Context, c *formsclient.Client, formID, path string) (int, error) {
	tmp := path + ".partial"
	f, err := os.Create(tmp)
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp) // after a successful rename there is nothing left to remove
	defer f.Close()
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w) // Encode writes one JSON value and a newline: one line per submission
	enc.SetEscapeHTML(false)  // keep < > & as typed
	n := 0
	for s, err := range c.Submissions(ctx, formID, formsclient.Oldest(), formsclient.PageSize(1000)) {
		if err != nil {
			return n, fmt.Errorf("export %s after %d submissions: %w", formID, n, err)
		}
		if err := enc.Encode(s); err != nil {
			return n, err
		}
		n++
	}
	if err := w.Flush(); err != nil {
		return n, err
	}
	if err := f.Close(); err != nil {
		return n, err
	}
	return n, os.Rename(tmp, path)
}
