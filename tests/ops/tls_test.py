#!/usr/bin/python3
"""A sojourn cluster over mutual TLS (common/tls.h), with the files of scripts/make-certs.

Makes a CA and certificates with scripts/make-certs, starts the real predictor,
broker, statemgr and monitor on loopback with --tls_cert/--tls_key/--tls_ca,
and checks, with Python's grpcio as an independent client and with the
sojourn CLI:
- the whole data flow runs over TLS: the monitor's samples reach the state
  manager, the state manager registers its hosts with the broker, and a
  ranking asks the predictor, which asks the state manager;
- callers without TLS, without a client certificate or with one from another
  CA are refused, and so is a server whose certificate does not name the
  address dialled; --tls_client_auth=none serves callers without a
  certificate, still over TLS only;
- bad TLS files stop a service at start-up with exit 2 and one line naming
  the flag and the file, before it opens its database;
- /metrics exports the certificate's expiry time as the file says.

usage: /usr/bin/python3 tests/ops/tls_test.py --bin-dir BUILD/bin
Needs openssl (scripts/make-certs) and python3-cryptography (Debian packages).
Prints "N passed, N failed" last; exits non-zero on any failure.
"""

import datetime
import os
import re
import subprocess
import sys
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO_DIR, "tests", "python"))
import sojourn_cluster  # noqa: E402
import grpc_client_test as client_test  # noqa: E402  (stubs and a synthetic history)

MONITOR_HOST = "tls-monitor-host"
CLUSTER = None
WORKDIR = None
CERTS = None  # sojourn_cluster.TlsFiles: the cluster's CA and certificates
ROGUE = None  # another CA, with a certificate for localhost


def health(address, creds, timeout=10):
    """The health status of `address` over `creds` (None = plaintext); raises grpc.RpcError."""
    import grpc
    pb = client_test.pb
    channel = (grpc.secure_channel(address, creds) if creds is not None
               else grpc.insecure_channel(address))
    with channel:
        stub = pb["health_grpc"].HealthStub(channel)
        return stub.Check(pb["health"].HealthCheckRequest(service=""), timeout=timeout).status


def run_cli(*args, env=None):
    return subprocess.run([os.path.join(CLUSTER.bin_dir, "sojourn"), *args], capture_output=True,
                          text=True, timeout=60, env=env)


