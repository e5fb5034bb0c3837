-- An endpoint's filter (package webhook, docs/webhooks.md "Filtered
-- endpoints"): the filter parameters and q of the submissions list, as
-- the canonical query string webhook.ParseFilter gives; '' for none, as
-- every endpoint made before had. A default that is a constant adds the
-- column without rewriting the table.
ALTER TABLE formsapi_endpoints ADD COLUMN IF NOT EXISTS filter_query text NOT NULL DEFAULT '';
