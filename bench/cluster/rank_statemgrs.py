#!/usr/bin/python3
"""RankHosts over many state managers: how long a warm ranking takes, per predictor binary.

A deployment runs one state manager per lab host (deploy/), so the predictor
dials as many state managers as there are hosts. This bench gives each host
its own state manager address without running a thousand state managers: one
statemgr listens on 0.0.0.0 and each host is registered with the broker under
its own loopback address, 127.0.X.Y:PORT (all of 127/8 reaches it on Linux),
so the predictor holds one channel and one connection per host as it would in
a real cluster. `--addresses same` registers every host under 127.0.0.1
instead (one channel in all).

The statemgr is loaded with a trace by sojourn-replay (history first, then in
real time, so the hosts stay live). Then, for each round and each predictor
binary in turn (a baseline measured in the same run), a fresh predictor and
broker (`--cache_ttl_seconds=0`, so every ranking asks the predictor for every
host) are started, the hosts registered, and RankHosts (2 h, half a CPU) run
`--rankings` times; the first ranking also builds the population prior. Prints
JSON: every ranking's wall time, the median of the warm ones (all but the
first) per binary, the predictor's open files and RSS after its rankings, and
the ratio of each binary's median to the first's.

`--tls both` measures what TLS costs (deploy/README.md "TLS"): a second
statemgr, loaded with the same trace, runs with TLS, and each predictor binary
is measured in each round twice, plaintext ("BINARY") and with TLS on every
service and connection ("BINARY+tls"; mutual TLS, certificates of a CA made
for the run, the statemgr's naming every address the hosts are registered
under). The first ranking then includes a TLS handshake per state manager
address.

  tools/eval/gwa_replicate.py ../shared/data/bitbrains-rnd-vm-load/bitbrains-rnd-100vms-2013Q3.tar.xz /tmp/bb1000 10
  bench/cluster/rank_statemgrs.py --trace /tmp/bb1000 --predictors OLD,build/bin/predictor --rounds 2
  bench/cluster/rank_statemgrs.py --trace /tmp/bb1000 --tls both --rounds 2

Exit 2 with a one-line reason on bad arguments, 1 when a service or the replay fails or a
ranking leaves out a host. Uses Debian's python3-grpcio.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO_DIR, "tests", "python"))
import sojourn_cluster  # noqa: E402


def die(msg):
    sys.stderr.write(f"rank_statemgrs.py: {msg}\n")
    sys.exit(2)


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", required=True, help="any sojourn-replay format")
    parser.add_argument("--bin-dir", default=os.path.join(REPO_DIR, "build", "bin"))
    parser.add_argument("--predictors", default="",
                        help="comma-separated predictor binaries (default: BIN_DIR/predictor)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rankings", type=int, default=5)
    parser.add_argument("--addresses", choices=("distinct", "same"), default="distinct")
    parser.add_argument("--tls", choices=("off", "both"), default="off",
                        help="plaintext only, or each binary plaintext and with TLS in turn")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    try:
        return run(args)
    except RuntimeError as e:
        sys.stderr.write(f"rank_statemgrs.py: {e}\n")
        return 1


def run(args):
    if not os.path.exists(args.trace):
        die(f"--trace {args.trace}: no such file or directory")
    predictors = [p for p in args.predictors.split(",") if p] or [
        os.path.join(args.bin_dir, "predictor")]
    for p in predictors:
        if not os.access(p, os.X_OK):
            die(f"--predictors: {p} is not an executable")
    if args.rounds < 1 or args.rankings < 2:
        die("--rounds must be >= 1 and --rankings >= 2")

    import grpc
    workdir = tempfile.mkdtemp(prefix="sojourn-rankbench-")
    sojourn_cluster.generate_sojourn_stubs(REPO_DIR, os.path.join(workdir, "stubs"))
    from sojourn.v1 import broker_pb2, broker_pb2_grpc, statemgr_pb2, statemgr_pb2_grpc

    modes = {"off": [False], "both": [False, True]}[args.tls]
    base = sojourn_cluster.Cluster(args.bin_dir, workdir, start_timeout_seconds=60)
    runs, replays, statemgrs, tls = [], [], {}, None
    try:
        statemgrs[False] = start_loaded_statemgr(base, args.trace, None, replays)
        hosts = sorted(statemgrs[False][1].ListHosts(statemgr_pb2.ListHostsRequest(),
                                                     timeout=120).hosts, key=lambda h: h.host)
        if len(hosts) > 250 * 250:
            die(f"{len(hosts)} hosts: at most 62,500 loopback addresses")
        if args.tls == "both":
            # The TLS statemgr's certificate names the addresses of the hosts it holds.
            tls = make_tls_files(workdir, len(hosts))
            statemgrs[True] = start_loaded_statemgr(base, args.trace, tls, replays)
            listed = statemgrs[True][1].ListHosts(statemgr_pb2.ListHostsRequest(), timeout=120)
            if sorted(h.host for h in listed.hosts) != [h.host for h in hosts]:
                raise RuntimeError("the two statemgrs hold different hosts")

        def address(i, port):
            if args.addresses == "same":
                return f"127.0.0.1:{port}"
            return f"127.0.{i // 250}.{i % 250 + 1}:{port}"

        for rnd in range(args.rounds):
            for k, binary in enumerate(predictors):
                for on in modes:
                    label = binary + ("+tls" if on else "")
                    port, sm = statemgrs[on]
                    rundir = os.path.join(workdir, f"round{rnd}-predictor{k}-tls{int(on)}")
                    os.makedirs(rundir)
                    cluster = sojourn_cluster.Cluster(args.bin_dir, rundir)
                    if on:
                        cluster.common_args = tls.flags("localhost")
                    try:
                        predictor, broker_port = start_predictor_and_broker(cluster, binary)
                        broker = broker_pb2_grpc.BrokerStub(channel(
                            f"127.0.0.1:{broker_port}", tls if on else None))
                        fresh = {h.host: h for h in sm.ListHosts(
                            statemgr_pb2.ListHostsRequest(), timeout=120).hosts}
                        for i, h in enumerate(hosts):
                            broker.RegisterHost(broker_pb2.RegisterHostRequest(
                                host=h.host, statemgr_address=address(i, port),
                                attributes=h.attributes,
                                last_sample_unix_seconds=fresh[h.host].last_sample_unix_seconds),
                                timeout=30)
                        times = []
                        for _ in range(args.rankings):
                            start = time.monotonic()
                            r = broker.RankHosts(broker_pb2.RankHostsRequest(
                                job=broker_pb2.JobRequirements(duration_seconds=7200,
                                                               cpu_share_ratio=0.5)), timeout=900)
                            times.append(time.monotonic() - start)
                        pid = predictor.popen.pid
                        run = {"round": rnd, "predictor": label, "hosts": len(hosts),
                               "ranked": len(r.hosts),
                               "times_s": [round(t, 3) for t in times],
                               "median_warm_s": round(statistics.median(times[1:]), 3),
                               "predictor_open_files": len(os.listdir(f"/proc/{pid}/fd")),
                               "predictor_rss_mb": round(rss_mb(pid), 1)}
                        runs.append(run)
                        print(json.dumps(run), file=sys.stderr)
                        if run["ranked"] != run["hosts"]:
                            raise RuntimeError(f"ranked {run['ranked']} of {run['hosts']} hosts")
                    finally:
                        cluster.stop()
    finally:
        base.stop()
        for replay in replays:
            if replay.poll() is None:
                replay.kill()
                replay.wait()
        if not args.keep:
            subprocess.run(["rm", "-rf", workdir])
    labels = list(dict.fromkeys(r["predictor"] for r in runs))
    medians = {b: statistics.median(r["median_warm_s"] for r in runs if r["predictor"] == b)
               for b in labels}
    firsts = {b: statistics.median(r["times_s"][0] for r in runs if r["predictor"] == b)
              for b in labels}
    print(json.dumps({"addresses": args.addresses, "trace": args.trace, "tls": args.tls,
                      "runs": runs, "median_warm_s": medians, "median_first_s": firsts,
                      "ratio_to_first": {b: round(m / medians[labels[0]], 3)
                                         for b, m in medians.items()},
                      "first_ratio_to_first": {b: round(m / firsts[labels[0]], 3)
                                               for b, m in firsts.items()}}, indent=1))
    return 0


def make_tls_files(workdir, hosts):
    """A CA for the run (scripts/make-certs) with certificates for localhost (the predictor and
    broker), this client, and the statemgr, which names every 127.0.X.Y it is dialled at."""
    import datetime
    tls = sojourn_cluster.TlsFiles(os.path.join(workdir, "certs"), ["localhost", "client"])
    now = datetime.datetime.now(datetime.timezone.utc)
    tls.sign("statemgr", [f"127.0.{i // 250}.{i % 250 + 1}" for i in range(hosts)],
             now - datetime.timedelta(hours=1), now + datetime.timedelta(days=2))
    return tls


def channel(address, tls):
    """A channel for this client: plaintext, or mutual TLS with `tls` (a TlsFiles)."""
    import grpc
    options = [("grpc.max_receive_message_length", 64 << 20)]
    if tls is None:
        return grpc.insecure_channel(address, options=options)
    return tls.channel(address, "client", options=options)


def start_loaded_statemgr(base, trace, tls, replays):
    """A statemgr on 0.0.0.0 (TLS with `tls`), loaded with `trace` by sojourn-replay, which
    goes on in real time (appended to `replays`). Returns (port, stub)."""
    from sojourn.v1 import statemgr_pb2_grpc
    name = "statemgr-tls" if tls else "statemgr"
    statemgr = base.start(name, "statemgr", [
        "--listen=0.0.0.0:0", f"--db_path={os.path.join(base.workdir, name + '-db')}"]
        + (tls.flags("statemgr") if tls else []))
    port = statemgr.grpc_port
    replay_log = os.path.join(base.workdir, name + "-replay.log")
    with open(replay_log, "wb") as log:
        replay = subprocess.Popen(
            sojourn_cluster.DIE_WITH_PARENT +
            [base.binary("sojourn-replay"), f"--trace={trace}", f"--statemgr=127.0.0.1:{port}"]
            + (tls.flags("client") if tls else []), stdout=log, stderr=subprocess.STDOUT)
    replays.append(replay)
    print(f"loading the trace into {name} ...", file=sys.stderr)

    def loaded():
        if replay.poll() is not None:
            return "exited"
        with open(replay_log) as f:
            return "as history" in f.read()
    if sojourn_cluster.wait_until(loaded, 1800, "sojourn-replay to load the history",
                                  interval_seconds=1) == "exited":
        with open(replay_log) as f:
            raise RuntimeError(f"sojourn-replay exited with code {replay.returncode}:\n"
                               f"{f.read()[-2000:]}")
    return port, statemgr_pb2_grpc.StateManagerStub(channel(f"127.0.0.1:{port}", tls))


def start_predictor_and_broker(cluster, binary):
    """A predictor (`binary`) whose --broker is the broker started after it.

    Each needs the other's address, so the broker's port is picked first; a
    port taken meanwhile by another process makes the broker exit, and both
    start again on another port (at most 5 times). Returns (predictor, port).
    """
    import socket
    for attempt in range(5):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        # (An absolute path: os.path.join keeps it as it is.)
        predictor = cluster.start(f"predictor{attempt}", os.path.abspath(binary), [
            f"--broker=127.0.0.1:{port}", "--histdb_path="])
        try:
            cluster.start(f"broker{attempt}", "broker", [
                f"--predictor={predictor.address}", "--heartbeat_ttl_seconds=86400",
                "--cache_ttl_seconds=0", f"--listen=127.0.0.1:{port}"])
            return predictor, port
        except RuntimeError as e:
            print(f"broker on port {port}: {e}; trying another port", file=sys.stderr)
            predictor.popen.terminate()
            predictor.popen.wait()
    raise RuntimeError("no free port for the broker in 5 attempts")


if __name__ == "__main__":
    sys.exit(main())
