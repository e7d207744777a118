#!/usr/bin/python3
"""What users see from the service binaries and the CLI against a live cluster.

Flags of statemgr, predictor, broker, monitor and sojourn-replay (no cluster):
  - --help exits 0 and lists the binary's flags with their defaults, once
    prefixed, without the build path ("Flags from ...") or internal wording;
  - a stray argument (`--sync_writes false`, `--follow false`: the value of a
    boolean flag given with a space) exits 2 with one line naming it, instead
    of being dropped while the flag stays true; unknown flags and bad values
    exit 2 too.

Against services on 127.0.0.1 port 0 (a broker whose predictor is down, a
predictor, a statemgr holding one host with samples, none in the last day):
  - `sojourn rank` exits 1 naming the unreachable predictor (it used to exit 0
    with "0 of 1 hosts can run it");
  - `sojourn availability --predictor <the statemgr>` names the status code
    and asks whether the address is a predictor (the message used to be empty);
  - `sojourn how-long` and `can-run` on the host without recent data exit 2
    with "not enough history yet" like `usage` (they answered "0.00h, limited
    by cpu" / "no" with an empty method, exit 0);
  - the start-up log names the listen address and "metrics off";
  - `sojourn guest` registers and unregisters a real process with a monitor
    running the guest gateway, shows its guests and gateway mode, and refuses
    init (exit 2);
  - `sojourn watch` prints the current states, then a new host's first
    change as JSON; an unregistered --host exits 2, a dead --statemgr 1 (also
    beside a live one, which it used to keep watching); `| head -1` ends it
    with exit 0 though no further change comes (it used to hang); a state
    manager given twice is watched once; --timeout bounds the connection to a state
    manager that never answers;
  - `sojourn job-event` feeds a predictor's job history from JSON lines (its
    count comes back; a line that is no event, or an event the predictor
    refuses, exits 2 naming the line, and the events before it stay recorded)
    and `sojourn turnaround` answers from it: the historical kernel matches the
    user's finished jobs, the simulation kernel waits behind the snapshot's
    queue (the example in its --help), bad snapshots exit 2.

usage: /usr/bin/python3 tests/tools/services_cli_test.py --bin-dir BUILD/bin
"""

import argparse
import gzip
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "python"))
import sojourn_cluster  # noqa: E402

REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVICES = ["statemgr", "predictor", "broker", "monitor", "sojourn-replay"]
FAILURES = []


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print("FAIL: " + what)


def run(argv, timeout=60, env=None):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, [l for l in p.stderr.splitlines() if l.strip()]


