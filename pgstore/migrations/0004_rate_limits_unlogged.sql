-- The rate limit rows need no durability: UNLOGGED keeps them out of the
-- WAL, so a decision commits without waiting for a disk flush (about ten
-- times faster, see BENCHMARKS.md). After a crash the table is empty,
-- which gives every key a full quota once: harmless. Standbys do not have
-- the rows either, so after a failover the same holds.
ALTER TABLE formsapi_rate_limits SET UNLOGGED;
