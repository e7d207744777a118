#!/bin/bash
# Every run of docs/EVALUATION-schedule.md, and its Markdown tables.
#
#   tools/eval/schedule_runs.sh OUT_DIR [MS_TRACE BB_TRACE] > tables.md
#
# Runs `sojourn-eval schedule` on the Microsoft 1999 desktop trace (ms-*) and
# the Bitbrains VMs (bb-*): the default (10 replicates, seeds 1..10), seeds
# 11..20, homogeneous 1.7 GHz hosts, every host a candidate (--pool 0) and one
# paper-size run (--replicates 1), each with the predictor service's TR
# (the default, NAME.json) and with the host's own windows only
# (--proactive-tr own, NAME-own.json): 20 runs, about 3 minutes on 2 cores.
# Then prints the tables of the document, in its order, from those files
# (tools/eval/schedule_tables.py). Progress goes to stderr; exits non-zero
# when a run fails.
set -euo pipefail

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }
if [[ $# -ge 1 && ( $1 == -h || $1 == --help ) ]]; then usage; exit 0; fi
if [[ $# -ne 1 && $# -ne 3 ]]; then
  echo "schedule_runs.sh: expected OUT_DIR [MS_TRACE BB_TRACE] (try --help)" >&2
  exit 2
fi
OUT=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MS=${2:-$ROOT/../shared/data/microsoft99-desktop-availability/PingData00-even-rows.txt.gz}
BB=${3:-$ROOT/../shared/data/bitbrains-rnd-vm-load/bitbrains-rnd-100vms-2013Q3.tar.xz}
EVAL=$ROOT/build/bin/sojourn-eval
TABLES=$ROOT/tools/eval/schedule_tables.py
for f in "$EVAL" "$MS" "$BB"; do
  [[ -e $f ]] || { echo "schedule_runs.sh: $f does not exist" >&2; exit 2; }
done
mkdir -p "$OUT"

declare -A ARGS=(
  [default]=""
  [seed11]="--seed 11"
  [homog]="--clock-mhz 1700,1700"
  [all-hosts]="--pool 0"
  [single]="--replicates 1"
)
RUNS=(default seed11 homog all-hosts single)
for t in ms bb; do
  trace=$MS; [[ $t == bb ]] && trace=$BB
  for run in "${RUNS[@]}"; do
    for tr in service own; do
      suffix=""; [[ $tr == own ]] && suffix="-own"
      echo "schedule_runs.sh: $t $run $tr" >&2
      # shellcheck disable=SC2086  # ARGS holds several words
      "$EVAL" schedule --trace "$trace" ${ARGS[$run]} --proactive-tr "$tr" \
        --json "$OUT/$t-$run$suffix.json" > /dev/null
    done
  done
done

o=$OUT
echo "## Results"
echo
"$TABLES" --detail \
  "Microsoft 1999, default (10 replicates of the paper-size run)=$o/ms-default.json" \
  "Bitbrains Rnd, default (10 replicates of the paper-size run)=$o/bb-default.json"
echo
echo "Sensitivity runs (each 10 replicates of 420 jobs; only the setting named differs from the default):"
echo
"$TABLES" \
  "Microsoft 1999, seeds 11..20=$o/ms-seed11.json" \
  "Bitbrains Rnd, seeds 11..20=$o/bb-seed11.json" \
  "Microsoft 1999, homogeneous 1.7 GHz hosts (as the paper's testbed)=$o/ms-homog.json" \
  "Bitbrains Rnd, homogeneous 1.7 GHz hosts=$o/bb-homog.json" \
  "Microsoft 1999, every host a candidate (--pool 0)=$o/ms-all-hosts.json" \
  "Bitbrains Rnd, every host a candidate (--pool 0)=$o/bb-all-hosts.json" \
  "Microsoft 1999, one paper-size run (--replicates 1, seed 1)=$o/ms-single.json" \
  "Bitbrains Rnd, one paper-size run (--replicates 1, seed 1)=$o/bb-single.json"
echo
echo "## Does proactive beat the failure-oblivious matchmaker?"
echo
"$TABLES" --compare \
  "default (seeds 1..10)=$o/ms-default.json,$o/bb-default.json" \
  "seeds 11..20=$o/ms-seed11.json,$o/bb-seed11.json" \
  "homogeneous 1.7 GHz=$o/ms-homog.json,$o/bb-homog.json" \
  "every host a candidate=$o/ms-all-hosts.json,$o/bb-all-hosts.json"
echo
echo "### proactive's TR: the predictor service's pipeline against the host's own windows"
echo
versus=()
for t in ms bb; do
  name=Microsoft; [[ $t == bb ]] && name=Bitbrains
  for run in "${RUNS[@]}"; do
    label=${run%-hosts}
    versus+=("$name, $label, own=$o/$t-$run-own.json" "$name, $label, service=$o/$t-$run.json")
  done
done
"$TABLES" --versus "${versus[@]}"
