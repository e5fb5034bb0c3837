-- Forms, submissions and API keys. Every name starts with formsapi_ so the
-- tables can share a schema with the host's own. The store runs this with
-- search_path set to its schema.
--
-- Times are bigint Unix nanoseconds in UTC: timestamptz keeps only
-- microseconds, and the API promises the instant it was given. seq, an
-- identity in insertion order, breaks ties between equal times and never
-- changes, which is what keyset cursors need.

CREATE TABLE formsapi_forms (
    seq                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id                 text   NOT NULL,
    account_id         text   NOT NULL,
    title              text   NOT NULL,
    icon               text   NOT NULL,
    notification_email text   NOT NULL,
    created_at         bigint NOT NULL,
    -- The last feed position given to a submission of this form: the
    -- per-form insertion sequence in commit order (see feed_pos).
    feed_last          bigint NOT NULL DEFAULT 0
);

-- Form IDs are public and unique across accounts.
CREATE UNIQUE INDEX formsapi_forms_id ON formsapi_forms (id);

-- ListForms: one account's forms in keyset order.
CREATE INDEX formsapi_forms_account ON formsapi_forms (account_id, created_at, seq);

CREATE TABLE formsapi_submissions (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    form_seq    bigint NOT NULL REFERENCES formsapi_forms (seq),
    -- Position in the form's feed: 1, 2, 3... taken from the form row by
    -- the insert itself, which holds that row's lock until it commits, so
    -- within a form positions become visible in order, without gaps.
    feed_pos    bigint NOT NULL,
    created_at  bigint NOT NULL,
    data        text   NOT NULL,               -- the submitted JSON object, compacted
    attachments text   NOT NULL DEFAULT '[]',  -- JSON array of attachments
    json        bytea  NOT NULL,               -- the whole submission as the API sends it
    -- Metadata of the collection side: never selected by the read API.
    -- bytea, because request headers need not be UTF-8 and must not make
    -- a submission fail.
    client_ip   bytea  NOT NULL DEFAULT '',
    user_agent  bytea  NOT NULL DEFAULT '',
    geo         bytea,                          -- JSON, NULL when absent
    trace_id    bytea  NOT NULL DEFAULT ''
);

-- ListSubmissions: one form's submissions in keyset order.
CREATE INDEX formsapi_submissions_form ON formsapi_submissions (form_seq, created_at, seq);

-- The sync feed: one form's submissions in commit order.
CREATE UNIQUE INDEX formsapi_submissions_feed ON formsapi_submissions (form_seq, feed_pos);

-- API keys by the SHA-256 of the key; the key itself is never stored.
-- Revoked keys keep their row so that a leaked key can never be added again.
CREATE TABLE formsapi_keys (
    key_hash   bytea  PRIMARY KEY CHECK (octet_length(key_hash) = 32),
    account_id text   NOT NULL,
    created_at bigint NOT NULL,
    revoked_at bigint
);
