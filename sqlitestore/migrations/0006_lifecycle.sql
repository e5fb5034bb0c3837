-- The data lifecycle: a submission can be deleted by the host's own ID for
-- it (formsapi.Metadata.ID), kept with its metadata and never selected by
-- the read API. '' is no ID; the others are unique within their form.
-- Deleting rows needs no trigger of its own: formsapi_submissions_delete
-- (0003) gives the form a new version, so no cached page outlives it.
ALTER TABLE formsapi_submissions ADD COLUMN host_id TEXT NOT NULL DEFAULT '';

CREATE UNIQUE INDEX formsapi_submissions_host_id ON formsapi_submissions (form_seq, host_id) WHERE host_id <> '';
