-- Least privilege for API keys: a key may be scoped to some forms and may
-- expire, and the store notes when each key was last used.
ALTER TABLE formsapi_keys
    ADD COLUMN forms        text[], -- the only forms the key may read; NULL: every form of the account
    ADD COLUMN expires_at   bigint, -- Unix nanoseconds, UTC; NULL: never
    ADD COLUMN last_used_at bigint; -- Unix nanoseconds, UTC; NULL: never used. Written in batches

-- ListKeys: one account's keys, oldest first.
CREATE INDEX formsapi_keys_account ON formsapi_keys (account_id, created_at);
