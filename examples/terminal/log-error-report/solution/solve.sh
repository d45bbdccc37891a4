#!/bin/bash
# Count lines whose level field is ERROR (not lines that merely mention it), then the commonest code.
set -e
errors=$(awk '$2 == "ERROR"' logs/*.log | wc -l)
top=$(awk '$2 == "ERROR" { print $3 }' logs/*.log | sort | uniq -c | sort -rn | awk 'NR == 1 { print $2 }')
printf 'errors: %s\ntop: %s\n' "$errors" "$top" > report.txt
cat report.txt
