-- Ownership of trials: the runner incarnation that created a trial, and its lease.
-- A trial whose lease_expires has passed is reclaimable (init replaces it, any owner may delete it);
-- owner NULL is an unowned trial, never reclaimed. Times are the database's clock, shared by every
-- service process.
ALTER TABLE tf_trials ADD COLUMN IF NOT EXISTS owner text;
ALTER TABLE tf_trials ADD COLUMN IF NOT EXISTS lease_seconds double precision;
ALTER TABLE tf_trials ADD COLUMN IF NOT EXISTS lease_expires timestamptz;
CREATE INDEX IF NOT EXISTS tf_trials_owner ON tf_trials (owner) WHERE owner IS NOT NULL;
