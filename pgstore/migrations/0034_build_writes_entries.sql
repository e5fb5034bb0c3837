-- Building the search index over stored rows writes the rows' index
-- entries itself (issue 37), as the store's insert does since 0030.
--
-- The build (and the indexing of rows stored without find_keys) set
-- find_keys a batch at a time, and each batch's UPDATE fired the
-- statement triggers of 0006, 0017 and 0028. formsapi_find_update's
-- DELETE of the batch's old entries, whose transition table the planner
-- cannot size, hashed every entry of formsapi_find, which the build
-- itself grows by about 150 trigram entries a row: the work of a batch
-- grew with the rows done, and building 20,000 rows took 146 s
-- (BENCHMARKS.md, "Building the search index over stored rows").
--
-- The build marks its transaction with the setting formsapi.indexing,
-- local to it, while it sets find_keys; the three triggers below do not
-- run for its updates, and the build does what they did: it deletes the
-- entries of keys a row's find_keys loses and inserts those of its new
-- keys, in index order, deletes the row from the unfolded tail (0023),
-- and gives each form whose rows it updated a fresh version and base,
-- once, before it commits (formsapi_sort_update had nothing to do: the
-- build leaves sort_keys as they are). A host's SQL, or a node of an
-- earlier version, never sets the mark, and its updates run the
-- triggers as before. A host's SQL must not set formsapi.indexing.
--
-- Written to run again over itself.

CREATE OR REPLACE TRIGGER formsapi_find_update AFTER UPDATE ON formsapi_submissions
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
WHEN (current_setting('formsapi.indexing', true) IS DISTINCT FROM '1')
EXECUTE FUNCTION formsapi_find_update();

CREATE OR REPLACE TRIGGER formsapi_sort_update AFTER UPDATE ON formsapi_submissions
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
WHEN (current_setting('formsapi.indexing', true) IS DISTINCT FROM '1')
EXECUTE FUNCTION formsapi_sort_update();

CREATE OR REPLACE TRIGGER formsapi_submissions_update_version AFTER UPDATE ON formsapi_submissions
REFERENCING OLD TABLE AS formsapi_old_rows NEW TABLE AS formsapi_new_rows FOR EACH STATEMENT
WHEN (current_setting('formsapi.indexing', true) IS DISTINCT FROM '1')
EXECUTE FUNCTION formsapi_submissions_updated();
