#!/bin/bash
# The verifier, without pytest: each check prints PASS/FAIL; the reward is the share that pass.
mkdir -p /logs/verifier
passed=0
check() {
  if [ "$2" = "$3" ]; then echo "PASS $1"; passed=$((passed + 1)); else echo "FAIL $1: expected '$3', got '$2'"; fi
}
report=/app/report.txt
check "report exists" "$([ -f "$report" ] && echo yes)" "yes"
check "error count" "$(sed -n 1p "$report" 2>/dev/null)" "errors: 5"
check "top code" "$(sed -n 2p "$report" 2>/dev/null)" "top: E042"
awk -v p="$passed" 'BEGIN { printf "%.6f\n", p / 3 }' > /logs/verifier/reward.txt
[ "$passed" -eq 3 ]
