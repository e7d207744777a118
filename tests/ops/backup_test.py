#!/usr/bin/python3
"""Online backups (--backup_dir, common/db_backup.h) of the real services, restored with sojourn-backup.

For each service with a database (statemgr: samples; broker: the job queue;
predictor: the job history), on the real binaries over loopback, with
Python's grpcio as the client:
- data written, the service restarted with --backup_dir: it takes a backup at
  start-up (none there yet) and exports sojourn_backup_* on /metrics;
- more data written after the backup, the service stopped;
- `sojourn-backup list --json`, `verify`, `restore` into a new directory; a
  second restore into it is refused (exit 2, one line) and changes nothing;
- the service started on the restored directory holds what was written
  before the backup and nothing written after it.
Also: a backup directory of another service or one in use by a running
service stops a service at start-up (exit 2, one line), and a damaged backup
fails `verify` (exit 1) and `restore`.

usage: /usr/bin/python3 tests/ops/backup_test.py --bin-dir BUILD/bin
Prints "N passed, N failed" last; exits non-zero on any failure.
"""

import json
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


def path(*parts):
    return os.path.join(WORKDIR, *parts)


def tool(*args):
    return subprocess.run([os.path.join(CLUSTER.bin_dir, "sojourn-backup"), *args],
                          capture_output=True, text=True, timeout=120)


CHANNELS = {}  # service name -> the test's open channels to it


def stop(service):
    # A client's open channel holds a service's shutdown for its 5 s grace.
    for channel in CHANNELS.pop(service.name, []):
        channel.close()
    service.popen.terminate()
    return service.popen.wait(timeout=30)


def start_refused(name, program, args):
    """Runs a service expected to stop at start-up: (exit code, stderr lines)."""
    argv = [CLUSTER.binary(program), "--listen=127.0.0.1:0", "--metrics_listen=", *args]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=WORKDIR)
    return p.returncode, [line for line in p.stderr.splitlines() if line.strip()]


def samples(start, n, period=30):
    common = client_test.pb["common"]
    return [common.HostSample(unix_seconds=start + i * period, cpu_load_ratio=0.1,
                              free_mem_mb=4000.0) for i in range(n)]


