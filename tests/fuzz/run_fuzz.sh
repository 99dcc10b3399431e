#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time, as a ctest entry (label fuzz):
#   run_fuzz.sh TARGET SEED_CORPUS WORK_DIR
# Every seed (real examples and each input that once crashed the target) runs first, so a
# regression fails at once; then new inputs go to WORK_DIR/corpus, never into the repo.
# FULCRUM_FUZZ_SECONDS (default 5) bounds the run. A crash leaves its input in
# WORK_DIR/artifacts/; add it to SEED_CORPUS with the fix.
set -uo pipefail
target=$1 seeds=$2 work=$3
seconds=${FULCRUM_FUZZ_SECONDS:-5}
name=$(basename "$target")
mkdir -p "$work/corpus" "$work/artifacts"
log="$work/fuzz.log"
start=$SECONDS
# -close_fd_mask=1: the code under test may print (logs); libFuzzer's own report goes to stderr.
"$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -close_fd_mask=1 -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds" >"$log" 2>&1
status=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
corpus=$(find "$work/corpus" -type f | wc -l)
if ((status != 0)); then
  grep -v '^#[0-9]' "$log" | tail -60
  echo "fuzz $name: FAILED (exit $status) after $((SECONDS - start)) s; crashing input:" \
    "$(ls -t "$work/artifacts/" 2>/dev/null | head -1 | sed "s|^|$work/artifacts/|")" |
    tee "$work/summary"
  exit 1
fi
echo "fuzz $name: ${runs:-0} executions in $((SECONDS - start)) s ($seconds s budget)," \
  "$corpus inputs in its working corpus" | tee "$work/summary"
