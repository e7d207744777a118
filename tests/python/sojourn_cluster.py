"""Starts a sojourn cluster (the real service binaries) on loopback for tests.

Shared by tests/python/grpc_client_test.py, tests/ops/ and bench/cluster/; TlsFiles
makes the TLS files of a test or bench.
Runs with Debian's interpreter (/usr/bin/python3): python3-grpcio,
python3-grpc-tools and python3-protobuf.

  cluster = Cluster(bin_dir, workdir)
  try:
      addrs = cluster.start_all(monitor_host="this-host")
      ...                     # addrs["broker"] == "127.0.0.1:N"
  finally:
      cluster.stop()          # SIGTERM, then SIGKILL after a grace period

Every service listens on 127.0.0.1 port 0 (gRPC and /metrics) and writes the
bound ports to a --port_file, which is read back with bounded polling. The
children get PR_SET_PDEATHSIG=SIGKILL, so they die with the test even when
the test itself is killed (e.g. by a ctest timeout).
"""

import argparse
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

_REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Put before a child's command line: it gets SIGKILL when the thread that
# started it (the test) dies. util-linux's setpriv (Essential in Debian) sets
# it and execs the command, where a preexec_fn would run Python between fork
# and exec, which can deadlock in a process with threads (grpcio's): a child
# that never reached exec hung a test for its whole timeout with an empty log.
DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "KILL", "--"]


def wait_until(predicate, timeout_seconds, what, interval_seconds=0.05):
    """Polls `predicate` until it returns a truthy value, at most `timeout_seconds`.

    Returns the value. Raises TimeoutError naming `what` (and the last
    exception the predicate raised, if any) when the time is up.
    """
    deadline = time.monotonic() + timeout_seconds
    last_error = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # the predicate may fail until the condition holds
            last_error = e
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise TimeoutError(f"timed out after {timeout_seconds}s waiting for {what}{detail}")
        time.sleep(interval_seconds)


def protoc_command():
    """The protoc invocation that generates Python and gRPC Python code.

    Debian 12's python3-grpc-tools (1.14, bundling protoc 3.5) rejects proto3
    `optional` fields, which the sojourn contracts use, so the system protoc
    (protobuf-compiler, 3.21) with grpc's Python plugin (protobuf-compiler-grpc)
    comes first. SOJOURN_PROTOC / SOJOURN_GRPC_PYTHON_PLUGIN override the paths.
    grpc_tools.protoc is the fallback where those are missing.
    """
    protoc = os.environ.get("SOJOURN_PROTOC") or shutil.which("protoc")
    plugin = (os.environ.get("SOJOURN_GRPC_PYTHON_PLUGIN") or shutil.which("grpc_python_plugin"))
    if protoc and plugin:
        return [protoc, f"--plugin=protoc-gen-grpc_python={plugin}"]
    return [sys.executable, "-m", "grpc_tools.protoc"]


def generate_stubs(out_dir, proto_dirs, proto_files):
    """Generates Python messages and gRPC stubs for `proto_files` into `out_dir`.

    proto_files are paths relative to one of `proto_dirs`. Adds out_dir to
    sys.path.
    """
    os.makedirs(out_dir, exist_ok=True)
    cmd = protoc_command()
    cmd += [f"-I{d}" for d in proto_dirs]
    cmd += [f"--python_out={out_dir}", f"--grpc_python_out={out_dir}"]
    cmd += proto_files
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"protoc failed ({' '.join(cmd)}):\n{result.stderr}")
    if out_dir not in sys.path:
        sys.path.insert(0, out_dir)


def generate_sojourn_stubs(repo_dir, out_dir):
    """Stubs of proto/sojourn/v1/*.proto and of grpc.health.v1 into out_dir.

    health.proto is compiled from its own directory, so its module is the
    top-level `health_pb2` (a `grpc.health` package would collide with grpcio's
    `grpc` package); the proto package, and so the RPC names, stay
    grpc.health.v1.
    """
    proto_root = os.path.join(repo_dir, "proto")
    files = sorted(os.path.relpath(p, proto_root)
                   for p in glob.glob(os.path.join(proto_root, "sojourn", "v1", "*.proto")))
    if not files:
        raise RuntimeError(f"no .proto files under {proto_root}/sojourn/v1")
    generate_stubs(out_dir, [proto_root], files)
    health_dir = os.path.join(repo_dir, "tests", "python", "protos", "grpc", "health", "v1")
    generate_stubs(out_dir, [health_dir], ["health.proto"])


