#!/usr/bin/env bash
# The suite, N times in a row on one commit, beside a CPU-bound process (a Python busy loop):
# how tracebus looks for flaky tests (README, "Flakes"). Each run's log and a summary line
# (exit status, seconds, load average at its start, pytest's last line) go into OUTDIR.
#   bench/flaky.sh COMMIT N OUTDIR [CLONE]
# CLONE (default OUTDIR/clone) is a clone of this repository kept between campaigns: its venv is
# made once (./dev test), and each campaign moves it to COMMIT and removes untracked files.
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: bench/flaky.sh COMMIT N OUTDIR [CLONE]" >&2; exit 2; }
commit=$1; n=$2; out=$(realpath -m "$3"); clone=$(realpath -m "${4:-$out/clone}")
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
[ -d "$clone" ] || git clone -q "$repo" "$clone"
cd "$clone" && git fetch -q "$repo" && git checkout -q "$commit" && git clean -qfdx -e .venv -e node_modules
npm ci --prefix tests/dashboard --no-audit --no-fund --silent >/dev/null 2>&1
npm ci --prefix examples/wire_js --no-audit --no-fund --silent >/dev/null 2>&1
python3 -c 'while True: pass' & hog=$!
trap 'kill $hog' EXIT
for i in $(seq 1 "$n"); do
  start=$(date +%s)
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  ./dev test -q -p no:cacheprovider > "$out/run$i.log" 2>&1; rc=$?
  echo "run $i commit $commit rc=$rc $(( $(date +%s) - start ))s load_at_start=[$load]" \
       "$(grep -E '[0-9]+ (passed|failed)' "$out/run$i.log" | tail -1)" | tee -a "$out/summary.txt"
done
