#!/usr/bin/python3
"""A broker started with a low soft limit on open files serves more hosts than it.

Each registered host's state manager keeps a connection to the broker, so a
broker holds a descriptor per host. Debian's shells and systemd start
processes with a soft limit of 1024 open files (hard 524288): before the
services raised their soft limit to the hard one, a broker stopped accepting
at about 1,000 hosts ("Failed accept4: Too many open files") and the next
hosts' RegisterHost calls waited out their deadlines.

Starts the real broker with a soft limit of 64 (the hard limit this process
has), registers 150 hosts over 150 connections of their own (as 150 state
managers would), and checks that every call is answered, that ListHosts lists
all of them, that /proc shows the soft limit raised, and that the broker's
/metrics counts the descriptors (process_open_fds, process_max_fds). The
broker's log says it raised the limit.

`sojourn watch` holds a stream per state manager: with the hosts registered
under 150 addresses of one state manager (listening on 0.0.0.0, so every
127.0.0.X reaches it) and a soft limit of 64, it watches all 150 (it failed
with "Too many open files" before it raised its limit).

The predictor keeps a connection to each state manager the broker lists: one
started with a hard limit of 600 open files warns, when it pools the prior
over the 150, that it needs about 662.

usage: /usr/bin/python3 tests/ops/open_files_test.py --bin-dir BUILD/bin
Prints "N passed, N failed" last; exits non-zero on any failure.
"""

import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO_DIR, "tests", "python"))
import sojourn_cluster  # noqa: E402

SOFT_FILES = 64
HOSTS = 150  # more than SOFT_FILES connections

CLUSTER = None


def metric(text, name):
    m = re.search(rf"^{name}{{[^}}]*}} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


class OpenFilesTest(unittest.TestCase):

    def test_hosts_beyond_the_soft_limit(self):
        import grpc
        from sojourn.v1 import broker_pb2, broker_pb2_grpc
        broker = CLUSTER.services["broker"]
        channels = []
        try:
            for i in range(HOSTS):
                # A subchannel pool of its own: one TCP connection per channel,
                # as each state manager has its own.
                channel = grpc.insecure_channel(
                    broker.address, options=[("grpc.use_local_subchannel_pool", 1)])
                channels.append(channel)
                stub = broker_pb2_grpc.BrokerStub(channel)
                # Raises (DEADLINE_EXCEEDED) when the broker cannot accept the connection.
                stub.RegisterHost(broker_pb2.RegisterHostRequest(
                    host=f"fd-host-{i}", statemgr_address=statemgr_address(i)), timeout=10)
            listed = broker_pb2_grpc.BrokerStub(channels[0]).ListHosts(
                broker_pb2.BrokerListHostsRequest(), timeout=10)
            self.assertEqual(len(listed.hosts), HOSTS)
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=5) as resp:
                text = resp.read().decode()
            # Every connection is open while its channel is.
            self.assertGreaterEqual(metric(text, "process_open_fds"), HOSTS, text)
            self.assertGreater(metric(text, "process_max_fds"), HOSTS, text)
        finally:
            for channel in channels:
                channel.close()
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        with open(f"/proc/{broker.popen.pid}/limits") as f:
            limit = next(line for line in f if line.startswith("Max open files")).split()
        if hard != resource.RLIM_INFINITY:
            self.assertEqual(limit[3], str(hard), limit)
        self.assertNotEqual(limit[3], str(SOFT_FILES), limit)
        with open(broker.log_path) as f:
            self.assertIn(f"open files: soft limit raised from {SOFT_FILES} to the hard limit",
                          f.read())
        self.watch_every_statemgr(broker)

    def watch_every_statemgr(self, broker):
        # One stream per registered state manager address; the watch prints a
        # line for each stream it opened, or stops at the first that fails.
        watch = subprocess.Popen(
            low_soft_limit() + [CLUSTER.binary("sojourn"), "watch", "--no-snapshot", "--broker",
                                broker.address],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(watch.stderr), daemon=True)
        reader.start()
        try:
            watching = lambda: {l for l in lines if "watching state changes at" in l}
            sojourn_cluster.wait_until(
                lambda: len(watching()) == HOSTS or watch.poll() is not None, 60,
                f"sojourn watch to open {HOSTS} streams")
            self.assertIsNone(watch.poll(), "".join(lines[-5:]))
            self.assertEqual(len(watching()), HOSTS, "".join(lines[-5:]))
        finally:
            watch.send_signal(signal.SIGINT)
            watch.wait(timeout=30)
            reader.join(timeout=10)
        self.assertFalse([l for l in lines if "Too many open files" in l], lines[-5:])

    def test_predictor_warns_of_its_limit(self):
        # One host with a few samples, so that a prediction for it pools the
        # prior over every host the broker lists (the other 150 are unknown to
        # the state manager and are left out of it).
        import grpc
        from sojourn.v1 import (broker_pb2, broker_pb2_grpc, common_pb2, predictor_pb2,
                                predictor_pb2_grpc, statemgr_pb2, statemgr_pb2_grpc)
        statemgr = CLUSTER.services["statemgr"]
        now = int(time.time())
        samples = [common_pb2.HostSample(unix_seconds=now - 540 + 6 * i, cpu_load_ratio=0.1)
                   for i in range(90)]
        pushed = statemgr_pb2_grpc.StateManagerStub(
            grpc.insecure_channel(statemgr.address)).PushSamples(
                iter([statemgr_pb2.PushSamplesRequest(host="fd-pushed", samples=samples,
                                                      period_seconds=6)]), timeout=30)
        self.assertEqual(pushed.persisted_samples, len(samples))
        broker = broker_pb2_grpc.BrokerStub(
            grpc.insecure_channel(CLUSTER.services["broker"].address))
        for i in range(HOSTS):
            broker.RegisterHost(broker_pb2.RegisterHostRequest(
                host=f"fd-prior-{i}", statemgr_address=statemgr_address(i)), timeout=10)
        predictor = predictor_pb2_grpc.PredictorStub(
            grpc.insecure_channel(CLUSTER.services["predictor"].address))
        answer = predictor.PredictAvailability(predictor_pb2.PredictAvailabilityRequest(
            host="fd-pushed", window_seconds=3600, statemgr_address=statemgr.address), timeout=60)
        self.assertGreater(answer.tr_ratio, 0.0)
        log = CLUSTER.services["predictor"].log_path
        # 150 listed + 256 others + 256 reserved, against the hard limit of 600.
        want = (f"the broker lists {HOSTS} state managers, and a connection to each needs about "
                f"{HOSTS + 512} open files in all, above this process's limit of 600")
        with open(log) as f:
            text = f.read()
        self.assertIn(want, text)
        self.assertEqual(text.count("open files: the broker lists"), 1, text)