class BackupTest(unittest.TestCase):

    def stub(self, service, stub_class):
        import grpc
        channel = grpc.insecure_channel(service.address)
        CHANNELS.setdefault(service.name, []).append(channel)
        self.addCleanup(channel.close)
        return stub_class(channel)

    def backup_and_restore(self, name, program, db_flag, base_args, write_before, write_after,
                           check_restored):
        """The cycle of the module docstring for one service; returns the backup directory."""
        db = path(f"{name}-db")
        backups = path(f"{name}-backups")
        restored = path(f"{name}-restored")
        first = CLUSTER.start(f"{name}-1", program, [f"{db_flag}={db}", *base_args])
        write_before(first)
        self.assertEqual(stop(first), 0)

        second = CLUSTER.start(f"{name}-2", program, [f"{db_flag}={db}", f"--backup_dir={backups}",
                                                      *base_args])
        ok = f'sojourn_backups_total{{service="{program}",outcome="ok"}} 1'
        sojourn_cluster.wait_until(lambda: ok in second.metrics_text(), 60, f"{name}'s first backup")
        text = second.metrics_text()
        stamp = re.search(r'sojourn_backup_last_success_timestamp_seconds\{service="[a-z]+"\} (\S+)',
                          text)
        self.assertIsNotNone(stamp, text)
        self.assertLess(abs(float(stamp.group(1)) - time.time()), 120)
        self.assertIn(f'sojourn_backup_interval_seconds{{service="{program}"}} 86400', text)
        self.assertIn(f'sojourn_backups_kept{{service="{program}"}} 1', text)
        write_after(second)
        self.assertEqual(stop(second), 0)

        listed = tool("list", "--backup-dir", backups, "--json")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        entries = json.loads(listed.stdout)["backups"]
        self.assertEqual(len(entries), 1, listed.stdout)
        self.assertEqual(entries[0]["service"], program)
        self.assertEqual(entries[0]["db_path"], db)  # absolute, as the service saw it
        verified = tool("verify", "--backup-dir", backups)
        self.assertEqual(verified.returncode, 0, verified.stderr)
        self.assertIn(f"backup {entries[0]['id']}: ok", verified.stdout)

        done = tool("restore", "--backup-dir", backups, "--db-path", restored)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn(f"into {restored}", done.stdout)
        before = sorted(os.listdir(restored))
        again = tool("restore", "--backup-dir", backups, "--db-path", restored)
        self.assertEqual(again.returncode, 2)
        self.assertEqual(len(again.stderr.splitlines()), 1, again.stderr)
        self.assertIn("is not empty", again.stderr)
        self.assertEqual(sorted(os.listdir(restored)), before)

        third = CLUSTER.start(f"{name}-3", program, [f"{db_flag}={restored}", *base_args])
        check_restored(third)
        self.assertEqual(stop(third), 0)
        return backups

    def test_statemgr(self):
        pb = client_test.pb
        now = int(time.time())
        start = now - 6 * 3600

        def push(service, host, batch):
            stub = self.stub(service, pb["statemgr_grpc"].StateManagerStub)
            req = pb["statemgr"].PushSamplesRequest(host=host, samples=batch, period_seconds=30)
            resp = stub.PushSamples(iter([req]), timeout=RPC_TIMEOUT)
            self.assertEqual(resp.persisted_samples, len(batch))

        def hosts(service):
            stub = self.stub(service, pb["statemgr_grpc"].StateManagerStub)
            listed = stub.ListHosts(pb["statemgr"].ListHostsRequest(), timeout=RPC_TIMEOUT)
            return {h.host: h.sample_count for h in listed.hosts}

        def check(service):
            self.assertEqual(hosts(service), {"before-backup": 400})

        backups = self.backup_and_restore(
            "statemgr", "statemgr", "--db_path", [],
            lambda s: push(s, "before-backup", samples(start, 400)),
            lambda s: (push(s, "after-backup", samples(start, 10)),
                       self.assertEqual(set(hosts(s)), {"before-backup", "after-backup"})),
            check)

        # Another service's backups, and a directory a running service backs up into.
        code, lines = start_refused("broker-foreign", "broker",
                                    [f"--data_dir={path('other-q')}", f"--backup_dir={backups}",
                                     "--predictor=127.0.0.1:1"])
        self.assertEqual((code, len(lines)), (2, 1), lines)
        self.assertIn("holds backup 1 of the statemgr's database", lines[0])
        # Another database backed up into the same directory (a database started anew, say)
        # is logged, and its backups do not rotate the first one's out.
        running = CLUSTER.start("statemgr-lock", "statemgr",
                                [f"--db_path={path('lock-db')}", f"--backup_dir={backups}"])
        code, lines = start_refused("statemgr-second", "statemgr",
                                    [f"--db_path={path('lock-db-2')}", f"--backup_dir={backups}"])
        self.assertEqual((code, len(lines)), (2, 1), lines)
        self.assertIn("is in use by another process", lines[0])
        # A backup is deleted only while no service backs up into the directory.
        deleted = tool("delete", "--backup-dir", backups, "--id", "1")
        self.assertEqual(deleted.returncode, 2, deleted.stderr)
        self.assertIn("stop it before deleting", deleted.stderr)
        self.assertEqual(stop(running), 0)
        self.assertIn("holds 1 backup(s) of another database", CLUSTER.log_tail("statemgr-lock"))
        listed = json.loads(tool("list", "--backup-dir", backups, "--json").stdout)["backups"]
        self.assertEqual([b["db_path"] for b in listed], [path("statemgr-db"), path("lock-db")])

        # A damaged table file: verify names it (exit 1), and a restore of it fails (exit 1).
        sst = sorted(os.path.join(d, f) for d, _, files in os.walk(backups) for f in files
                     if f.endswith(".sst"))
        self.assertTrue(sst, f"no table file under {backups}")
        with open(sst[0], "r+b") as f:
            f.seek(64)
            byte = f.read(1)
            f.seek(64)
            f.write(bytes([byte[0] ^ 0xFF]))
        verified = tool("verify", "--backup-dir", backups)
        self.assertEqual(verified.returncode, 1, verified.stdout + verified.stderr)
        self.assertEqual(len(verified.stderr.splitlines()), 1, verified.stderr)
        self.assertIn("failed verification: 1", verified.stderr)
        self.assertRegex(verified.stdout, r"backup 1: .*is damaged")
        self.assertIn("backup 2: ok", verified.stdout)
        failed = tool("restore", "--backup-dir", backups, "--id", "1", "--db-path",
                      path("from-damaged"))
        self.assertEqual(failed.returncode, 1, failed.stdout + failed.stderr)

        # A damaged description (meta/2): listed as damaged, verify exit 1, and the restore
        # of "the newest" refuses rather than restoring backup 1 instead.
        with open(os.path.join(backups, "meta", "2"), "w") as f:
            f.write("garbage")
        listed = json.loads(tool("list", "--backup-dir", backups, "--json").stdout)["backups"]
        self.assertEqual([(b["id"], b["damaged"]) for b in listed], [(1, False), (2, True)])
        verified = tool("verify", "--backup-dir", backups, "--id", "2")
        self.assertEqual(verified.returncode, 1, verified.stderr)
        refused = tool("restore", "--backup-dir", backups, "--db-path", path("newest"))
        self.assertEqual(refused.returncode, 1, refused.stderr)
        self.assertIn("backup 2 in", refused.stderr)
        self.assertFalse(os.path.exists(path("newest")))
        deleted = tool("delete", "--backup-dir", backups, "--id", "2")
        self.assertEqual(deleted.returncode, 0, deleted.stderr)
        listed = json.loads(tool("list", "--backup-dir", backups, "--json").stdout)["backups"]
        self.assertEqual([b["id"] for b in listed], [1])

    def test_broker(self):
        pb = client_test.pb
        bp, ta = pb["broker"], pb["turnaround"]

        def submit(service, job_id):
            stub = self.stub(service, pb["broker_grpc"].BrokerStub)
            job = ta.JobSpec(job_id=job_id, user=5, procs=1, requested_seconds=3600)
            stub.SubmitJob(bp.SubmitJobRequest(job=job), timeout=RPC_TIMEOUT)

        def jobs(service):
            stub = self.stub(service, pb["broker_grpc"].BrokerStub)
            listed = stub.ListJobs(bp.ListJobsRequest(), timeout=RPC_TIMEOUT)
            return sorted(j.spec.job_id for j in listed.waiting)

        # The predictor is not there: the events wait in the queue's outbox.
        self.backup_and_restore(
            "broker", "broker", "--data_dir", ["--predictor=127.0.0.1:1"],
            lambda s: (submit(s, 11), submit(s, 12)),
            lambda s: (submit(s, 13), self.assertEqual(jobs(s), [11, 12, 13])),
            lambda s: self.assertEqual(jobs(s), [11, 12]))

    def test_predictor(self):
        pb = client_test.pb
        ta = pb["turnaround"]
        now = int(time.time())

        def record(service, job_id):
            """One finished job; returns the history's record count after it."""
            stub = self.stub(service, pb["predictor_grpc"].PredictorStub)
            snap = ta.ClusterSnapshot(now_unix_seconds=now - 3000,
                                      nodes=[ta.NodeState() for _ in range(2)])
            spec = ta.JobSpec(job_id=job_id, submit_unix_seconds=now - 3000, user=5, procs=1,
                              requested_seconds=3600)
            count = None
            for event in (ta.JobEvent(submitted=ta.JobSubmitted(job=spec, snapshot=snap)),
                          ta.JobEvent(started=ta.JobStarted(job_id=job_id,
                                                           start_unix_seconds=now - 2900,
                                                           nodes=[0], snapshot=snap)),
                          ta.JobEvent(finished=ta.JobFinished(job_id=job_id,
                                                             finish_unix_seconds=now - 1000,
                                                             cpu_seconds_per_task=-1))):
                count = stub.RecordJobEvent(event, timeout=RPC_TIMEOUT).history_records
            return count

        self.backup_and_restore(
            "predictor", "predictor", "--histdb_path", ["--broker="],
            lambda s: (self.assertEqual(record(s, 21), 1), self.assertEqual(record(s, 22), 2)),
            lambda s: self.assertEqual(record(s, 23), 3),
            # Jobs 21 and 22 are back, 23 is not.
            lambda s: self.assertEqual(record(s, 24), 3))

    def test_tool_refusals(self):
        for args, want in (
                (["list", "--backup-dir", path("nothing-here")], "holds no backups"),
                (["verify", "--backup-dir", path("nothing-here")], "holds no backups"),
                (["restore", "--backup-dir", path("nothing-here"), "--db-path", path("x")],
                 "holds no backups"),
                (["restore", "--backup-dir", path("b")], "--db-path is required"),
                (["list"], "--backup-dir is required"),
                (["list", "--backup-dir", "d", "--id", "1"], "--id"),
                (["verify", "--backup-dir", "d", "--id", "0"], "--id"),
                (["delete", "--backup-dir", path("nothing-here")], "--id is required"),
                (["delete", "--backup-dir", path("nothing-here"), "--id", "3"],
                 "holds no backups"),
                (["prune", "--backup-dir", "d"], "unknown command 'prune'")):
            result = tool(*args)
            self.assertEqual(result.returncode, 2, (args, result.stdout, result.stderr))
            self.assertEqual(len(result.stderr.splitlines()), 1, (args, result.stderr))
            self.assertIn(want, result.stderr, args)
        self.assertFalse(os.path.exists(path("x")))
        helped = tool("--help")
        self.assertEqual(helped.returncode, 0)
        self.assertIn("restore", helped.stdout)


def main():
    args = sojourn_cluster.parse_suite_args(__doc__)

    def setup(cluster, workdir):
        global CLUSTER, WORKDIR
        CLUSTER, WORKDIR = cluster, workdir
        client_test.load_stubs(os.path.join(workdir, "stubs"))

    return sojourn_cluster.run_suite_with_cluster(
        args.bin_dir, "sojourn-backup-", args.keep, setup,
        lambda: unittest.TestLoader().loadTestsFromTestCase(BackupTest))


if __name__ == "__main__":
    sys.exit(main())