def dead_address():
    """127.0.0.1:PORT where nothing listens (bound then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


def stop_cluster(cluster):
    """Stops the services; each must exit 0 on SIGTERM. Logs on any failure."""
    codes = cluster.stop()
    if FAILURES:
        cluster.dump_logs()
    for name, code in codes.items():
        check(code == 0, f"{name} exited {code} on SIGTERM")


def test_flags(bin_dir, workdir):
    for name in SERVICES:
        exe = os.path.join(bin_dir, name)
        for help_flag in ("--help", "-h", "--helpfull"):
            code, out, err = run([exe, help_flag])
            check(code == 0, f"{name} {help_flag}: exit {code}, wanted 0 ({err})")
            check(out.startswith(name + ": ") and not out.startswith(f"{name}: {name}:"),
                  f"{name} {help_flag}: help should start with '{name}: ' once: {out[:80]!r}")
            check("Flags from" not in out and "/main.cc" not in out and "_main.cc" not in out,
                  f"{name} {help_flag}: help shows the build path: {out!r}")
            check(not re.search(r"\bissue \d", out), f"{name} {help_flag}: internal wording")
        code, out, _ = run([exe, "--help"])
        if name == "sojourn-replay":
            check("--statemgr=STRING  (default \"127.0.0.1:7403\")" in out,
                  f"sojourn-replay --help: --statemgr default 7403 not shown: {out!r}")
            check("--follow=BOOL  (default true)" in out, "sojourn-replay --help: --follow")
        else:
            check(re.search(r'--listen=STRING  \(default "127\.0\.0\.1:74\d\d"\)', out),
                  f"{name} --help: --listen with its default not listed: {out!r}")
            check("--threads" in out or name == "monitor", f"{name} --help: --threads missing")

    trace = os.path.join(workdir, "never-read.csv")
    db = os.path.join(workdir, "never-created-db")
    cases = [
        (["statemgr", "--listen=127.0.0.1:0", "--metrics_listen=", f"--db_path={db}",
          "--sync_writes", "false"], "unexpected argument 'false'", "--sync_writes=false"),
        (["sojourn-replay", "--trace", trace, "--follow", "false"],
         "unexpected argument 'false'", "--follow=false"),
        (["broker", "--listen=127.0.0.1:0", "--metrics_listen=", "extra"],
         "unexpected argument 'extra'", "no arguments besides flags"),
        (["predictor", "--listen=127.0.0.1:0", "--metrics_listen=", "--histdb_path=",
          "--", "x"], "unexpected argument 'x'", ""),
        (["monitor", "--listen=127.0.0.1:0", "--metrics_listen=", "--no_such_flag=1"],
         "unknown flag --no_such_flag", ""),
        (["broker", "--listen=127.0.0.1:0", "--metrics_listen=", "--threads=abc"],
         "--threads: 'abc' is not a valid INT", ""),
        (["statemgr", "--listen=127.0.0.1:0", "--metrics_listen=", "--sync_writes=maybe"],
         "--sync_writes: 'maybe'", ""),
        (["predictor", "--listen"], "flag --listen needs a value", ""),
        # sojourn-replay dials --statemgr as the sojourn CLI does: HOST:PORT or
        # a target with a scheme ('localhost' was dialled on port 443, exit 1).
        (["sojourn-replay", "--trace", trace, "--statemgr", "localhost"],
         "--statemgr 'localhost' is not HOST:PORT", "no port"),
        (["sojourn-replay", "--trace", trace, "--statemgr", "bogus:abc"],
         "--statemgr 'bogus:abc' is not HOST:PORT", "the port must be a number"),
    ]
    for argv, needle, needle2 in cases:
        code, out, err = run([os.path.join(bin_dir, argv[0])] + argv[1:], timeout=30)
        check(code == 2 and len(err) == 1 and needle in err[0] and needle2 in err[0]
              and err[0].startswith(argv[0] + ": "),
              f"{argv}: exit {code}, stderr {err} (wanted exit 2, one line with {needle!r} "
              f"{needle2!r})")
    check(not os.path.exists(db), "statemgr created its database despite a stray argument")
    # A host name the state manager would refuse (not UTF-8) is named before
    # any connection, with the trace (it was a libprotobuf error, then "empty stream").
    bad_host = os.path.join(workdir, "nonutf8.csv")
    with open(bad_host, "wb") as f:
        f.write(b"host,timestamp,cpu_load,free_mem_mb\nvm\xff1,1000,0.1,100\n")
    code, out, err = run([os.path.join(bin_dir, "sojourn-replay"), "--trace", bad_host,
                          "--statemgr", "127.0.0.1:1", "--follow=false"], timeout=30)
    check(code == 2 and len(err) == 1 and "nonutf8.csv: host vm\\xff1 is not valid UTF-8" in err[0],
          f"sojourn-replay non-UTF-8 host: exit {code}, stderr {err}")
    # --hosts names only hosts of the trace (a misspelt one was skipped unsaid,
    # and "," replayed every host).
    two = os.path.join(workdir, "two.csv")
    with open(two, "w") as f:
        f.write("host,timestamp,cpu_load,free_mem_mb\nvm1,1000,0.1,100\nvm2,1000,0.1,100\n")
    for hosts, needle in (("vm1,vmX", "--hosts: no host 'vmX' in"), (",", "--hosts lists no host")):
        code, out, err = run([os.path.join(bin_dir, "sojourn-replay"), "--trace", two,
                              "--hosts", hosts, "--statemgr", "127.0.0.1:1", "--follow=false"],
                             timeout=30)
        check(code == 2 and len(err) == 1 and needle in err[0],
              f"sojourn-replay --hosts {hosts}: exit {code}, stderr {err}")
    # A state manager that does not accept a connection: waited for up to
    # --connect_timeout_seconds (one loading a large database opens its port
    # late; replay failed at once), then exit 1 saying so.
    code, out, err = run([os.path.join(bin_dir, "sojourn-replay"), "--trace", two,
                          "--statemgr", "127.0.0.1:1", "--follow=false",
                          "--connect_timeout_seconds=1"], timeout=30)
    check(code == 1 and any("did not accept a connection within 1 s" in e for e in err),
          f"sojourn-replay to nothing: exit {code}, stderr {err}")
    code, out, err = run([os.path.join(bin_dir, "sojourn-replay"), "--trace", two,
                          "--connect_timeout_seconds=-1"], timeout=30)
    check(code == 2 and len(err) == 1
          and "--connect_timeout_seconds must be in [0, 3600]" in err[0],
          f"sojourn-replay --connect_timeout_seconds=-1: exit {code}, stderr {err}")


def write_stale_trace(path, host, now):
    """Samples of `host` ending 26 hours ago: samples, but none in the last day."""
    with open(path, "w") as f:
        f.write("host,timestamp,cpu_load,free_mem_mb,total_mem_mb,cpu_cores\n")
        start = now - 30 * 3600
        start -= start % 300
        for t in range(start, now - 26 * 3600, 300):
            f.write(f"{host},{t},0.2,4000,8192,2\n")


def test_cluster(bin_dir, workdir):
    sojourn = os.path.join(bin_dir, "sojourn")
    env = dict(os.environ)
    env.pop("SOJOURN_BROKER", None)
    env.pop("SOJOURN_PREDICTOR", None)
    cluster = sojourn_cluster.Cluster(bin_dir, workdir)
    codes = {}
    try:
        dead = dead_address()
        broker = cluster.start("broker", "broker", [f"--predictor={dead}"])
        predictor = cluster.start("predictor", "predictor", [
            f"--broker={broker.address}", "--histdb_path="])
        # Metrics off for this one: its start-up line says so.
        statemgr = cluster.start("statemgr", "statemgr", [
            "--metrics_listen=", f"--db_path={os.path.join(workdir, 'statemgr-db')}",
            f"--broker={broker.address}", "--heartbeat_seconds=1"])

        def started_line(service):
            with open(service.log_path, errors="replace") as f:
                return next((l for l in f if "serving on" in l), None)
        line = sojourn_cluster.wait_until(lambda: started_line(statemgr), 20,
                                          "statemgr's start-up line")
        check(f"statemgr serving on {statemgr.address} (metrics off)" in line,
              f"statemgr start-up line: {line!r}")
        bline = sojourn_cluster.wait_until(lambda: started_line(broker), 20,
                                           "broker's start-up line")
        check(f"broker serving on {broker.address} (metrics on 127.0.0.1:{broker.metrics_port})"
              in bline, f"broker start-up line: {bline!r}")

        host = "stale-vm"
        trace = os.path.join(workdir, "stale.csv")
        write_stale_trace(trace, host, int(time.time()))
        code, _, err = run([os.path.join(bin_dir, "sojourn-replay"), f"--trace={trace}",
                            f"--statemgr={statemgr.address}", "--follow=false", "--shift=false"])
        check(code == 0, f"sojourn-replay: exit {code}: {err}")

        def registered():
            c, out, _ = run([sojourn, "hosts", "--json", "--broker", broker.address], env=env)
            return c == 0 and any(h.get("host") == host and h.get("live")
                                  for h in json.loads(out).get("hosts", []))
        sojourn_cluster.wait_until(registered, 30, f"{host} registered at the broker")

        # `sojourn hosts` shows the state the state manager reported: silent for 26 hours,
        # the host is S5 since its last sample.
        c, out, _ = run([sojourn, "hosts", "--json", "--broker", broker.address], env=env)
        mine = [h for h in json.loads(out)["hosts"] if h["host"] == host][0] if c == 0 else {}
        last = int(mine.get("last_sample_unix_seconds", 0))
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(last))
        check(mine.get("condition", {}).get("state") == "HOST_STATE_S5_REVOKED" and
              mine["condition"].get("state_since_unix_seconds") == str(last) and last > 0,
              f"sojourn hosts --json: exit {c}, {host}: {mine}")
        c, out, _ = run([sojourn, "hosts", "--broker", broker.address], env=env)
        line = next((l for l in out.splitlines() if l.startswith(host + " ")), "")
        check(c == 0 and out.startswith("HOST ") and " STATE STATE_SINCE " in out.splitlines()[0]
              and f" S5    {since}  " in line,
              f"sojourn hosts: exit {c}, stdout {out!r}")

        # B3: the predictor is down -> exit 1, naming it (not "0 of 1 hosts").
        code, out, err = run([sojourn, "rank", "--duration", "2h", "--broker", broker.address],
                             env=env)
        check(code == 1 and len(err) == 1 and f"predictor {dead} unreachable" in err[0]
              and "can run it" not in out,
              f"rank with the predictor down: exit {code}, stdout {out!r}, stderr {err}")

        # B4: the wrong service -> the code's name and a hint, never an empty reason.
        code, _, err = run([sojourn, "availability", "--host", host, "--window", "2h",
                            "--predictor", statemgr.address], env=env)
        check(code == 1 and len(err) == 1 and "UNIMPLEMENTED" in err[0]
              and f"is {statemgr.address} a predictor?" in err[0]
              and not err[0].rstrip().endswith(":"),
              f"availability against a statemgr: exit {code}, stderr {err}")

        # --baselines: HTCondor's and BOINC's estimates beside the TR. The host
        # was up for 4 hours, then silent for 26 (S5 now): no survival for
        # HTCondor (no interval completed, down now), and BOINC counts the
        # silence as off time: exp(-26 h / 10 days).
        argv = [sojourn, "availability", "--host", host, "--window", "2h",
                "--predictor", predictor.address]
        code, out, err = run(argv, env=env)
        check(code == 0 and "TR over 2.00h" in out and "HTCondor" not in out,
              f"availability: exit {code}, stdout {out!r}, stderr {err}")
        code, out, err = run(argv + ["--baselines"], env=env)
        check(code == 0 and "HTCondor AvailTime: TR 0.0000 (0 past up intervals, up 0.00h); "
              "BOINC on-fraction 0.89" in out,
              f"availability --baselines: exit {code}, stdout {out!r}, stderr {err}")
        code, out, err = run(argv + ["--baselines", "--json"], env=env)
        on = json.loads(out).get("deployed_estimates", {}).get("on_fraction", -1) if code == 0 else -1
        check(abs(on - math.exp(-26 / 240)) < 1e-3,
              f"availability --baselines --json: exit {code}, on_fraction {on}, stderr {err}")

        # B5: samples but none in the last day: how-long refuses like usage.
        for argv in (["how-long", "--host", host, "--cpu", "0.5", "--memory-mb", "512"],
                     ["can-run", "--host", host, "--cpu", "0.5", "--hours", "2"],
                     ["usage", "--host", host, "--hours", "4"]):
            code, out, err = run([sojourn] + argv + ["--predictor", predictor.address], env=env)
            check(code == 2 and len(err) == 1 and "not enough history yet" in err[0]
                  and "0.00h" not in out,
                  f"{argv[0]} on a host without recent data: exit {code}, stdout {out!r}, "
                  f"stderr {err}")

        # The guest gateway: a real process registered through the CLI.
        monitor = cluster.start("monitor", "monitor", [
            f"--statemgr={statemgr.address}", "--host=gw-host", "--period_seconds=1",
            "--gateway", "--metrics_listen="])
        guest = subprocess.Popen(["sleep", "600"])
        try:
            code, out, err = run([sojourn, "guest", "--pid", str(guest.pid),
                                  "--monitor", monitor.address], env=env)
            check(code == 0 and f"guests {guest.pid}; gateway " in out,
                  f"sojourn guest --pid: exit {code}, stdout {out!r}, stderr {err}")
            code, out, err = run([sojourn, "guest", "--json", "--monitor", monitor.address],
                                 env=env)
            status = json.loads(out) if code == 0 else {}
            check(status.get("guest_pids") == [guest.pid] and
                  status.get("gateway") in ("normal", "low_priority", "suspended"),
                  f"sojourn guest --json: exit {code}, {out!r}")
            code, out, err = run([sojourn, "guest", "--pid", "1", "--monitor", monitor.address],
                                 env=env)
            check(code == 2 and len(err) == 1 and "is init" in err[0],
                  f"sojourn guest --pid 1: exit {code}, stderr {err}")
            code, out, err = run([sojourn, "guest", "--pid", str(guest.pid), "--unregister",
                                  "--monitor", monitor.address], env=env)
            check(code == 0 and "guests none; gateway " in out,
                  f"sojourn guest --unregister: exit {code}, stdout {out!r}, stderr {err}")
            # Unregistered, the gateway leaves it running (resumed if it was stopped).
            check(guest.poll() is None, "the unregistered guest is no longer running")
        finally:
            guest.kill()
            guest.wait()

        # `sojourn watch`: the current state (the stale host is gone: S5), then
        # the first sample of a host that did not exist when the watch began.
        watch = subprocess.Popen([sojourn, "watch", "--broker", broker.address],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 stdin=subprocess.DEVNULL, env=env)
        json_watch = subprocess.Popen(
            [sojourn, "watch", "--statemgr", statemgr.address, "--host", "new-vm",
             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL, env=env)
        try:
            # The snapshot is in host order; the monitor's gw-host may come first.
            line = ""
            for _ in range(5):
                line = watch.stdout.readline()
                if host in line or not line:
                    break
            check(host in line and " S5 " in line and "current state" in line,
                  f"sojourn watch, first line: {line!r}")
            ready = json_watch.stderr.readline()
            check(f"watching state changes at {statemgr.address}" in ready,
                  f"sojourn watch --json, stderr: {ready!r}")
            new_trace = os.path.join(workdir, "new.csv")
            with open(new_trace, "w") as f:
                f.write("host,timestamp,cpu_load,free_mem_mb\n")
                t0 = int(time.time()) - 600
                for i in range(3):
                    f.write(f"new-vm,{t0 + 300 * i},0.45,4000\n")
            code, _, err = run([os.path.join(bin_dir, "sojourn-replay"), f"--trace={new_trace}",
                                f"--statemgr={statemgr.address}", "--follow=false",
                                "--shift=false"])
            check(code == 0, f"sojourn-replay new-vm: exit {code}: {err}")
            event = json.loads(json_watch.stdout.readline() or "{}")
            check(event.get("host") == "new-vm" and event.get("to_state") == "HOST_STATE_S2_BUSY"
                  and event.get("snapshot") is False and "first sample" in event.get("reason", ""),
                  f"sojourn watch --json, first event: {event}")
        finally:
            for p in (watch, json_watch):
                p.terminate()
                p.wait(timeout=10)
        code, _, err = run([sojourn, "watch", "--host", "nowhere", "--broker", broker.address],
                           env=env)
        check(code == 2 and len(err) == 1 and "not registered" in err[0],
              f"sojourn watch --host of an unknown host: exit {code}, stderr {err}")
        code, _, err = run([sojourn, "watch", "--statemgr", dead], env=env)
        check(code == 1 and len(err) == 1 and dead in err[0],
              f"sojourn watch of a dead statemgr: exit {code}, stderr {err}")
        # One that accepts the connection and never answers (a silent listener: the
        # channel stays connecting): --timeout bounds the wait, and says so.
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        try:
            mute = f"127.0.0.1:{silent.getsockname()[1]}"
            code, _, err = run([sojourn, "watch", "--statemgr", mute, "--timeout", "1"],
                               env=env, timeout=30)
        except subprocess.TimeoutExpired:
            code, err = "no exit within 30 s", []
        finally:
            silent.close()
        check(code == 1 and len(err) == 1 and mute in err[0] and
              "cannot connect within --timeout (1 s)" in err[0],
              f"sojourn watch of a silent listener: exit {code}, stderr {err}")
        # A live and a dead one: the dead one ends the watch of both (exit 1, naming it),
        # instead of the command going on as if it watched every host.
        try:
            code, _, err = run([sojourn, "watch", "--statemgr", f"{statemgr.address},{dead}"],
                               env=env, timeout=30)
        except subprocess.TimeoutExpired:
            code, err = "no exit within 30 s", []
        check(code == 1 and len([l for l in err if dead in l]) == 1 and
              all(dead in l or "watching state changes" in l for l in err),
              f"sojourn watch of a live and a dead statemgr: exit {code}, stderr {err}")
        # Its output read by `head -1`: once the reader is gone, the watch ends quietly
        # (exit 0) even though no change comes to write; one state manager given twice is
        # watched once.
        head = subprocess.Popen([sojourn, "watch", "--statemgr", f"{statemgr.address},,"
                                 f"{statemgr.address}", "--host", host],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL, env=env)
        try:
            line = head.stdout.readline()
            head.stdout.close()
            code = head.wait(timeout=20)
            err = [l for l in head.stderr.read().splitlines() if l.strip()]
        except subprocess.TimeoutExpired:
            code, err = "no exit within 20 s", []
        finally:
            if head.poll() is None:
                head.kill()
                head.wait()
        check(code == 0 and host in line and len(err) == 1 and "watching state changes" in err[0],
              f"sojourn watch | head -1: exit {code}, first line {line!r}, stderr {err}")
        for argv, want in ((["--host", ""], "--host needs a host name"),
                           (["--statemgr", dead, "--timeout", "x"], "--timeout")):
            code, _, err = run([sojourn, "watch"] + argv, env=env)
            check(code == 2 and len(err) == 1 and want in err[0],
                  f"sojourn watch {argv}: exit {code}, stderr {err}")
    finally:
        stop_cluster(cluster)


def run_input(argv, text, env=None):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, input=text)
    return p.returncode, p.stdout, [l for l in p.stderr.splitlines() if l.strip()]


def test_turnaround(bin_dir, workdir):
    sojourn = os.path.join(bin_dir, "sojourn")
    env = dict(os.environ)
    env.pop("SOJOURN_PREDICTOR", None)
    cluster = sojourn_cluster.Cluster(bin_dir, workdir)
    try:
        predictor = cluster.start("predictor-histdb", "predictor", [
            f"--broker={dead_address()}", "--metrics_listen=",
            f"--histdb_path={os.path.join(workdir, 'histdb')}"])
        p = ["--predictor", predictor.address]
        now = int(time.time())

        def snap(t, nodes=4):
            return {"now_unix_seconds": t, "nodes": [{} for _ in range(nodes)]}

        events = ["# user 3 ran executable 12 twice on 2 of 4 nodes", ""]
        for job_id, submit, start, end, nodes in ((1, now - 9000, now - 8800, now - 6800, [0, 1]),
                                                  (2, now - 5000, now - 4900, now - 2500, [2, 3])):
            events += [
                json.dumps({"submitted": {"job": {"job_id": job_id, "submit_unix_seconds": submit,
                                                  "procs": 2, "user": 3, "executable": 12,
                                                  "requested_seconds": 3600},
                                          "snapshot": snap(submit)}}),
                json.dumps({"started": {"job_id": job_id, "start_unix_seconds": start,
                                        "nodes": nodes, "snapshot": snap(start)}}),
                json.dumps({"finished": {"job_id": job_id, "finish_unix_seconds": end}})]
        path = os.path.join(workdir, "events.jsonl")
        with open(path, "w") as f:
            f.write("\n".join(events) + "\n")
        code, out, err = run([sojourn, "job-event", "--file", path] + p, env=env)
        check(code == 0 and "recorded 6 events; the job history holds 2 records" in out,
              f"sojourn job-event: exit {code}, {out!r}, {err}")

        code, out, err = run([sojourn, "turnaround", "--procs", "2", "--user", "3",
                              "--executable", "12", "--requested", "1h", "--nodes", "4",
                              "--json"] + p, env=env)
        try:
            est = {e["kernel"]: e for e in json.loads(out)["estimates"]}
        except (ValueError, KeyError):
            est = {}
        hist = est.get("historical", {})
        check(code == 0 and set(est) == {"historical", "simulation", "hybrid"} and
              hist.get("from_history") and hist.get("matched_records") == 2 and
              2000 <= hist["exec"]["point_seconds"] <= 2400,
              f"sojourn turnaround from the recorded history: exit {code}, {out[:400]!r}, {err}")
        # Another user's job has no history to match.
        code, out, err = run([sojourn, "turnaround", "--procs", "2", "--user", "4",
                              "--nodes", "4"] + p, env=env)
        rows = {l.split()[0]: l for l in out.splitlines()[2:] if l.strip()}
        check(code == 0 and rows.get("historical", "").endswith("none"),
              f"sojourn turnaround without history: exit {code}, {out!r}, {err}")

        # The snapshot example of --help, EASY backfilling: the 1-node job fits before the
        # queued 2-node job's reservation (no wait); with FCFS it waits behind it.
        code, help_text, _ = run([sojourn, "turnaround", "--help"], env=env)
        lines = help_text.splitlines()
        first = next(i for i, l in enumerate(lines) if l.strip().startswith('{"now_unix_seconds"'))
        example = " ".join(l.strip() for l in lines[first:first + 9])
        example = example[:example.rindex("}") + 1]
        for policy, waits in (("JOB_SELECTION_EASY", False), ("JOB_SELECTION_FCFS", True)):
            text = example.replace("JOB_SELECTION_EASY", policy)
            code, out, err = run_input([sojourn, "turnaround", "--procs", "1", "--snapshot", "-",
                                        "--json"] + p, text, env=env)
            try:
                wait = {e["kernel"]: e for e in json.loads(out)["estimates"]}["simulation"][
                    "wait"]["point_seconds"]
            except (ValueError, KeyError):
                wait = None
            check(code == 0 and wait is not None and (wait > 0) == waits,
                  f"sojourn turnaround on the --help example ({policy}) {text!r}: exit {code}, "
                  f"simulation wait {wait}, {err}")

        for argv, text, want in (
                (["--procs", "1", "--snapshot", "-"], '{"nodez": []}', "is not a ClusterSnapshot"),
                (["--procs", "1", "--snapshot", "-"], '{"now_unix_seconds": 5}', "lists no nodes"),
                (["--procs", "1", "--snapshot", "-"], '{"nodes": [{}]}', "needs now_unix_seconds"),
                (["--procs", "1"], "", "one of --nodes N, --snapshot FILE or --queue"),
                (["--procs", "1", "--nodes", "2", "--queue"], "",
                 "one of --nodes N, --snapshot FILE or --queue"),
                (["--procs", "3", "--nodes", "2"], "", "can never start on 2 nodes"),
                (["--nodes", "2"], "", "--procs is required")):
            code, _, err = run_input([sojourn, "turnaround"] + argv + p, text, env=env)
            check(code == 2 and len(err) == 1 and want in err[0],
                  f"sojourn turnaround {argv} <<< {text!r}: exit {code}, stderr {err}")

        # Refusals name the line; what came before stays recorded (2 -> 3 records).
        good = json.dumps({"submitted": {"job": {"job_id": 9, "submit_unix_seconds": now,
                                                 "procs": 1}, "snapshot": snap(now)}})
        for text, want in (("\n" + good + "\nnot json\n", "standard input:3: not a job event"),
                           ('{"started": {"job_id": 77}}\n',
                            "standard input:1: recording the event: job 77")):
            code, out, err = run_input([sojourn, "job-event"] + p, text, env=env)
            check(code == 2 and len(err) == 1 and want in err[0],
                  f"sojourn job-event <<< {text!r}: exit {code}, stderr {err}")
        code, out, err = run_input([sojourn, "job-event", "--json"] + p,
                                   '{"cancelled": {"job_id": 9}}\n', env=env)
        check(code == 0 and json.loads(out or "{}").get("events_recorded") == 1 and
              json.loads(out or "{}").get("history_records") == 2,
              f"sojourn job-event --json after a refusal: exit {code}, {out!r}, {err}")

        # scripts/up's first run: the demo job log loaded by sojourn-eval is a history the
        # predictor opens and matches (the README's example, user 34: 326 of the 2,000 jobs).
        demo = os.path.join(REPO_DIR, "data", "demo", "sdsc-sp2-2000jobs.swf.gz")
        with gzip.open(demo, "rt") as f:
            jobs = [l.split() for l in f if not l.startswith(";") and l.strip()]
        check(len(jobs) == 2000 and sum(1 for j in jobs if j[11] == "34") == 326,
              f"{demo}: {len(jobs)} jobs, {sum(1 for j in jobs if j[11] == '34')} of user 34")
        seeded = os.path.join(workdir, "histdb-demo")
        code, _, err = run([os.path.join(bin_dir, "sojourn-eval"), "turnaround", "--swf", demo,
                            "--histdb", seeded], timeout=120)
        check(code == 0, f"sojourn-eval turnaround --histdb: exit {code}, {err[-3:]}")
        demo_predictor = cluster.start("predictor-demo", "predictor", [
            f"--broker={dead_address()}", "--metrics_listen=", f"--histdb_path={seeded}"])
        code, out, err = run([sojourn, "turnaround", "--procs", "9", "--nodes", "128",
                              "--requested", "30m", "--user", "34", "--json",
                              "--predictor", demo_predictor.address], env=env)
        try:
            hist = {e["kernel"]: e for e in json.loads(out)["estimates"]}["historical"]
        except (ValueError, KeyError):
            hist = {}
        check(code == 0 and hist.get("from_history") and hist.get("matched_records", 0) >= 1,
              f"sojourn turnaround on the demo history: exit {code}, {out[:300]!r}, {err}")
    finally:
        stop_cluster(cluster)


def test_job_queue(bin_dir, workdir):
    sojourn = os.path.join(bin_dir, "sojourn")
    env = dict(os.environ)
    env.pop("SOJOURN_BROKER", None)
    cluster = sojourn_cluster.Cluster(bin_dir, workdir)
    try:
        predictor = cluster.start("predictor-jobs", "predictor", [
            f"--broker={dead_address()}", "--metrics_listen=",
            f"--histdb_path={os.path.join(workdir, 'histdb-jobs')}"])
        queue_dir = os.path.join(workdir, "broker-jobs")
        # A TTL far longer than the test: its whole run is within the first TTL
        # after the broker's start, when an unknown host is UNAVAILABLE (retry).
        broker = cluster.start("broker-jobs", "broker", [
            f"--predictor={predictor.address}", "--metrics_listen=", f"--data_dir={queue_dir}",
            "--heartbeat_ttl_seconds=3600"])
        statemgr = cluster.start("statemgr-jobs", "statemgr", [
            "--metrics_listen=", f"--db_path={os.path.join(workdir, 'statemgr-jobs-db')}",
            f"--broker={broker.address}", "--heartbeat_seconds=1"])
        trace = os.path.join(workdir, "jobs-host.csv")
        write_stale_trace(trace, "lab-pc", int(time.time()))
        code, _, err = run([os.path.join(bin_dir, "sojourn-replay"), f"--trace={trace}",
                            f"--statemgr={statemgr.address}", "--follow=false", "--shift=false"])
        check(code == 0, f"sojourn-replay: exit {code}: {err}")
        b = ["--broker", broker.address]

        def jobs(*argv):
            return run([sojourn, "jobs"] + list(argv) + b, env=env)

        def listed():
            c, out, _ = jobs("--json")
            return c == 0 and json.loads(out).get("snapshot_hosts") == ["lab-pc"]
        sojourn_cluster.wait_until(listed, 30, "lab-pc a node of the broker's snapshot")

        code, out, err = jobs("submit", "--job-id", "1", "--procs", "1", "--user", "5",
                              "--executable", "2", "--requested", "1h")
        check(code == 0 and "job 1 queued; the queue holds 1 waiting and 0 running jobs; "
              "the job history recorded it" in out, f"jobs submit: exit {code}, {out!r}, {err}")
        code, out, err = jobs("start", "--job-id", "1", "--hosts", "lab-pc")
        check(code == 0 and "job 1 running; the queue holds 0 waiting and 1 running" in out,
              f"jobs start: exit {code}, {out!r}, {err}")
        code, out, err = jobs("submit", "--job-id", "2", "--procs", "1", "--requested", "2h",
                              "--swf-queue", "3")
        check(code == 0, f"jobs submit 2: exit {code}, {out!r}, {err}")
        code, out, err = jobs()
        rows = [l.split() for l in out.splitlines()[2:]]
        check(code == 0 and out.startswith("1 waiting, 1 running on 1 hosts") and
              [r[:2] for r in rows] == [["2", "waiting"], ["1", "running"]] and
              rows[1][-1] == "lab-pc", f"jobs (list): exit {code}, {out!r}, {err}")

        # The only host runs job 1 and job 2 waits first: a new 1-host job waits (FCFS).
        # (--queue, the broker's cluster, beside --swf-queue, the job's SWF queue id.)
        code, out, err = run([sojourn, "turnaround", "--queue", "--procs", "1", "--requested",
                              "30m", "--swf-queue", "4", "--json"] + b, env=env)
        try:
            r = json.loads(out)
            wait = {e["kernel"]: e for e in r["estimates"]}["simulation"]["wait"]["point_seconds"]
        except (ValueError, KeyError):
            r, wait = {}, None
        check(code == 0 and wait is not None and wait > 0 and
              len(r["snapshot"]["running"]) == 1 and len(r["snapshot"]["waiting"]) == 1 and
              r["snapshot"]["waiting"][0].get("queue") == 3 and r["snapshot_hosts"] == ["lab-pc"],
              f"turnaround --queue: exit {code}, wait {wait}, {out[:400]!r}, {err}")
        code, out, err = run([sojourn, "turnaround", "--queue", "--procs", "1"] + b, env=env)
        check(code == 0 and "the broker's queue: 1 nodes, 1 running and 1 waiting jobs" in out,
              f"turnaround --queue (table): exit {code}, {out!r}, {err}")

        for argv, want in ((["submit", "--job-id", "1", "--procs", "1"], "job 1 is already queued"),
                           (["start", "--job-id", "9", "--hosts", "lab-pc"], "job 9 is not queued"),
                           (["finish", "--job-id", "2"], "never started"),
                           (["submit", "--procs", "1"], "--job-id is required"),
                           (["start", "--job-id", "2"], "--hosts is required"),
                           (["cancel", "--job-id", "2", "--cpu-seconds", "3"],
                            "--cpu-seconds is for finish"),
                           (["bogus"], "unknown action 'bogus'"),
                           # More CPU seconds than job 1 has run (it started seconds ago).
                           (["finish", "--job-id", "1", "--cpu-seconds", "1e9"],
                            "a task uses at most one CPU")):
            code, out, err = jobs(*argv)
            check(code == 2 and len(err) == 1 and want in err[0],
                  f"jobs {argv}: exit {code}, stdout {out!r}, stderr {err}")

        # A host the broker does not know yet, so soon after its start: it may
        # re-register with its next heartbeat, so retry (exit 1, not 2).
        code, out, err = jobs("start", "--job-id", "2", "--hosts", "elsewhere")
        check(code == 1 and len(err) == 1 and err[0].startswith(
                  "sojourn: start job 2: job 2: host 'elsewhere' is not registered with this "
                  "broker yet: the broker started ") and err[0].endswith(
                  " s ago and hosts re-register with their next heartbeat (within 3600 s, "
                  "--heartbeat_ttl_seconds); retry"),
              f"jobs start on an unknown host: exit {code}, stdout {out!r}, stderr {err}")

        code, out, err = jobs("finish", "--job-id", "1", "--cpu-seconds", "1")
        check(code == 0 and "job 1 finished; the queue holds 1 waiting and 0 running jobs; "
              "the job history recorded it (1 finished jobs)" in out,
              f"jobs finish: exit {code}, {out!r}, {err}")

        # A restarted broker has the same queue (its --data_dir).
        broker.popen.send_signal(signal.SIGTERM)
        check(broker.popen.wait(timeout=20) == 0, "broker exit code on SIGTERM")
        broker2 = cluster.start("broker-jobs-2", "broker", [
            f"--predictor={predictor.address}", "--metrics_listen=", f"--data_dir={queue_dir}"])
        code, out, err = run([sojourn, "jobs", "--json", "--broker", broker2.address], env=env)
        waiting = json.loads(out).get("waiting", []) if code == 0 else []
        check([w["spec"]["job_id"] for w in waiting] == ["2"] and
              waiting[0]["spec"]["requested_seconds"] == "7200",
              f"jobs after a broker restart: exit {code}, {out[:300]!r}, {err}")
        code, out, err = run([sojourn, "jobs", "cancel", "--job-id", "2", "--broker",
                              broker2.address], env=env)
        check(code == 0 and "job 2 cancelled; the queue holds 0 waiting and 0 running" in out,
              f"jobs cancel after the restart: exit {code}, {out!r}, {err}")
    finally:
        stop_cluster(cluster)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    a.bin_dir = os.path.abspath(a.bin_dir)  # the services run in the work directory
    workdir = tempfile.mkdtemp(prefix="sojourn-services-cli-")
    try:
        test_flags(a.bin_dir, workdir)
        test_cluster(a.bin_dir, workdir)
        test_turnaround(a.bin_dir, workdir)
        test_job_queue(a.bin_dir, workdir)
    finally:
        if not a.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if FAILURES:
        print(f"{len(FAILURES)} failed")
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
