-- Tolokaforge DB service, PostgreSQL store: tables as directories of immutable chunks.
-- A table is the ordered list of its chunks' ids (tf_directory, one row per slot and table); a chunk
-- holds up to 128 records as their canonical encoding (tf_chunks). A write stores the chunks it
-- changed plus the new directory, never the whole table; a snapshot, restore or reset copies
-- directories and shares the chunks. Chunks no directory names any more are deleted.
-- Rows of the 0001 layout (tf_tables) are converted by the store on start, then tf_tables is dropped.

CREATE TABLE IF NOT EXISTS tf_chunks (
    trial_id   text NOT NULL REFERENCES tf_trials (trial_id) ON DELETE CASCADE,
    chunk_id   bigint NOT NULL,
    full_enc   bytea NOT NULL,          -- the chunk's members (records, or "key":record pairs), no brackets
    stable_enc bytea,                   -- NULL when equal to full_enc
    PRIMARY KEY (trial_id, chunk_id)
);

CREATE TABLE IF NOT EXISTS tf_directory (
    trial_id   text NOT NULL REFERENCES tf_trials (trial_id) ON DELETE CASCADE,
    slot       text NOT NULL,           -- 'current', 'initial', or 's:<snapshot name>'
    table_name text NOT NULL,
    shape      text NOT NULL CHECK (shape IN ('list', 'keyed')),
    chunk_ids  bigint[] NOT NULL,
    PRIMARY KEY (trial_id, slot, table_name)
);

-- Chunk ids are allocated per trial under the trial's row lock.
ALTER TABLE tf_trials ADD COLUMN IF NOT EXISTS next_chunk bigint NOT NULL DEFAULT 0;

-- Directories of large tables are rewritten element by element on every write: keep them out of line
-- but uncompressed, so a write does not recompress the whole list.
ALTER TABLE tf_directory ALTER COLUMN chunk_ids SET STORAGE EXTERNAL;