class Service:
    """One child process."""

    def __init__(self, name, popen, log_path, grpc_port, metrics_port):
        self.name = name
        self.popen = popen
        self.log_path = log_path
        self.grpc_port = grpc_port
        self.metrics_port = metrics_port
        self.exit_code = None

    @property
    def address(self):
        return f"127.0.0.1:{self.grpc_port}"

    def alive(self):
        return self.popen.poll() is None

    def metrics_text(self):
        """The service's /metrics page, as text."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read().decode()

    def metric(self, name, labels=""):
        """The value of the series `name{..., labels}` on /metrics (None when absent).

        Every sojourn series carries a service label, so the series is matched
        with its braces; `labels` is a part of them, e.g. 'state="running"'.
        """
        m = re.search(r"^%s\{[^}]*%s\} (\S+)$" % (re.escape(name), re.escape(labels)),
                      self.metrics_text(), re.M)
        return None if m is None else float(m.group(1))


class Cluster:
    """The four services of one test, their logs and data under `workdir`."""

    def __init__(self, bin_dir, workdir, start_timeout_seconds=20):
        self.bin_dir = bin_dir
        self.workdir = workdir
        self.start_timeout_seconds = start_timeout_seconds
        self.services = {}  # name -> Service, in start order
        # Appended to every service's command line (e.g. the TLS flags of tests/ops/tls_test.py).
        self.common_args = []

    def binary(self, program):
        path = os.path.join(self.bin_dir, program)
        if not os.access(path, os.X_OK):
            raise FileNotFoundError(f"{path} is not an executable (build the target '{program}')")
        return path

    def start(self, name, program, args, prefix=(), common=True):
        """Starts `program` with `args` plus loopback port-0 listen flags.

        `prefix` goes before the program (e.g. ["prlimit", "--nofile=64:600", "--"]);
        `common` appends self.common_args.
        Returns the Service once its port file is written (bounded wait).
        """
        port_file = os.path.join(self.workdir, f"{name}.ports")
        log_path = os.path.join(self.workdir, f"{name}.log")
        argv = DIE_WITH_PARENT + list(prefix) + [self.binary(program),
                "--listen=127.0.0.1:0",
                "--metrics_listen=127.0.0.1:0",
                f"--port_file={port_file}"] + (list(self.common_args) if common else []) + list(args)
        log = open(log_path, "wb")
        try:
            popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL,
                                     cwd=self.workdir)
        finally:
            log.close()
        service = Service(name, popen, log_path, 0, 0)
        self.services[name] = service

        def ports_written():
            if popen.poll() is not None:
                raise RuntimeError(f"{name} exited with code {popen.returncode} before binding; "
                                   f"log:\n{self.log_tail(name)}")
            if not os.path.exists(port_file):
                return None
            values = {}
            with open(port_file) as f:
                for line in f:
                    key, _, value = line.strip().partition("=")
                    if key:
                        values[key] = int(value)
            return values

        try:
            ports = wait_until(ports_written, self.start_timeout_seconds, f"{name}'s port file")
        except RuntimeError as e:
            raise RuntimeError(str(e)) from None
        service.grpc_port = ports["grpc_port"]
        service.metrics_port = ports["metrics_port"]
        return service

    def start_all(self, monitor_host, monitor_period_seconds=1, heartbeat_seconds=1,
                  statemgr_args=()):
        """Starts predictor, broker, statemgr and monitor, wired together.

        `statemgr_args` are added to the statemgr's command line.

        Order: the broker needs the predictor's address and the predictor
        would need the broker's; both bind port 0, so the predictor runs
        without --broker (the broker passes each host's statemgr_address in
        its PredictAvailability calls). Returns {name: "127.0.0.1:port"}.
        """
        predictor = self.start("predictor", "predictor", ["--broker="])
        broker = self.start("broker", "broker", [f"--predictor={predictor.address}"])
        statemgr = self.start("statemgr", "statemgr", [
            f"--db_path={os.path.join(self.workdir, 'statemgr-db')}",
            f"--broker={broker.address}",
            f"--heartbeat_seconds={heartbeat_seconds}",
            *statemgr_args,
        ])
        monitor = self.start("monitor", "monitor", [
            f"--statemgr={statemgr.address}",
            f"--host={monitor_host}",
            f"--period_seconds={monitor_period_seconds}",
        ])
        return {s.name: s.address for s in (predictor, broker, statemgr, monitor)}

    def log_tail(self, name, lines=30):
        try:
            with open(self.services[name].log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError as e:
            return f"(no log: {e})"

    def dump_logs(self, stream=sys.stderr, lines=30):
        for name in self.services:
            print(f"----- {name} log (last {lines} lines) -----", file=stream)
            print(self.log_tail(name, lines), file=stream)

    def stop(self, grace_seconds=10):
        """SIGTERM to every live child (last started first), SIGKILL after the grace.

        Returns {name: exit code}; a child killed by a signal has a negative code.
        """
        for s in reversed(list(self.services.values())):
            if s.alive():
                s.popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        for s in self.services.values():
            try:
                s.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                s.popen.kill()
                s.popen.wait()
            if s.exit_code is None:
                s.exit_code = s.popen.returncode
        return {name: s.exit_code for name, s in self.services.items()}


class TlsFiles:
    """TLS files for a test or a bench (common/tls.h; deploy/README.md "TLS").

    scripts/make-certs makes a CA in `directory` (or reuses the one there) and
    a certificate and key for each of `names` (good for services and clients;
    they name localhost too) and of `client_names` (make-certs --client).
    sign() adds certificates make-certs cannot make (any validity, any names).
    """

    def __init__(self, directory, names=(), client_names=()):
        self.dir = directory
        make = os.path.join(_REPO_DIR, "scripts", "make-certs")
        if names:
            subprocess.run([make, directory, *names], check=True, capture_output=True)
        if client_names:
            subprocess.run([make, "--client", directory, *client_names], check=True,
                           capture_output=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()

    def flags(self, name="localhost"):
        """A service's (or sojourn-replay's) flags presenting NAME's certificate."""
        return [f"--tls_cert={self.path(name + '.pem')}", f"--tls_key={self.path(name + '.key')}",
                f"--tls_ca={self.path('ca.pem')}"]

    def cli_flags(self, name="client"):
        """The sojourn CLI's (and the middleware example's) options for NAME's certificate."""
        return ["--tls-ca", self.path("ca.pem"), "--tls-cert", self.path(name + ".pem"),
                "--tls-key", self.path(name + ".key")]

    def credentials(self, name=None):
        """grpcio channel credentials trusting this CA, presenting NAME's certificate if given."""
        import grpc
        return grpc.ssl_channel_credentials(
            self.read("ca.pem"), self.read(name + ".key") if name else None,
            self.read(name + ".pem") if name else None)

    def channel(self, address, name="client", options=None):
        import grpc
        return grpc.secure_channel(address, self.credentials(name), options=options)

    def sign(self, name, sans, not_before, not_after):
        """NAME.pem and NAME.key: a certificate signed by this CA for `sans` (DNS names or IP
        addresses), valid from `not_before` to `not_after` (aware datetimes)."""
        import ipaddress
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        def general_name(s):
            try:
                return x509.IPAddress(ipaddress.ip_address(s))
            except ValueError:
                return x509.DNSName(s)
        ca_key = serialization.load_pem_private_key(self.read("ca.key"), None)
        ca = x509.load_pem_x509_certificate(self.read("ca.pem"))
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                .issuer_name(ca.subject)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(not_before)
                .not_valid_after(not_after)
                .add_extension(x509.SubjectAlternativeName([general_name(s) for s in sans]),
                               False)
                .sign(ca_key, hashes.SHA256()))
        with open(self.path(name + ".pem"), "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM))
        with open(self.path(name + ".key"), "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))


def parse_suite_args(doc, add_arguments=None):
    """The command line of a suite run with run_suite_with_cluster.

    --bin-dir (default $SOJOURN_BIN_DIR, else build/bin; made absolute, as the
    services run in the work directory) and --keep, plus what
    add_arguments(parser) adds. `doc` is the test's __doc__ (its first line is
    the description).
    """
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--bin-dir", default=os.environ.get(
        "SOJOURN_BIN_DIR", os.path.join(_REPO_DIR, "build", "bin")),
        help="directory holding the services' binaries")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args()
    args.bin_dir = os.path.abspath(args.bin_dir)
    return args