class TlsClusterTest(unittest.TestCase):

    def secure_stub(self, service, stub_class, cert="client"):
        """A stub of `service` over mutual TLS, presenting CERT's certificate."""
        channel = CERTS.channel(CLUSTER.services[service].address, cert)
        self.addCleanup(channel.close)
        return stub_class(channel)

    def test_data_flow_runs_over_mutual_tls(self):
        pb = client_test.pb
        broker = self.secure_stub("broker", pb["broker_grpc"].BrokerStub)
        statemgr = self.secure_stub("statemgr", pb["statemgr_grpc"].StateManagerStub)
        # monitor -> statemgr -> broker: the monitor's host is registered by its state manager.
        sojourn_cluster.wait_until(
            lambda: MONITOR_HOST in {h.host for h in broker.ListHosts(
                pb["broker"].BrokerListHostsRequest(), timeout=10).hosts},
            60, f"{MONITOR_HOST} registered at the broker over TLS")
        # A host with days of history, pushed over TLS; a ranking then asks the predictor
        # (broker -> predictor) for its TR, which reads the statemgr (predictor -> statemgr).
        now = int(time.time())
        ack = statemgr.PushSamples(client_test.push_requests(client_test.synthetic_history(now)),
                                   timeout=60)
        self.assertGreater(ack.persisted_samples, 0)
        sojourn_cluster.wait_until(
            lambda: client_test.PUSHED_HOST in {h.host for h in broker.ListHosts(
                pb["broker"].BrokerListHostsRequest(), timeout=10).hosts},
            60, "the pushed host registered")
        resp = broker.RankHosts(pb["broker"].RankHostsRequest(
            job=pb["broker"].JobRequirements(duration_seconds=3600, cpu_share_ratio=1.0)),
            timeout=60)
        ranked = {r.host: r for r in resp.hosts}
        self.assertIn(client_test.PUSHED_HOST, ranked, str(resp))
        mine = ranked[client_test.PUSHED_HOST]
        self.assertTrue(mine.HasField("tr_ratio"), f"no TR: {mine.reason}")
        self.assertTrue(0.0 <= mine.tr_ratio <= 1.0)

    def test_callers_without_the_right_certificate_are_refused(self):
        import grpc
        serving = client_test.pb["health"].HealthCheckResponse.SERVING
        for name in ("statemgr", "predictor", "broker", "monitor"):
            address = CLUSTER.services[name].address
            with self.subTest(service=name):
                self.assertEqual(health(address, CERTS.credentials("client")), serving)
                for case, creds in (("plaintext", None),
                                    ("no client certificate", CERTS.credentials()),
                                    ("client certificate of another CA",
                                     grpc.ssl_channel_credentials(
                                         CERTS.read("ca.pem"), ROGUE.read("localhost.key"),
                                         ROGUE.read("localhost.pem"))),
                                    ("server not signed by the trusted CA",
                                     grpc.ssl_channel_credentials(
                                         ROGUE.read("ca.pem"), CERTS.read("client.key"),
                                         CERTS.read("client.pem")))):
                    with self.subTest(case=case):
                        with self.assertRaises(grpc.RpcError) as ctx:
                            health(address, creds, timeout=5)
                        self.assertEqual(ctx.exception.code(), grpc.StatusCode.UNAVAILABLE)
                        if case.startswith("server"):
                            # Refused by this client, not by the server.
                            self.assertIn("certificate verify failed", ctx.exception.details())

    def test_a_server_must_name_the_address_dialled(self):
        now = datetime.datetime.now(datetime.timezone.utc)
        CERTS.sign("elsewhere", ["elsewhere.example"], now - datetime.timedelta(hours=1),
                           now + datetime.timedelta(days=2))
        other = CLUSTER.start("statemgr-elsewhere", "statemgr", [
            f"--db_path={os.path.join(WORKDIR, 'elsewhere-db')}", *CERTS.flags("elsewhere")])
        # The sojourn CLI (C++ gRPC) dials 127.0.0.1, which the certificate does not name.
        out = run_cli("watch", "--statemgr", other.address, "--timeout", "5", "--json",
                      *CERTS.cli_flags())
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertIn("Peer name 127.0.0.1 is not in peer certificate (the service's certificate "
                      "does not name the address dialled", out.stderr)
        # Python's client, told to expect the name the certificate holds, gets through.
        import grpc
        creds = CERTS.credentials("client")
        with grpc.secure_channel(other.address, creds, options=[
                ("grpc.ssl_target_name_override", "elsewhere.example")]) as channel:
            stub = client_test.pb["health_grpc"].HealthStub(channel)
            status = stub.Check(client_test.pb["health"].HealthCheckRequest(), timeout=10).status
        self.assertEqual(status, client_test.pb["health"].HealthCheckResponse.SERVING)

    def test_client_auth_none_takes_callers_without_a_certificate(self):
        import grpc
        svc = CLUSTER.start("statemgr-open", "statemgr", [
            f"--db_path={os.path.join(WORKDIR, 'open-db')}", *CERTS.flags(),
            "--tls_client_auth=none"])
        serving = client_test.pb["health"].HealthCheckResponse.SERVING
        self.assertEqual(health(svc.address, CERTS.credentials()), serving)
        with self.assertRaises(grpc.RpcError):
            health(svc.address, None, timeout=5)

    def test_cli_with_tls_to_a_plaintext_service(self):
        svc = CLUSTER.start("statemgr-plain", "statemgr", [
            f"--db_path={os.path.join(WORKDIR, 'plain-db')}"], common=False)
        out = run_cli("watch", "--statemgr", svc.address, "--timeout", "5", *CERTS.cli_flags())
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertIn("does the service use TLS? without --tls-ca the call is plaintext",
                      out.stderr)
        # One line: gRPC core's own handshake log lines are not printed before it.
        self.assertEqual(len([l for l in out.stderr.splitlines() if l.strip()]), 1, out.stderr)

    def test_cli_over_tls(self):
        broker = CLUSTER.services["broker"].address
        # The monitor's host appears once its state manager registered it (over TLS).
        out = sojourn_cluster.wait_until(
            lambda: (lambda o: o if MONITOR_HOST in o.stdout else None)(
                run_cli("hosts", "--json", "--broker", broker, *CERTS.cli_flags())),
            60, f"`sojourn hosts` over TLS listing {MONITOR_HOST}")
        self.assertEqual(out.returncode, 0, out.stderr)
        # The same files from the environment.
        env = dict(os.environ, SOJOURN_TLS_CA=CERTS.path("ca.pem"),
                   SOJOURN_TLS_CERT=CERTS.path("client.pem"),
                   SOJOURN_TLS_KEY=CERTS.path("client.key"))
        out = run_cli("hosts", "--json", "--broker", broker, env=env)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(MONITOR_HOST, out.stdout)
        # Without TLS, or without a client certificate: exit 1 and a hint at the options.
        out = run_cli("hosts", "--broker", broker, "--timeout", "5")
        self.assertEqual(out.returncode, 1)
        self.assertIn("give --tls-ca", out.stderr)
        out = run_cli("hosts", "--broker", broker, "--timeout", "5",
                      "--tls-ca", CERTS.path("ca.pem"))
        self.assertEqual(out.returncode, 1)
        self.assertIn("give --tls-cert and --tls-key", out.stderr)
        # A bad file is a usage error, before any call.
        out = run_cli("hosts", "--broker", broker, "--tls-ca", CERTS.path("client.key"))
        self.assertEqual(out.returncode, 2)
        self.assertEqual(len(out.stderr.strip().splitlines()), 1, out.stderr)
        self.assertIn("--tls-ca: no PEM certificate in", out.stderr)
        out = run_cli("hosts", "--broker", broker, "--tls-ca", CERTS.path("ca.pem"),
                      "--tls-cert", CERTS.path("client.pem"))
        self.assertEqual(out.returncode, 2)
        self.assertIn("--tls-cert and --tls-key go together", out.stderr)
        out = run_cli("hosts", "--broker", broker, "--tls-cert", CERTS.path("client.pem"),
                      "--tls-key", CERTS.path("client.key"))
        self.assertEqual(out.returncode, 2)
        self.assertIn("--tls-ca is missing", out.stderr)

    def test_bad_tls_files_stop_a_service_at_start_up(self):
        now = datetime.datetime.now(datetime.timezone.utc)
        CERTS.sign("expired", ["localhost"], now - datetime.timedelta(days=30),
                           now - datetime.timedelta(days=1))
        CERTS.sign("future", ["localhost"], now + datetime.timedelta(days=30),
                           now + datetime.timedelta(days=60))
        garbage = os.path.join(WORKDIR, "garbage.pem")
        with open(garbage, "w") as f:
            f.write("not a certificate\n")
        c = CERTS.path
        cases = [
            ("cert without key", [f"--tls_cert={c('localhost.pem')}", f"--tls_ca={c('ca.pem')}"],
             r"--tls_key is missing"),
            ("missing file", CERTS.flags() + [f"--tls_ca={c('nope.pem')}"],
             r"--tls_ca: cannot read .*nope\.pem \(No such file"),
            ("not PEM", [f"--tls_cert={garbage}", f"--tls_key={c('localhost.key')}",
                         f"--tls_ca={c('ca.pem')}"], r"--tls_cert: no PEM certificate in .*garbage"),
            ("key of another certificate", [f"--tls_cert={c('localhost.pem')}",
                                            f"--tls_key={c('client.key')}",
                                            f"--tls_ca={c('ca.pem')}"],
             r"--tls_key: the key in .*client\.key does not match the certificate in"),
            ("expired", CERTS.flags("expired"), r"--tls_cert: the certificate in .*expired\.pem "
                                              r"expired on \d{4}-\d\d-\d\d"),
            ("not yet valid", CERTS.flags("future"), r"is not valid before .*clock"),
            ("client auth", CERTS.flags() + ["--tls_client_auth=maybe"],
             r"--tls_client_auth must be 'require' or 'none', got 'maybe'"),
            ("certificate of another CA", ROGUE.flags("localhost")[:2]
             + [f"--tls_ca={c('ca.pem')}"],
             r"--tls_cert: the certificate in .*rogue/localhost\.pem does not verify against "
             r".*certs/ca\.pem \(.*\); the other services verify against the same CA"),
            ("bind hosts without TLS", ["--tls_bind_hosts"],
             r"--tls_bind_hosts needs mutual TLS"),
            ("bind hosts without client certificates",
             CERTS.flags() + ["--tls_bind_hosts", "--tls_client_auth=none"],
             r"--tls_bind_hosts needs mutual TLS"),
            ("a host's certificate as the CA", CERTS.flags()[:2] + [f"--tls_cert={c('localhost.pem')}",
                                                                  f"--tls_ca={c('client.pem')}"],
             r"--tls_ca: no CA certificate in .*client\.pem"),
        ]
        for case, flags, message in cases:
            with self.subTest(case=case):
                db = os.path.join(WORKDIR, "never-db-" + re.sub(r"\W", "-", case))
                out = subprocess.run(
                    [os.path.join(CLUSTER.bin_dir, "statemgr"), "--listen=127.0.0.1:0",
                     "--metrics_listen=", f"--db_path={db}", *flags],
                    capture_output=True, text=True, timeout=30)
                self.assertEqual(out.returncode, 2, out.stderr)
                # One error line (an INFO line may come first, once the TLS files loaded).
                lines = [l for l in out.stderr.strip().splitlines() if not l.startswith("I ")]
                self.assertEqual(len(lines), 1, out.stderr)
                self.assertRegex(lines[0], message)
                self.assertFalse(os.path.exists(db), "the database was opened")

    def test_middleware_example_over_tls(self):
        example = os.path.join(REPO_DIR, "examples", "python", "middleware_client.py")
        sojourn_cluster.wait_until(
            lambda: MONITOR_HOST in run_cli("hosts", "--json", "--broker",
                                            CLUSTER.services["broker"].address,
                                            *CERTS.cli_flags()).stdout,
            60, f"{MONITOR_HOST} registered")
        p = subprocess.run([sys.executable, example,
                            "--broker", CLUSTER.services["broker"].address,
                            "--predictor", CLUSTER.services["predictor"].address,
                            "--duration-hours", "1", *CERTS.cli_flags()],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        self.assertRegex(p.stdout, r"\d+ of \d+ hosts can run a 1 h job")
        self.assertRegex(p.stdout, r"cancelled job \d+: 0 waiting, 0 running")
        # The broker forwarded the job's events to the predictor's job history, over TLS.
        self.assertRegex(p.stdout, r"queued job \d+: 1 waiting, 0 running; job history "
                                   r"recorded it: True")

    def test_bind_hosts_takes_reports_only_for_the_certificates_host(self):
        # A state manager per host: the broker and the state manager bind host names to
        # certificates. The host "client" (its certificate names client, and the loopback
        # names, which do not count) reports through a monitor and a state manager holding
        # its certificate; the state manager advertises itself as client:7403.
        import grpc
        pb = client_test.pb
        broker = CLUSTER.start("broker-bound", "broker", [
            f"--predictor={CLUSTER.services['predictor'].address}", "--tls_bind_hosts"])
        statemgr = CLUSTER.start("statemgr-bound", "statemgr", [
            f"--db_path={os.path.join(WORKDIR, 'bound-db')}", f"--broker={broker.address}",
            "--heartbeat_seconds=1", "--advertise_address=client:7403", "--tls_bind_hosts",
            *CERTS.flags("client")], common=False)
        CLUSTER.start("monitor-bound", "monitor", [
            f"--statemgr={statemgr.address}", "--host=client", "--period_seconds=1",
            *CERTS.flags("client")], common=False)
        broker_stub = self.secure_stub("broker-bound", pb["broker_grpc"].BrokerStub)
        sojourn_cluster.wait_until(
            lambda: "client" in {h.host for h in broker_stub.ListHosts(
                pb["broker"].BrokerListHostsRequest(), timeout=10).hosts},
            60, "host 'client' registered by its own state manager")
        now = int(time.time())
        sample = pb["common"].HostSample(unix_seconds=now - 60, cpu_load_ratio=0.1,
                                         free_mem_mb=1000)

        def push(host, cert="client", hosts=None):
            sm = self.secure_stub("statemgr-bound", pb["statemgr_grpc"].StateManagerStub, cert)
            return sm.PushSamples(iter([pb["statemgr"].PushSamplesRequest(
                host=h, samples=[sample], period_seconds=6) for h in (hosts or [host])]),
                timeout=10)

        def register(host, address, cert="client"):
            broker = self.secure_stub("broker-bound", pb["broker_grpc"].BrokerStub, cert)
            return broker.RegisterHost(
                pb["broker"].RegisterHostRequest(host=host, statemgr_address=address), timeout=10)
        # Taken (stored, or a duplicate of what the monitor sent).
        ack = push("client")
        self.assertEqual(ack.persisted_samples + ack.duplicate_samples, 1)
        register("client", "dns:///client:7403")
        names = "is not named in the caller's TLS certificate (it names client)"
        cases = [
            ("push for another host", lambda: push("intruder"), names),
            ("another host in the stream's second message",
             lambda: push(None, hosts=["client", "intruder"]), names),
            ("push in another case", lambda: push("CLIENT"), "matched in lowercase"),
            ("push for localhost", lambda: push("localhost"), "is a loopback name"),
            ("push with a client-only certificate", lambda: push("ops", cert="ops"),
             "the caller's certificate is a client's"),
            ("push for a host this state manager is not", lambda: push("pc02", cert="pc02"),
             "host pc02 is not this state manager's"),
            ("register another host", lambda: register("intruder", "client:7403"), names),
            ("register at an address not named", lambda: register("client", "elsewhere:7403"),
             names),
            ("register at a loopback address", lambda: register("client", "127.0.0.1:7403"),
             "is a loopback name"),
            ("register with a client-only certificate", lambda: register("ops", "ops:7403", "ops"),
             "the caller's certificate is a client's"),
            ("heartbeat for another host", lambda: broker_stub.Heartbeat(
                pb["broker"].HeartbeatRequest(host="intruder"), timeout=10), names),
        ]
        for case, call, message in cases:
            with self.subTest(case=case):
                with self.assertRaises(grpc.RpcError) as ctx:
                    call()
                self.assertEqual(ctx.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
                self.assertIn(message, ctx.exception.details())
        broker_stub.Heartbeat(pb["broker"].HeartbeatRequest(host="client"), timeout=10)
        # The broker refuses the flag without mutual TLS, as the state manager does.
        out = subprocess.run([os.path.join(CLUSTER.bin_dir, "broker"), "--listen=127.0.0.1:0",
                              "--metrics_listen=", "--tls_bind_hosts"],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("--tls_bind_hosts needs mutual TLS", out.stderr)

    def test_replay_over_tls(self):
        host, rows = "tls-replayed-host", 50
        last = int(time.time()) - 300
        path = os.path.join(WORKDIR, "replay-trace.csv")
        with open(path, "w") as f:
            f.write("host,timestamp,cpu_load,free_mem_mb\n")
            for i in range(rows):
                f.write(f"{host},{last - (rows - 1 - i) * 300},0.1,4000\n")
        replay = [os.path.join(CLUSTER.bin_dir, "sojourn-replay"), f"--trace={path}",
                  f"--statemgr={CLUSTER.services['statemgr'].address}", "--follow=false",
                  "--shift=false", "--connect_timeout_seconds=5"]
        run = subprocess.run(replay + CERTS.flags("client"), capture_output=True, text=True,
                             timeout=120)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        statemgr = self.secure_stub("statemgr", client_test.pb["statemgr_grpc"].StateManagerStub)
        listed = {h.host: h for h in statemgr.ListHosts(
            client_test.pb["statemgr"].ListHostsRequest(), timeout=10).hosts}
        self.assertEqual(listed[host].sample_count, rows)
        # Without TLS it cannot connect (exit 1), and a bad file is a usage error (exit 2).
        run = subprocess.run(replay, capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
        run = subprocess.run(replay + [f"--tls_ca={path}"], capture_output=True, text=True,
                             timeout=120)
        self.assertEqual(run.returncode, 2, run.stdout + run.stderr)
        self.assertIn("--tls_ca: no PEM certificate in", run.stderr)

    def test_metrics_export_the_certificate_expiry(self):
        from cryptography import x509
        cert = x509.load_pem_x509_certificate(CERTS.read("localhost.pem"))
        ca = x509.load_pem_x509_certificate(CERTS.read("ca.pem"))
        epoch = datetime.datetime(1970, 1, 1)
        for name in ("statemgr", "predictor", "broker", "monitor"):
            with self.subTest(service=name):
                port = CLUSTER.services[name].metrics_port
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                    text = r.read().decode()
                for file, c in (("cert", cert), ("ca", ca)):
                    m = re.search(r'^sojourn_tls_certificate_expiry_timestamp_seconds\{[^}]*'
                                  rf'file="{file}"[^}}]*\}} (\S+)$', text, re.M)
                    self.assertIsNotNone(m, f"no {file} expiry in /metrics")
                    self.assertEqual(float(m.group(1)),
                                     (c.not_valid_after - epoch).total_seconds())


def main():
    global CERTS, ROGUE, WORKDIR
    args = sojourn_cluster.parse_suite_args(__doc__)

    def setup(cluster, workdir):
        global CLUSTER, CERTS, ROGUE, WORKDIR
        CLUSTER, WORKDIR = cluster, workdir
        CERTS = sojourn_cluster.TlsFiles(os.path.join(workdir, "certs"),
                                         ["localhost", "client", "pc02"], ["ops"])
        ROGUE = sojourn_cluster.TlsFiles(os.path.join(workdir, "rogue"), ["localhost"])
        client_test.load_stubs(os.path.join(workdir, "stubs"))
        cluster.common_args = CERTS.flags()
        cluster.start_all(monitor_host=MONITOR_HOST)

    return sojourn_cluster.run_suite_with_cluster(
        args.bin_dir, "sojourn-tls-", args.keep, setup,
        lambda: unittest.TestLoader().loadTestsFromTestCase(TlsClusterTest))


if __name__ == "__main__":
    sys.exit(main())
