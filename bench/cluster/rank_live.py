#!/usr/bin/python3
"""RankHosts on a live cluster: how often the broker's cache holds, per broker binary.

In a deployment every host's monitor sends a sample every few seconds (6 s by
default) and its state manager registers the host with the broker every 10 s,
so every registration reports a newer last sample. This bench runs that: one
statemgr is loaded with a trace (sojourn-replay, history up to now, as in
rank_statemgrs.py) and registers its hosts with the broker every 10 s
(`--heartbeat_seconds`). For each round and each broker binary in turn (a
baseline measured in the same run), a fresh predictor and broker (default
`--cache_ttl_seconds`, 60) are started on the broker port the statemgr
reports to (plus any `--broker-flag`), and for `--seconds`: every `--push-every` seconds (6, the
monitor's default period) each host gets a
sample stamped now whose load and free memory are the host's own a week
before (a monitor's samples of a host that behaves as it did: the trace's
5-minute values, sampled more often; `--load-noise SD` adds Gaussian noise to
each, as a monitor's few-second samples are noisier than 5-minute means; the
state grid keeps the trace's 300 s step), while RankHosts (2 h, half a CPU) starts
every `--rank-every` seconds (at once when the last one took longer), as
middleware placing jobs would call it; the rankings start once every host has
been registered with a live sample. Prints JSON: per run, every ranking's
wall time; over all but the first (cold) one, their median, 90th percentile,
maximum and mean, the share of the hosts' predictions the broker took from its cache
(without waiting), how many it fetched per minute (TR curves computed by the
predictor, for the rankings or in the background) and how many of those were
refreshes ahead of an entry's expiry (in the background);
per binary, the medians of the runs and the ratios to the first binary's.

  tools/eval/gwa_replicate.py ../shared/data/bitbrains-rnd-vm-load/bitbrains-rnd-100vms-2013Q3.tar.xz /tmp/bb1000 10
  bench/cluster/rank_live.py --trace /tmp/bb1000 --brokers OLD_BROKER,build/bin/broker --rounds 2

Exit 2 with a one-line reason on bad arguments, 1 when a service, the replay or a push
fails, a ranking leaves out a host or a run's cached share is below --min-cached-share. Uses Debian's python3-grpcio.
"""

import argparse
import bisect
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO_DIR, "tests", "python"))
import sojourn_cluster  # noqa: E402

WEEK = 7 * 86400


