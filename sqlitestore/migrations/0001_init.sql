-- Forms, submissions and API keys. Every name starts with formsapi_ so the
-- tables can share a database file with the host's own.
-- Times are INTEGER Unix nanoseconds in UTC; seq (the rowid) breaks ties
-- between equal times and never changes, which is what keyset cursors need.

CREATE TABLE formsapi_forms (
    seq                INTEGER PRIMARY KEY,
    id                 TEXT    NOT NULL,
    account_id         TEXT    NOT NULL,
    title              TEXT    NOT NULL,
    icon               TEXT    NOT NULL,
    notification_email TEXT    NOT NULL,
    created_at         INTEGER NOT NULL
);

-- Form IDs are public and unique across accounts. A named index rather than
-- a UNIQUE constraint, so no sqlite_autoindex_ object lands in a shared file.
CREATE UNIQUE INDEX formsapi_forms_id ON formsapi_forms (id);

-- ListForms: one account's forms in keyset order.
CREATE INDEX formsapi_forms_account ON formsapi_forms (account_id, created_at, seq);

CREATE TABLE formsapi_submissions (
    seq         INTEGER PRIMARY KEY,
    form_seq    INTEGER NOT NULL REFERENCES formsapi_forms (seq),
    created_at  INTEGER NOT NULL,
    data        TEXT    NOT NULL,             -- the submitted JSON object, compacted
    attachments TEXT    NOT NULL DEFAULT '[]', -- JSON array of attachments
    json        BLOB    NOT NULL,             -- the whole submission as the API sends it
    -- Metadata of the collection side: never selected by the read API.
    client_ip   TEXT    NOT NULL DEFAULT '',
    user_agent  TEXT    NOT NULL DEFAULT '',
    geo         TEXT,                          -- JSON, NULL when absent
    trace_id    TEXT    NOT NULL DEFAULT ''
);

-- ListSubmissions: one form's submissions in keyset order.
CREATE INDEX formsapi_submissions_form ON formsapi_submissions (form_seq, created_at, seq);

-- API keys by the SHA-256 of the key; the key itself is never stored.
-- Revoked keys keep their row so that a leaked key can never be added again.
CREATE TABLE formsapi_keys (
    key_hash   BLOB    PRIMARY KEY CHECK (length(key_hash) = 32),
    account_id TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
) WITHOUT ROWID;
