#!/usr/bin/env bash
# Checks the deployment descriptions without a Docker engine or systemd running:
#   1. `docker-compose -f docker-compose.yml config -q` (Debian's docker-compose) accepts
#      the cluster, and rejects a copy with an unknown key (so the check has teeth);
#   2. the compose cluster has the broker, predictor, Prometheus and >= 2 monitor+statemgr
#      pairs, every monitor spools to a volume and takes guests on loopback only, deploy/prometheus.yml scrapes exactly the services' --metrics_listen ports,
#      and its rule files are mounted beside it;
#   3. `promtool check config deploy/prometheus.yml` and `promtool test rules
#      deploy/sojourn-alerts.test.yml` (each alert fires when it should, and only then);
#   4. `systemd-analyze verify` prints nothing for deploy/systemd/*.service (ExecStart
#      binaries replaced by /bin/true, since they are not installed here), nor for them with
#      the TLS drop-in deploy/systemd/tls.conf;
#   5. the Grafana dashboard and provisioning files parse.
# usage: tests/ops/deploy_config_test.sh [REPO_DIR]
# Prints "N passed, N failed" last; exits non-zero on any failure.
set -uo pipefail

REPO="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
PROMTOOL="${PROMTOOL:-promtool}"
PYTHON3="${PYTHON3:-/usr/bin/python3}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0

check() {  # check NAME COMMAND...: runs COMMAND, output to the log, counts the result
  local name="$1"
  shift
  if "$@" >"$TMP/out" 2>&1; then
    echo "PASS $name"
    passed=$((passed + 1))
  else
    echo "FAIL $name"
    sed 's/^/    /' "$TMP/out"
    failed=$((failed + 1))
  fi
}

compose_accepts() {
  command -v docker-compose >/dev/null ||
    { echo "docker-compose not installed (scripts/install-deps installs it)"; return 1; }
  (cd "$REPO" && docker-compose -f docker-compose.yml config -q)
}

compose_rejects_unknown_key() {
  mkdir -p "$TMP/bad"
  sed 's/^  broker:$/  broker:\n    no_such_option: 1/' "$REPO/docker-compose.yml" \
    >"$TMP/bad/docker-compose.yml"
  grep -q no_such_option "$TMP/bad/docker-compose.yml" || { echo "could not break the copy"; return 1; }
  if docker-compose -f "$TMP/bad/docker-compose.yml" config -q; then
    echo "docker-compose accepted an unknown option: its check proves nothing"
    return 1
  fi
  return 0
}

