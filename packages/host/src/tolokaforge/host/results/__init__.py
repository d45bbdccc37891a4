"""What a run writes: trial files, records and ledger, manifest, summary."""
