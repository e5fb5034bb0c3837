-- Which additions a filtered endpoint was sent (package webhook,
-- docs/webhooks.md "Filtered endpoints"), so that it is sent the
-- deletions of those and of no others: a stream that is judging
-- (judging = 1) was sent every addition above unsent and at or below
-- judged that no span of formsapi_endpoint_passed holds. Streams made
-- before are not judging: they are sent every deletion, as before.
ALTER TABLE formsapi_endpoint_streams ADD COLUMN judging INTEGER NOT NULL DEFAULT 0;
ALTER TABLE formsapi_endpoint_streams ADD COLUMN unsent INTEGER NOT NULL DEFAULT 0;
ALTER TABLE formsapi_endpoint_streams ADD COLUMN judged INTEGER NOT NULL DEFAULT 0;

-- The spans of feed positions whose additions a stream's endpoint was
-- not sent (hookstore.PassedStore): positions only, never a value.
-- Deleted with the stream by the store.
CREATE TABLE formsapi_endpoint_passed (
    endpoint_id TEXT    NOT NULL,
    form_id     TEXT    NOT NULL,
    pos_from    INTEGER NOT NULL,
    pos_to      INTEGER NOT NULL,
    PRIMARY KEY (endpoint_id, form_id, pos_from)
) WITHOUT ROWID;
