#!/bin/bash
# The verifier: pytest over test_outputs.py in the working directory; reward 1 only when every test passes.
mkdir -p /logs/verifier
if python3 -m pytest /tests/test_outputs.py -v -p no:cacheprovider; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
