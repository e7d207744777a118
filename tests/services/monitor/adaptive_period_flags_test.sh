#!/usr/bin/env bash
# monitor --adaptive_period: bad period flags stop it at start-up with exit 2
# and one line on stderr naming the flag, before anything is served; the
# longest period must stay below the state manager's revocation gap,
# max(--revocation_gap_seconds, 1.5 x --period_seconds) (services/statemgr/
# host_book.cc, ClassifierFor). Accepted combinations are shown to pass these
# checks by an invalid --host, which is checked after them and also exits 2.
# Without --adaptive_period the adaptive flags are not looked at (the default
# monitor starts as it always did).
# usage: adaptive_period_flags_test.sh MONITOR_BINARY
set -uo pipefail
monitor=$1
failures=0

# run EXPECTED_EXIT EXPECTED_REGEX FLAG...
run() {
  local want_rc=$1 want=$2
  shift 2
  local err rc lines
  err=$(timeout 20 "$monitor" --listen=127.0.0.1:0 --metrics_listen= --statemgr=127.0.0.1:1 \
        "$@" 2>&1 >/dev/null)
  rc=$?
  lines=$(printf '%s' "$err" | grep -c '')
  if [ "$rc" -ne "$want_rc" ] || [ "$lines" -ne 1 ] || ! grep -Eq -- "$want" <<<"$err"; then
    echo "FAIL: monitor $*: exit $rc (want $want_rc), $lines stderr lines (want 1), want /$want/:"
    printf '%s\n' "$err"
    failures=$((failures + 1))
  else
    echo "ok: monitor $* -> exit $rc: $err"
  fi
}

# Refused.
run 2 "--max_period_seconds must be below the state manager's revocation gap of 60 s.*got 60" \
  --adaptive_period --max_period_seconds=60
run 2 "--max_period_seconds must be below the state manager's revocation gap of 45 s.*got 50" \
  --adaptive_period --revocation_gap_seconds=45 --max_period_seconds=50
# 1.5 x 40 = 60 is still the 60 s gap: 60 is refused.
run 2 "--max_period_seconds must be below the state manager's revocation gap of 60 s" \
  --adaptive_period --period_seconds=40 --max_period_seconds=60
run 2 "--min_period_seconds must be in \[1, --max_period_seconds = 30\], got 40" \
  --adaptive_period --min_period_seconds=40
run 2 "--min_period_seconds must be in \[1, --max_period_seconds = 20\], got 21" \
  --adaptive_period --max_period_seconds=20 --min_period_seconds=21
run 2 "--min_period_seconds must be in .*got 0" --adaptive_period --min_period_seconds=0
run 2 "--max_period_seconds must be in \[1, 86400\], got -5" \
  --adaptive_period --max_period_seconds=-5
run 2 "--max_period_seconds must be at most --grace_seconds = 20, got 30" \
  --adaptive_period --grace_seconds=20
run 2 "--stable_seconds must be in \[1, 86400\], got 0" --adaptive_period --stable_seconds=0
run 2 "--revocation_gap_seconds must be in \[1, 31536000\]" \
  --adaptive_period --revocation_gap_seconds=0

# Accepted by the period checks (stopped by the invalid host that follows).
run 2 "^E .*--host is only whitespace$" --adaptive_period "--host= "
run 2 "^E .*--host is only whitespace$" --adaptive_period --max_period_seconds=59 "--host= "
# 1.5 x 41 s rounds up to a 62 s gap: 60 s fits (and --grace_seconds=60 allows it).
run 2 "^E .*--host is only whitespace$" \
  --adaptive_period --period_seconds=41 --max_period_seconds=60 "--host= "
run 2 "^E .*--host is only whitespace$" \
  --adaptive_period --min_period_seconds=5 --max_period_seconds=5 "--host= "
# Off: the adaptive flags are ignored, as before they existed.
run 2 "^E .*--host is only whitespace$" \
  --max_period_seconds=600 --min_period_seconds=0 --stable_seconds=0 "--host= "

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"
