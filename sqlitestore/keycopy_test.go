package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyformat"
	"github.com/formsapi/formsapi/sqlitestore"
)

// hits returns how many lookups s answered from its key copy.
func hits(t *testing.T, s *sqlitestore.Store) int64 {
	t.Helper()
	st, ok := s.KeyCopyStats()
	if !ok {
		t.Fatal("the store keeps no key copy")
	}
	return st.Hits
}

// served requests target twice with key, so that the second is answered
// from the copy, and fails the test unless it was: each check that
// follows then proves something.
func served(t *testing.T, s *sqlitestore.Store, key, target string) []string {
	t.Helper()
	get(t, s, key, target)
	before := hits(t, s)
	code, items, _ := get(t, s, key, target)
	if code != 200 {
		t.Fatalf("GET %s: %d", target, code)
	}
	if hits(t, s) != before+1 {
		t.Fatalf("GET %s was not answered from the key copy", target)
	}
	return items
}

func addKey(t *testing.T, s *sqlitestore.Store, o formsapi.KeyOptions) string {
	t.Helper()
	key, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddKeyWith(ctx, key, "acct", o); err != nil {
		t.Fatal(err)
	}
	return key
}

// TestKeyCopyOnlyOnOpen: a store from Open keeps the copy unless
// WithKeyCopy(false), and answers a key's second lookup from it without
// a statement; a store from New never keeps one.
func TestKeyCopyOnlyOnOpen(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	path, s, key := newTenant(t)
	served(t, s, key, "/v1/forms/f1/submissions?limit=2")
	_, err := s.Authorize(ctx, key)
	is.NoErr(err)
	st, _ := s.KeyCopyStats()
	is.True(st.Hits >= 2) // the combined lookup, then the key alone

	off := mustOpen(t, path, sqlitestore.WithKeyCopy(false))
	_, ok := off.KeyCopyStats()
	is.True(!ok) // turned off
	code, items, _ := get(t, off, key, "/v1/forms/f1/submissions?limit=2")
	is.Equal(code, 200)
	is.Equal(items, []string{"29", "28"})

	onNew := mustNew(t, hostDB(t, path), sqlitestore.WithKeyCopy(true))
	_, ok = onNew.KeyCopyStats()
	is.True(!ok) // never on a host's handle
}

// TestKeyCopyOwnWrites: the store's own writes, a submission added and
// deleted, a form added and deleted, a key revoked and a grant, hold for
// the very next request though the copy answered the one before.
func TestKeyCopyOwnWrites(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	_, s, key := newTenant(t)
	list := "/v1/forms/f1/submissions?limit=2"
	is.Equal(served(t, s, key, list), []string{"29", "28"})

	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "f1", Data: []byte(`{"n":500}`), CreatedAt: t0.Add(time.Hour)},
		formsapi.Metadata{ID: "m500"}))
	_, items, _ := get(t, s, key, list)
	is.Equal(items, []string{"500", "29"}) // the store's own submission

	is.Equal(served(t, s, key, list), []string{"500", "29"})
	is.NoErr(s.DeleteSubmission(ctx, "acct", "f1", "m500"))
	_, items, _ = get(t, s, key, list)
	is.Equal(items, []string{"29", "28"}) // deleted

	is.Equal(served(t, s, key, list), []string{"29", "28"})
	is.NoErr(s.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
		yield(formsapi.Submission{FormID: "f1", Data: []byte(`{"n":501}`), CreatedAt: t0.Add(2 * time.Hour)}, formsapi.Metadata{})
	}))
	_, items, _ = get(t, s, key, list)
	is.Equal(items, []string{"501", "29"}) // a batch

	is.Equal(served(t, s, key, "/v1/forms/f2/submissions?limit=1"), []string{"29"})
	is.NoErr(s.DeleteForm(ctx, "acct", "f2"))
	code, _, _ := get(t, s, key, "/v1/forms/f2/submissions?limit=1")
	is.Equal(code, 404) // the form is gone
	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "f2", CreatedAt: t0}))
	code, items, _ = get(t, s, key, "/v1/forms/f2/submissions?limit=1")
	is.Equal(code, 200)     // a new form of the same ID
	is.Equal(len(items), 0) // empty

	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "f3", Data: []byte(`{"n":502,"email":"a@example.com"}`), CreatedAt: t0.Add(time.Hour)},
		formsapi.Metadata{}))
	is.Equal(served(t, s, key, "/v1/forms/f3/submissions?limit=1"), []string{"502"})
	n, err := s.Erase(ctx, "acct", "email", "a@example.com")
	is.NoErr(err)
	is.Equal(n, 1)
	_, items, _ = get(t, s, key, "/v1/forms/f3/submissions?limit=1")
	is.Equal(items, []string{"29"}) // erased

	is.NoErr(s.RevokeKey(ctx, key))
	code, _, _ = get(t, s, key, list)
	is.Equal(code, 401) // revoked through the store, refused at once
	_, err = s.ResolveKey(ctx, key)
	is.True(errors.Is(err, formsapi.ErrInvalidKey))
}

