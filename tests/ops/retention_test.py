#!/usr/bin/python3
"""Retention (statemgr --retention_days, HostBook::Retain) on the real binary.

On the real statemgr over loopback, with Python's grpcio as the client:
- 30 days of 10-minute samples of one host and 3 days, 40 days ago, of
  another are pushed to a state manager that keeps everything;
- restarted with --retention_days=14, it deletes at start-up every sample
  before the cut it exports (sojourn_statemgr_retention_cutoff_timestamp_seconds,
  local midnight 14 days back) and counts them in
  sojourn_statemgr_retention_deleted_samples_total;
- ListHosts and GetSeries then show exactly the samples from the cut on; the
  host with none left is still listed, with no samples;
- samples pushed afterwards are stored, and a restart without the flag finds
  exactly what was left (nothing else lost).

usage: /usr/bin/python3 tests/ops/retention_test.py --bin-dir BUILD/bin
Prints "N passed, N failed" last; exits non-zero on any failure.
"""

import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO_DIR, "tests", "python"))
import sojourn_cluster  # noqa: E402
import grpc_client_test as client_test  # noqa: E402  (stubs)

CLUSTER = None
WORKDIR = None
RPC_TIMEOUT = 30
PERIOD = 600


class RetentionTest(unittest.TestCase):

    def channel(self, service):
        import grpc
        channel = grpc.insecure_channel(service.address)
        self.channels.append(channel)
        return channel

    def stop(self, service):
        # An open client channel holds a service's shutdown for its 5 s grace.
        for channel in self.channels:
            channel.close()
        self.channels = []
        service.popen.terminate()
        return service.popen.wait(timeout=30)

    def stub(self, service):
        return client_test.pb["statemgr_grpc"].StateManagerStub(self.channel(service))

    def push(self, service, host, times):
        common = client_test.pb["common"]
        batch = [common.HostSample(unix_seconds=t, cpu_load_ratio=0.1 if t % 7200 else 0.9,
                                   free_mem_mb=4000.0) for t in times]
        req = client_test.pb["statemgr"].PushSamplesRequest(host=host, samples=batch,
                                                            period_seconds=PERIOD)
        resp = self.stub(service).PushSamples(iter([req]), timeout=RPC_TIMEOUT)
        self.assertEqual(resp.persisted_samples, len(batch))

    def hosts(self, service):
        listed = self.stub(service).ListHosts(client_test.pb["statemgr"].ListHostsRequest(),
                                              timeout=RPC_TIMEOUT)
        return {h.host: (h.sample_count, h.first_sample_unix_seconds) for h in listed.hosts}

    def series(self, service, host):
        req = client_test.pb["statemgr"].GetSeriesRequest(host=host, start_unix_seconds=0)
        return [s.unix_seconds for s in self.stub(service).GetSeries(req, timeout=RPC_TIMEOUT).samples]

    def test_retention_days(self):
        self.channels = []
        now = int(time.time()) // PERIOD * PERIOD
        recent = list(range(now - 30 * 86400, now, PERIOD))
        ancient = list(range(now - 40 * 86400, now - 37 * 86400, PERIOD))
        db = os.path.join(WORKDIR, "statemgr-db")
        keeper = CLUSTER.start("statemgr-keep", "statemgr", [f"--db_path={db}"])
        self.push(keeper, "lab-1", recent)
        self.push(keeper, "lab-gone", ancient)
        self.assertEqual(self.hosts(keeper)["lab-1"], (len(recent), recent[0]))
        self.assertEqual(self.stop(keeper), 0)

        retaining = CLUSTER.start("statemgr-retain", "statemgr",
                                  [f"--db_path={db}", "--retention_days=14"])
        deleted_name = "sojourn_statemgr_retention_deleted_samples_total"
        sojourn_cluster.wait_until(lambda: (retaining.metric(deleted_name) or 0) > 0, 60,
                                   "the start-up retention pass")
        cut = retaining.metric("sojourn_statemgr_retention_cutoff_timestamp_seconds")
        self.assertIsNotNone(cut)
        cut = int(cut)
        self.assertEqual(cut % 86400, 0)  # UTC midnight (--utc_offset_seconds 0)
        self.assertLess(now - 15 * 86400, cut)
        self.assertLessEqual(cut, time.time() - 14 * 86400)
        kept = [t for t in recent if t >= cut]
        self.assertEqual(retaining.metric(deleted_name),
                         len(recent) - len(kept) + len(ancient))
        self.assertEqual(retaining.metric("sojourn_statemgr_retention_failures_total"), 0)
        listed = self.hosts(retaining)
        self.assertEqual(listed["lab-1"], (len(kept), kept[0]))
        self.assertEqual(listed["lab-gone"][0], 0)
        self.assertEqual(self.series(retaining, "lab-1"), kept)
        self.assertEqual(self.series(retaining, "lab-gone"), [])
        self.push(retaining, "lab-1", [now, now + PERIOD])
        self.assertEqual(self.stop(retaining), 0)
        self.assertIn("retention: ", CLUSTER.log_tail("statemgr-retain", 100))

        # Without the flag: exactly what was left, nothing more lost.
        after = CLUSTER.start("statemgr-after", "statemgr", [f"--db_path={db}"])
        self.assertEqual(self.series(after, "lab-1"), kept + [now, now + PERIOD])
        self.assertEqual(self.hosts(after)["lab-gone"][0], 0)
        self.assertIsNone(after.metric(deleted_name))  # no retention, no metric
        self.assertEqual(self.stop(after), 0)


def main():
    args = sojourn_cluster.parse_suite_args(__doc__)

    def setup(cluster, workdir):
        global CLUSTER, WORKDIR
        CLUSTER, WORKDIR = cluster, workdir
        client_test.load_stubs(os.path.join(workdir, "stubs"))

    return sojourn_cluster.run_suite_with_cluster(
        args.bin_dir, "sojourn-retention-", args.keep, setup,
        lambda: unittest.TestLoader().loadTestsFromTestCase(RetentionTest))


if __name__ == "__main__":
    sys.exit(main())
