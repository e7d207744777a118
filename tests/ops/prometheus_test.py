#!/usr/bin/python3
"""A real Prometheus server scrapes every sojourn service.

Starts the four services on 127.0.0.1 (port 0) and Debian's Prometheus
(/usr/bin/prometheus) on a free loopback port with deploy/prometheus.yml's
jobs (their settings and target labels) scraping each service's /metrics every
second (storage in a temporary directory), waits (bounded) until Prometheus
reports up == 1 for every target, calls a broker method a known number of times from Python, and checks
that sojourn_grpc_requests_total and the latency histogram for that method are
visible through Prometheus' HTTP query API. The counters of rare events
(rejected batches, failed /proc reads, usage answers by method) must be there
at 0 before their first event. Each service's /metrics is also
checked with `promtool check metrics` (exposition format). The alerting rules of
deploy/sojourn-alerts.yml are loaded too: each evaluates without error, none
fires on the healthy cluster, and every metric they read is exported. Every
query of the Grafana dashboard runs, and those on gauges return data. The
services start with a soft limit of 256 open files and raise it to the hard
limit; every service exports the process_* metrics of the Prometheus client
guidelines and its heap, and they agree with what /proc says of its process.
The cluster runs with TLS on (certificates of scripts/make-certs; /metrics
stays plain HTTP), so the certificate expiry gauge and its alert are
evaluated on live data too.

usage: /usr/bin/python3 tests/ops/prometheus_test.py --bin-dir BUILD/bin
       [--prometheus /usr/bin/prometheus] [--promtool /usr/bin/promtool]
Prints "N passed, N failed" last; exits non-zero on any failure.
"""

import json
import os
import re
import resource
import subprocess
import sys
import unittest
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO_DIR, "tests", "python"))
import sojourn_cluster  # noqa: E402

SERVICES = ("statemgr", "predictor", "broker", "monitor")
ALERT_RULES = os.path.join(REPO_DIR, "deploy", "sojourn-alerts.yml")
DEPLOY_CONFIG = os.path.join(REPO_DIR, "deploy", "prometheus.yml")
CALLS = 3  # broker ListHosts calls made by the test
SOFT_FILES = 256  # the services' soft limit on open files at start (they raise it)
MONITOR_HOST = "ops-monitor-host"
TARGET_HOST = "host1"  # the label of deploy/prometheus.yml's first statemgr target

ARGS = None
CLUSTER = None
PROMETHEUS = None  # subprocess.Popen
PROM_URL = None
WORKDIR = None
CERTS = None  # sojourn_cluster.TlsFiles: the services' and this client's


def listening_tcp_ports(pid):
    """Loopback/any TCP ports in LISTEN state owned by process `pid` (from /proc)."""
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    local, state, inode = fields[1], fields[3], fields[9]
                    if state == "0A" and inode in inodes:  # 0A = TCP_LISTEN
                        ports.add(int(local.rsplit(":", 1)[1], 16))
        except OSError:
            continue
    return ports


def write_prometheus_config(path):
    """deploy/prometheus.yml's sojourn jobs, each with its settings and its first
    target's labels (e.g. host: host1), scraping this cluster's services every
    second; the rules of deploy/sojourn-alerts.yml."""
    import yaml
    with open(DEPLOY_CONFIG) as f:
        deploy = yaml.safe_load(f)
    jobs = {j["job_name"]: j for j in deploy["scrape_configs"]}
    config = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                         "evaluation_interval": "1s"},
              "rule_files": [ALERT_RULES], "scrape_configs": []}
    for name in SERVICES:
        job = dict(jobs[f"sojourn-{name}"])
        labels = job["static_configs"][0].get("labels", {})
        target = {"targets": [f"127.0.0.1:{CLUSTER.services[name].metrics_port}"]}
        if labels:
            target["labels"] = labels
        job["static_configs"] = [target]
        config["scrape_configs"].append(job)
    with open(path, "w") as f:
        yaml.safe_dump(config, f)


