#!/usr/bin/python3
"""A Python grpcio client built only from proto/ talks to a real sojourn cluster.

Issue 2, acceptance 3 (and part of 5): starts the four service binaries on
127.0.0.1 (port 0), generates Python stubs from proto/sojourn/v1/*.proto and
grpc/health/v1/health.proto at test time, pushes samples to the statemgr over
its client-streaming PushSamples, waits (bounded polling) until the statemgr
has registered the host at the broker, and then asks the broker for a
ranking. Also: health SERVING from every service, one malformed request per
service rejected with INVALID_ARGUMENT / NOT_FOUND and a message, sojourn-replay
loading a trace of several PushSamples messages with its attributes, `sojourn
export` writing it back exactly (and its backtest equal to the trace's), the
predictor's job history fed with RecordJobEvent and EstimateTurnaround's three
kernels learning from it, examples/python/middleware_client.py against the
same cluster, no service crashed, and every service exits 0 on
SIGTERM.

usage: /usr/bin/python3 tests/python/grpc_client_test.py --bin-dir BUILD/bin [unittest args]
       (or SOJOURN_BIN_DIR=BUILD/bin). Prints "N passed, N failed" last and exits
       non-zero on any failure.
"""

import csv
import datetime
import gzip
import json
import math
import os
import random
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sojourn_cluster  # noqa: E402

REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Set by main() before the tests run.
ARGS = None
CLUSTER = None
ADDRS = {}

# Names bound after stub generation (the modules exist only then).
grpc = None
pb = {}

PUSHED_HOST = "py-replayed-host"
MONITOR_HOST = "py-monitor-host"
PERIOD_SECONDS = 30
HISTORY_DAYS = 3


def load_stubs(out_dir):
    global grpc
    sojourn_cluster.generate_sojourn_stubs(REPO_DIR, out_dir)
    import grpc as grpc_module
    grpc = grpc_module
    import importlib
    for name in ("common", "statemgr", "predictor", "broker", "monitor"):
        pb[name] = importlib.import_module(f"sojourn.v1.{name}_pb2")
        pb[name + "_grpc"] = importlib.import_module(f"sojourn.v1.{name}_pb2_grpc")
    pb["turnaround"] = importlib.import_module("sojourn.v1.turnaround_pb2")
    pb["health"] = importlib.import_module("health_pb2")
    pb["health_grpc"] = importlib.import_module("health_pb2_grpc")


def synthetic_history(now, seed=20260101):
    """HISTORY_DAYS of samples every PERIOD_SECONDS ending at `now`, in the idle state.

    Office-hours pattern with seeded noise: idle nights (load ~0.05), busy days
    (~0.4, state S2) with a few overload bursts (0.9 for 10 min, S3) and a
    memory dip (S4) now and then, so the statistics hold real transitions. The
    last hour is idle with plenty of memory, so the host is usable now.
    """
    rng = random.Random(seed)
    common = pb["common"]
    start = now - HISTORY_DAYS * 86400
    start -= start % PERIOD_SECONDS
    samples = []
    burst_left = 0
    dip_left = 0
    t = start
    while t <= now:
        hour = (t % 86400) // 3600
        load = 0.05 + 0.05 * rng.random()
        free_mem = 4000.0 + 500.0 * rng.random()
        if 9 <= hour < 18 and now - t > 3600:
            load = 0.3 + 0.2 * rng.random()
            if burst_left == 0 and rng.random() < 0.004:
                burst_left = 20
            if dip_left == 0 and rng.random() < 0.002:
                dip_left = 10
        if burst_left > 0:
            load, burst_left = 0.9, burst_left - 1
        if dip_left > 0:
            free_mem, dip_left = 100.0, dip_left - 1
        samples.append(common.HostSample(unix_seconds=t, cpu_load_ratio=load, free_mem_mb=free_mem,
                                         swap_in_pages_per_second=0.0,
                                         swap_out_pages_per_second=0.0))
        t += PERIOD_SECONDS
    return samples


def push_requests(samples, batch=500):
    common = pb["common"]
    attrs = common.HostAttributes(cpu_mhz=2400.0, cpu_cores=4, total_mem_mb=8192.0)
    for i in range(0, len(samples), batch):
        yield pb["statemgr"].PushSamplesRequest(host=PUSHED_HOST, samples=samples[i:i + batch],
                                                attributes=attrs, period_seconds=PERIOD_SECONDS)


def channel(name):
    return grpc.insecure_channel(ADDRS[name])


def demo_log_6x():
    """The demo's SDSC SP2 excerpt six times over, one after the other (12,000 jobs, 11,238
    of them with a wait and a run: more than one page or batch of 10,000); made once."""
    demo = os.path.join(CLUSTER.workdir, "jobs-6x.swf.gz")
    if os.path.exists(demo):
        return demo
    excerpt = os.path.join(REPO_DIR, "data", "demo", "sdsc-sp2-2000jobs.swf.gz")
    with gzip.open(excerpt, "rt") as f:
        lines = f.readlines()
    body = [line.split() for line in lines if line.strip() and not line.startswith(";")]
    span = max(int(j[1]) + max(0, int(j[2])) + max(0, int(j[3])) for j in body) + 3600
    with gzip.open(demo + ".tmp", "wt") as w:
        w.writelines(line for line in lines if line.startswith(";"))
        for copy in range(6):
            for n, j in enumerate(body):
                j = list(j)
                j[0] = str(copy * len(body) + n + 1)
                j[1] = str(int(j[1]) + copy * span)
                w.write(" ".join(j) + "\n")
    os.rename(demo + ".tmp", demo)
    return demo


def demo_history_predictor(test):
    """A predictor serving the job history sojourn-eval's replay of demo_log_6x() stores (as
    scripts/up seeds one); started once."""
    if "predictor-jobs" in CLUSTER.services:
        return CLUSTER.services["predictor-jobs"]
    hist = os.path.join(CLUSTER.workdir, "py-jobs-histdb")
    run = subprocess.run([CLUSTER.binary("sojourn-eval"), "turnaround", "--swf", demo_log_6x(),
                          "--histdb", hist], capture_output=True, text=True, timeout=300)
    test.assertEqual(run.returncode, 0, run.stderr)
    return CLUSTER.start("predictor-jobs", "predictor", [f"--histdb_path={hist}", "--broker="])


def read_swf(path, opener=gzip.open):
    """({header key: value}, [job line fields]) of an SWF log."""
    header, jobs = {}, []
    with opener(path, "rt") as f:
        for line in f:
            if line.startswith(";"):
                key, _, value = line[1:].partition(":")
                header[key.strip()] = value.strip()
            elif line.strip():
                jobs.append(line.split())
    return header, jobs


