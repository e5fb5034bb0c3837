-- Webhook endpoints (package webhook): what an account registered, and
-- the lease a dispatcher holds on each. forms and secrets are JSON arrays
-- (internal/hookrow); times are Unix nanoseconds, UTC, 0 for none.
-- Secrets are kept as given: signing needs them (docs/webhooks-hosts.md).
CREATE TABLE formsapi_endpoints (
    id              TEXT    PRIMARY KEY,
    account_id      TEXT    NOT NULL,
    url             TEXT    NOT NULL,
    forms           TEXT    NOT NULL,
    secrets         TEXT    NOT NULL,
    disabled        INTEGER NOT NULL,
    disabled_reason TEXT    NOT NULL,
    disabled_at     INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    lease_gen       INTEGER NOT NULL DEFAULT 0, -- the fencing token: every claim adds one
    lease_until     INTEGER NOT NULL DEFAULT 0  -- 0: free
) WITHOUT ROWID; -- the ID is the table's key: no index of SQLite's own naming

CREATE INDEX formsapi_endpoints_account ON formsapi_endpoints (account_id, created_at, id);

-- The delivery state of each form an endpoint follows: the cursor over
-- the form's feed and the retries of the entry after it. Deleted with
-- the endpoint by the store (a host's handle may not enforce foreign
-- keys).
CREATE TABLE formsapi_endpoint_streams (
    endpoint_id   TEXT    NOT NULL,
    form_id       TEXT    NOT NULL,
    cursor        INTEGER NOT NULL,
    floor         INTEGER NOT NULL,
    attempts      INTEGER NOT NULL,
    next_at       INTEGER NOT NULL,
    failing_since INTEGER NOT NULL,
    last_success  INTEGER NOT NULL,
    resync        INTEGER NOT NULL,
    PRIMARY KEY (endpoint_id, form_id)
) WITHOUT ROWID;
