#!/usr/bin/python3
"""What grid middleware does with sojourn, in one page of Python (grpcio).

Builds Python stubs from proto/ into a temporary directory (with Debian 12's
protoc and grpc_python_plugin, packages protobuf-compiler and
protobuf-compiler-grpc: its python3-grpc-tools bundles a protoc too old for
proto3 `optional`), then, against a running cluster (`scripts/up`, or the
addresses given), with python3-grpcio:

  1. ranks the registered hosts for a job (broker RankHosts) and prints the
     figures behind the first places and why the others cannot take it;
  2. asks the predictor for the temporal reliability of the best host over
     the job's duration (PredictAvailability: TR, MTTF, a few curve points),
     passing the host's state manager as the broker registered it;
  3. asks when a parallel job would end on a cluster of idle nodes
     (EstimateTurnaround: the historical, simulation and hybrid kernels);
  4. uses the broker's job queue as middleware placing a guest job would:
     queues a 1-host job (SubmitJob), asks when it would end on the hosts and
     queue the broker knows (EstimateJobTurnaround), starts it on the best
     host (StartJob), then cancels it (FinishJob with cancelled), so the
     example leaves neither a queued job nor a job record behind. A real
     job would be reported finished instead, teaching the job history.

Errors come back as gRPC status codes with a message: INVALID_ARGUMENT or
FAILED_PRECONDITION for a request sojourn refuses, NOT_FOUND for an unknown
host, UNAVAILABLE when a service cannot be reached. This client prints them
and exits 1.

With TLS on (deploy/README.md "TLS"), give the lab CA and this client's
certificate and key: --tls-ca, --tls-cert, --tls-key (or SOJOURN_TLS_CA,
SOJOURN_TLS_CERT, SOJOURN_TLS_KEY, as for the sojourn CLI).

usage: examples/python/middleware_client.py [--broker ADDR] [--predictor ADDR]
           [--duration-hours H] [--procs N] [--nodes N] [--user U]
           [--tls-ca CA.pem [--tls-cert CERT.pem --tls-key KEY.pem]]
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_stubs(out_dir):
    """Compiles proto/sojourn/v1/*.proto to Python modules in out_dir and imports them."""
    proto_root = os.path.join(REPO, "proto")
    files = sorted(glob.glob(os.path.join(proto_root, "sojourn", "v1", "*.proto")))
    protoc, plugin = shutil.which("protoc"), shutil.which("grpc_python_plugin")
    if not protoc or not plugin:
        sys.exit("middleware_client: needs protoc and grpc_python_plugin "
                 "(apt-get install protobuf-compiler protobuf-compiler-grpc)")
    subprocess.run([protoc, f"--plugin=protoc-gen-grpc_python={plugin}", f"-I{proto_root}",
                    f"--python_out={out_dir}", f"--grpc_python_out={out_dir}"] + files,
                   check=True)
    sys.path.insert(0, out_dir)
    import importlib
    return {name: importlib.import_module(f"sojourn.v1.{name}")
            for name in ("broker_pb2", "broker_pb2_grpc", "predictor_pb2", "predictor_pb2_grpc",
                         "turnaround_pb2")}


def channel(grpc, address, a):
    """A plaintext channel, or with --tls-ca one over TLS (a client certificate if given)."""
    if not a.tls_ca:
        return grpc.insecure_channel(address)

    def read(path):
        with open(path, "rb") as f:
            return f.read()
    return grpc.secure_channel(address, grpc.ssl_channel_credentials(
        read(a.tls_ca), read(a.tls_key) if a.tls_key else None,
        read(a.tls_cert) if a.tls_cert else None))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", default=os.environ.get("SOJOURN_BROKER", "127.0.0.1:7401"))
    ap.add_argument("--predictor", default=os.environ.get("SOJOURN_PREDICTOR", "127.0.0.1:7402"))
    ap.add_argument("--duration-hours", type=float, default=2.0, help="the job's run time")
    ap.add_argument("--procs", type=int, default=4, help="turnaround: processors the job needs")
    ap.add_argument("--nodes", type=int, default=16, help="turnaround: idle nodes of the cluster")
    ap.add_argument("--user", type=int, default=34, help="turnaround: the job's user id")
    ap.add_argument("--tls-ca", default=os.environ.get("SOJOURN_TLS_CA"),
                    help="TLS: the CA (PEM) that signed the services' certificates")
    ap.add_argument("--tls-cert", default=os.environ.get("SOJOURN_TLS_CERT"),
                    help="TLS: this client's certificate (PEM), for services that require one")
    ap.add_argument("--tls-key", default=os.environ.get("SOJOURN_TLS_KEY"),
                    help="TLS: the key (PEM) of --tls-cert")
    a = ap.parse_args()
    if (a.tls_cert or a.tls_key) and not (a.tls_ca and a.tls_cert and a.tls_key):
        ap.error("--tls-cert and --tls-key go together, and need --tls-ca")

    import grpc
    with tempfile.TemporaryDirectory() as tmp:
        pb = load_stubs(tmp)
        broker = pb["broker_pb2_grpc"].BrokerStub(channel(grpc, a.broker, a))
        predictor = pb["predictor_pb2_grpc"].PredictorStub(channel(grpc, a.predictor, a))
        duration = int(a.duration_hours * 3600)
        try:
            # 1. Rank every host for the job: eligible hosts first, best first.
            ranking = broker.RankHosts(pb["broker_pb2"].RankHostsRequest(
                job=pb["broker_pb2"].JobRequirements(duration_seconds=duration,
                                                     cpu_share_ratio=1.0),
                policy="proactive"), timeout=30)
            eligible = [h for h in ranking.hosts if h.eligible]
            print(f"{len(eligible)} of {len(ranking.hosts)} hosts can run a "
                  f"{a.duration_hours:g} h job (policy {ranking.policy})")
            for h in ranking.hosts[:3]:
                print(f"  {h.rank:>2} {h.host:<24} TR {h.tr_ratio:.4f}  {h.reason}")
            for h in ranking.hosts:
                if not h.eligible:
                    print(f"   - {h.host:<24} cannot: {h.reason}")
            if eligible:
                # 2. The best host's TR over the job, from its own state manager.
                best = eligible[0].host
                reg = broker.GetHost(pb["broker_pb2"].GetHostRequest(host=best), timeout=30)
                tr = predictor.PredictAvailability(pb["predictor_pb2"].PredictAvailabilityRequest(
                    host=best, window_seconds=duration, curve_points=4,
                    statemgr_address=reg.statemgr_address, deployed_estimates=True), timeout=30)
                curve = ", ".join(f"+{p.offset_seconds / 3600:.1f}h {p.tr_ratio:.3f}"
                                  for p in tr.curve)
                # Beside the model, the empirical baseline: the host's own past windows.
                print(f"{best}: TR {tr.tr_ratio:.4f} over {a.duration_hours:g} h, "
                      f"MTTF {tr.mttf_seconds / 3600:.2f} h; {tr.past_up_windows_survived} of "
                      f"{tr.past_up_windows} past windows like it stayed up; curve {curve}")
                # And what the estimators deployed today would say of the same window.
                d = tr.deployed_estimates
                print(f"   HTCondor AvailTime {d.avail_time_tr:.4f} ({d.completed_up_intervals} "
                      f"past up intervals, up {d.up_seconds / 3600:.2f} h), "
                      f"BOINC on-fraction {d.on_fraction:.4f}")

            # 3. When would a parallel job end on `nodes` idle nodes, submitted now?
            ta = pb["turnaround_pb2"]
            now = int(time.time())
            # job_id 0: a what-if, no job of the history (under a job's id it would
            # replace the forecast scored when that job finishes).
            est = predictor.EstimateTurnaround(ta.EstimateTurnaroundRequest(
                job=ta.JobSpec(job_id=0, submit_unix_seconds=now, procs=a.procs, user=a.user,
                               group=-1, executable=-1, queue=-1, requested_seconds=duration),
                snapshot=ta.ClusterSnapshot(now_unix_seconds=now,
                                            nodes=[ta.NodeState() for _ in range(a.nodes)])),
                timeout=30)
            for e in est.estimates:
                t = e.turnaround
                print(f"turnaround ({e.kernel}): {t.point_seconds / 3600:.2f} h "
                      f"[{t.lo_seconds / 3600:.2f}, {t.hi_seconds / 3600:.2f}], "
                      f"{e.matched_records} similar jobs")

            # 4. A guest job through the broker's queue, placed on the best host.
            if eligible:
                bp = pb["broker_pb2"]
                job = ta.JobSpec(job_id=int(time.time() * 1000), procs=1, user=a.user, group=-1,
                                 executable=-1, queue=-1, requested_seconds=duration)
                q = broker.SubmitJob(bp.SubmitJobRequest(job=job), timeout=30)
                print(f"queued job {job.job_id}: {q.waiting_jobs} waiting, {q.running_jobs} "
                      f"running; job history recorded it: {q.recorded_in_history}")
                est = broker.EstimateJobTurnaround(bp.EstimateJobTurnaroundRequest(job=job),
                                                   timeout=30)
                sim = next(e for e in est.estimates if e.kernel == "simulation")
                print(f"on the broker's {len(est.snapshot_hosts)} hosts and queue: wait "
                      f"{sim.wait.point_seconds / 3600:.2f} h, turnaround "
                      f"{sim.turnaround.point_seconds / 3600:.2f} h (simulation)")
                q = broker.StartJob(bp.StartJobRequest(job_id=job.job_id, hosts=[best]),
                                    timeout=30)
                print(f"started job {job.job_id} on {best}: {q.running_jobs} running")
                q = broker.FinishJob(bp.FinishJobRequest(job_id=job.job_id, cancelled=True),
                                     timeout=30)
                print(f"cancelled job {job.job_id}: {q.waiting_jobs} waiting, "
                      f"{q.running_jobs} running")
        except grpc.RpcError as err:
            print(f"middleware_client: {err.code().name}: {err.details()}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