class GrpcClientTest(unittest.TestCase):
    """Runs in the order defined (see main): push first, then the queries."""

    RPC_TIMEOUT = 30

    @classmethod
    def setUpClass(cls):
        cls.statemgr = pb["statemgr_grpc"].StateManagerStub(channel("statemgr"))
        cls.broker = pb["broker_grpc"].BrokerStub(channel("broker"))
        cls.predictor = pb["predictor_grpc"].PredictorStub(channel("predictor"))
        cls.monitor = pb["monitor_grpc"].MonitorStub(channel("monitor"))

    def assert_rpc_error(self, call, code):
        with self.assertRaises(grpc.RpcError) as ctx:
            call()
        err = ctx.exception
        self.assertEqual(err.code(), code, f"details: {err.details()}")
        self.assertTrue(err.details() and err.details().strip(), "error without a message")
        return err

    def test_01_push_samples_is_acknowledged(self):
        now = int(time.time())
        samples = synthetic_history(now)
        resp = self.statemgr.PushSamples(push_requests(samples), timeout=self.RPC_TIMEOUT)
        self.assertEqual(resp.persisted_samples, len(samples))
        self.assertEqual(resp.duplicate_samples, 0)
        self.assertEqual(resp.last_persisted_unix_seconds[PUSHED_HOST], samples[-1].unix_seconds)
        # Re-sending the tail is idempotent: acknowledged, not stored again.
        again = self.statemgr.PushSamples(push_requests(samples[-10:]), timeout=self.RPC_TIMEOUT)
        self.assertEqual(again.persisted_samples, 0)
        self.assertEqual(again.duplicate_samples, 10)
        listed = {h.host: h for h in self.statemgr.ListHosts(
            pb["statemgr"].ListHostsRequest(), timeout=self.RPC_TIMEOUT).hosts}
        self.assertIn(PUSHED_HOST, listed)
        self.assertEqual(listed[PUSHED_HOST].sample_count, len(samples))
        self.assertEqual(listed[PUSHED_HOST].last_sample_unix_seconds, samples[-1].unix_seconds)

    def wait_registered(self, host):
        req = pb["broker"].GetHostRequest(host=host)

        def registered():
            h = self.broker.GetHost(req, timeout=5)
            return h if h.live else None

        return sojourn_cluster.wait_until(registered, 30, f"{host} registered at the broker",
                                          interval_seconds=0.1)

    def test_02_statemgr_registers_host_at_broker(self):
        h = self.wait_registered(PUSHED_HOST)
        self.assertEqual(h.statemgr_address, ADDRS["statemgr"])
        self.assertEqual(h.attributes.cpu_cores, 4)
        self.assertGreater(h.last_heartbeat_unix_seconds, 0)
        # The registration carries the host's condition (the broker's cache key), as the
        # state manager lists the host: its state and since when (the two agree once a
        # registration follows the listing; they may differ for a heartbeat period).
        def agree():
            b = self.broker.GetHost(pb["broker"].GetHostRequest(host=PUSHED_HOST), timeout=5)
            s = {s.host: s for s in self.statemgr.ListHosts(
                pb["statemgr"].ListHostsRequest(), timeout=self.RPC_TIMEOUT).hosts}[PUSHED_HOST]
            return b if (b.HasField("condition") and b.condition.state == s.current_state and
                         b.condition.state_since_unix_seconds == s.state_since_unix_seconds) \
                else None
        b = sojourn_cluster.wait_until(agree, 30, "the broker's condition of the host to match "
                                       "the state manager's state", interval_seconds=0.2)
        # Up (S1, S2), or S5 once the samples of test_01 are older than the revocation gap.
        self.assertIn(b.condition.state, (pb["common"].HOST_STATE_S1_IDLE,
                                          pb["common"].HOST_STATE_S2_BUSY,
                                          pb["common"].HOST_STATE_S5_REVOKED))
        self.assertIn(b.condition.load_band,
                      (-1,) if b.condition.state == pb["common"].HOST_STATE_S5_REVOKED else (0, 1))
        self.assertEqual(b.condition.step_seconds, PERIOD_SECONDS)

    def test_03_rank_hosts(self):
        self.wait_registered(PUSHED_HOST)
        req = pb["broker"].RankHostsRequest(
            job=pb["broker"].JobRequirements(duration_seconds=2 * 3600, cpu_share_ratio=1.0,
                                             memory_mb=512))
        resp = self.broker.RankHosts(req, timeout=self.RPC_TIMEOUT)
        self.assertTrue(resp.policy)  # the broker names the policy it used
        by_host = {r.host: r for r in resp.hosts}
        self.assertIn(PUSHED_HOST, by_host, f"ranking: {resp}")
        mine = by_host[PUSHED_HOST]
        self.assertTrue(mine.eligible, f"{PUSHED_HOST}: {mine.reason}")
        self.assertTrue(mine.HasField("tr_ratio"))
        self.assertGreaterEqual(mine.tr_ratio, 0.0)
        self.assertLessEqual(mine.tr_ratio, 1.0)
        self.assertTrue(mine.reason)
        self.assertEqual(mine.current_state, pb["common"].HOST_STATE_S1_IDLE)
        # Every host with a TR has it in [0, 1]; eligible hosts come first, ranked
        # 1..k by non-increasing TR; ineligible ones have rank 0 and a reason.
        eligible = [r for r in resp.hosts if r.eligible]
        self.assertEqual([r.rank for r in eligible], list(range(1, len(eligible) + 1)))
        self.assertEqual([r.eligible for r in resp.hosts],
                         [True] * len(eligible) + [False] * (len(resp.hosts) - len(eligible)))
        for r in resp.hosts:
            if r.HasField("tr_ratio"):
                self.assertTrue(0.0 <= r.tr_ratio <= 1.0 and not math.isnan(r.tr_ratio), str(r))
            if not r.eligible:
                self.assertEqual(r.rank, 0)
                self.assertTrue(r.reason)
        trs = [r.tr_ratio for r in eligible]
        self.assertEqual(trs, sorted(trs, reverse=True))

    def test_04_predictor_answers_with_statemgr_address(self):
        req = pb["predictor"].PredictAvailabilityRequest(
            host=PUSHED_HOST, window_seconds=3600, curve_points=4,
            statemgr_address=ADDRS["statemgr"])
        resp = self.predictor.PredictAvailability(req, timeout=self.RPC_TIMEOUT)
        self.assertEqual(resp.host, PUSHED_HOST)
        self.assertTrue(0.0 <= resp.tr_ratio <= 1.0)
        self.assertGreaterEqual(resp.mttf_seconds, 0.0)
        self.assertLessEqual(resp.mttf_seconds, 3600.0 + resp.step_seconds)
        self.assertEqual(len(resp.curve), 4)
        curve = [p.tr_ratio for p in resp.curve]
        for earlier, later in zip(curve, curve[1:]):
            self.assertLessEqual(later, earlier + 1e-9, f"TR curve must not increase: {curve}")
        offsets = [p.offset_seconds for p in resp.curve]
        self.assertEqual(offsets, sorted(offsets))
        # The empirical baseline beside the TR: the host's own past windows at this clock
        # time, at most one a day of history (none of today's day type on a Saturday).
        self.assertLessEqual(resp.past_up_windows, HISTORY_DAYS)
        self.assertLessEqual(resp.past_up_windows_survived, resp.past_up_windows)
        self.assertGreaterEqual(resp.past_up_windows_survived, 0)
        # HTCondor's and BOINC's estimates of the same window only when asked for.
        self.assertFalse(resp.HasField("deployed_estimates"))
        req.deployed_estimates = True
        with_baselines = self.predictor.PredictAvailability(req, timeout=self.RPC_TIMEOUT)
        self.assertAlmostEqual(with_baselines.tr_ratio, resp.tr_ratio, places=12)
        self.assertTrue(with_baselines.HasField("deployed_estimates"))
        d = with_baselines.deployed_estimates
        self.assertTrue(0.0 <= d.avail_time_tr <= 1.0)
        self.assertTrue(0.0 <= d.on_fraction <= 1.0)
        self.assertGreaterEqual(d.completed_up_intervals, 0)
        self.assertGreaterEqual(d.up_seconds, 0)
        self.assertLessEqual(d.up_seconds, HISTORY_DAYS * 86400)
        # `sojourn availability --start` asks for a window that starts then: as a date-time
        # with its offset and as Unix seconds, the same answer as the RPC's start.
        start = int(time.time()) // 60 * 60 - 5 * 3600
        req = pb["predictor"].PredictAvailabilityRequest(
            host=PUSHED_HOST, window_seconds=3600, start_unix_seconds=start,
            statemgr_address=ADDRS["statemgr"])
        want = self.predictor.PredictAvailability(req, timeout=self.RPC_TIMEOUT)
        plus_one = datetime.timezone(datetime.timedelta(hours=1))
        for arg in (datetime.datetime.fromtimestamp(start, plus_one).strftime("%Y-%m-%dT%H:%M+01:00"),
                    str(start)):
            run = subprocess.run([CLUSTER.binary("sojourn"), "availability", "--host", PUSHED_HOST,
                                  "--window", "1h", "--start", arg, "--json",
                                  "--predictor", ADDRS["predictor"],
                                  "--statemgr", ADDRS["statemgr"]],
                                 capture_output=True, text=True, timeout=60)
            self.assertEqual(run.returncode, 0, run.stderr)
            got = json.loads(run.stdout)
            self.assertAlmostEqual(got["tr_ratio"], want.tr_ratio, places=12, msg=arg)
            self.assertEqual(got["day_type"], pb["common"].DayType.Name(want.day_type), arg)
            self.assertEqual(got["history_windows"], want.history_windows, arg)

    def test_05_health_serving_everywhere(self):
        health = pb["health"]
        for name in ("statemgr", "predictor", "broker", "monitor"):
            with self.subTest(service=name):
                stub = pb["health_grpc"].HealthStub(channel(name))
                resp = stub.Check(health.HealthCheckRequest(service=""), timeout=10)
                self.assertEqual(resp.status, health.HealthCheckResponse.SERVING)

    def test_06_malformed_requests_rejected(self):
        codes = grpc.StatusCode
        with self.subTest(service="statemgr", case="empty stream"):
            self.assert_rpc_error(lambda: self.statemgr.PushSamples(iter([]), timeout=10),
                                  codes.INVALID_ARGUMENT)
        with self.subTest(service="statemgr", case="unknown host"):
            self.assert_rpc_error(
                lambda: self.statemgr.GetStateIntervals(
                    pb["statemgr"].GetStateIntervalsRequest(host="no-such-host"), timeout=10),
                codes.NOT_FOUND)
        with self.subTest(service="broker", case="negative duration"):
            err = self.assert_rpc_error(
                lambda: self.broker.RankHosts(pb["broker"].RankHostsRequest(
                    job=pb["broker"].JobRequirements(duration_seconds=-3600)), timeout=10),
                codes.INVALID_ARGUMENT)
            self.assertIn("duration", err.details())
        with self.subTest(service="broker", case="unknown host"):
            self.assert_rpc_error(
                lambda: self.broker.GetHost(pb["broker"].GetHostRequest(host="no-such-host"),
                                            timeout=10),
                codes.NOT_FOUND)
        with self.subTest(service="predictor", case="negative window"):
            self.assert_rpc_error(
                lambda: self.predictor.PredictAvailability(
                    pb["predictor"].PredictAvailabilityRequest(
                        host=PUSHED_HOST, window_seconds=-1, statemgr_address=ADDRS["statemgr"]),
                    timeout=10),
                codes.INVALID_ARGUMENT)
        with self.subTest(service="predictor", case="unknown host"):
            self.assert_rpc_error(
                lambda: self.predictor.PredictAvailability(
                    pb["predictor"].PredictAvailabilityRequest(
                        host="no-such-host", window_seconds=3600,
                        statemgr_address=ADDRS["statemgr"]),
                    timeout=10),
                codes.NOT_FOUND)
        with self.subTest(service="monitor", case="negative pid"):
            self.assert_rpc_error(
                lambda: self.monitor.RegisterGuest(pb["monitor"].RegisterGuestRequest(pid=-1),
                                                   timeout=10),
                codes.INVALID_ARGUMENT)
        with self.subTest(service="monitor", case="init is not a guest"):
            self.assert_rpc_error(
                lambda: self.monitor.RegisterGuest(pb["monitor"].RegisterGuestRequest(pid=1),
                                                   timeout=10),
                codes.INVALID_ARGUMENT)

    def test_07_monitor_streams_this_host(self):
        # The real monitor's samples reach the statemgr (bounded wait).
        req = pb["monitor"].GetMonitorStatusRequest()

        def acknowledged():
            st = self.monitor.GetStatus(req, timeout=5)
            return st if st.acknowledged_samples > 0 else None

        st = sojourn_cluster.wait_until(acknowledged, 30, "the monitor's first acknowledged sample",
                                        interval_seconds=0.1)
        self.assertEqual(st.host, MONITOR_HOST)
        self.assertTrue(0.0 <= st.last_sample.cpu_load_ratio <= 1.0)
        self.assertEqual(st.gateway, "off")  # the monitor runs without --gateway
        listed = [h.host for h in self.statemgr.ListHosts(pb["statemgr"].ListHostsRequest(),
                                                          timeout=10).hosts]
        self.assertIn(MONITOR_HOST, listed)

    def test_07b_replay_keeps_the_trace_attributes(self):
        # sojourn-replay loads a trace longer than one PushSamples message
        # (5000 samples) with the attributes the trace gives. Before, the
        # second message erased them (MEM_MB 0 at the broker for a Bitbrains
        # VM of ~7000 rows) and the trace's cpu_cores were never sent.
        host, rows = "py-replay-trace-host", 6000
        last = int(time.time()) - 300
        path = os.path.join(CLUSTER.workdir, "replay-trace.csv")
        with open(path, "w") as f:
            f.write("host,timestamp,cpu_load,free_mem_mb,total_mem_mb,cpu_cores\n")
            for i in range(rows):
                # Some rows measure more than the machine, as Bitbrains rows do (CPU above
                # 100 %, memory use above capacity): PushSamples refuses a load above 1 and
                # negative free memory, so replay sends them at the bound (it stopped there).
                load, free = (1.3, -500) if i % 1000 == 7 else (0.1, 4000)
                f.write(f"{host},{last - (rows - 1 - i) * 300},{load},{free},8192,2\n")
                if i % 2000 == 3:  # a row repeating its time, left out and counted
                    f.write(f"{host},{last - (rows - 1 - i) * 300},0.9,4000,8192,2\n")
        run = subprocess.run([CLUSTER.binary("sojourn-replay"), f"--trace={path}",
                              f"--statemgr={ADDRS['statemgr']}", "--follow=false",
                              "--shift=false"], capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("6 samples above the machine's CPU or memory sent at the bound",
                      run.stdout + run.stderr)
        self.assertIn(f"loaded {rows} samples of 1 hosts", run.stdout + run.stderr)
        self.assertIn("3 rows repeating their host's previous timestamp left out",
                      run.stdout + run.stderr)
        listed = {h.host: h for h in self.statemgr.ListHosts(
            pb["statemgr"].ListHostsRequest(), timeout=self.RPC_TIMEOUT).hosts}
        self.assertIn(host, listed)
        self.assertEqual(listed[host].sample_count, rows)
        self.assertEqual(listed[host].attributes.total_mem_mb, 8192)
        self.assertEqual(listed[host].attributes.cpu_cores, 2)
        self.assertEqual(listed[host].period_seconds, 300)
        h = self.wait_registered(host)
        self.assertEqual(h.attributes.total_mem_mb, 8192)
        self.assertEqual(h.attributes.cpu_cores, 2)

    def test_07b2_replay_loads_a_history_longer_than_the_senders_buffer(self):
        # Two weeks and a half of 6 s samples: more than a sender keeps
        # (200,000). Before, replay added the whole history to the sender and
        # then sent it, so all but the last 200,000 samples were dropped, and
        # it still said every one was loaded.
        host, rows, period = "py-replay-long-host", 220000, 6
        last = int(time.time()) - 60
        path = os.path.join(CLUSTER.workdir, "replay-long.csv")
        with open(path, "w") as f:
            f.write("host,timestamp,cpu_load,free_mem_mb\n")
            f.writelines(f"{host},{last - (rows - 1 - i) * period},0.1,4000\n"
                         for i in range(rows))
        run = subprocess.run([CLUSTER.binary("sojourn-replay"), f"--trace={path}",
                              f"--statemgr={ADDRS['statemgr']}", "--follow=false",
                              "--shift=false"], capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertNotIn("dropping", run.stdout + run.stderr)
        listed = {h.host: h for h in self.statemgr.ListHosts(
            pb["statemgr"].ListHostsRequest(), timeout=self.RPC_TIMEOUT).hosts}
        self.assertEqual(listed[host].sample_count, rows)
        self.assertEqual(listed[host].first_sample_unix_seconds, last - (rows - 1) * period)
        self.assertEqual(listed[host].last_sample_unix_seconds, last)

    def test_07b3_export_writes_back_what_replay_loaded(self):
        # `sojourn export` gives back, to the bit, the samples sojourn-replay loaded (loads and
        # memory at full precision, rows without memory, the hosts' memory and cores), and the
        # backtest of the export is the backtest of the original trace.
        hosts, period, days = ["py-export-a", "py-export-b"], 300, 14
        rng = random.Random(7)
        last = int(time.time()) - 600
        last -= last % period
        first = last - days * 86400
        rows = []
        for h in hosts:
            burst = 0
            for t in range(first, last + 1, period):
                hour = (t // 3600) % 24
                load = 0.02 + 0.1 * rng.random()
                if 8 <= hour < 19 and (t // 86400 + 3) % 7 < 5:  # Monday .. Friday
                    load = 0.25 + 0.3 * rng.random()
                    if burst == 0 and rng.random() < 0.03:
                        burst = 4
                if burst > 0:
                    load, burst = 0.9 + 0.05 * rng.random(), burst - 1
                free = None if rng.random() < 0.05 else (
                    100 * rng.random() if rng.random() < 0.01 else 3000 + 1000 * rng.random())
                rows.append((h, t, load, free))
        orig = os.path.join(CLUSTER.workdir, "export-orig.csv")
        with open(orig, "w") as f:
            f.write("host,timestamp,cpu_load,free_mem_mb,total_mem_mb,cpu_cores\n")
            for h, t, load, free in rows:
                mem = "" if free is None else repr(free)
                f.write(f"{h},{t},{load!r},{mem},{8191.5 if h == hosts[0] else ''},"
                        f"{2 if h == hosts[0] else ''}\n")
        run = subprocess.run([CLUSTER.binary("sojourn-replay"), f"--trace={orig}",
                              f"--statemgr={ADDRS['statemgr']}", "--follow=false",
                              "--shift=false"], capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        for h in hosts:
            self.wait_registered(h)

        def export(*args, out):
            path = os.path.join(CLUSTER.workdir, out)
            p = subprocess.run([CLUSTER.binary("sojourn"), "export", *args, "--out", path],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertFalse(os.path.exists(path + ".tmp"))
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rt", newline="") as f:
                table = list(csv.reader(f))
            self.assertEqual(table[0], ["host", "timestamp", "cpu_load", "free_mem_mb",
                                        "total_mem_mb", "cpu_cores"])
            return path, table[1:], p.stderr

        # The broker's hosts, two of them named, compressed.
        path, got, err = export("--broker", ADDRS["broker"], "--hosts", ",".join(hosts),
                                out="export.csv.gz")
        self.assertIn(f"wrote {len(rows)} samples of 2 hosts", err)
        self.assertEqual(len(got), len(rows))
        for (h, t, load, free), g in zip(rows, got):
            self.assertEqual(g[0], h)
            self.assertEqual(int(g[1]), t)
            self.assertEqual(float(g[2]), load)
            if free is None:
                self.assertEqual(g[3], "")
            else:
                self.assertEqual(float(g[3]), free)
            self.assertEqual(g[4:], ["8191.5", "2"] if h == hosts[0] else ["", ""])

        # The backtest reads the export as it reads the original (the same numbers for each
        # method, day type and window).
        def backtest(trace, name):
            out = os.path.join(CLUSTER.workdir, name)
            p = subprocess.run([CLUSTER.binary("sojourn-eval"), "availability", "--trace", trace,
                                "--max-window-hours", "4", "--json", out],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(out) as f:
                return json.load(f)["summary"]
        before = backtest(orig, "orig.json")
        self.assertGreater(before["smp"]["weekday"]["2"]["n"], 0)
        self.assertEqual(backtest(path, "export.json"), before)

        # Every host of the state manager, by its address: the 220,000 samples of
        # py-replay-long-host (loaded by test_07b2, which runs first) come in pages of 50,000;
        # --since keeps the last day.
        _, every, err = export("--statemgr", ADDRS["statemgr"], out="every.csv")
        per_host = {}
        for g in every:
            per_host.setdefault(g[0], []).append(int(g[1]))
        listed = {h.host: h for h in self.statemgr.ListHosts(
            pb["statemgr"].ListHostsRequest(), timeout=self.RPC_TIMEOUT).hosts}
        self.assertGreaterEqual(set(per_host), set(hosts) | {"py-replay-long-host"})
        long_times = per_host["py-replay-long-host"]
        self.assertEqual(len(long_times), listed["py-replay-long-host"].sample_count)
        self.assertEqual(len(long_times), 220000)
        self.assertTrue(all(a < b for a, b in zip(long_times, long_times[1:])))
        # Hosts in name order, each in one run of rows.
        runs = [g[0] for i, g in enumerate(every) if i == 0 or every[i - 1][0] != g[0]]
        self.assertEqual(runs, sorted(per_host))
        before_run = int(time.time())
        _, recent, _ = export("--statemgr", ADDRS["statemgr"], "--hosts", hosts[1],
                              "--since", "1d", out="recent.csv")
        after_run = int(time.time())
        times = [int(g[1]) for g in recent]
        all_times = [t for h, t, _, _ in rows if h == hosts[1]]
        self.assertTrue(times)
        self.assertEqual(times, [t for t in all_times if t >= times[0]])
        self.assertGreaterEqual(times[0], before_run - 86400)
        self.assertLess(times[0] - period, after_run - 86400)

        # A host nobody holds, and a directory for a file: exit 2, one line, nothing written.
        for args, needle in [(["--statemgr", ADDRS["statemgr"], "--hosts", "py-no-such-host"],
                              "host py-no-such-host is not known to the state managers"),
                             (["--broker", ADDRS["broker"], "--hosts", "py-no-such-host"],
                              f"is not known to the broker {ADDRS['broker']} (give its state "
                              "manager with --statemgr ADDR)"),
                             (["--statemgr", ADDRS["statemgr"], "--hosts", hosts[0], "--out",
                               CLUSTER.workdir], "is a directory")]:
            p = subprocess.run([CLUSTER.binary("sojourn"), "export", *args],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertIn(needle, p.stderr)
            self.assertEqual(p.stdout, "")

    def test_07c_watch_states_streams_changes(self):
        # The snapshot first (which also says the watcher is registered), then
        # the change a new sample makes: free memory below the guest working
        # set is S4.
        stream = self.statemgr.WatchStates(pb["statemgr"].WatchStatesRequest(host=PUSHED_HOST),
                                           timeout=self.RPC_TIMEOUT)
        try:
            first = next(stream)
            self.assertTrue(first.snapshot)
            self.assertEqual(first.host, PUSHED_HOST)
            listed = {h.host: h for h in self.statemgr.ListHosts(
                pb["statemgr"].ListHostsRequest(), timeout=self.RPC_TIMEOUT).hosts}
            last = listed[PUSHED_HOST].last_sample_unix_seconds
            common = pb["common"]
            sample = common.HostSample(unix_seconds=last + PERIOD_SECONDS, cpu_load_ratio=0.05,
                                       free_mem_mb=10.0)
            self.statemgr.PushSamples(iter([pb["statemgr"].PushSamplesRequest(
                host=PUSHED_HOST, samples=[sample])]), timeout=self.RPC_TIMEOUT)
            change = next(stream)
            self.assertFalse(change.snapshot)
            self.assertEqual(change.host, PUSHED_HOST)
            self.assertEqual(change.to_state, common.HOST_STATE_S4_MEMORY_THRASHING)
            self.assertEqual(change.from_state, first.to_state)
            self.assertEqual(change.since_unix_seconds, last + PERIOD_SECONDS)
            self.assertIn("working set", change.reason)
        finally:
            stream.cancel()
        self.assert_rpc_error(
            lambda: next(self.statemgr.WatchStates(
                pb["statemgr"].WatchStatesRequest(host="bad\nname"), timeout=10)),
            grpc.StatusCode.INVALID_ARGUMENT)

    def test_07d_turnaround_from_recorded_jobs(self):
        """RecordJobEvent builds the job history EstimateTurnaround learns from."""
        ta = pb["turnaround"]
        now = int(time.time())

        def snapshot(t):
            return ta.ClusterSnapshot(now_unix_seconds=t, nodes=[ta.NodeState() for _ in range(4)])

        def spec(job_id, submit):
            return ta.JobSpec(job_id=job_id, submit_unix_seconds=submit, user=5, group=1,
                              executable=9, queue=0, procs=2, requested_seconds=3600)

        records = []
        for job_id, submit, start, end, nodes in ((101, now - 9000, now - 8900, now - 7100, [0, 1]),
                                                  (102, now - 5000, now - 4800, now - 2400, [2, 3])):
            for event in (ta.JobEvent(submitted=ta.JobSubmitted(job=spec(job_id, submit),
                                                               snapshot=snapshot(submit))),
                          ta.JobEvent(started=ta.JobStarted(job_id=job_id, start_unix_seconds=start,
                                                           nodes=nodes, snapshot=snapshot(start))),
                          ta.JobEvent(finished=ta.JobFinished(job_id=job_id,
                                                             finish_unix_seconds=end,
                                                             cpu_seconds_per_task=-1))):
                records.append(self.predictor.RecordJobEvent(
                    event, timeout=self.RPC_TIMEOUT).history_records)
        # A record is written when its job finishes.
        self.assertEqual(records[2] + 1, records[5], f"history_records after each event: {records}")

        resp = self.predictor.EstimateTurnaround(
            ta.EstimateTurnaroundRequest(job=spec(103, now), snapshot=snapshot(now)),
            timeout=self.RPC_TIMEOUT)
        kernels = {e.kernel: e for e in resp.estimates}
        self.assertEqual(set(kernels), {"historical", "simulation", "hybrid"})
        hist = kernels["historical"]
        self.assertTrue(hist.from_history)
        self.assertEqual(hist.matched_records, 2)
        # Runs of 1800 s and 2400 s (start to finish) are what it learnt from.
        self.assertGreaterEqual(hist.exec.point_seconds, 1800)
        self.assertLessEqual(hist.exec.point_seconds, 2400)
        for e in resp.estimates:
            for t in (e.wait, e.exec, e.turnaround):
                with self.subTest(kernel=e.kernel):
                    self.assertLessEqual(t.lo_seconds, t.point_seconds)
                    self.assertLessEqual(t.point_seconds, t.hi_seconds)
        # The simulating kernels start a 2-node job on an idle cluster of 4 nodes at
        # once; the historical kernel goes by the recorded waits (100 s and 200 s).
        self.assertEqual(kernels["simulation"].wait.point_seconds, 0)
        self.assertEqual(kernels["hybrid"].wait.point_seconds, 0)
        self.assertGreaterEqual(hist.wait.point_seconds, 100)
        self.assertLessEqual(hist.wait.point_seconds, 200)

        codes = grpc.StatusCode
        self.assert_rpc_error(
            lambda: self.predictor.RecordJobEvent(ta.JobEvent(), timeout=10),
            codes.INVALID_ARGUMENT)
        self.assert_rpc_error(
            lambda: self.predictor.RecordJobEvent(
                ta.JobEvent(started=ta.JobStarted(job_id=999, start_unix_seconds=now, nodes=[0],
                                                  snapshot=snapshot(now))), timeout=10),
            codes.NOT_FOUND)
        bad = spec(104, now)
        bad.procs = 0
        err = self.assert_rpc_error(
            lambda: self.predictor.EstimateTurnaround(
                ta.EstimateTurnaroundRequest(job=bad, snapshot=snapshot(now)), timeout=10),
            codes.INVALID_ARGUMENT)
        self.assertIn("procs", err.details())

    def test_07e_middleware_example_runs(self):
        """examples/python/middleware_client.py, the README's example for middleware."""
        example = os.path.join(REPO_DIR, "examples", "python", "middleware_client.py")
        p = subprocess.run([sys.executable, example, "--broker", ADDRS["broker"],
                            "--predictor", ADDRS["predictor"], "--duration-hours", "1"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        self.assertRegex(p.stdout, r"\d+ of \d+ hosts can run a 1 h job")
        self.assertRegex(p.stdout, r": TR [01]\.\d{4} over 1 h, MTTF [\d.]+ h; \d+ of \d+ past")
        self.assertRegex(p.stdout, r"HTCondor AvailTime [01]\.\d{4} \(\d+ past up intervals, "
                                   r"up [\d.]+ h\), BOINC on-fraction [01]\.\d{4}")
        for kernel in ("historical", "simulation", "hybrid"):
            self.assertIn(f"turnaround ({kernel}):", p.stdout)
        # Step 4, the broker's job queue: queued, estimated, started, cancelled, and the
        # queue is empty again.
        self.assertRegex(p.stdout, r"queued job \d+: 1 waiting, 0 running; job history "
                                   r"recorded it: True")
        self.assertRegex(p.stdout, r"on the broker's [1-9]\d* hosts and queue: wait 0\.00 h")
        self.assertRegex(p.stdout, r"started job \d+ on \S+: 1 running")
        self.assertRegex(p.stdout, r"cancelled job \d+: 0 waiting, 0 running")
        # A refused request is reported with its status code, exit 1.
        p = subprocess.run([sys.executable, example, "--broker", ADDRS["broker"],
                            "--predictor", ADDRS["predictor"], "--duration-hours", "-1"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("INVALID_ARGUMENT", p.stderr)

    def test_07f_broker_takes_job_times_the_history_records(self):
        """The broker's job queue holds job times to the predictor's limit (1 h ahead).

        It used to take submit times up to its --max_clock_skew_seconds for host
        samples (2 h): a job submitted 1-2 h ahead was queued (OK) while the
        predictor refused its history event for good (recorded_in_history false,
        nothing pending), StartJob failed until then, and EstimateJobTurnaround
        refused the same submit time.
        """
        bp, ta = pb["broker"], pb["turnaround"]
        now = int(time.time())

        def job(job_id, submit):
            return ta.JobSpec(job_id=job_id, submit_unix_seconds=submit, user=5, group=1,
                              executable=9, procs=1, requested_seconds=600)

        err = self.assert_rpc_error(
            lambda: self.broker.SubmitJob(bp.SubmitJobRequest(job=job(9000001, now + 5400)),
                                          timeout=self.RPC_TIMEOUT),
            grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("submit_unix_seconds", err.details())
        err = self.assert_rpc_error(
            lambda: self.broker.EstimateJobTurnaround(
                bp.EstimateJobTurnaroundRequest(job=job(9000001, now + 5400)),
                timeout=self.RPC_TIMEOUT),
            grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("submit_unix_seconds", err.details())
        listed = self.broker.ListJobs(bp.ListJobsRequest(), timeout=self.RPC_TIMEOUT)
        self.assertNotIn(9000001, [j.spec.job_id for j in listed.waiting])

        # Within the limit: queued, and the history records it at once.
        q = self.broker.SubmitJob(bp.SubmitJobRequest(job=job(9000002, now + 1800)),
                                  timeout=self.RPC_TIMEOUT)
        self.assertTrue(q.recorded_in_history, q.history_error)
        self.assertEqual(q.history_pending, 0)
        q = self.broker.FinishJob(bp.FinishJobRequest(job_id=9000002, cancelled=True),
                                  timeout=self.RPC_TIMEOUT)
        self.assertTrue(q.recorded_in_history, q.history_error)

    def test_07g_export_of_hosts_that_cannot_be_read(self):
        # Hosts the broker lists whose samples cannot be read: one its state manager does not
        # hold (a retired host), one whose state manager is down. The export fails and writes
        # nothing, or with --skip-unreadable leaves them out and says so. Runs after
        # test_07b3, which loaded py-export-a.
        for host, statemgr in [("py-export-retired", ADDRS["statemgr"]),
                               ("py-export-gone", "127.0.0.1:9")]:
            self.broker.RegisterHost(pb["broker"].RegisterHostRequest(
                host=host, statemgr_address=statemgr), timeout=self.RPC_TIMEOUT)
        out = os.path.join(CLUSTER.workdir, "skip.csv")

        def export(hosts, *flags):
            return subprocess.run([CLUSTER.binary("sojourn"), "export", "--broker", ADDRS["broker"],
                                   "--hosts", hosts, "--out", out, "--timeout", "10", *flags],
                                  capture_output=True, text=True, timeout=120)
        for hosts, code, needle in [("py-export-a,py-export-retired", 2, "py-export-retired"),
                                    ("py-export-a,py-export-gone", 1, "127.0.0.1:9")]:
            p = export(hosts)
            self.assertEqual(p.returncode, code, p.stderr)
            self.assertIn(needle, p.stderr)
            self.assertIn(f"({out} not written)", p.stderr)
            self.assertFalse(os.path.exists(out))
            self.assertFalse(os.path.exists(out + ".tmp"))
        p = export("py-export-a,py-export-retired,py-export-gone", "--skip-unreadable")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("could not read, left out: py-export-gone, py-export-retired", p.stderr)
        with open(out, newline="") as f:
            table = list(csv.reader(f))[1:]
        self.assertEqual({r[0] for r in table}, {"py-export-a"})
        listed = {h.host: h for h in self.statemgr.ListHosts(
            pb["statemgr"].ListHostsRequest(), timeout=self.RPC_TIMEOUT).hosts}
        self.assertEqual(len(table), listed["py-export-a"].sample_count)
        self.assertIn(f"wrote {len(table)} samples of 1 hosts", p.stderr)
        # Nothing readable: no file, not even over an older one; a state manager that
        # cannot list its hosts is left out like a host.
        with open(out, "w") as f:
            f.write("older export\n")
        p = export("py-export-retired,py-export-gone", "--skip-unreadable")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"no host could be read ({out} not written)", p.stderr)
        with open(out) as f:
            self.assertEqual(f.read(), "older export\n")
        self.assertFalse(os.path.exists(out + ".tmp"))
        p = subprocess.run([CLUSTER.binary("sojourn"), "export", "--statemgr",
                            f"127.0.0.1:9,{ADDRS['statemgr']}", "--hosts", "py-export-a",
                            "--skip-unreadable", "--out", out, "--timeout", "10"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("could not read, left out: the hosts of 127.0.0.1:9", p.stderr)
        self.assertIn(f"wrote {len(table)} samples of 1 hosts", p.stderr)

    def test_07h_export_jobs_writes_back_the_job_history(self):
        # `sojourn export-jobs` writes a predictor's job history as an SWF log: the demo's SDSC
        # SP2 excerpt, six times over one after the other (12,000 jobs: more than one page),
        # loaded by sojourn-eval (as scripts/up loads it), exported from a predictor serving
        # that history, holds every job the history kept with the log's own fields, and its
        # backtest is the log's (the jobs the history keeps: those with a wait and a run).
        demo = demo_log_6x()
        service = demo_history_predictor(self)
        out = os.path.join(CLUSTER.workdir, "jobs.swf.gz")

        def export(*flags):
            return subprocess.run([CLUSTER.binary("sojourn"), "export-jobs", "--predictor",
                                   service.address, "--out", out, "--timeout", "30", *flags],
                                  capture_output=True, text=True, timeout=120)

        p = export()
        self.assertEqual(p.returncode, 0, p.stderr)
        _, orig = read_swf(demo, gzip.open)
        known = [j for j in orig if int(j[2]) >= 0 and int(j[3]) >= 0]
        self.assertEqual(len(known), 6 * 1873)  # 127 jobs of the excerpt were cancelled unrun
        header, exported = read_swf(out, gzip.open)
        self.assertIn(f"wrote {len(known)} jobs", p.stderr)
        self.assertIn("MaxNodes 128 (the largest cluster recorded)", p.stderr)
        self.assertEqual(header["MaxNodes"], "128")
        self.assertEqual(header["MaxJobs"], str(len(known)))
        start = min(int(j[1]) for j in known)
        self.assertEqual(header["UnixStartTime"], str(start))
        submits = [int(j[1]) for j in exported]
        self.assertEqual(submits, sorted(submits))

        def fields(j, t0):
            procs = int(j[4]) if int(j[4]) > 0 else int(j[7])
            return (int(j[1]) - t0, int(j[2]), int(j[3]), procs, float(j[5]), int(j[8]),
                    int(j[11]), int(j[12]), int(j[13]), int(j[14]))
        self.assertEqual(sorted(fields(j, 0) for j in exported),
                         sorted(fields(j, start) for j in known))
        self.assertEqual({j[10] for j in exported}, {"1"})

        # The backtest of the export is the backtest of the log's jobs the history kept.
        known_path = os.path.join(CLUSTER.workdir, "jobs-known.swf")
        with gzip.open(demo, "rt") as f, open(known_path, "w") as w:
            for line in f:
                if line.startswith(";") or (line.strip() and int(line.split()[2]) >= 0
                                            and int(line.split()[3]) >= 0):
                    w.write(line)
        reports = []
        for swf in (known_path, out, demo):
            report = os.path.join(CLUSTER.workdir, os.path.basename(swf) + ".json")
            run = subprocess.run([CLUSTER.binary("sojourn-eval"), "turnaround", "--swf", swf,
                                  "--json", report], capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stderr)
            reports.append(report)
        with open(reports[0]) as f, open(reports[1]) as g:
            jobs = json.load(f)["jobs"]
            self.assertEqual(jobs["scored"], len(known))
            self.assertEqual(jobs, json.load(g)["jobs"])
        # The log's times are shifted to start at 0: sums of seconds round differently in the
        # last bits, nothing more. The whole log (with the jobs cancelled unrun, which the
        # history does not keep) is another backtest.
        compare = os.path.join(REPO_DIR, "tools", "eval", "compare_summaries.py")
        run = subprocess.run([sys.executable, compare, "--max", "1e-9", reports[0], reports[1]],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("historical", run.stdout)
        run = subprocess.run([sys.executable, compare, "--max", "1e-9", reports[2], reports[1]],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
        self.assertIn("above --max", run.stderr)

        # The history keeps the log's 1998 times: nothing was submitted in the last day. No
        # file then, not even over an older one.
        with open(out, "w") as f:
            f.write("older export\n")
        p = export("--since", "1d")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"holds {len(known)} finished jobs, none submitted since", p.stderr)
        self.assertIn(f"({out} not written)", p.stderr)
        with open(out) as f:
            self.assertEqual(f.read(), "older export\n")
        self.assertFalse(os.path.exists(out + ".tmp"))

    def test_07i_import_jobs_seeds_a_predictor_with_an_swf_log(self):
        # `sojourn import-jobs` replays an SWF log and appends the records to a running
        # predictor's job history (two batches here): the same records, queue and cluster state
        # included, that sojourn-eval's replay stores (what scripts/up seeds), read back with
        # this independent client; the log's job numbers, requests and Unix times kept, so that
        # the export's backtest is the log's. Importing it again adds nothing.
        demo = demo_log_6x()
        header, orig = read_swf(demo)
        offset = int(header["UnixStartTime"])
        known = [j for j in orig if int(j[2]) >= 0 and int(j[3]) >= 0]
        service = CLUSTER.start("predictor-import", "predictor",
                                [f"--histdb_path={os.path.join(CLUSTER.workdir, 'py-import')}",
                                 "--broker="])

        def import_jobs():
            run = subprocess.run([CLUSTER.binary("sojourn"), "import-jobs", "--swf", demo,
                                  "--predictor", service.address, "--json"],
                                 capture_output=True, text=True, timeout=120)
            self.assertEqual(run.returncode, 0, run.stderr)
            return json.loads(run.stdout), run.stderr

        first, _ = import_jobs()
        self.assertEqual(first, {"jobs_in_log": len(orig), "jobs_finished": len(known),
                                 "imported": len(known), "already_imported": 0,
                                 "history_records": len(known)})
        again, err = import_jobs()
        self.assertEqual(again["imported"], 0)
        self.assertEqual(again["already_imported"], len(known))
        self.assertEqual(again["history_records"], len(known))
        self.assertIn("already there from an earlier import of this log", err)

        def records(address):
            stub = pb["predictor_grpc"].PredictorStub(grpc.insecure_channel(address))
            out, token = [], ""
            while True:
                resp = stub.ListJobHistory(pb["turnaround"].ListJobHistoryRequest(
                    page_token=token), timeout=self.RPC_TIMEOUT)
                out.extend(resp.records)
                token = resp.next_page_token
                if not token:
                    return out

        def state(r, t0):
            return (r.job.submit_unix_seconds - t0, r.start_unix_seconds - t0,
                    r.finish_unix_seconds - t0, r.job.procs, r.job.user, r.job.executable,
                    r.cpu_seconds_per_task, r.cpu_seconds_ahead, r.cpu_seconds_backwards,
                    r.queue_length_at_submit, r.queue_length_at_start, r.shared_tasks,
                    r.cluster_nodes, r.policy.job_selection, r.policy.node_selection)
        imported = records(service.address)
        self.assertEqual(len(imported), len(known))
        self.assertEqual(sorted(r.job.job_id for r in imported), sorted(int(j[0]) for j in known))
        self.assertEqual(sorted((r.job.job_id, r.job.requested_seconds) for r in imported),
                         sorted((int(j[0]), max(0, int(j[8]))) for j in known))
        loaded = records(demo_history_predictor(self).address)
        # Unsorted: both list by template, the newest recorded first, so the order the kernels
        # read (the order of finishing) is compared too.
        self.assertEqual([state(r, offset) for r in imported], [state(r, 0) for r in loaded])
        self.assertGreater(sum(r.queue_length_at_submit > 0 for r in imported), 1000)

        # Exported again, it is the log's finished jobs; its backtest is theirs.
        out = os.path.join(CLUSTER.workdir, "imported.swf")
        run = subprocess.run([CLUSTER.binary("sojourn"), "export-jobs", "--predictor",
                              service.address, "--out", out], capture_output=True, text=True,
                             timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        exported_header, exported = read_swf(out, open)
        start = min(int(j[1]) for j in known)
        self.assertEqual(int(exported_header["UnixStartTime"]), offset + start)

        def fields(j, t0):  # number, submit, wait, run, procs, CPU, request, user .. queue
            procs = int(j[4]) if int(j[4]) > 0 else int(j[7])
            return (int(j[0]), int(j[1]) - t0, int(j[2]), int(j[3]), procs, float(j[5]),
                    int(j[8]), int(j[11]), int(j[12]), int(j[13]), int(j[14]))
        self.assertEqual(sorted(fields(j, 0) for j in exported),
                         sorted(fields(j, start) for j in known))
        known_path = os.path.join(CLUSTER.workdir, "import-known.swf")
        with open(known_path, "w") as w:
            w.write(f"; UnixStartTime: {offset}\n; MaxNodes: 128\n")
            for j in known:
                w.write(" ".join(j) + "\n")
        reports = []
        for swf in (known_path, out):
            report = os.path.join(CLUSTER.workdir, os.path.basename(swf) + ".import.json")
            run = subprocess.run([CLUSTER.binary("sojourn-eval"), "turnaround", "--swf", swf,
                                  "--json", report], capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stderr)
            reports.append(report)
        compare = os.path.join(REPO_DIR, "tools", "eval", "compare_summaries.py")
        run = subprocess.run([sys.executable, compare, "--max", "1e-9", *reports],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("user_estimate", run.stdout)

        # The same log cut without its machine's size: replayed on its largest job's nodes, with a
        # warning, and recorded as other batches (the size is in their names), not taken as the
        # batches already there.
        headerless = os.path.join(CLUSTER.workdir, "jobs-6x-no-size.swf")
        with gzip.open(demo, "rt") as f, open(headerless, "w") as w:
            w.writelines(line for line in f
                         if not line.startswith(("; MaxNodes:", "; MaxProcs:")))
        largest = max(int(j[4]) if int(j[4]) > 0 else int(j[7]) for j in orig)
        self.assertLess(largest, 128)
        run = subprocess.run([CLUSTER.binary("sojourn"), "import-jobs", "--swf", headerless,
                              "--predictor", service.address, "--json"],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("has no usable MaxProcs or MaxNodes header line: the machine is taken as "
                      f"{largest} nodes", run.stderr)
        self.assertEqual(json.loads(run.stdout)["imported"], len(known))
        self.assertEqual(sorted(r.cluster_nodes for r in records(service.address))[0], largest)

    def test_08_no_service_crashed(self):
        for name, service in CLUSTER.services.items():
            with self.subTest(service=name):
                self.assertTrue(service.alive(),
                                f"{name} exited with {service.popen.returncode}:\n"
                                f"{CLUSTER.log_tail(name)}")


class ShutdownTest(unittest.TestCase):
    """Runs last: every service stops cleanly (exit 0) on SIGTERM."""

    def test_graceful_shutdown_on_sigterm(self):
        # An open WatchStates stream does not hold the shutdown up: the
        # statemgr ends it (UNAVAILABLE) before stopping its server.
        statemgr = pb["statemgr_grpc"].StateManagerStub(channel("statemgr"))
        stream = statemgr.WatchStates(pb["statemgr"].WatchStatesRequest(), timeout=120)
        self.assertTrue(next(stream).snapshot)
        codes = CLUSTER.stop()
        with self.assertRaises(grpc.RpcError) as ctx:
            for _ in stream:
                pass
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.UNAVAILABLE,
                         ctx.exception.details())
        self.assertIn("shutting down", ctx.exception.details())
        for name, code in codes.items():
            with self.subTest(service=name):
                self.assertEqual(code, 0, f"{name} exit code {code}:\n{CLUSTER.log_tail(name)}")


def build_suite():
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    suite.addTests(loader.loadTestsFromTestCase(GrpcClientTest))  # sorted: test_01.. test_08
    suite.addTests(loader.loadTestsFromTestCase(ShutdownTest))
    return suite


def main():
    global ARGS
    ARGS = sojourn_cluster.parse_suite_args(__doc__)

    def setup(cluster, workdir):
        global CLUSTER, ADDRS
        CLUSTER = cluster
        load_stubs(os.path.join(workdir, "stubs"))
        ADDRS = cluster.start_all(monitor_host=MONITOR_HOST)
        print(f"cluster: {ADDRS} (work dir {workdir})", file=sys.stderr)

    return sojourn_cluster.run_suite_with_cluster(ARGS.bin_dir, "sojourn-pytest-", ARGS.keep,
                                                  setup, build_suite)


if __name__ == "__main__":
    sys.exit(main())
