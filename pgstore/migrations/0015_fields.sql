-- A form's fields (formsapi.FieldStore): each top-level member name of
-- its submissions' data, with the feed position of the first submission
-- that had it (first_pos) and, to order the names that one submission
-- brought, the member's place among that submission's names (ord). The
-- CSV export takes its columns from here in one read, before its first
-- row. AddSubmission adds a submission's names in its own statement,
-- decoded in Go as the export decodes them (bytea: a name may hold a
-- NUL, which text cannot), keeping the least (first_pos, ord) of a name;
-- the migration fills the table from the submissions already stored, in
-- Go, in the same transaction (migrate.go, backfillFields). Deleting a
-- submission leaves the table as it is (a column may be empty);
-- deleting a form deletes its fields.

CREATE TABLE formsapi_fields (
    form_seq  bigint NOT NULL REFERENCES formsapi_forms (seq) ON DELETE CASCADE,
    name      bytea  NOT NULL,
    first_pos bigint NOT NULL,
    ord       bigint NOT NULL,
    PRIMARY KEY (form_seq, name)
);

-- DataFields: one form's fields in first position order.
CREATE INDEX formsapi_fields_order ON formsapi_fields (form_seq, first_pos, ord);
