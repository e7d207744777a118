#!/usr/bin/env python3
"""Bad invocations of the `sojourn` CLI exit 2 with a one-line reason.

Each case is refused before any call is made (the broker and predictor
addresses point at a port nothing listens on, so a case that slipped through
would fail with exit 1 and a connection error instead).

usage: sojourn_cli_test.py --sojourn build/bin/sojourn
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

DEAD = ["--broker", "127.0.0.1:9", "--predictor", "127.0.0.1:9", "--timeout", "2"]
CASES = [
    # (arguments, text the one stderr line must contain)
    (["availability", "--host", b"\xff\xfe", "--window", "2h"], "not valid UTF-8"),
    (["availability", "--host", "vm1", "--window", "nan"], "finite"),
    (["availability", "--host", "vm1", "--window", "99999999999999999999"], "100 years"),
    (["availability", "--host", "vm1", "--window", "-2h"], "positive"),
    (["availability", "--host", "", "--window", "2h"], "--host"),
    (["availability", "--host", "x" * 300, "--window", "2h"], "255"),
    (["availability", "--host", "vm1", "--window", "2h", "--timeout", "nan"], "--timeout"),
    (["availability", "--host", "vm1", "--window", "2h", "--timeout", "1e308"], "--timeout"),
    (["rank", "--duration", "2h", "--hosts", ",,,"], "--hosts lists no host"),
    (["rank", "--duration", "2h", "--cpu", "inf"], "--cpu"),
    (["rank", "--duration", "2h", "--memory-mb", "nan"], "--memory-mb"),
    (["hosts", "--broker", ""], "--broker"),
    (["hosts", "--broker", "has space:1"], "--broker"),
    # Whole numbers only (2.5 used to become 2 silently), in range (1e12
    # overflowed the int conversion).
    (["availability", "--host", "vm1", "--window", "2h", "--history-days", "2.5"],
     "--history-days wants an integer in [0, 36500], got '2.5'"),
    (["availability", "--host", "vm1", "--window", "2h", "--curve", "1e12"],
     "--curve wants an integer in [0, 100000], got '1e12'"),
    (["availability", "--host", "vm1", "--window", "2h", "--curve", "-1"], "--curve"),
    # --start: a date-time needs its UTC offset; +DURATION is positive.
    (["availability", "--host", "vm1", "--window", "2h", "--start", "2026-12-09T09:00"],
     "with its UTC offset"),
    (["availability", "--host", "vm1", "--window", "2h", "--start", "+-2h"], "+DURATION"),
    (["availability", "--host", "vm1", "--window", "2h", "--start", "+1.5s"], "whole number"),
    (["availability", "--host", "vm1", "--window", "2h", "--start", "0"], "after 1970"),
    (["availability", "--host", "vm1", "--window", "2h", "--start", "1969-12-31T23:00Z"],
     "after 1970"),
    # can-run / how-long's --cpu is a free fraction of the host's CPU; rank's
    # is CPUs the job needs (may exceed 1, must be > 0).
    (["can-run", "--host", "vm1", "--hours", "2", "--cpu", "1.5"], "in [0, 1], got '1.5'"),
    (["how-long", "--host", "vm1", "--cpu", "1.5"], "in [0, 1], got '1.5'"),
    # Durations go to the services in whole seconds (0.5s became 0, 90.7s 90).
    (["rank", "--duration", "0.5s"], "--duration: '0.5s' is not a whole number of seconds"),
    (["availability", "--host", "vm1", "--window", "90.7s"], "not a whole number of seconds"),
    # A repeated option is refused (the last one used to win: --hosts a was dropped).
    (["rank", "--duration", "2h", "--hosts", "a", "--hosts", "b"], "option --hosts is given twice"),
    # Nothing asked for: no trivial yes / 72 h from a host without history.
    (["can-run", "--host", "vm1", "--hours", "2"], "nothing to check: give --cpu FREE or"),
    (["how-long", "--host", "vm1", "--cpu", "0", "--memory-mb", "0"], "nothing to check"),
    (["rank", "--duration", "2h", "--cpu", "0"], "--cpu is the number of CPUs"),
    (["rank", "--duration", "2h", "stray"], "unexpected argument 'stray'"),
    # Checked before any connection: exit 2 with or without a cluster.
    (["rank", "--duration", "2h", "--policy", "foo"], "--policy must be proactive"),
    (["rank", "--duration", "2h", "--policy", "omniscient"], "--policy must be proactive"),
    (["rank", "--duration", "169h"], "--duration must be at most 7 days"),
    (["usage", "--host", "vm1", "--hours", "1", "--resource", "disk"], "--resource must be cpu or mem"),
    # An address without a scheme must be HOST:PORT: 'localhost' was dialled on
    # port 443, '127.0.0.1:grpc_port=1' (a port file pasted whole) on port 0.
    (["hosts", "--broker", "localhost"], "--broker 'localhost' is not HOST:PORT"),
    (["hosts", "--broker", "127.0.0.1:grpc_port=1"], "the port must be a number"),
    (["watch", "--statemgr", "localhost"], "--statemgr 'localhost' is not HOST:PORT"),
    (["turnaround", "--procs", "1"], "one of --nodes N, --snapshot FILE or --queue"),
    (["turnaround", "--procs", "1", "--nodes", "2", "--snapshot", "-"],
     "one of --nodes N, --snapshot FILE or --queue"),
    (["turnaround", "--nodes", "2"], "--procs is required"),
    (["turnaround", "--procs", "0", "--nodes", "2"], "--procs wants an integer in [1, 1000000]"),
    (["turnaround", "--procs", "1", "--nodes", "2", "--cpu", "0"], "--cpu must be a share"),
    (["turnaround", "--procs", "1", "--nodes", "2", "--user", "-2"], "--user wants an integer"),
    (["turnaround", "--procs", "1", "--nodes", "2", "--swf-queue", "x"],
     "--swf-queue wants an integer"),
    (["turnaround", "--procs", "1", "--nodes", "2", "--requested", "0"], "--requested"),
    (["turnaround", "--procs", "1", "--snapshot", "/nonexistent/snap.json"], "No such file"),
    (["job-event", "--file", "/nonexistent/events.jsonl"], "No such file"),
    # A directory or an unreadable file: exit 2 and one line (a directory was exit 134
    # with an uncaught std::ios failure, session 19).
    (["turnaround", "--procs", "1", "--snapshot", "/tmp"], "--snapshot /tmp: is a directory"),
    (["turnaround", "--procs", "1", "--snapshot", "/proc/self/mem"], "read error"),
    (["job-event", "--file", "/tmp"], "--file /tmp: is a directory"),
    (["turnaround", "--procs", "1", "--snapshot", "-", "--queue"],
     "one of --nodes N, --snapshot FILE or --queue"),
    (["export", "--hosts", ",,"], "--hosts lists no host"),
    (["export", "--since", "-1h"], "positive"),
    (["export", "--since", "1.5s"], "not a whole number of seconds"),
    (["export", "--statemgr", "localhost"], "--statemgr 'localhost' is not HOST:PORT"),
    (["export", "--statemgr", ","], "--statemgr needs an address"),
    (["export", "--out", ""], "--out needs a file name"),
    (["export-jobs", "--nodes", "0"], "--nodes"),
    (["export-jobs", "--nodes", "1000001"], "--nodes"),
    (["export-jobs", "--since", "0"], "positive"),
    (["export-jobs", "--out", ""], "--out needs a file name"),
    (["export-jobs", "--hosts", "a"], "--hosts"),
    (["import-jobs"], "import-jobs needs --swf FILE"),
    (["import-jobs", "--swf", "/nonexistent/x.swf"], "/nonexistent/x.swf: cannot open"),
    (["import-jobs", "--swf", "/tmp"], "is a directory"),
    (["import-jobs", "--swf", "/nonexistent/x.swf", "--policy", "sjf"], "--policy"),
    (["import-jobs", "--swf", "/nonexistent/x.swf", "--nsp", "random"], "--nsp"),
    (["import-jobs", "--swf", "/nonexistent/x.swf", "--predictor", "localhost"],
     "--predictor 'localhost' is not HOST:PORT"),
    (["jobs", "bogus"], "unknown action 'bogus'"),
    (["jobs", "submit", "--procs", "1"], "--job-id is required"),
    (["jobs", "submit", "--job-id", "0", "--procs", "1"], "--job-id wants an integer in [1, "),
    # The broker's queue takes at most 100000 hosts; the CLI says so before dialling.
    (["jobs", "submit", "--job-id", "1", "--procs", "100001"],
     "--procs wants an integer in [1, 100000]"),
    (["jobs", "submit", "--job-id", "1"], "--procs is required"),
    (["jobs", "start", "--job-id", "1"], "--hosts is required"),
    (["jobs", "start", "--job-id", "1", "--hosts", ",,"], "--hosts names no host"),
    (["jobs", "start", "--job-id", "1", "--hosts", "x" * 300], "255"),
    (["jobs", "finish", "--job-id", "1", "--cpu-seconds", "-3"], "--cpu-seconds must be"),
    (["jobs", "cancel", "--job-id", "1", "--cpu-seconds", "3"], "--cpu-seconds is for finish"),
]

# Accepted: these reach the (dead) cluster and fail with exit 1, not 2.
ACCEPTED = [
    ["rank", "--duration", "2h", "--cpu", "1.5"],
    ["rank", "--duration", "168h", "--policy", "condor"],
    ["rank", "--duration", "2h", "--include-busy"],
    ["usage", "--host", "vm1", "--hours", "1", "--resource", "Memory"],
    ["availability", "--host", "vm1", "--window", "2h", "--history-days", "3", "--curve", "8"],
    ["can-run", "--host", "vm1", "--hours", "2", "--cpu", "0.5"],
    ["hosts", "--broker", "unix:/nonexistent/sojourn.sock"],
    ["hosts", "--broker", "dns:///localhost:9"],
    ["turnaround", "--procs", "4", "--nodes", "8", "--requested", "2h", "--user", "3"],
    ["turnaround", "--procs", "4", "--queue", "--requested", "2h"],
    # The job's SWF queue id beside --queue, the broker's cluster (session 19: one name
    # for both made --queue Q unusable).
    ["turnaround", "--procs", "4", "--nodes", "8", "--swf-queue", "3"],
    ["turnaround", "--procs", "4", "--queue", "--swf-queue", "3"],
    ["export"],
    ["export", "--statemgr", "127.0.0.1:9", "--hosts", "a,b", "--since", "30d"],
    ["export", "--skip-unreadable"],
    ["export-jobs"],
    ["export-jobs", "--since", "30d", "--nodes", "64"],
    ["jobs"],
    ["jobs", "list"],
    ["jobs", "submit", "--job-id", "3", "--procs", "2", "--requested", "1h", "--cpu", "0.5"],
    ["jobs", "submit", "--job-id", "3", "--procs", "2", "--swf-queue", "3", "--user", "1"],
    ["jobs", "start", "--job-id", "3", "--hosts", "a,b"],
    ["jobs", "finish", "--job-id", "3", "--cpu-seconds", "120"],
    ["jobs", "cancel", "--job-id", "3"],
]

# `sojourn COMMAND --help`: exit 0, the command's own options with defaults.
HELP = {
    "hosts": ["--broker ADDR", "default 127.0.0.1:7401", "--json", "--timeout"],
    "availability": ["--window DURATION", "--history-days N", "--curve N", "default 0",
                     "[0, 100000]", "default 127.0.0.1:7402", "--baselines"],
    "rank": ["--cpu CPUS", "default 1.0", "--memory-mb MB", "default 0 = not checked",
             "--min-mhz MHZ", "default 0 = any", "--policy P", "default proactive",
             "Not the same as can-run's --cpu", "default 127.0.0.1:7401", "--include-busy"],
    "usage": ["--resource R", "default cpu", "--hours N", "(0, 72]"],
    "can-run": ["--cpu FREE", "in [0, 1]", "default 0 = not checked", "--memory-mb MB",
                "Not the same as rank's --cpu"],
    "how-long": ["--cpu FREE", "in [0, 1]", "--memory-mb MB", "not enough history yet"],
    "turnaround": ["--procs N", "--requested DURATION", "default: unknown", "--nodes N",
                   "--snapshot FILE", "default -1 = unknown", "default 127.0.0.1:7402",
                   "--swf-queue Q"],
    "job-event": ["--file FILE", "default - = standard input", "one line", "cancelled"],
    "export": ["--hosts H1,H2,...", "--statemgr ADDR,...", "--since DURATION",
               "default: every host", "--out FILE", ".gz", "--skip-unreadable",
               "host,timestamp,cpu_load,free_mem_mb,total_mem_mb,cpu_cores",
               "sojourn-eval availability"],
    "export-jobs": ["--since DURATION", "default: every job", "--nodes N", "[1, 1000000]",
                    "MaxNodes", "--out FILE", ".gz", "sojourn-eval turnaround --swf FILE",
                    "default 127.0.0.1:7402"],
    "import-jobs": ["--swf FILE", "required", "--policy P", "default easy", "--nsp P",
                    "default normal", "UnixStartTime", "running it again", "already_imported", "default 127.0.0.1:7402"],
    "jobs": ["list (default)", "submit --job-id N --procs N", "start --job-id N --hosts",
             "finish --job-id N [--cpu-seconds S]", "cancel --job-id N", "--data_dir",
             "default 127.0.0.1:7401", "--swf-queue", "default -1 = unknown"],
}


def with_dead(args):
    """args with DEAD's options the case does not give itself (an option may
    be given once)."""
    own = {x for x in args if isinstance(x, str) and x.startswith("--")}
    dead = []
    for i in range(0, len(DEAD), 2):
        if DEAD[i] not in own:
            dead += DEAD[i:i + 2]
    return args[:1] + dead + args[1:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sojourn", required=True)
    a = ap.parse_args()
    failures = 0
    for args, needle in CASES:
        # A case's own --broker / --timeout replaces DEAD's.
        argv = [a.sojourn.encode()] + [x if isinstance(x, bytes) else x.encode()
                                        for x in with_dead(args)]
        p = subprocess.run(argv, capture_output=True, timeout=60)
        lines = [l for l in p.stderr.decode("utf-8", "replace").splitlines() if l.strip()]
        if p.returncode != 2 or len(lines) != 1 or needle not in lines[0]:
            failures += 1
            print("FAIL: %r: exit %d, stderr %r (wanted exit 2 and one line with %r)"
                  % (args, p.returncode, lines, needle))
    for args in ACCEPTED:
        p = subprocess.run([a.sojourn] + with_dead(args), capture_output=True, timeout=60)
        if p.returncode != 1:
            failures += 1
            print("FAIL: %r: exit %d (wanted 1: accepted, cluster unreachable), stderr %r"
                  % (args, p.returncode, p.stderr))
    # The address from the environment is checked like the flag's, naming the variable.
    env = dict(os.environ, SOJOURN_BROKER="localhost")
    p = subprocess.run([a.sojourn, "hosts", "--timeout", "2"], capture_output=True, text=True,
                       timeout=60, env=env)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    if p.returncode != 2 or len(lines) != 1 or "SOJOURN_BROKER 'localhost'" not in lines[0]:
        failures += 1
        print("FAIL: SOJOURN_BROKER=localhost sojourn hosts: exit %d, stderr %r"
              % (p.returncode, lines))
    # An export that cannot list the hosts leaves neither FILE nor FILE.tmp; a FILE that
    # cannot be created is refused (exit 2) before any call.
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "x.csv.gz")
        p = subprocess.run([a.sojourn, "export"] + DEAD + ["--out", out], capture_output=True,
                           text=True, timeout=60)
        if p.returncode != 1 or os.listdir(tmp) or f"({out} not written)" not in p.stderr:
            failures += 1
            print("FAIL: export to a dead cluster: exit %d, files %r, stderr %r"
                  % (p.returncode, os.listdir(tmp), p.stderr))
        p = subprocess.run([a.sojourn, "export-jobs"] + DEAD + ["--out", out],
                           capture_output=True, text=True, timeout=60)
        if p.returncode != 1 or os.listdir(tmp) or f"({out} not written)" not in p.stderr:
            failures += 1
            print("FAIL: export-jobs from a dead predictor: exit %d, files %r, stderr %r"
                  % (p.returncode, os.listdir(tmp), p.stderr))
        # A bad address or TLS file is refused (exit 2) before FILE.tmp is created.
        for flags in (["--predictor", "localhost"], ["--tls-ca", os.path.join(tmp, "no.pem")]):
            p = subprocess.run([a.sojourn, "export-jobs"] + flags + ["--out", out],
                               capture_output=True, text=True, timeout=60)
            if p.returncode != 2 or os.listdir(tmp):
                failures += 1
                print("FAIL: export-jobs %r: exit %d, files %r, stderr %r"
                      % (flags, p.returncode, os.listdir(tmp), p.stderr))
        for command in ["export", "export-jobs"]:
            for bad, needle in [(tmp, "is a directory"), (os.path.join(tmp, "no", "x.csv"),
                                                          "cannot create file")]:
                p = subprocess.run([a.sojourn, command] + DEAD + ["--out", bad],
                                   capture_output=True, text=True, timeout=60)
                lines = [l for l in p.stderr.splitlines() if l.strip()]
                if (p.returncode != 2 or len(lines) != 1 or needle not in lines[0]
                        or os.listdir(tmp)):
                    failures += 1
                    print("FAIL: %s --out %s: exit %d, stderr %r"
                          % (command, bad, p.returncode, lines))
    # import-jobs: the log is read and replayed before the predictor is asked. A
    # malformed line or a log with no finished job is exit 2 naming it; a good log
    # reaches the dead predictor (exit 1).
    with tempfile.TemporaryDirectory() as tmp:
        logs = {
            "bad.swf": ("1 0 5 10 1 -1 -1 1 20 -1 1 1 1 1 1 -1 -1 -1\n1 2 3\n", 2, "bad.swf:2:"),
            "none.swf": ("; MaxNodes: 8\n1 0 -1 -1 1 -1 -1 1 20 -1 5 1 1 1 1 -1 -1 -1\n", 2,
                         "none of its 1 jobs has both a wait and a run time (fields 3 and 4); "
                         "field 3 is -1 everywhere"),
            # Jobs the predictor would refuse, named before anything is sent.
            "request.swf": ("; MaxNodes: 8\n1 0 5 10 1 -1 -1 1 20 -1 1 1 1 1 1 -1 -1 -1\n"
                            "2 9 5 10 1 -1 -1 1 40000000 -1 1 1 1 1 1 -1 -1 -1\n", 2,
                            "request.swf:3: job 2: requested_seconds must be in"),
            "user.swf": ("1 0 5 10 1 -1 -1 1 20 -1 1 4294967303 1 1 1 -1 -1 -1\n", 2,
                         "user.swf:1: user id 4294967303 is above 2^31 - 1"),
            "future.swf": ("; UnixStartTime: 17000000000\n"
                           "1 0 5 10 1 -1 -1 1 20 -1 1 1 1 1 1 -1 -1 -1\n", 2,
                           "UnixStartTime 17000000000 and the last finish 15 s"),
            "good.swf": ("; UnixStartTime: 1700000000\n; MaxNodes: 8\n"
                         "1 0 5 10 1 -1 -1 1 20 -1 1 1 1 1 1 -1 -1 -1\n", 1, "127.0.0.1:9"),
        }
        for name, (text, code, needle) in logs.items():
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(text)
            p = subprocess.run([a.sojourn, "import-jobs", "--swf", path] + DEAD,
                               capture_output=True, text=True, timeout=60)
            lines = [l for l in p.stderr.splitlines() if l.strip()]
            if p.returncode != code or len(lines) != 1 or needle not in lines[0]:
                failures += 1
                print("FAIL: import-jobs --swf %s: exit %d, stderr %r (wanted exit %d, %r)"
                      % (name, p.returncode, lines, code, needle))
        # Without MaxNodes / MaxProcs the machine is the largest job's, and the import says so
        # before it sends anything.
        path = os.path.join(tmp, "nosize.swf")
        with open(path, "w") as f:
            f.write("; UnixStartTime: 1700000000\n"
                    "1 0 5 10 3 -1 -1 3 20 -1 1 1 1 1 1 -1 -1 -1\n")
        p = subprocess.run([a.sojourn, "import-jobs", "--swf", path] + DEAD,
                           capture_output=True, text=True, timeout=60)
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        want = "has no usable MaxProcs or MaxNodes header line: the machine is taken as 3 nodes"
        if p.returncode != 1 or len(lines) != 2 or want not in lines[0] \
                or "127.0.0.1:9" not in lines[1]:
            failures += 1
            print("FAIL: import-jobs --swf nosize.swf: exit %d, stderr %r" % (p.returncode, lines))
        # A job number that comes twice (a history imported twice, exported) is said.
        path = os.path.join(tmp, "twice.swf")
        with open(path, "w") as f:
            f.write("; UnixStartTime: 1700000000\n; MaxNodes: 8\n"
                    "7 0 5 10 1 -1 -1 1 20 -1 1 1 1 1 1 -1 -1 -1\n"
                    "8 1 5 10 1 -1 -1 1 20 -1 1 1 1 1 1 -1 -1 -1\n"
                    "7 2 5 10 1 -1 -1 1 20 -1 1 1 1 1 1 -1 -1 -1\n")
        p = subprocess.run([a.sojourn, "import-jobs", "--swf", path] + DEAD,
                           capture_output=True, text=True, timeout=60)
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        want = "has 1 job whose number came before (job 7 at lines 3 and 5)"
        if p.returncode != 1 or len(lines) != 2 or want not in lines[0]:
            failures += 1
            print("FAIL: import-jobs --swf twice.swf: exit %d, stderr %r" % (p.returncode, lines))
    # Ctrl-C while the export waits for a state manager or the predictor (a listener that
    # never answers) removes FILE.tmp: the exit code says the signal, nothing is left.
    for command, flag in [("export", "--statemgr"), ("export-jobs", "--predictor")]:
        with tempfile.TemporaryDirectory() as tmp, socket.socket() as mute:
            mute.bind(("127.0.0.1", 0))
            mute.listen(4)
            out = os.path.join(tmp, "x.csv")
            p = subprocess.Popen([a.sojourn, command, flag,
                                  "127.0.0.1:%d" % mute.getsockname()[1], "--timeout", "60",
                                  "--out", out], stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 30
            while (not os.path.exists(out + ".tmp") and p.poll() is None
                   and time.monotonic() < deadline):
                time.sleep(0.01)  # polls for the file to appear; the export waits 60 s
            p.send_signal(signal.SIGINT)
            code = p.wait(timeout=30)
            if code != 128 + signal.SIGINT or os.listdir(tmp):
                failures += 1
                print("FAIL: %s interrupted: exit %d, files %r, stderr %r"
                      % (command, code, os.listdir(tmp), p.stderr.read()))
            p.stderr.close()
    for command, needles in HELP.items():
        p = subprocess.run([a.sojourn, command, "--help"], capture_output=True, text=True,
                           timeout=60)
        missing = [n for n in needles if n not in p.stdout]
        if p.returncode != 0 or missing or not p.stdout.startswith("usage: sojourn " + command):
            failures += 1
            print("FAIL: sojourn %s --help: exit %d, missing %r in %r"
                  % (command, p.returncode, missing, p.stdout))
    if failures:
        sys.exit(1)
    print("ok: %d bad invocations refused, %d accepted, %d command helps"
          % (len(CASES), len(ACCEPTED), len(HELP)))


if __name__ == "__main__":
    main()
