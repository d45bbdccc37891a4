-- Tolokaforge DB service, PostgreSQL store: initial schema.
-- A trial's tables live in tf_tables under a slot: 'current', 'initial', or 's:<snapshot name>'.
-- Each table is stored as its canonical JSON encoding (full, and stable when unstable fields differ),
-- so reads and hashes need no JSON work in the database or in Python.

CREATE TABLE IF NOT EXISTS tf_trials (
    trial_id   text PRIMARY KEY,
    version    bigint NOT NULL,
    schemas    json NOT NULL,           -- TableSchema objects as sent (json keeps the text exactly)
    unstable   json NOT NULL,           -- {table_name: [field_name, ...]}
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS tf_tables (
    trial_id   text NOT NULL REFERENCES tf_trials (trial_id) ON DELETE CASCADE,
    slot       text NOT NULL,
    table_name text NOT NULL,
    shape      text NOT NULL CHECK (shape IN ('list', 'keyed')),
    full_enc   bytea NOT NULL,
    stable_enc bytea,                   -- NULL when equal to full_enc (no unstable fields in this table)
    PRIMARY KEY (trial_id, slot, table_name)
);

CREATE TABLE IF NOT EXISTS tf_snapshots (
    trial_id      text NOT NULL REFERENCES tf_trials (trial_id) ON DELETE CASCADE,
    snapshot_name text NOT NULL,
    version       bigint NOT NULL,
    PRIMARY KEY (trial_id, snapshot_name)
);
