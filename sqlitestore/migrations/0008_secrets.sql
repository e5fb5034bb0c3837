-- Secrets the store keeps with the data. One today, named 'cursor': the
-- key material of the handler's cursors, sync tokens, feed refs and page
-- ETags, so that they outlive a restart and hold in every process over
-- this file. The store inserts it, from crypto/rand, at the first Open or
-- New that finds none (a migration cannot draw random bytes in Go), and
-- reads it back at every open. See internal/stored/secret.go.
CREATE TABLE formsapi_secrets (
    name       TEXT    PRIMARY KEY,
    secret     BLOB    NOT NULL,
    created_at INTEGER NOT NULL -- Unix nanoseconds, UTC
) WITHOUT ROWID;
