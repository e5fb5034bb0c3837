-- Which additions a filtered endpoint was sent (package webhook,
-- docs/webhooks.md "Filtered endpoints"), so that it is sent the
-- deletions of those and of no others: a stream that is judging was
-- sent every addition above unsent and at or below judged that no span
-- of formsapi_endpoint_passed holds. Streams made before are not
-- judging: they are sent every deletion, as before. Constant defaults
-- add the columns without rewriting the table.
ALTER TABLE formsapi_endpoint_streams ADD COLUMN IF NOT EXISTS judging boolean NOT NULL DEFAULT false;
ALTER TABLE formsapi_endpoint_streams ADD COLUMN IF NOT EXISTS unsent bigint NOT NULL DEFAULT 0;
ALTER TABLE formsapi_endpoint_streams ADD COLUMN IF NOT EXISTS judged bigint NOT NULL DEFAULT 0;

-- The spans of feed positions whose additions a stream's endpoint was
-- not sent (hookstore.PassedStore): positions only, never a value.
CREATE TABLE IF NOT EXISTS formsapi_endpoint_passed (
    endpoint_id text   NOT NULL REFERENCES formsapi_endpoints (id) ON DELETE CASCADE,
    form_id     text   NOT NULL,
    pos_from    bigint NOT NULL,
    pos_to      bigint NOT NULL,
    PRIMARY KEY (endpoint_id, form_id, pos_from)
);
