package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyformat"
)

// copyFixture opens a store with the key copy on a new file with form
// "f" of account "acct", and returns it with two of the account's keys
// and another connection to the file.
func copyFixture(t *testing.T) (s *Store, key, key2 string, other *sql.DB) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "forms.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if s.keys == nil {
		t.Fatal("no key copy")
	}
	if err := s.AddForm(ctx, "acct", formsapi.Form{ID: "f"}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []*string{&key, &key2} {
		if *k, err = formsapi.NewKey(); err != nil {
			t.Fatal(err)
		}
		if err := s.AddKey(ctx, *k, "acct"); err != nil {
			t.Fatal(err)
		}
	}
	other, err = sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return s, key, key2, other
}

// TestKeyCopyLateLookupNotCopied: a lookup that read the file before a
// write, the store's own or another connection's, is not copied after
// it, so the next request reads the write: a submission (the form's
// version) or a revocation (the key).
func TestKeyCopyLateLookupNotCopied(t *testing.T) {
	ctx := context.Background()
	s, key, key2, other := copyFixture(t)
	var path string
	if err := other.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path); err != nil {
		t.Fatal(err)
	}
	otherStore, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer otherStore.Close()
	for _, c := range []struct {
		name    string
		key     string
		write   func(key string) error
		foreign bool
		revoked bool
	}{
		{"own submission", key, func(string) error {
			return s.AddSubmission(ctx, formsapi.Submission{FormID: "f", Data: []byte(`{"a":1}`)}, formsapi.Metadata{})
		}, false, false},
		{"another connection's submission", key, func(string) error {
			_, err := other.ExecContext(ctx, `INSERT INTO formsapi_submissions (form_seq, created_at, data, json)
SELECT seq, 1, '{}', '{}' FROM formsapi_forms WHERE id = 'f'`)
			return err
		}, true, false},
		// Another store's insert brings its feed position: no update of
		// the row, so keys_gen stays where it was, and the round keeps
		// the copy, the form read again (migration 0025).
		{"another store's submission", key, func(string) error {
			return otherStore.AddSubmission(ctx, formsapi.Submission{FormID: "f", Data: []byte(`{"b":1}`)}, formsapi.Metadata{})
		}, true, false},
		{"own revocation", key2, func(k string) error { return s.RevokeKey(ctx, k) }, false, true},
	} {
		h := keyformat.Hash(c.key)
		ch := s.keys.change() // the form's entry goes
		ch.form("f")
		ch.end()
		_, _, ok, gen, err := s.keys.lookup(ctx, h, "f")
		if err != nil || ok {
			t.Fatalf("%s: a first lookup answered from the copy (%v)", c.name, err)
		}
		g, old, err := s.lookupKey(ctx, h, "f") // read before the write
		if err != nil {
			t.Fatal(err)
		}
		if err := c.write(c.key); err != nil {
			t.Fatal(err)
		}
		if c.foreign {
			// A round sees the commit (the lookup below runs one).
			if _, _, _, _, err := s.keys.lookup(ctx, h, "f"); err != nil {
				t.Fatal(err)
			}
		}
		s.keys.fill(gen, h, g, "f", old) // too late
		_, f, err := s.lookupCopied(ctx, h, "f")
		if c.revoked {
			if !errors.Is(err, formsapi.ErrInvalidKey) {
				t.Errorf("%s: the next lookup got %v, want the key refused", c.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.Version == old.Version {
			t.Errorf("%s: the next lookup got the version before the write", c.name)
		}
		// And now the copy holds the new one.
		_, f2, ok, _, _ := s.keys.lookup(ctx, h, "f")
		if !ok || f2 != f {
			t.Errorf("%s: the copy holds %+v (%v), want %+v", c.name, f2, ok, f)
		}
	}
}

// TestKeyCopyNoRoundNoCopy: while a long write holds the store's gate
// (here the test, as holdLong notes one), no round runs, and a lookup is
// not answered from the copy: another connection's revocation committed
// meanwhile holds.
func TestKeyCopyNoRoundNoCopy(t *testing.T) {
	ctx := context.Background()
	s, key, _, other := copyFixture(t)
	for range 2 { // copied
		if _, err := s.Authorize(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	s.gate <- struct{}{}
	end := s.keys.holdLong()
	h := keyformat.Hash(key)
	if _, err := other.ExecContext(ctx, `UPDATE formsapi_keys SET revoked_at = 1 WHERE key_hash = ?`, h[:]); err != nil {
		t.Fatal(err)
	}
	_, err := s.Authorize(ctx, key)
	end()
	<-s.gate
	if !errors.Is(err, formsapi.ErrInvalidKey) {
		t.Errorf("a key revoked by another connection during a long write: %v", err)
	}
}

// TestKeyCopyLongWrites: while a long write of the store holds the
// write connection (a batch, whose iterator is the host's code), a
// lookup does not wait for it (the iterator's own lookup would wait
// forever) but reads the file; and the copy still sees another
// connection's commit after.
func TestKeyCopyLongWrites(t *testing.T) {
	ctx := context.Background()
	s, key, key2, other := copyFixture(t)
	for range 2 { // copied
		if _, err := s.Authorize(ctx, key2); err != nil {
			t.Fatal(err)
		}
	}
	ictx, cancel := context.WithTimeout(ctx, time.Minute) // a deadlock fails, not hangs
	defer cancel()
	var inside []error
	err := s.AddSubmissions(ictx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
		_, _, err := s.AuthorizeForm(ictx, key, "f") // the host's iterator reads through the store
		inside = append(inside, err)
		yield(formsapi.Submission{FormID: "f", Data: []byte(`{"b":1}`)}, formsapi.Metadata{})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(inside) == 0 || inside[0] != nil {
		t.Fatalf("a lookup during the batch: %v", inside)
	}
	st, _ := s.KeyCopyStats()
	if st.Busy == 0 {
		t.Error("the round during the batch did not leave its lookup to the file")
	}
	h := keyformat.Hash(key2)
	if _, err := other.ExecContext(ctx, `UPDATE formsapi_keys SET revoked_at = 1 WHERE key_hash = ?`, h[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authorize(ctx, key2); !errors.Is(err, formsapi.ErrInvalidKey) {
		t.Errorf("a key revoked by another connection: %v", err)
	}
	if _, err := s.Authorize(ctx, key); err != nil {
		t.Fatal(err)
	}
}

// TestKeyCopyNewWriteConnection: data_version is the write connection's
// own count, and a connection opened anew starts it again, so a value
// equal to the last round's proves nothing when the connection is
// another. database/sql replaces the write connection when it finds it
// unusable (modernc.org/sqlite's IsValid is false after an interrupted
// statement: a request that gave up during a write or a round); here the
// test discards it as the driver would. Another connection's revocation
// made before the new connection's first round holds.
func TestKeyCopyNewWriteConnection(t *testing.T) {
	ctx := context.Background()
	s, key, _, other := copyFixture(t)
	for range 2 { // copied
		if _, err := s.Authorize(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := s.write.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The driver's verdict on a connection it cannot trust: database/sql
	// closes it, and opens another for the next statement.
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
	h := keyformat.Hash(key)
	if _, err := other.ExecContext(ctx, `UPDATE formsapi_keys SET revoked_at = 1 WHERE key_hash = ?`, h[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authorize(ctx, key); !errors.Is(err, formsapi.ErrInvalidKey) {
		t.Errorf("a key revoked by another connection after the write connection was replaced: %v", err)
	}
}