def start_prometheus():
    global PROMETHEUS, PROM_URL
    config = os.path.join(WORKDIR, "prometheus.yml")
    write_prometheus_config(config)
    log = open(os.path.join(WORKDIR, "prometheus.log"), "wb")
    try:
        PROMETHEUS = subprocess.Popen(
            sojourn_cluster.DIE_WITH_PARENT + [ARGS.prometheus, f"--config.file={config}",
             f"--storage.tsdb.path={os.path.join(WORKDIR, 'prometheus-data')}",
             "--web.listen-address=127.0.0.1:0", "--storage.tsdb.retention.time=1h"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=WORKDIR)
    finally:
        log.close()

    def bound_port():
        if PROMETHEUS.poll() is not None:
            raise RuntimeError(f"prometheus exited with {PROMETHEUS.returncode}:\n"
                               f"{prometheus_log()}")
        ports = listening_tcp_ports(PROMETHEUS.pid)
        return min(ports) if len(ports) == 1 else None

    port = sojourn_cluster.wait_until(bound_port, 20, "prometheus to listen")
    PROM_URL = f"http://127.0.0.1:{port}"
    sojourn_cluster.wait_until(lambda: http_get(f"{PROM_URL}/-/ready").startswith("Prometheus"),
                               20, "prometheus to be ready", interval_seconds=0.1)


def prometheus_log(lines=30):
    try:
        with open(os.path.join(WORKDIR, "prometheus.log"), errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return f"(no log: {e})"


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read().decode()


def query(expr):
    """Instant query; returns the result vector [(labels, float value)]."""
    body = json.loads(http_get(f"{PROM_URL}/api/v1/query?" +
                               urllib.parse.urlencode({"query": expr})))
    if body.get("status") != "success":
        raise RuntimeError(f"query {expr!r} failed: {body}")
    return [(r["metric"], float(r["value"][1])) for r in body["data"]["result"]]


class PrometheusTest(unittest.TestCase):

    def test_1_every_target_up(self):
        jobs = {f"sojourn-{name}" for name in SERVICES}

        def all_up():
            up = {labels["job"]: value for labels, value in query("up")}
            return up if set(up) == jobs and all(v == 1.0 for v in up.values()) else None

        up = sojourn_cluster.wait_until(all_up, 30, "up == 1 for every sojourn target",
                                        interval_seconds=0.2)
        self.assertEqual(set(up), jobs)

    def test_1b_event_counters_exported_at_zero(self):
        # Counters of rare events exist at 0 from start-up: a counter created by
        # its first event is invisible until then, so rate() misses that first
        # increment and the dashboards said "No data". Nothing in this cluster
        # rejects a batch, fails a /proc read, asks a usage question or ranks hosts.
        expected = [
            'sojourn_statemgr_rejected_batches_total{job="sojourn-statemgr"}',
            'sojourn_monitor_sample_errors_total{job="sojourn-monitor"}',
        ] + [f'sojourn_statemgr_usage_answers_total{{job="sojourn-statemgr",method="{m}"}}'
             for m in ("upa", "last4", "persist", "same_time_yesterday")] + [
            f'sojourn_broker_ranking_predictions_total{{job="sojourn-broker",source="{s}"}}'
            for s in ("cache", "predictor")] + [
            f'sojourn_broker_prediction_refreshes_total{{job="sojourn-broker",outcome="{o}"}}'
            for o in ("ok", "error", "skipped")] + [
            f'sojourn_broker_jobs_expired_total{{job="sojourn-broker",state="{s}"}}'
            for s in ("waiting", "running")] + [
            'sojourn_broker_jobs_overdue{job="sojourn-broker"}'] + [
            f'sojourn_broker_hosts_forgotten_total{{job="sojourn-broker",reason="{r}"}}'
            for r in ("silent", "max_hosts")] + [
            'sojourn_broker_hosts{job="sojourn-broker",state="expired"}'] + [
            f'sojourn_predictor_turnaround_{m}{{job="sojourn-predictor",kernel="{k}",'
            f'quantity="{q}"}}'
            for m in ("scored_total", "abs_error_seconds_total", "observed_seconds_total")
            for k, q in (("historical", "wait"), ("hybrid", "turnaround"),
                         ("user_estimate", "run"))] + [
            f'sojourn_predictor_availability_unresolved_total{{job="sojourn-predictor",'
            f'reason="{r}"}}' for r in ("full", "no_states")]
        for expr in expected:
            with self.subTest(series=expr):
                # Bounded wait for a scrape that has the series (test_1 saw every
                # target up, so one scrape has normally happened already).
                got = sojourn_cluster.wait_until(lambda e=expr: query(e), 15,
                                                 f"{expr} in Prometheus", interval_seconds=0.2)
                self.assertEqual([v for _, v in got], [0.0], got)
        # And on the services' own /metrics, before any Prometheus arithmetic.
        for name, series in (
                ("statemgr", b'sojourn_statemgr_rejected_batches_total{service="statemgr"} 0\n'),
                ("statemgr", b'sojourn_statemgr_usage_answers_total{service="statemgr",'
                             b'method="upa"} 0\n'),
                ("monitor", b'sojourn_monitor_sample_errors_total{service="monitor"} 0\n')):
            with self.subTest(service=name, series=series):
                url = f"http://127.0.0.1:{CLUSTER.services[name].metrics_port}/metrics"
                self.assertIn(series, http_get(url).encode())

    def test_1c_host_states_in_prometheus(self):
        # The statemgr exports each host's state as its classifier sees it
        # (the Grafana state timeline): the monitor's host is in a state 1..5,
        # and the changes by state entered exist from start-up.
        def host_states():
            got = query('sojourn_statemgr_host_state{job="sojourn-statemgr"}')
            return got or None
        got = sojourn_cluster.wait_until(host_states, 30, "sojourn_statemgr_host_state scraped",
                                         interval_seconds=0.2)
        for labels, value in got:
            with self.subTest(host=labels.get("host")):
                self.assertIn(value, (1.0, 2.0, 3.0, 4.0, 5.0), labels)
        # Each series keeps the host it is about, not the scrape target's `host`
        # label of deploy/prometheus.yml (without honor_labels the monitor's host
        # showed as "host1", its own name moved to exported_host).
        self.assertEqual(sorted(labels.get("host") for labels, _ in got), [MONITOR_HOST], got)
        self.assertFalse(any("exported_host" in labels for labels, _ in got), got)
        # The state manager's other series get the target's label.
        persisted = query('sojourn_statemgr_samples_persisted_total{job="sojourn-statemgr"}')
        self.assertEqual([labels.get("host") for labels, _ in persisted], [TARGET_HOST], persisted)
        for to in ("S1", "S2", "S3", "S4", "S5"):
            expr = f'sojourn_statemgr_state_transitions_total{{job="sojourn-statemgr",to="{to}"}}'
            with self.subTest(series=expr):
                sojourn_cluster.wait_until(lambda e=expr: query(e), 15, f"{expr} in Prometheus",
                                           interval_seconds=0.2)

    def test_1d_process_metrics(self):
        # Every service exports its process's figures (prometheus-cpp has no
        # process collector), and they are its own: the start time and the
        # limit on open files agree with /proc/<pid>/ of that service.
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        names = ("process_cpu_seconds_total", "process_start_time_seconds",
                 "process_resident_memory_bytes", "process_virtual_memory_bytes",
                 "process_open_fds", "process_max_fds", "sojourn_process_heap_in_use_bytes",
                 "sojourn_process_heap_free_bytes")
        for name in SERVICES:
            job = f"sojourn-{name}"
            with self.subTest(job=job):
                values = {}
                for metric in names:
                    got = sojourn_cluster.wait_until(
                        lambda m=metric: query(f'{m}{{job="{job}"}}'), 15,
                        f"{metric} of {job} in Prometheus", interval_seconds=0.2)
                    self.assertEqual(len(got), 1, got)
                    values[metric] = got[0][1]
                pid = CLUSTER.services[name].popen.pid
                self.assertGreater(values["process_resident_memory_bytes"], 1 << 20, values)
                self.assertGreaterEqual(values["process_virtual_memory_bytes"],
                                        values["process_resident_memory_bytes"], values)
                self.assertGreater(values["process_open_fds"], 3, values)
                # Raised from SOFT_FILES to the hard limit at start-up.
                with open(f"/proc/{pid}/limits") as f:
                    line = next(l for l in f if l.startswith("Max open files")).split()
                if hard != resource.RLIM_INFINITY:
                    self.assertEqual(line[3], str(hard), line)
                    self.assertEqual(values["process_max_fds"], float(hard), values)
                self.assertGreater(values["process_max_fds"], SOFT_FILES, values)
                self.assertLess(values["process_open_fds"], values["process_max_fds"], values)
                # The start time of the service's pid, from /proc (boot time + field 22).
                with open(f"/proc/{pid}/stat") as f:
                    start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
                with open("/proc/stat") as f:
                    btime = int(next(l for l in f if l.startswith("btime")).split()[1])
                start = btime + start_ticks / os.sysconf("SC_CLK_TCK")
                self.assertAlmostEqual(values["process_start_time_seconds"], start, delta=0.02)
                self.assertGreaterEqual(values["process_cpu_seconds_total"], 0.0, values)
                self.assertGreaterEqual(values["sojourn_process_heap_free_bytes"], 0.0, values)
                self.assertGreaterEqual(values["sojourn_process_heap_in_use_bytes"], 0.0, values)

    def test_1e_build_info(self):
        # Every service exports the build it runs, as its own --version prints it.
        for name in SERVICES:
            job = f"sojourn-{name}"
            with self.subTest(job=job):
                version = subprocess.run([CLUSTER.binary(name), "--version"], capture_output=True,
                                         text=True, timeout=30)
                self.assertEqual(version.returncode, 0, version.stderr)
                first, built = version.stdout.splitlines()
                self.assertTrue(first.startswith(f"{name} (sojourn) "), first)
                got = sojourn_cluster.wait_until(
                    lambda: query(f'sojourn_build_info{{job="{job}"}}'), 15,
                    f"sojourn_build_info of {job} in Prometheus", interval_seconds=0.2)
                self.assertEqual(len(got), 1, got)
                labels, value = got[0]
                self.assertEqual(value, 1.0)
                self.assertEqual(labels["commit"], first.split()[-1])
                for label, word in (("grpc", "gRPC"), ("protobuf", "protobuf"),
                                    ("rocksdb", "RocksDB"), ("abseil", "Abseil")):
                    self.assertIn(f"{word} {labels[label]}", built)

    def test_2_request_counter_visible(self):
        from sojourn.v1 import broker_pb2, broker_pb2_grpc
        stub = broker_pb2_grpc.BrokerStub(CERTS.channel(CLUSTER.services["broker"].address))
        for _ in range(CALLS):
            stub.ListHosts(broker_pb2.BrokerListHostsRequest(), timeout=10)

        selector = '{job="sojourn-broker",grpc_service="sojourn.v1.Broker",method="ListHosts"}'

        def counted():
            total = sum(v for _, v in query(f"sojourn_grpc_requests_total{selector}"))
            return total if total >= CALLS else None

        total = sojourn_cluster.wait_until(counted, 30, "ListHosts in sojourn_grpc_requests_total",
                                           interval_seconds=0.2)
        self.assertEqual(total, CALLS)  # no one else calls this broker
        ok = query(f'sojourn_grpc_requests_total{{job="sojourn-broker",method="ListHosts",'
                   f'code="0"}}')
        self.assertEqual(sum(v for _, v in ok), CALLS)
        hist = query(f"sojourn_grpc_request_duration_seconds_count{selector}")
        self.assertEqual(sum(v for _, v in hist), CALLS)
        buckets = query(f'sojourn_grpc_request_duration_seconds_bucket{selector[:-1]},le="+Inf"}}')
        self.assertEqual(sum(v for _, v in buckets), CALLS)

    def test_2b_alert_rules_evaluate_on_live_metrics(self):
        # deploy/sojourn-alerts.yml loaded by a real Prometheus: every rule evaluates without
        # error, none fires or is pending on this healthy cluster, and every metric a rule
        # reads is exported by the services (a misspelt name would never fire).
        def evaluated():
            body = json.loads(http_get(f"{PROM_URL}/api/v1/rules"))
            rules = [r for g in body["data"]["groups"] for r in g["rules"]]
            done = all(not r.get("lastEvaluation", "0001").startswith("0001") for r in rules)
            return rules if rules and done else None
        rules = sojourn_cluster.wait_until(evaluated, 20, "the alert rules to be evaluated",
                                           interval_seconds=0.2)
        with open(ALERT_RULES) as f:
            want = set(re.findall(r"- alert: (\w+)", f.read()))
        self.assertEqual({r["name"] for r in rules}, want)
        for r in rules:
            with self.subTest(alert=r["name"]):
                self.assertEqual(r["health"], "ok", r.get("lastError"))
                self.assertEqual(r["state"], "inactive", r.get("alerts"))
                names = set(re.findall(r"\b(sojourn_[a-z_]+|process_[a-z_]+|up)\b",
                                       r["query"]))
                self.assertTrue(names, r["query"])
                for name in names:
                    got = sojourn_cluster.wait_until(
                        lambda n=name: query(f'count({{__name__="{n}"}})'), 15,
                        f"{name} in Prometheus", interval_seconds=0.2)
                    self.assertGreater(got[0][1], 0, name)

    def test_2c_dashboard_queries_run(self):
        # Every query of the Grafana dashboard is valid PromQL on this Prometheus, and the
        # ones on sojourn metrics return data from the live services (a renamed metric
        # would leave its panel empty).
        with open(os.path.join(REPO_DIR, "deploy", "grafana", "sojourn-dashboard.json")) as f:
            dash = json.load(f)
        exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
        self.assertGreater(len(exprs), 10)
        for expr in exprs:
            with self.subTest(expr=expr):
                got = query(expr)  # raises on a query Prometheus refuses
                if (("sojourn_" in expr or "process_" in expr) and "rate(" not in expr
                        and "increase(" not in expr):
                    self.assertTrue(got, f"no data for {expr}")

    def test_3_metrics_exposition_format(self):
        # One health check per service, so that every service has counted a request
        # (request counters are labelled by method and appear with the first call).
        import health_pb2
        import health_pb2_grpc
        for name in SERVICES:
            stub = health_pb2_grpc.HealthStub(CERTS.channel(CLUSTER.services[name].address))
            stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
        for name in SERVICES:
            with self.subTest(service=name):
                url = f"http://127.0.0.1:{CLUSTER.services[name].metrics_port}/metrics"
                with urllib.request.urlopen(url, timeout=5) as resp:
                    content_type = resp.headers.get("Content-Type", "")
                    text = resp.read()
                self.assertTrue(content_type.startswith("text/plain"), content_type)
                self.assertIn(b"# TYPE sojourn_grpc_requests_total counter", text)
                self.assertIn(b'method="Check"', text)
                self.assertIn(b"# TYPE sojourn_grpc_request_duration_seconds histogram", text)
                check = subprocess.run([ARGS.promtool, "check", "metrics"], input=text,
                                       capture_output=True)
                self.assertEqual(check.returncode, 0,
                                 check.stdout.decode() + check.stderr.decode())


def main():
    global ARGS
    def add_arguments(parser):
        parser.add_argument("--prometheus", default="/usr/bin/prometheus")
        parser.add_argument("--promtool", default="/usr/bin/promtool")

    ARGS = sojourn_cluster.parse_suite_args(__doc__, add_arguments)

    def setup(cluster, workdir):
        global CLUSTER, WORKDIR, CERTS
        CLUSTER, WORKDIR = cluster, workdir
        sojourn_cluster.generate_sojourn_stubs(REPO_DIR, os.path.join(workdir, "stubs"))
        CERTS = sojourn_cluster.TlsFiles(os.path.join(workdir, "certs"), ["localhost", "client"])
        cluster.common_args = CERTS.flags()
        # The services inherit a low soft limit on open files (test_1d: they
        # raise it); this process gets its own back.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT_FILES, hard))
        try:
            # Backups on, so that sojourn_backup_* and their alert are evaluated live.
            cluster.start_all(monitor_host=MONITOR_HOST, statemgr_args=[
                f"--backup_dir={os.path.join(workdir, 'statemgr-backups')}",
                "--retention_days=400"])
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        start_prometheus()
        print(f"prometheus at {PROM_URL} (work dir {workdir})", file=sys.stderr)

    def stop_prometheus():
        if PROMETHEUS is not None and PROMETHEUS.poll() is None:
            PROMETHEUS.terminate()
            try:
                PROMETHEUS.wait(timeout=10)
            except subprocess.TimeoutExpired:
                PROMETHEUS.kill()
                PROMETHEUS.wait()

    return sojourn_cluster.run_suite_with_cluster(
        ARGS.bin_dir, "sojourn-opstest-", ARGS.keep, setup,
        # test_1.. in order
        lambda: unittest.TestLoader().loadTestsFromTestCase(PrometheusTest),
        on_failure=lambda: print(f"----- prometheus log -----\n{prometheus_log()}",
                                 file=sys.stderr),
        teardown=stop_prometheus)


if __name__ == "__main__":
    sys.exit(main())