compose_matches_prometheus() {
  (cd "$REPO" && docker-compose -f docker-compose.yml config) >"$TMP/compose.yml" || return 1
  "$PYTHON3" - "$TMP/compose.yml" "$REPO/deploy/prometheus.yml" <<'EOF'
import sys
import yaml

compose = yaml.safe_load(open(sys.argv[1]))["services"]
prom = yaml.safe_load(open(sys.argv[2]))
errors = []

def flag(service, name):
    for arg in compose[service].get("command") or []:
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
    return None

def program(service):
    cmd = compose[service].get("command") or []
    return cmd[0] if cmd else None

by_program = {}
for s in compose:
    by_program.setdefault(program(s), []).append(s)
for p in ("broker", "predictor", "prometheus"):
    if len(by_program.get(p, [])) != 1:
        errors.append(f"want exactly one {p} service, got {by_program.get(p)}")
monitors = by_program.get("monitor", [])
statemgrs = set(by_program.get("statemgr", []))
if len(monitors) < 2:
    errors.append(f"want >= 2 monitor services (one per host), got {monitors}")
for m in monitors:
    target = (flag(m, "statemgr") or "").rsplit(":", 1)[0]
    if target not in statemgrs:
        errors.append(f"{m} streams to {target!r}, not a statemgr service")
for s in statemgrs:
    adv = flag(s, "advertise_address") or ""
    if adv.rsplit(":", 1)[0] != s or adv.rsplit(":", 1)[-1] != flag(s, "listen").rsplit(":", 1)[-1]:
        errors.append(f"{s}: --advertise_address={adv} is not <service>:<listen port>")
    if not flag(s, "broker") or flag(s, "broker").rsplit(":", 1)[0] not in by_program["broker"]:
        errors.append(f"{s}: --broker does not name the broker service")
for m in monitors:
    # DESIGN.md: the monitor buffers on disk while its statemgr is unreachable. The spool must
    # sit on a volume, or a re-created container loses the samples it held.
    spool = flag(m, "spool_path") or ""
    mounts = [v.get("target") if isinstance(v, dict) else v.split(":")[1]
              for v in compose[m].get("volumes") or []]
    if not spool or not any(t and spool.startswith(t.rstrip("/") + "/") for t in mounts):
        errors.append(f"{m}: --spool_path={spool!r} is not on one of its volumes {mounts}")
    # The monitor's gRPC port takes guest registrations (and with --gateway acts on the
    # guests): only this host's processes may reach it (deploy/README.md).
    if not (flag(m, "listen") or "").startswith("127.0.0.1:"):
        errors.append(f"{m}: --listen={flag(m, 'listen')!r} is not on loopback")
if statemgrs != {flag(m, "statemgr").rsplit(":", 1)[0] for m in monitors}:
    errors.append("every statemgr needs its monitor (one pair per host)")

# Every sojourn service's metrics endpoint is scraped, and nothing else but Prometheus itself.
want = set()
for s in compose:
    if program(s) in ("broker", "predictor", "statemgr", "monitor"):
        ml = flag(s, "metrics_listen")
        if not ml:
            errors.append(f"{s}: no --metrics_listen")
            continue
        want.add(f"{s}:{ml.rsplit(':', 1)[1]}")
got = set()
for job in prom.get("scrape_configs", []):
    for sc in job.get("static_configs", []):
        got.update(t for t in sc.get("targets", []) if not t.startswith("localhost:"))
if want != got:
    errors.append(f"prometheus.yml targets {sorted(got)} != compose metrics endpoints {sorted(want)}")

# Rule files are read from the config's directory: each must be mounted beside it.
prom_service = by_program.get("prometheus", [None])[0]
if prom_service:
    config = next((a.split("=", 1)[1] for a in compose[prom_service].get("command") or []
                   if a.startswith("--config.file=")), "")
    config_dir = config.rsplit("/", 1)[0]
    mounts = {}
    for v in compose[prom_service].get("volumes") or []:
        if isinstance(v, dict):
            mounts[v.get("target")] = v.get("source") or ""
        else:
            mounts[v.split(":")[1]] = v.split(":")[0]
    for rf in prom.get("rule_files") or []:
        target = rf if rf.startswith("/") else f"{config_dir}/{rf}"
        if not mounts.get(target, "").endswith(f"deploy/{rf}"):
            errors.append(f"rule file {rf}: {target} is not mounted from deploy/{rf} "
                          f"in the {prom_service} service ({mounts})")

for e in errors:
    print(e)
sys.exit(1 if errors else 0)
EOF
}

promtool_accepts() {
  command -v "$PROMTOOL" >/dev/null || { echo "promtool not installed (Debian package prometheus)"; return 1; }
  "$PROMTOOL" check config "$REPO/deploy/prometheus.yml"
}

# The alerting rules fire on the series that call for them, after their `for`, and not on
# the healthy ones (deploy/sojourn-alerts.test.yml).
alert_rules_tested() {
  command -v "$PROMTOOL" >/dev/null || { echo "promtool not installed (Debian package prometheus)"; return 1; }
  (cd "$REPO/deploy" && "$PROMTOOL" test rules sojourn-alerts.test.yml)
}