def run_suite_with_cluster(bin_dir, prefix, keep, setup, make_suite, on_failure=None,
                           teardown=None):
    """Runs a unittest suite against a Cluster in a fresh work directory.

    setup(cluster, workdir) starts what the suite needs (an exception is a
    failed setup); make_suite() builds the suite after it. On a failed test or
    setup the services' logs (and on_failure()) go to stderr. teardown() and
    cluster.stop() always run, and the work directory is removed unless `keep`.
    SIGTERM (e.g. a ctest timeout) unwinds through the same cleanup; SIGKILL
    leaves the work dir, but the children still die (PR_SET_PDEATHSIG).
    Prints "P passed, F failed" and returns the exit code.
    """
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    workdir = tempfile.mkdtemp(prefix=prefix)
    cluster = Cluster(bin_dir, workdir)
    passed = failed = 0
    try:
        try:
            setup(cluster, workdir)
        except Exception as e:
            print(f"setup failed: {e}", file=sys.stderr)
            cluster.dump_logs()
            print("0 passed, 1 failed")
            return 1
        result = unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(make_suite())
        failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
        passed = result.testsRun - failed - len(result.skipped)
        if failed:
            cluster.dump_logs()
            if on_failure is not None:
                on_failure()
    finally:
        if teardown is not None:
            teardown()
        cluster.stop()
        if keep:
            print(f"work dir kept: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1
