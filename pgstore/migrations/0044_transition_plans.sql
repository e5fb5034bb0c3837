-- A deletion's (and an update's) statement triggers seek, whatever the
-- connection ran before.
--
-- Their statements read a transition table and have no parameters, so
-- PL/pgSQL plans each once per connection, for the transition table's
-- row count at the first firing, and keeps that plan. After a deletion
-- of a whole form (DeleteForm, Erase, a host's DELETE) on a connection,
-- every later DeleteSubmission on it read whole tables (formsapi_find,
-- its tail, formsapi_sort) by sequential scans and hash joins, whatever
-- its form (TestDeleteAfterABigDeleteSeeks). The functions now plan
-- without sequential scans, hash or merge joins: every table they touch
-- is reached by an index, so the plan a connection keeps probes the
-- indexes a row at a time, which is what a deletion of one submission
-- needs and what a big one costs anyway. A later migration that replaces
-- one of these functions must give it the same SET clauses
-- (CREATE OR REPLACE drops those it does not name).

ALTER FUNCTION formsapi_find_delete() SET enable_seqscan = off;
ALTER FUNCTION formsapi_find_delete() SET enable_hashjoin = off;
ALTER FUNCTION formsapi_find_delete() SET enable_mergejoin = off;
ALTER FUNCTION formsapi_sort_delete() SET enable_seqscan = off;
ALTER FUNCTION formsapi_sort_delete() SET enable_hashjoin = off;
ALTER FUNCTION formsapi_sort_delete() SET enable_mergejoin = off;
ALTER FUNCTION formsapi_submissions_deleted() SET enable_seqscan = off;
ALTER FUNCTION formsapi_submissions_deleted() SET enable_hashjoin = off;
ALTER FUNCTION formsapi_submissions_deleted() SET enable_mergejoin = off;
ALTER FUNCTION formsapi_find_update() SET enable_seqscan = off;
ALTER FUNCTION formsapi_find_update() SET enable_hashjoin = off;
ALTER FUNCTION formsapi_find_update() SET enable_mergejoin = off;
ALTER FUNCTION formsapi_sort_update() SET enable_seqscan = off;
ALTER FUNCTION formsapi_sort_update() SET enable_hashjoin = off;
ALTER FUNCTION formsapi_sort_update() SET enable_mergejoin = off;
ALTER FUNCTION formsapi_submissions_updated() SET enable_seqscan = off;
ALTER FUNCTION formsapi_submissions_updated() SET enable_hashjoin = off;
ALTER FUNCTION formsapi_submissions_updated() SET enable_mergejoin = off;
