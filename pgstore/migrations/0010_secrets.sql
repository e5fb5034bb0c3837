-- Secrets the store keeps with the data. One today, named 'cursor': the
-- key material of the handler's cursors, sync tokens, feed refs and page
-- ETags, so that they outlive a restart and hold on every node over this
-- schema. The store inserts it, from crypto/rand, under the migration lock
-- at the first Open or New that finds none, and reads it back at every
-- open: nodes starting together on an empty schema all read the first
-- one inserted. See internal/stored/secret.go.
CREATE TABLE formsapi_secrets (
    name       text   PRIMARY KEY,
    secret     bytea  NOT NULL,
    created_at bigint NOT NULL -- Unix nanoseconds, UTC
);