def low_soft_limit(hard=None):
    """prlimit(1) prefix: a soft limit of SOFT_FILES, and `hard` or this process's hard limit."""
    if hard is None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        hard = "unlimited" if hard == resource.RLIM_INFINITY else hard
    return ["prlimit", f"--nofile={SOFT_FILES}:{hard}", "--"]


def statemgr_address(i):
    """Host i's state manager: 127.0.0.(i+1), all reaching the one state manager."""
    return f"127.0.0.{i + 1}:{CLUSTER.services['statemgr'].grpc_port}"


def main():
    global CLUSTER
    args = sojourn_cluster.parse_suite_args(__doc__)

    def setup(cluster, workdir):
        global CLUSTER
        CLUSTER = cluster
        sojourn_cluster.generate_sojourn_stubs(REPO_DIR, os.path.join(workdir, "stubs"))
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if hard != resource.RLIM_INFINITY and hard <= 2 * HOSTS + 64:
            raise RuntimeError(f"the hard limit on open files ({hard}) is too low for this test")
        # Registering hosts does not call the predictor.
        broker = cluster.start("broker", "broker", ["--predictor=127.0.0.1:1"],
                               prefix=low_soft_limit())
        cluster.start("statemgr", "statemgr", [
            "--listen=0.0.0.0:0", f"--db_path={os.path.join(workdir, 'statemgr-db')}"])
        cluster.start("predictor", "predictor", [f"--broker={broker.address}", "--histdb_path="],
                      prefix=low_soft_limit(hard=600))

    return sojourn_cluster.run_suite_with_cluster(
        args.bin_dir, "sojourn-openfiles-", args.keep, setup,
        lambda: unittest.TestLoader().loadTestsFromTestCase(OpenFilesTest))


if __name__ == "__main__":
    sys.exit(main())
