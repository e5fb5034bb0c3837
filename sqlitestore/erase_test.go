package sqlitestore_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// traceForm is the form the deletion tests fill with traceable bytes.
const (
	traceForm = "trace-form-7f3a"
	traceWho  = "gone.respondent@example.org"
)

// subTraces are in the submissions of traceForm, data and every metadata
// field; formTraces in the form's own fields.
var (
	subTraces  = []string{traceWho, "TRACE-DATA-7f3a", "TRACE-IP-7f3a", "TRACE-UA-7f3a", "TRACE-GEO-7f3a", "TRACE-ID-7f3a", "TRACE-HOST-ID-7f3a"}
	formTraces = []string{"TRACE-TITLE-7f3a", "trace-notify-7f3a@example.org"}
)

// fillTraces adds traceForm to AccountA, with two submissions of
// traceWho: a small one and one large enough for overflow pages, each
// with metadata of its own, host IDs TRACE-HOST-ID-7f3a-0 and -1.
func fillTraces(t *testing.T, s *sqlitestore.Store) {
	t.Helper()
	is := is.New(t)
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: traceForm, Title: "TRACE-TITLE-7f3a", NotificationEmail: "trace-notify-7f3a@example.org"}))
	big := strings.Repeat("TRACE-DATA-7f3a ", 2000) // 32 KB: overflow pages
	for i, data := range []string{
		fmt.Sprintf(`{"email":%q,"note":"TRACE-DATA-7f3a"}`, traceWho),
		fmt.Sprintf(`{"email":%q,"essay":%q}`, traceWho, big),
	} {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: traceForm, Data: []byte(data)}, formsapi.Metadata{
			ClientIP: "TRACE-IP-7f3a", UserAgent: "TRACE-UA-7f3a", Geo: []byte(`{"city":"TRACE-GEO-7f3a"}`),
			TraceID: "TRACE-ID-7f3a", ID: fmt.Sprintf("TRACE-HOST-ID-7f3a-%d", i),
		}))
	}
}

// files returns the bytes of the database file at path and of its -wal.
func files(t *testing.T, path string) []byte {
	t.Helper()
	var all []byte
	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// mustHold fails the test unless every trace is in the files at path: so
// that a search that finds nothing afterwards could have found them.
func mustHold(t *testing.T, path string, traces []string) {
	t.Helper()
	all := files(t, path)
	for _, tr := range traces {
		if !bytes.Contains(all, []byte(tr)) {
			t.Fatalf("%q is not in the files before the deletion: the search finds nothing", tr)
		}
	}
}

// mustNotHold fails the test for every trace still in the files at path.
func mustNotHold(t *testing.T, path string, traces []string) {
	t.Helper()
	all := files(t, path)
	for _, tr := range traces {
		if i := bytes.Index(all, []byte(tr)); i >= 0 {
			t.Errorf("%q is still in the files after the deletion, at byte %d", tr, i)
		}
	}
}

// TestDeletionsLeaveNoTrace deletes a respondent's submissions (Erase,
// DeleteSubmission) or their whole form (DeleteForm), small ones and one
// large enough for overflow pages, with metadata of their own, and then
// looks for their bytes in the database file and its -wal file: the data
// and every metadata field (and, for DeleteForm, the form's fields) were
// there before, so the search can fail, and none is anywhere after. Each
// deletion runs with secure_delete and ends with a TRUNCATE checkpoint
// (see Store.Erase); a store from New gets secure_delete for its
// deletions whatever the host's DSN says.
func TestDeletionsLeaveNoTrace(t *testing.T) {
	deletions := map[string]func(s *sqlitestore.Store) error{
		"Erase": func(s *sqlitestore.Store) error {
			n, err := s.Erase(ctx, storetest.AccountA, "email", traceWho)
			if err == nil && n != 2 {
				err = fmt.Errorf("erased %d submissions, want 2", n)
			}
			return err
		},
		"DeleteSubmission": func(s *sqlitestore.Store) error {
			for i := range 2 {
				if err := s.DeleteSubmission(ctx, storetest.AccountA, traceForm, fmt.Sprintf("TRACE-HOST-ID-7f3a-%d", i)); err != nil {
					return err
				}
			}
			return nil
		},
		"DeleteForm": func(s *sqlitestore.Store) error {
			return s.DeleteForm(ctx, storetest.AccountA, traceForm)
		},
	}
	for _, mode := range []string{"Open", "New"} {
		for name, del := range deletions {
			t.Run(mode+"/"+name, func(t *testing.T) {
				t.Parallel()
				is := is.New(t)
				path := dbPath(t)
				var s *sqlitestore.Store
				if mode == "Open" {
					s = mustOpen(t, path)
				} else {
					s = mustNew(t, hostDB(t, path))
				}
				is.NoErr(storetest.Load(ctx, s, storetest.DefaultSeed()))
				fillTraces(t, s)
				traces := subTraces
				if name == "DeleteForm" {
					traces = append(slices.Clone(subTraces), formTraces...)
				}
				mustHold(t, path, traces)
				is.NoErr(del(s))
				mustNotHold(t, path, traces)
				// The rest of the data is intact.
				p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormSmall, formsapi.Query{Limit: 10})
				is.NoErr(err)
				is.Equal(len(p.Items), 3)
			})
		}
	}
}