def die(msg):
    sys.stderr.write(f"rank_live.py: {msg}\n")
    sys.exit(2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", required=True, help="any sojourn-replay format")
    parser.add_argument("--bin-dir", default=os.path.join(REPO_DIR, "build", "bin"))
    parser.add_argument("--brokers", default="",
                        help="comma-separated broker binaries (default: BIN_DIR/broker)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=150,
                        help="live time per run (default 150)")
    parser.add_argument("--push-every", type=float, default=6,
                        help="seconds between two samples of a host (default 6, the monitor's "
                        "--period_seconds)")
    parser.add_argument("--rank-every", type=float, default=2,
                        help="seconds between the starts of two rankings (default 2)")
    parser.add_argument("--load-noise", type=float, default=0,
                        help="standard deviation of Gaussian noise added to each pushed load "
                        "(clamped to [0, 1]; default 0)")
    parser.add_argument("--broker-flag", action="append", default=[], metavar="FLAG",
                        help="a flag passed to every broker binary, e.g. "
                        "--broker-flag=--cache_ttl_seconds=600 (repeatable)")
    parser.add_argument("--min-cached-share", type=float, default=0,
                        help="exit 1 when a run's cached share is below this (a check for tests)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    try:
        return run(args)
    except RuntimeError as e:
        sys.stderr.write(f"rank_live.py: {e}\n")
        return 1


def run(args):
    if not os.path.exists(args.trace):
        die(f"--trace {args.trace}: no such file or directory")
    brokers = [b for b in args.brokers.split(",") if b] or [os.path.join(args.bin_dir, "broker")]
    for b in brokers:
        if not os.access(b, os.X_OK):
            die(f"--brokers: {b} is not an executable")
    if (args.rounds < 1 or not args.seconds >= 10 or not 1 <= args.push_every <= 300 or
            not 0 <= args.rank_every <= 60 or not 0 <= args.load_noise <= 1):
        die("--rounds must be >= 1, --seconds >= 10, --push-every in [1, 300], --rank-every "
            "in [0, 60] and --load-noise in [0, 1]")
    for f in args.broker_flag:
        if not f.startswith("--") or f.split("=")[0] in ("--predictor", "--listen"):
            die(f"--broker-flag {f}: must be a broker flag (--NAME[=VALUE]) other than "
                "--predictor and --listen, which the bench sets")

    import grpc
    workdir = tempfile.mkdtemp(prefix="sojourn-livebench-")
    sojourn_cluster.generate_sojourn_stubs(REPO_DIR, os.path.join(workdir, "stubs"))
    from sojourn.v1 import (broker_pb2, broker_pb2_grpc, common_pb2, statemgr_pb2,
                            statemgr_pb2_grpc)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        broker_port = s.getsockname()[1]
    base = sojourn_cluster.Cluster(args.bin_dir, workdir, start_timeout_seconds=60)
    runs = []
    try:
        statemgr = base.start("statemgr", "statemgr", [
            f"--db_path={os.path.join(workdir, 'statemgr-db')}",
            f"--broker=127.0.0.1:{broker_port}", "--heartbeat_seconds=10"])
        replay_log = os.path.join(workdir, "replay.log")
        print("loading the trace ...", file=sys.stderr)
        with open(replay_log, "wb") as log:
            code = subprocess.call(
                sojourn_cluster.DIE_WITH_PARENT + [
                    base.binary("sojourn-replay"), f"--trace={args.trace}",
                    f"--statemgr={statemgr.address}", "--follow=false"],
                stdout=log, stderr=subprocess.STDOUT)
        if code != 0:
            with open(replay_log) as f:
                raise RuntimeError(f"sojourn-replay exited with code {code}:\n{f.read()[-2000:]}")
        channel = grpc.insecure_channel(statemgr.address,
                                        options=[("grpc.max_receive_message_length", 64 << 20)])
        sm = statemgr_pb2_grpc.StateManagerStub(channel)
        hosts = sorted(h.host for h in sm.ListHosts(statemgr_pb2.ListHostsRequest(),
                                                    timeout=120).hosts)
        # Each host's samples of a week before the live time, to repeat.
        total = args.rounds * len(brokers) * (args.seconds + 60) + 600
        start = int(time.time())
        week_ago = {}
        for h in hosts:
            r = sm.GetSeries(statemgr_pb2.GetSeriesRequest(
                host=h, start_unix_seconds=start - WEEK - 3600,
                end_unix_seconds=start - WEEK + int(total)), timeout=60)
            week_ago[h] = ([s.unix_seconds for s in r.samples], list(r.samples))
        print(f"{len(hosts)} hosts loaded", file=sys.stderr)

        for rnd in range(args.rounds):
            for k, binary in enumerate(brokers):
                rundir = os.path.join(workdir, f"round{rnd}-broker{k}")
                os.makedirs(rundir)
                cluster = sojourn_cluster.Cluster(args.bin_dir, rundir)
                stop = threading.Event()
                pusher = None
                try:
                    predictor = cluster.start("predictor", "predictor", [
                        f"--broker=127.0.0.1:{broker_port}", "--histdb_path="])
                    cluster.start("broker", os.path.abspath(binary), [
                        f"--predictor={predictor.address}", f"--listen=127.0.0.1:{broker_port}"]
                        + args.broker_flag)
                    broker = broker_pb2_grpc.BrokerStub(grpc.insecure_channel(
                        f"127.0.0.1:{broker_port}",
                        options=[("grpc.max_receive_message_length", 64 << 20)]))
                    pushed = {"samples": 0, "errors": 0, "hosts": set()}
                    first_push = int(time.time())
                    pusher = threading.Thread(target=push_loop, args=(
                        sm, statemgr_pb2, common_pb2, hosts, week_ago, args.push_every,
                        args.load_noise, random.Random(rnd), stop, pushed))
                    pusher.start()

                    # Hosts without samples a week before (a gap in the trace) get none
                    # now either: they go silent, as such a host would.
                    def all_registered_live():
                        listed = broker.ListHosts(broker_pb2.BrokerListHostsRequest(), timeout=30)
                        live = {h.host for h in listed.hosts
                                if h.live and h.last_sample_unix_seconds >= first_push}
                        return (len(listed.hosts) == len(hosts) and pushed["hosts"] and
                                pushed["hosts"] <= live)
                    sojourn_cluster.wait_until(all_registered_live, 120,
                                               "every host registered with a live sample",
                                               interval_seconds=0.5)
                    times, cached, fetched, refreshing = [], 0, 0, 0
                    began = time.monotonic()
                    deadline = began + args.seconds
                    next_start = began
                    while time.monotonic() < deadline:
                        time.sleep(max(0.0, next_start - time.monotonic()))
                        t = time.monotonic()
                        next_start = t + args.rank_every
                        r = broker.RankHosts(broker_pb2.RankHostsRequest(
                            job=broker_pb2.JobRequirements(duration_seconds=7200,
                                                           cpu_share_ratio=0.5)), timeout=900)
                        times.append(time.monotonic() - t)
                        if len(times) > 1:
                            cached += r.predictions_cached
                            fetched += r.predictions_fetched
                            refreshing += r.predictions_refreshing
                        if len(r.hosts) != len(hosts):
                            raise RuntimeError(f"ranked {len(r.hosts)} of {len(hosts)} hosts")
                    minutes = (time.monotonic() - began) / 60
                    if len(times) < 11:
                        raise RuntimeError(f"{len(times)} rankings in {args.seconds} s: raise "
                                           "--seconds")
                    warm = sorted(times[1:])
                    run = {"round": rnd, "broker": binary, "hosts": len(hosts),
                           "rankings": len(times), "times_s": [round(t, 3) for t in times],
                           "median_warm_s": round(statistics.median(warm), 4),
                           "p90_warm_s": round(warm[int(0.9 * (len(warm) - 1))], 4),
                           "max_warm_s": round(warm[-1], 4),
                           "mean_warm_s": round(statistics.mean(warm), 4),
                           "cached_share": round(cached / max(1, cached + fetched), 4),
                           "fetched_per_minute": round((fetched + refreshing) / minutes, 1),
                           "refreshed_ahead_per_minute": round(refreshing / minutes, 1),
                           "samples_pushed": pushed["samples"],
                           "hosts_pushed": len(pushed["hosts"]),
                           "push_errors": pushed["errors"]}
                    runs.append(run)
                    print(json.dumps(run), file=sys.stderr)
                    if pushed["errors"] or not pushed["samples"]:
                        raise RuntimeError(f"{pushed['errors']} failed pushes, "
                                           f"{pushed['samples']} samples stored")
                    if run["cached_share"] < args.min_cached_share:
                        raise RuntimeError(f"{binary}: cached share {run['cached_share']} below "
                                           f"--min-cached-share {args.min_cached_share}")
                finally:
                    stop.set()
                    if pusher is not None:
                        pusher.join()
                    cluster.stop()
    finally:
        base.stop()
        if not args.keep:
            subprocess.run(["rm", "-rf", workdir])
    keys = ("median_warm_s", "p90_warm_s", "max_warm_s", "mean_warm_s", "cached_share",
            "fetched_per_minute")
    out = {"trace": args.trace, "push_every_s": args.push_every, "rank_every_s": args.rank_every,
           "load_noise": args.load_noise, "seconds": args.seconds, "runs": runs}
    for key in keys:
        out[key] = {b: statistics.median(r[key] for r in runs if r["broker"] == b)
                    for b in brokers}
    out["ratio_to_first"] = {
        key: {b: round(v / out[key][brokers[0]], 4) if out[key][brokers[0]] else None
              for b, v in out[key].items()}
        for key in ("median_warm_s", "p90_warm_s", "max_warm_s", "mean_warm_s",
                    "fetched_per_minute")}
    print(json.dumps(out, indent=1))
    return 0


def push_loop(sm, statemgr_pb2, common_pb2, hosts, week_ago, every, noise, rng, stop, pushed):
    """Every `every` seconds, one sample per host stamped now: its load a week before."""
    while not stop.is_set():
        tick = time.monotonic()
        now = int(time.time())

        def requests():
            for h in hosts:
                times, samples = week_ago[h]
                i = bisect.bisect_right(times, now - WEEK) - 1
                if i < 0:
                    continue
                s = samples[i]
                load = s.cpu_load_ratio
                if noise > 0:
                    load = min(1.0, max(0.0, load + rng.gauss(0, noise)))
                sample = common_pb2.HostSample(unix_seconds=now, cpu_load_ratio=load)
                if s.HasField("free_mem_mb"):
                    sample.free_mem_mb = s.free_mem_mb
                pushed["hosts"].add(h)
                yield statemgr_pb2.PushSamplesRequest(host=h, samples=[sample])
        try:
            r = sm.PushSamples(requests(), timeout=60)
            pushed["samples"] += r.persisted_samples
        except Exception as e:  # counted and reported; the bench goes on
            pushed["errors"] += 1
            print(f"push: {e}", file=sys.stderr)
        stop.wait(max(0.0, every - (time.monotonic() - tick)))


if __name__ == "__main__":
    sys.exit(main())
