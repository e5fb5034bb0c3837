-- An endpoint's filter (package webhook, docs/webhooks.md "Filtered
-- endpoints"): the filter parameters and q of the submissions list, as
-- the canonical query string webhook.ParseFilter gives; '' for none, as
-- every endpoint made before had.
ALTER TABLE formsapi_endpoints ADD COLUMN filter_query TEXT NOT NULL DEFAULT '';
