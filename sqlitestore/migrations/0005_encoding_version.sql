-- The version of the response JSON each submission keeps (internal/stored).
-- Rows written before this migration were encoded as version 1.
ALTER TABLE formsapi_submissions ADD COLUMN json_version INTEGER NOT NULL DEFAULT 1;

-- The rows whose JSON is not in the current encoding: empty in normal
-- operation. A release that changes the encoding recreates this index with
-- its own number, and the store re-encodes these rows when it opens.
CREATE INDEX formsapi_submissions_stale ON formsapi_submissions (seq) WHERE json_version <> 1;
