-- Webhook endpoints (package webhook): what an account registered, and
-- the lease a dispatcher holds on each. forms and secrets are JSON arrays
-- (internal/hookrow); times are Unix nanoseconds, UTC, 0 for none.
-- Secrets are kept as given: signing needs them (docs/webhooks-hosts.md).
--
-- A dispatcher claims free endpoints with FOR UPDATE SKIP LOCKED and
-- gives each claim a new lease_gen, the fencing token every later write
-- of that holder must match: a node paused past its lease, whose endpoint
-- another node claimed, moves no cursor.
CREATE TABLE formsapi_endpoints (
    id              text    PRIMARY KEY,
    account_id      text    NOT NULL,
    url             text    NOT NULL,
    forms           text    NOT NULL,
    secrets         text    NOT NULL,
    disabled        boolean NOT NULL,
    disabled_reason text    NOT NULL,
    disabled_at     bigint  NOT NULL,
    created_at      bigint  NOT NULL,
    lease_gen       bigint  NOT NULL DEFAULT 0,
    lease_until     bigint  NOT NULL DEFAULT 0 -- 0: free
);

CREATE INDEX formsapi_endpoints_account ON formsapi_endpoints (account_id, created_at, id);

-- The delivery state of each form an endpoint follows: the cursor over
-- the form's feed and the retries of the entry after it.
CREATE TABLE formsapi_endpoint_streams (
    endpoint_id   text    NOT NULL REFERENCES formsapi_endpoints (id) ON DELETE CASCADE,
    form_id       text    NOT NULL,
    cursor        bigint  NOT NULL,
    floor         bigint  NOT NULL,
    attempts      integer NOT NULL,
    next_at       bigint  NOT NULL,
    failing_since bigint  NOT NULL,
    last_success  bigint  NOT NULL,
    resync        boolean NOT NULL,
    PRIMARY KEY (endpoint_id, form_id)
);
