"""One tool call of a trial: validated, run in its worker or thread, committed, recorded."""