systemd_units_verify() {
  if ! command -v systemd-analyze >/dev/null; then
    echo "systemd-analyze not installed: skipped"
    return 0
  fi
  local units=("$REPO"/deploy/systemd/*.service)
  [ -e "${units[0]}" ] || { echo "no units in deploy/systemd"; return 1; }
  mkdir -p "$TMP/units"
  for u in "${units[@]}"; do
    grep -q '^ExecStart=/usr/local/bin/' "$u" || { echo "$u: ExecStart is not /usr/local/bin/..."; return 1; }
    sed 's|^ExecStart=/usr/local/bin/[A-Za-z_-]*|ExecStart=/bin/true|' "$u" >"$TMP/units/$(basename "$u")"
  done
  local out
  out="$(systemd-analyze verify "$TMP"/units/*.service 2>&1)" || { echo "$out"; return 1; }
  # verify exits 0 on unknown keys and unparsable values; any message is a failure.
  [ -z "$out" ] || { echo "$out"; return 1; }
}

# Every unit passes $SOJOURN_TLS_FLAGS, and each still verifies with deploy/systemd/tls.conf,
# the drop-in that sets it, appended (as systemd merges a drop-in's [Service] section).
systemd_units_with_tls_verify() {
  if ! command -v systemd-analyze >/dev/null; then
    echo "systemd-analyze not installed: skipped"
    return 0
  fi
  mkdir -p "$TMP/tls-units"
  for u in "$REPO"/deploy/systemd/*.service; do
    grep -q '^    \$SOJOURN_TLS_FLAGS \\$' "$u" || { echo "$u: ExecStart lacks \$SOJOURN_TLS_FLAGS"; return 1; }
    { sed 's|^ExecStart=/usr/local/bin/[A-Za-z_-]*|ExecStart=/bin/true|' "$u"; echo; cat "$REPO/deploy/systemd/tls.conf"; } \
      >"$TMP/tls-units/$(basename "$u")"
  done
  local out
  out="$(systemd-analyze verify "$TMP"/tls-units/*.service 2>&1)" || { echo "$out"; return 1; }
  [ -z "$out" ] || { echo "$out"; return 1; }
}

grafana_files_parse() {
  "$PYTHON3" - "$REPO/deploy/grafana" <<'EOF'
import glob, json, os, sys
import yaml
root = sys.argv[1]
dash = json.load(open(os.path.join(root, "sojourn-dashboard.json")))
assert dash.get("panels"), "dashboard without panels"
rules = open(os.path.join(os.path.dirname(root), "sojourn-alerts.yml")).read()
for p in dash["panels"]:
    for t in p.get("targets", []):
        expr = t.get("expr", "")
        # sojourn's metrics, or the process_* metrics of the sojourn jobs only.
        assert ("sojourn_" in expr or "up" in expr or expr.startswith("ALERTS{") or
                ("process_" in expr and 'job=~"sojourn-.*"' in expr)), t
        if expr.startswith("ALERTS{"):
            # The alerts panel shows the rules of deploy/sojourn-alerts.yml.
            assert 'alertname=~"Sojourn.*"' in expr and "- alert: Sojourn" in rules, expr
files = glob.glob(os.path.join(root, "provisioning", "*", "*.yml"))
assert files, "no provisioning files"
for f in files:
    yaml.safe_load(open(f))
print(f"dashboard: {len(dash['panels'])} panels; provisioning: {len(files)} files")
EOF
}

check "docker-compose config accepts docker-compose.yml" compose_accepts
check "docker-compose config rejects an unknown option" compose_rejects_unknown_key
check "compose cluster shape matches deploy/prometheus.yml" compose_matches_prometheus
check "promtool check config deploy/prometheus.yml" promtool_accepts
check "promtool test rules deploy/sojourn-alerts.test.yml" alert_rules_tested
check "systemd-analyze verify deploy/systemd/*.service" systemd_units_verify
check "systemd-analyze verify the units with deploy/systemd/tls.conf" systemd_units_with_tls_verify
check "grafana dashboard and provisioning parse" grafana_files_parse

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