// TestKeyCopyOtherConnections: commits by another connection to the
// file, a second store on it (as another process would be) and a host's
// SQL through its own handle, hold for the next request that starts
// after them, though the copy answered the one before.
func TestKeyCopyOtherConnections(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	path, s, key := newTenant(t)
	restricted := addKey(t, s, formsapi.KeyOptions{})
	expiring := addKey(t, s, formsapi.KeyOptions{})
	other := mustOpen(t, path)
	host := hostDB(t, path)
	list := "/v1/forms/f1/submissions?limit=2"

	is.Equal(served(t, s, key, list), []string{"29", "28"})
	is.NoErr(other.AddSubmission(ctx, formsapi.Submission{FormID: "f1", Data: []byte(`{"n":600}`), CreatedAt: t0.Add(time.Hour)},
		formsapi.Metadata{ID: "m600"}))
	_, items, _ := get(t, s, key, list)
	is.Equal(items, []string{"600", "29"}) // another store's submission

	is.Equal(served(t, s, key, list), []string{"600", "29"})
	_, err := host.ExecContext(ctx, `DELETE FROM formsapi_submissions WHERE host_id = 'm600'`)
	is.NoErr(err)
	_, items, _ = get(t, s, key, list)
	is.Equal(items, []string{"29", "28"}) // the host's deletion

	served(t, s, restricted, list)
	h := keyformat.Hash(restricted)
	_, err = host.ExecContext(ctx, `UPDATE formsapi_keys SET forms = '["f0"]' WHERE key_hash = ?`, h[:])
	is.NoErr(err)
	code, _, _ := get(t, s, restricted, list)
	is.True(code != 200) // the grant narrowed by the host
	code, _, _ = get(t, s, restricted, "/v1/forms/f0/submissions?limit=1")
	is.Equal(code, 200) // still granted f0

	served(t, s, expiring, list)
	h = keyformat.Hash(expiring)
	_, err = host.ExecContext(ctx, `UPDATE formsapi_keys SET expires_at = 1 WHERE key_hash = ?`, h[:])
	is.NoErr(err)
	code, _, _ = get(t, s, expiring, list)
	is.Equal(code, 401) // expired by the host

	served(t, s, key, "/v1/forms/f2/submissions?limit=1")
	is.NoErr(other.DeleteForm(ctx, "acct", "f2"))
	code, _, _ = get(t, s, key, "/v1/forms/f2/submissions?limit=1")
	is.Equal(code, 404) // deleted by another store

	served(t, s, key, list)
	is.NoErr(other.RevokeKey(ctx, key))
	code, _, _ = get(t, s, key, list)
	is.Equal(code, 401) // revoked by another store
	_, err = s.Authorize(ctx, key)
	is.True(errors.Is(err, formsapi.ErrInvalidKey))
}

// TestKeyCopyIsExactUnderConcurrentWrites stamps each write's return and
// each request's start: readers, through the handler, list the newest
// submission of two forms, one written by the store, one by another
// store on the file, and one key is revoked by the other store midway.
// No answer is older than a write that returned before its request
// started, and no request of the revoked key started after the
// revocation returned is served.
func TestKeyCopyIsExactUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	path, s, key := newTenant(t)
	doomed := addKey(t, s, formsapi.KeyOptions{})
	other := mustOpen(t, path)
	const writes, readers = 60, 6
	var committed [2]atomic.Int64 // f0 by s, f1 by other: writes returned
	var revoked atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	done := make(chan struct{})
	var served atomic.Int64
	for w, st := range []*sqlitestore.Store{s, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			form := fmt.Sprintf("f%d", w)
			for i := range writes {
				sub := formsapi.Submission{FormID: form, Data: []byte(fmt.Sprintf(`{"n":%d}`, 1000+i)), CreatedAt: t0.Add(time.Hour + time.Duration(i)*time.Second)}
				if err := st.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
					report(err)
					return
				}
				committed[w].Store(int64(i + 1))
				// Let the readers make a few requests before the next
				// write, so that some are answered from the copy.
				for at := served.Load(); served.Load() < at+readers; {
					runtime.Gosched()
				}
				if w == 1 && i == writes/2 {
					if err := other.RevokeKey(ctx, doomed); err != nil {
						report(err)
					}
					revoked.Store(true)
				}
			}
		}()
	}
	var readersWG sync.WaitGroup
	for r := range readers {
		readersWG.Add(1)
		go func() {
			defer readersWG.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				w := (r + i) % 2
				if r%3 == 0 {
					wasRevoked := revoked.Load()
					code, _, _ := get(t, s, doomed, "/v1/forms/f0/submissions?limit=1")
					if wasRevoked && code != 401 {
						report(fmt.Errorf("a request of the revoked key, started after the revocation returned: %d", code))
					}
					continue
				}
				want := committed[w].Load()
				code, items, _ := get(t, s, key, fmt.Sprintf("/v1/forms/f%d/submissions?limit=1", w))
				if code != 200 || len(items) != 1 {
					report(fmt.Errorf("f%d: %d %v", w, code, items))
					return
				}
				n, _ := strconv.Atoi(items[0])
				if want > 0 && int64(n) < 1000+want-1 {
					report(fmt.Errorf("f%d: newest %d, but write %d had returned before the request", w, n, 1000+want-1))
				}
				served.Add(1)
			}
		}()
	}
	wg.Wait()
	close(done)
	readersWG.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st, _ := s.KeyCopyStats()
	t.Logf("%d answers checked; key copy: %+v", served.Load(), st)
	if st.Hits == 0 {
		t.Error("no request was answered from the copy: the test proves nothing")
	}
}

