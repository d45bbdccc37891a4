"""A trial's tables in the runner: copy-on-write views for tool calls, and the write-through mirror."""
