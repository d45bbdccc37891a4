"""A run: trial ids and specs, the schedule, one trial's conductor and episode loop."""