// TestDeletionRetryCheckpoints deletes the traces the way a deletion that
// crashed between its commit and its checkpoint leaves them (committed
// with secure_delete, by a host's connection, no checkpoint: the bytes
// are still in the files), and then retries the deletion through the
// store, which finds nothing to delete: the retry checkpoints anyway, and
// the bytes are gone.
func TestDeletionRetryCheckpoints(t *testing.T) {
	retries := map[string]func(s *sqlitestore.Store) error{
		"Erase": func(s *sqlitestore.Store) error {
			n, err := s.Erase(ctx, storetest.AccountA, "email", traceWho)
			if err == nil && n != 0 {
				err = fmt.Errorf("erased %d submissions, want 0", n)
			}
			return err
		},
		"DeleteSubmission": func(s *sqlitestore.Store) error {
			err := s.DeleteSubmission(ctx, storetest.AccountA, traceForm, "TRACE-HOST-ID-7f3a-1")
			if !errors.Is(err, formsapi.ErrSubmissionNotFound) {
				return fmt.Errorf("got %v, want ErrSubmissionNotFound", err)
			}
			return nil
		},
	}
	for name, retry := range retries {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			path := dbPath(t)
			s := mustOpen(t, path)
			is.NoErr(storetest.Load(ctx, s, storetest.DefaultSeed()))
			fillTraces(t, s)
			host := hostDB(t, path)
			conn, err := host.Conn(ctx)
			is.NoErr(err)
			defer conn.Close()
			_, err = conn.ExecContext(ctx, "PRAGMA secure_delete = 1")
			is.NoErr(err)
			_, err = conn.ExecContext(ctx, `DELETE FROM formsapi_submissions WHERE host_id LIKE 'TRACE-HOST-ID-7f3a-%'`)
			is.NoErr(err)
			mustHold(t, path, subTraces) // committed, not checkpointed
			is.NoErr(retry(s))
			mustNotHold(t, path, subTraces)
		})
	}
}

// TestDeletionUnderReader deletes while a reader holds a snapshot older
// than the deletion, so the deletion's checkpoint cannot finish: the
// deletion still succeeds (the checkpoint is best effort and waits a
// bounded time), and once the reader is gone the next deletion, which
// finds nothing, checkpoints the bytes away.
func TestDeletionUnderReader(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	s := mustOpen(t, path)
	is.NoErr(storetest.Load(ctx, s, storetest.DefaultSeed()))
	fillTraces(t, s)
	reader, err := hostDB(t, path).BeginTx(ctx, nil)
	is.NoErr(err)
	var n int
	is.NoErr(reader.QueryRowContext(ctx, "SELECT count(*) FROM formsapi_submissions").Scan(&n)) // holds its snapshot
	is.NoErr(s.DeleteForm(ctx, storetest.AccountA, traceForm))
	mustHold(t, path, subTraces) // the reader kept the log from being truncated
	is.NoErr(reader.Rollback())
	n, err = s.Erase(ctx, storetest.AccountA, "email", traceWho)
	is.NoErr(err)
	is.Equal(n, 0)
	mustNotHold(t, path, append(slices.Clone(subTraces), formTraces...))
}
