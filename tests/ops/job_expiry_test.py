#!/usr/bin/python3
"""Jobs the middleware lost (overdue jobs, broker --expire_*_jobs_after_seconds) on the real binaries.

The real broker (queue in RocksDB) and predictor (job history in RocksDB) over
loopback, with Python's grpcio as the middleware and the sojourn CLI as the
operator:
- a broker without expiry queues job 7 (started two days ago, 1 h requested:
  its finish was lost), job 9 (started an hour ago, 2 h requested) and job 8
  (waiting); `sojourn jobs list` marks job 7 overdue, job 9 running, and says
  which job is past its requested time and by how long;
- restarted with both expiry flags at an hour, the broker's start-up check
  sets sojourn_broker_jobs_overdue to 1 and the age gauges, and drops
  nothing (sojourn_broker_jobs_expired_total 0 for both states): every job
  was reported minutes ago, and expiry counts from the report when it is
  later than the times the events carried (the drops themselves, to the
  second, are checked by BrokerJobsTest on a fake clock);
- `sojourn jobs cancel` removes job 7, and the predictor's job history
  forgets it: a finish sent to it directly is refused as a job not pending;
- a restart without the flags has jobs 8 and 9 only.

usage: /usr/bin/python3 tests/ops/job_expiry_test.py --bin-dir BUILD/bin
Prints "N passed, N failed" last; exits non-zero on any failure.
"""

import os
import re
import subprocess
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


