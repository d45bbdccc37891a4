#!/bin/bash
# Sum per region with awk, then sort the rows under a fixed header.
set -e
cd /app   # the Dockerfile's WORKDIR, where the agent's shell starts too
{
  echo "region,total"
  awk -F, 'NR > 1 { sum[$2] += $3 } END { for (r in sum) printf "%s,%.2f\n", r, sum[r] }' data/sales.csv | LC_ALL=C sort
} > totals.csv
cat totals.csv
