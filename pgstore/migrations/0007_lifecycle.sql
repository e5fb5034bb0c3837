-- The data lifecycle: a submission can be deleted by the host's own ID for
-- it (formsapi.Metadata.ID), kept with its metadata and never selected by
-- the read API. '' is no ID; the others are unique within their form.
-- Deleting rows needs no trigger of its own: the statement trigger of
-- 0006 gives every form whose submissions a DELETE touched a new version
-- in the deleting transaction, so no node serves a cached page past it.
ALTER TABLE formsapi_submissions ADD COLUMN host_id text NOT NULL DEFAULT '';

CREATE UNIQUE INDEX formsapi_submissions_host_id ON formsapi_submissions (form_seq, host_id) WHERE host_id <> '';