// TestKeyCopyWriteGivenUp: a write whose request gave up while it waited
// for the file's lock (another process's transaction) leaves the store's
// write connection interrupted, and database/sql opens another, whose
// data_version starts again; a revocation by the host's SQL after it
// holds for the next request, though the copy answered the key before.
func TestKeyCopyWriteGivenUp(t *testing.T) {
	t.Parallel()
	path, s, key := newTenant(t)
	list := "/v1/forms/f2/submissions?limit=2"
	served(t, s, key, list)
	host := hostDB(t, path)
	conn, err := host.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil { // the file's write lock
		t.Fatal(err)
	}
	// The write waits for the lock (busy_timeout, 5 s) and its request
	// gives up meanwhile: the driver interrupts the statement.
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err = s.AddSubmission(wctx, formsapi.Submission{FormID: "f1", Data: []byte(`{"n":1}`), CreatedAt: t0}, formsapi.Metadata{})
	if err == nil {
		t.Fatal("the write took the lock another connection holds")
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	h := keyformat.Hash(key)
	if _, err := host.ExecContext(ctx, `UPDATE formsapi_keys SET revoked_at = 1 WHERE key_hash = ?`, h[:]); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := get(t, s, key, list); code != 401 {
		t.Errorf("a key revoked by the host after a write was given up: %d", code)
	}
	if _, err := s.Authorize(ctx, key); !errors.Is(err, formsapi.ErrInvalidKey) {
		t.Errorf("Authorize of the revoked key: %v", err)
	}
}

// TestKeyCopyKeepsKeysAcrossOtherWrites: another store's submission (a
// commit on another connection) leaves the copy its keys (migration
// 0025's keys_gen did not move) and brings its forms up to date in the
// round (KeyCopyStats.Refreshed): the next request is answered from the
// copy, and shows the submission; a form the host's SQL gives another
// account goes from the copy; a host that deletes keys_gen's row only
// makes the copy go at every such commit.
func TestKeyCopyKeepsKeysAcrossOtherWrites(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	path, s, key := newTenant(t)
	other := mustOpen(t, path)
	host := hostDB(t, path)
	list := "/v1/forms/f1/submissions?limit=2"
	refreshed := func() int64 {
		st, _ := s.KeyCopyStats()
		return st.Refreshed
	}

	is.Equal(served(t, s, key, list), []string{"29", "28"})
	before, r := hits(t, s), refreshed()
	is.NoErr(other.AddSubmission(ctx, formsapi.Submission{FormID: "f1", Data: []byte(`{"n":700}`), CreatedAt: t0.Add(time.Hour)},
		formsapi.Metadata{ID: "m700"}))
	_, items, _ := get(t, s, key, list)
	is.Equal(items, []string{"700", "29"}) // the new version, read again in the round
	is.Equal(hits(t, s), before+1)         // from the copy
	is.Equal(refreshed(), r+1)

	// Another account takes f1: the copy drops it.
	served(t, s, key, list)
	_, err := host.ExecContext(ctx, `UPDATE formsapi_forms SET account_id = 'someone else' WHERE id = 'f1'`)
	is.NoErr(err)
	code, _, _ := get(t, s, key, list)
	is.Equal(code, 404)
	_, err = host.ExecContext(ctx, `UPDATE formsapi_forms SET account_id = 'acct' WHERE id = 'f1'`)
	is.NoErr(err)

	// Without keys_gen's row, a key changed by the host still holds at
	// once: the copy goes.
	_, err = host.ExecContext(ctx, `DELETE FROM formsapi_settings WHERE name = 'keys_gen'`)
	is.NoErr(err)
	served(t, s, key, list)
	r = refreshed()
	h := keyformat.Hash(key)
	_, err = host.ExecContext(ctx, `UPDATE formsapi_keys SET revoked_at = 1 WHERE key_hash = ?`, h[:])
	is.NoErr(err)
	code, _, _ = get(t, s, key, list)
	is.Equal(code, 401)
	is.Equal(refreshed(), r) // emptied, not kept
}
