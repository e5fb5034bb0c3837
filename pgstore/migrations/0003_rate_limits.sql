-- The state of RateLimiter: one row per policy and key, shared by every
-- node on the database. tat is GCRA's theoretical arrival time, in Unix
-- microseconds of the database's clock, so the nodes' clocks never
-- matter. A row whose tat has passed is the same as no row.
CREATE TABLE formsapi_rate_limits (
    policy  text    NOT NULL,
    key     text    NOT NULL,
    tat     bigint  NOT NULL,
    allowed boolean NOT NULL, -- the last decision
    at      bigint  NOT NULL, -- when it was made, Unix microseconds
    PRIMARY KEY (policy, key)
);
