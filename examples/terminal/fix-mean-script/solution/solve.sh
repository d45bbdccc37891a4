#!/bin/bash
# The sum skipped the first value: sum them all.
set -e
python3 - <<'PY'
from pathlib import Path

path = Path("mean.py")
path.write_text(path.read_text().replace("for value in values[1:]:", "for value in values:"))
PY
python3 mean.py numbers.txt