class JobExpiryTest(unittest.TestCase):

    def setUp(self):
        self.channels = []

    def tearDown(self):
        for channel in self.channels:
            channel.close()

    def stub(self, service, kind="broker"):
        import grpc
        channel = grpc.insecure_channel(service.address)
        self.channels.append(channel)
        if kind == "broker":
            return client_test.pb["broker_grpc"].BrokerStub(channel)
        return client_test.pb["predictor_grpc"].PredictorStub(channel)

    def stop(self, service):
        # An open client channel holds a service's shutdown for its 5 s grace.
        for channel in self.channels:
            channel.close()
        self.channels = []
        service.popen.terminate()
        return service.popen.wait(timeout=30)

    def cli(self, broker, *argv):
        env = dict(os.environ)
        env.pop("SOJOURN_BROKER", None)
        p = subprocess.run([CLUSTER.binary("sojourn"), "jobs"] + list(argv) +
                           ["--broker", broker.address], capture_output=True, text=True,
                           timeout=60, env=env)
        return p.returncode, p.stdout, p.stderr

    def listed(self, broker):
        code, out, err = self.cli(broker)
        self.assertEqual(code, 0, err)
        rows = re.findall(r"^(\d+) +(waiting|running|overdue) +\d+ ", out, re.M)
        return {int(job_id): state for job_id, state in rows}, out

    def test_overdue_job_is_marked_kept_and_cancelled(self):
        pb = client_test.pb
        predictor = CLUSTER.start("predictor", "predictor", [
            "--broker=127.0.0.1:1", f"--histdb_path={os.path.join(WORKDIR, 'histdb')}"])
        queue = os.path.join(WORKDIR, "queue")
        keeper = CLUSTER.start("broker-keep", "broker",
                               [f"--predictor={predictor.address}", f"--data_dir={queue}"])
        broker = self.stub(keeper)
        broker.RegisterHost(pb["broker"].RegisterHostRequest(
            host="lab-1", statemgr_address="127.0.0.1:1"), timeout=RPC_TIMEOUT)
        broker.RegisterHost(pb["broker"].RegisterHostRequest(
            host="lab-2", statemgr_address="127.0.0.1:1"), timeout=RPC_TIMEOUT)
        now = int(time.time())

        def job(job_id, submit, requested):
            return pb["turnaround"].JobSpec(job_id=job_id, submit_unix_seconds=submit, procs=1,
                                            requested_seconds=requested, user=3)

        for job_id, submit, start, host, requested in ((7, now - 3 * 86400, now - 2 * 86400,
                                                        "lab-1", 3600),
                                                       (9, now - 7200, now - 3600, "lab-2", 7200)):
            r = broker.SubmitJob(pb["broker"].SubmitJobRequest(job=job(job_id, submit, requested)),
                                 timeout=RPC_TIMEOUT)
            self.assertTrue(r.recorded_in_history, r.history_error)
            r = broker.StartJob(pb["broker"].StartJobRequest(job_id=job_id, hosts=[host],
                                                             start_unix_seconds=start),
                                timeout=RPC_TIMEOUT)
            self.assertTrue(r.recorded_in_history, r.history_error)
        broker.SubmitJob(pb["broker"].SubmitJobRequest(job=job(8, now - 600, 3600)),
                         timeout=RPC_TIMEOUT)

        states, out = self.listed(keeper)
        self.assertEqual(states, {8: "waiting", 7: "overdue", 9: "running"}, out)
        # 2 days minus the 1 h requested: 47 h, plus the seconds the test took.
        self.assertIn("1 running job is past its requested time (job 7 by 47.0", out)
        self.assertEqual(self.stop(keeper), 0)

        # Restarted with expiry on: the start-up check counts job 7 overdue, but
        # does not drop it, nor anything else: each was reported minutes ago, and
        # gets the whole hour from its report. (The drops themselves, to the
        # second, are BrokerJobsTest's, on a fake clock.)
        expiring = CLUSTER.start("broker-expire", "broker", [
            f"--predictor={predictor.address}", f"--data_dir={queue}",
            "--expire_running_jobs_after_seconds=3600",
            "--expire_waiting_jobs_after_seconds=3600"])
        sojourn_cluster.wait_until(
            lambda: expiring.metric("sojourn_broker_jobs_overdue") == 1, 60,
            "the start-up check counting job 7 overdue")
        expired = "sojourn_broker_jobs_expired_total"
        self.assertEqual(expiring.metric(expired, 'state="running"'), 0)
        self.assertEqual(expiring.metric(expired, 'state="waiting"'), 0)
        self.assertGreaterEqual(
            expiring.metric("sojourn_broker_job_age_max_seconds", 'state="running"'),
            2 * 86400)
        states, out = self.listed(expiring)
        self.assertEqual(states, {8: "waiting", 7: "overdue", 9: "running"}, out)
        self.assertIn("jobs nothing is reported of are dropped: waiting ones 3600 s after their "
                      "submission, running ones 3600 s after their start plus their requested "
                      "time", CLUSTER.log_tail("broker-expire", 50))

        # The operator cancels it; the job history forgets it (a finish sent
        # to it directly is refused: job 7 is no longer pending there).
        code, out, err = self.cli(expiring, "cancel", "--job-id", "7")
        self.assertEqual(code, 0, (out, err))
        self.assertIn("job 7 cancelled; the queue holds 1 waiting and 1 running jobs; the job "
                      "history recorded it", out)
        import grpc
        event = pb["turnaround"].JobEvent(
            finished=pb["turnaround"].JobFinished(job_id=7, finish_unix_seconds=now))
        with self.assertRaises(grpc.RpcError) as refused:
            self.stub(predictor, "predictor").RecordJobEvent(event, timeout=RPC_TIMEOUT)
        self.assertEqual(refused.exception.code(), grpc.StatusCode.NOT_FOUND,
                         refused.exception.details())
        code, out, err = self.cli(expiring, "finish", "--job-id", "7")
        self.assertEqual(code, 2, (out, err))
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("job 7 is not queued", err)
        self.assertEqual(self.stop(expiring), 0)

        after = CLUSTER.start("broker-after", "broker",
                              [f"--predictor={predictor.address}", f"--data_dir={queue}"])
        states, out = self.listed(after)
        self.assertEqual(states, {8: "waiting", 9: "running"}, out)
        self.assertEqual(self.stop(after), 0)


def main():
    args = sojourn_cluster.parse_suite_args(__doc__)

    def setup(cluster, workdir):
        global CLUSTER, WORKDIR
        CLUSTER, WORKDIR = cluster, workdir
        client_test.load_stubs(os.path.join(workdir, "stubs"))

    return sojourn_cluster.run_suite_with_cluster(
        args.bin_dir, "sojourn-job-expiry-", args.keep, setup,
        lambda: unittest.TestLoader().loadTestsFromTestCase(JobExpiryTest))


if __name__ == "__main__":
    sys.exit(main())
