#!/usr/bin/env python3
"""Bad and extreme input to `sojourn-eval` (a fuzzing pass's findings).

Each case runs the real binary on a small generated input and checks the
contract of every sojourn CLI: bad input exits 2 with a one-line reason on
stderr (naming file:line where there is one), never a crash (signal, abort,
bad_alloc) and never a hang (each case has a timeout); good but unusual input
still runs (exit 0).

usage: eval_bad_input_cli_test.py --eval build/bin/sojourn-eval
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

FAILURES = []


def swf_line(job, submit, wait, run, procs=1, req=3600, cpu=-1):
    return "%d %d %d %d %d %s -1 %d %d -1 1 1 1 1 1 -1 -1 -1\n" % (
        job, submit, wait, run, procs, cpu, procs, req)


def base_swf(extra="", header="; MaxNodes: 8\n", jobs=30):
    text = "; Version: 2.2\n" + header
    for j in range(1, jobs + 1):
        text += swf_line(j, 100 * j, 10, 50 + j, procs=1 + j % 4)
    return text + extra


def check(ev, name, args, rc, want=None, timeout=60, stdin=None):
    try:
        p = subprocess.run([ev] + args, capture_output=True, text=True, timeout=timeout,
                           input=stdin)
    except subprocess.TimeoutExpired:
        FAILURES.append("%s: no answer within %d s (hang)" % (name, timeout))
        return None
    err = p.stderr.strip().splitlines()
    if p.returncode != rc:
        FAILURES.append("%s: exit %d, wanted %d; stderr: %s" % (name, p.returncode, rc,
                                                               p.stderr[-400:]))
        return p
    if rc == 2:
        last = err[-1] if err else ""
        # Progress lines may precede the reason; the reason is one line.
        if want is not None and want not in last:
            FAILURES.append("%s: reason %r lacks %r" % (name, last, want))
    elif want is not None and want not in p.stderr:
        FAILURES.append("%s: stderr lacks %r: %s" % (name, want, p.stderr[-400:]))
    return p


def turnaround_cases(ev, tmp):
    def w(name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    ok = w("ok.swf", base_swf())
    check(ev, "turnaround ok", ["turnaround", "--swf", ok], 0)
    # Jobs without a wait (field 3 -1) cannot be replayed: counted on stderr, not silently
    # left out.
    some_waits = w("some_waits.swf", base_swf(swf_line(31, 4000, -1, 60) + swf_line(32, 4100, -1, 60)))
    check(ev, "turnaround unknown waits", ["turnaround", "--swf", some_waits], 0,
          "2 jobs have no wait time (field 3 is -1)")
    big = 9223372036854775807
    # Item 1: times whose sum overflows int64 crashed (SIGSEGV) or failed with
    # "job 20 is not pending" without a line.
    for name, line, field in [
            ("rt_max", swf_line(31, 4000, 1, big), "field 4"),
            ("waitrt_5e18", swf_line(31, 4000, 5 * 10**18, 5 * 10**18), "field 3"),
            ("wait_max", swf_line(31, 4000, big, 10), "field 3"),
            ("subwait_5e18", swf_line(31, 5 * 10**18, 5 * 10**18, 10), "field 2")]:
        path = w(name + ".swf", base_swf(line))
        check(ev, "turnaround " + name, ["turnaround", "--swf", path], 2,
              "%s:33: %s is" % (path, field))
        check(ev, "turnaround " + name + " skip",
              ["turnaround", "--swf", path, "--on-malformed", "skip"], 0, "skipped malformed line")
    # Many malformed lines skipped: the first 20 named, then a count.
    many = w("many_bad.swf", base_swf("".join(swf_line(100 + k, 5000 + k, 5, big) for k in range(25))))
    check(ev, "turnaround 25 skipped", ["turnaround", "--swf", many, "--on-malformed", "skip"], 0,
          "5 more malformed lines skipped (25 in all)")
    # Item 2: node counts.
    for hdr in ["; MaxNodes: 9223372036854775807\n", "; MaxNodes: 100000000\n"]:
        path = w("maxnodes.swf", base_swf(header=hdr))
        check(ev, "turnaround " + hdr.strip(), ["turnaround", "--swf", path], 2,
              path + ":2: MaxNodes")
    check(ev, "turnaround --nodes 2147483647",
          ["turnaround", "--swf", ok, "--mode", "simulate", "--nodes", "2147483647"], 2,
          "--nodes wants an integer in [1, 1000000]")
    # Item 3: sizes >= 2^31 were cast to int32.
    path = w("procs_huge.swf", base_swf(swf_line(31, 4000, 1, 10, procs=4294967296)))
    check(ev, "turnaround procs 2^32", ["turnaround", "--swf", path], 2, path + ":33: field 5")
    # Item 7: simulate looped through local-load events over a 1e12 s span.
    path = w("rt1e12.swf", base_swf(swf_line(31, 4000, 1, 10**12)))
    check(ev, "turnaround simulate rt 1e12", ["turnaround", "--swf", path, "--mode", "simulate"],
          2, "local-load session events, above the limit")
    check(ev, "turnaround simulate rt 1e12 no local load",
          ["turnaround", "--swf", path, "--mode", "simulate", "--local-load", "0"], 0)
    # Item 9: a used --histdb directory changed the scores of a repeated run.
    hist = os.path.join(tmp, "hist")
    check(ev, "turnaround --histdb new", ["turnaround", "--swf", ok, "--histdb", hist], 0)
    check(ev, "turnaround --histdb reused", ["turnaround", "--swf", ok, "--histdb", hist], 2,
          "is not empty")
    check(ev, "turnaround --histdb-reuse",
          ["turnaround", "--swf", ok, "--histdb", hist, "--histdb-reuse"], 0)
    # Item 10: the output path is checked before the run.
    check(ev, "turnaround --json bad", ["turnaround", "--swf", ok, "--json",
                                        "/nonexistent-dir/x.json"], 2, "--json: cannot write")
    # Item 14: truncated gzip, NUL byte, replay without waits.
    gz = os.path.join(tmp, "cut.swf.gz")
    data = gzip.compress(base_swf(jobs=3000).encode())
    with open(gz, "wb") as f:
        f.write(data[:len(data) // 2])
    check(ev, "turnaround truncated gzip", ["turnaround", "--swf", gz], 2,
          "truncated or corrupt gzip data after line")
    path = w("nul.swf", base_swf("31 4000 1\0 10 1 -1 -1 1 10 -1 1 1 1 1 1 -1 -1 -1\n"
                                 + swf_line(32, 4100, 1, 10)))
    check(ev, "turnaround NUL", ["turnaround", "--swf", path], 2, path + ":33: the line contains a NUL")
    nowait = "; MaxNodes: 8\n" + "".join(swf_line(j, 100 * j, -1, 50) for j in range(1, 20))
    path = w("nowait.swf", nowait)
    out = os.path.join(tmp, "nowait.json")
    p = check(ev, "turnaround replay without waits", ["turnaround", "--swf", path, "--json", out],
              0, "use --mode simulate")
    # The NASA log's case: the tables say "-" (JSON null), never "nan".
    if p is not None and p.returncode == 0:
        rows = [l for l in p.stdout.splitlines() if l.startswith("historical")]
        if "nan" in p.stdout or not rows or rows[0].split()[2] != "-":
            FAILURES.append("turnaround replay without waits: table %r" % p.stdout[-400:])
        with open(out) as f:
            j = json.load(f)
        if j["summary"]["historical"]["turnaround"]["dv"] is not None:
            FAILURES.append("turnaround replay without waits: dv %r, wanted null"
                            % j["summary"]["historical"]["turnaround"])

    # An output path naming the input refused; the log is intact.
    before = open(ok).read()
    check(ev, "turnaround --json = --swf", ["turnaround", "--swf", ok, "--json",
                                            os.path.join(tmp, ".", "ok.swf")], 2,
          "is the input --swf")
    if open(ok).read() != before:
        FAILURES.append("turnaround --json = --swf: the log changed")
    # Cost grows with jobs x nodes: "MaxNodes: 1000000" took 0.3 s per job. Such a run
    # says up front how long it may take and how --max-jobs shortens it, then goes on
    # (read until the warning, then stopped: the run itself would take minutes).
    path = w("maxnodes_1e6.swf", base_swf(header="; MaxNodes: 1000000\n", jobs=3000))
    for name, extra, want in [
            ("replay", [], "3000 jobs to estimate on 1000000 nodes"),
            ("simulate", ["--mode", "simulate", "--local-load", "0", "--nodes", "1000000"],
             "or fewer --nodes keeps it within")]:
        proc = subprocess.Popen([ev, "turnaround", "--swf", path] + extra,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        seen = []
        try:
            for line in proc.stderr:
                seen.append(line)
                if want in line or "malformed lines skipped" in line or len(seen) > 20:
                    break
        finally:
            proc.kill()
            proc.wait()
        if not any(want in l and l.startswith("warning:") for l in seen):
            FAILURES.append("turnaround MaxNodes 1e6 x 3000 jobs %s: no warning %r in %r"
                            % (name, want, seen))
    path = w("maxnodes_1e6_few.swf", base_swf(header="; MaxNodes: 1000000\n", jobs=3))
    check(ev, "turnaround MaxNodes 1e6 x 3 jobs", ["turnaround", "--swf", path], 0)
    # A byte-order mark, a directory, integer options.
    path = w("bom.swf", "\ufeff" + base_swf())
    check(ev, "turnaround BOM", ["turnaround", "--swf", path], 0)
    check(ev, "turnaround --swf directory", ["turnaround", "--swf", tmp], 2, "is a directory")
    check(ev, "turnaround --seed -1", ["turnaround", "--swf", ok, "--seed", "-1"], 2,
          "--seed wants an integer in [0, 9223372036854775807], got '-1'")
    check(ev, "turnaround --max-jobs 1e3", ["turnaround", "--swf", ok, "--max-jobs", "1e3"], 2,
          "--max-jobs wants an integer in [0,")
    # Jobs larger than the machine of the header are kept with a warning naming the
    # first; a header size that is none is ignored with a warning.
    path = w("small_machine.swf", base_swf(swf_line(31, 4000, 1, 10, procs=110)
                                           + swf_line(32, 4100, 1, 10, procs=110),
                                           header="; MaxNodes: 2\n", jobs=1))
    check(ev, "turnaround 110 procs on MaxNodes 2", ["turnaround", "--swf", path], 0,
          path + ":4: warning: field 5 is 110 processors, more than MaxNodes 2")
    check(ev, "turnaround 110 procs on MaxNodes 2 count", ["turnaround", "--swf", path], 0,
          "2 jobs of %s need more processors than the header's machine" % path)
    # A log without its machine's size is replayed on its largest job's, with a warning.
    path = w("no_size.swf", base_swf(header=""))
    check(ev, "turnaround without MaxNodes", ["turnaround", "--swf", path], 0,
          "warning: %s has no usable MaxProcs or MaxNodes header line: the machine is taken as 4 nodes"
          % path)
    for val in ["abc", "0", "-5"]:
        path = w("maxnodes_bad.swf", base_swf(header="; MaxNodes: %s\n" % val))
        check(ev, "turnaround MaxNodes " + val, ["turnaround", "--swf", path], 0,
              path + ":2: warning: MaxNodes '%s' is not a positive integer" % val)
    # Jobs without a processor count are skipped with a count, like simulate.
    zero = "; MaxNodes: 8\n" + "".join(
        swf_line(j, 100 * j, 10, 50, procs=0 if j % 3 == 0 else 2) for j in range(1, 31))
    path = w("zero_procs.swf", zero)
    out = os.path.join(tmp, "zero.json")
    p = check(ev, "turnaround 0 procs", ["turnaround", "--swf", path, "--json", out], 0,
              "10 jobs have no processor count")
    if p is not None and p.returncode == 0:
        with open(out) as f:
            jobs = json.load(f)["jobs"]
        if (jobs["in_log"], jobs["estimated"]) != (30, 20):
            FAILURES.append("turnaround 0 procs: jobs %r, wanted 30 in the log, 20 estimated"
                            % jobs)


def tr_model_cases(ev, tmp):
    def model(path, M, rows):
        with open(path, "w") as f:
            f.write('{"format":"smp-tr-v1","M":%d,"d":6,"init":1,"K":{%s}}' % (M, rows))
        return path

    ok = model(os.path.join(tmp, "ok.json"), 600, '"1":{"2":[0.5],"3":[0.2]},"2":{"1":[0.9]}')
    check(ev, "tr-model ok", ["tr-model", ok], 0)
    # Item 4: 20 transient states at M = 1e6 crashed (SIGSEGV) in the FFT.
    rows = ",".join('"%d":{"3":[0.5]}' % i for i in range(1, 24) if i not in (3, 4, 5))
    path = model(os.path.join(tmp, "n20.json"), 1000000, rows)
    check(ev, "tr-model 20 states M 1e6", ["tr-model", path], 2,
          "20 transient states over M = 1000000 steps need about")
    # Item 13: "1" and "01" merged into a row summing to 1.6.
    path = model(os.path.join(tmp, "dup.json"), 600, '"1":{"3":[0.8]},"01":{"3":[0.8]}')
    check(ev, "tr-model 01 key", ["tr-model", path], 2, 'key "01" is not a positive integer')
    path = model(os.path.join(tmp, "dup2.json"), 600, '"1":{"3":[0.8]},"1":{"3":[0.8]}')
    check(ev, "tr-model repeated key", ["tr-model", path], 2, 'duplicate key "1"')
    # Item 14: a directory is not "invalid JSON ... unexpected end of input".
    check(ev, "tr-model directory", ["tr-model", tmp], 2, "is a directory")
    check(ev, "tr-model --bogus", ["tr-model", "--bogus"], 2, "unknown option '--bogus'")
    check(ev, "tr-model FILE --bogus", ["tr-model", ok, "--bogus"], 2, "unknown option '--bogus'")


def direct_tr(model):
    """TR(1..M) of an smp-tr-v1 model by the direct recursion (paper 000
    eq. 3), written here independently of the C++ code: R_i(m) = P(the sojourn
    in i outlasts m) + sum over up states j and l <= m of K_ij(l) R_j(m - l)."""
    M = model["M"]

    def pmf(p):
        out = [0.0] * (M + 1)
        items = enumerate(p, 1) if isinstance(p, list) else ((int(k), v) for k, v in p.items())
        for l, v in items:
            if l <= M:
                out[l] = v
        return out

    if "K" in model:
        K = {int(i): {int(j): pmf(p) for j, p in row.items()} for i, row in model["K"].items()}
    else:
        K = {int(i): {int(j): [q * x for x in pmf(model["H"][i][j])] for j, q in row.items()}
             for i, row in model["Q"].items()}
    up = (1, 2)  # S1, S2; S3..S5 end the window
    R = {i: [1.0] * (M + 1) for i in up}
    for m in range(1, M + 1):
        for i in up:
            row = K.get(i, {})
            left = 1.0 - sum(sum(k[1:m + 1]) for k in row.values())
            cont = sum(k[l] * R[j][m - l] for j, k in row.items() if j in up
                       for l in range(1, m + 1))
            R[i][m] = left + cont
    return R[model["init"]][1:]


def tr_model_examples(ev):
    """The examples in examples/tr-model run and print the right curves."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                        "tr-model")
    files = sorted(f for f in os.listdir(root) if f.endswith(".json"))
    if files != ["geometric.json", "lab-desktop.json"]:
        FAILURES.append("examples/tr-model holds %s" % files)
    for f in files:
        path = os.path.join(root, f)
        p = check(ev, "tr-model example " + f, ["tr-model", path], 0)
        if p is None or p.returncode != 0:
            continue
        with open(path) as fh:
            model = json.load(fh)
        out = json.loads(p.stdout)
        want = direct_tr(model)
        if f == "geometric.json":
            closed = [0.95 ** m for m in range(1, model["M"] + 1)]
            if max(abs(a - b) for a, b in zip(want, closed)) > 1e-12:
                FAILURES.append("the test's own recursion misses 0.95^m")
        if len(out["tr"]) != len(want) or max(abs(a - b) for a, b in zip(out["tr"], want)) > 1e-9:
            FAILURES.append("tr-model %s: curve differs from the direct recursion" % f)
        mttf = sum([1.0] + want[:-1])
        if abs(out["mttf_steps"] - mttf) > 1e-6:
            FAILURES.append("tr-model %s: mttf_steps %g, wanted %g" % (f, out["mttf_steps"], mttf))


def write_csv(path, rows):
    with open(path, "w") as f:
        f.write("host,timestamp,cpu_load,free_mem_mb\n")
        for r in rows:
            f.write("%s,%d,%s,%s\n" % r)
    return path


def trace_cases(ev, tmp):
    # A small good canonical trace: 4 hosts, 3 weeks at 300 s.
    rows = []
    t0 = 1372629600
    for h in range(4):
        for i in range(0, 21 * 288):
            load = 0.9 if (i // 12 + h) % 7 == 0 else 0.1
            rows.append(("vm%d" % h, t0 + 300 * i, load, 2048))
    good = write_csv(os.path.join(tmp, "good.csv"), rows)
    # Item 5: dense grids over absurd spans (bad_alloc, hangs, 1.7 GB).
    far = write_csv(os.path.join(tmp, "far.csv"), [("a", -10**11, 0.1, 100),
                                                  ("a", 10**11, 0.1, 100)])
    apart = write_csv(os.path.join(tmp, "apart.csv"), [("a", -10**11, 0.1, 100),
                                                      ("a", -10**11 + 300, 0.1, 100),
                                                      ("b", 10**11, 0.1, 100)])
    span2e10 = write_csv(os.path.join(tmp, "span2e10.csv"), [("a", 0, 0.1, 100),
                                                            ("a", 10**10, 0.2, 100),
                                                            ("a", 2 * 10**10, 0.3, 100)])
    for cmd in ("availability", "schedule", "usage"):
        # Above the span limit no --step helps: the reason says so, not "pass a larger --step".
        for name, path, want in [("far", far, "host a spans 2e+11 s"),
                                 ("apart", apart, "the trace spans 2e+11 s")]:
            p = check(ev, cmd + " " + name, [cmd, "--trace", path], 2, want)
            last = p.stderr.strip().splitlines()[-1] if p is not None and p.stderr.strip() else ""
            if "at any grid step; cut the trace" not in last or "--step" in last:
                FAILURES.append("%s %s: reason %r" % (cmd, name, last))
    check(ev, "usage span 2e10", ["usage", "--trace", span2e10], 2, "host a spans 2e+10 s")
    # Item 6: integer options wrapped through static_cast<int>.
    for cmd, opt, val in [("usage", "--residual-steps", "1000000000"),
                          ("usage", "--residual-steps", "2147483648"),
                          ("usage", "--tests", "4294967297"),
                          ("availability", "--max-window-hours", "4294967297"),
                          ("availability", "--max-hosts", "4294967296"),
                          ("schedule", "--submissions", "4294967297"),
                          # Item 8.
                          ("schedule", "--retry-seconds", "9223372036854775807"),
                          ("schedule", "--step", "86400")]:
        check(ev, "%s %s %s" % (cmd, opt, val), [cmd, "--trace", good, opt, val], 2,
              "%s wants an integer in" % opt)
    check(ev, "schedule --step 7", ["schedule", "--trace", good, "--step", "7"], 2,
          "--step 7 s must divide 3600 s")
    # Item 10: output paths and option values checked before the run.
    for cmd in ("availability", "schedule", "usage"):
        check(ev, cmd + " --json bad", [cmd, "--trace", good, "--json", "/nonexistent-dir/x.json"],
              2, "--json: cannot write")
    check(ev, "availability --json directory", ["availability", "--trace", good, "--json", tmp],
          2, "is a directory")
    for opt, val, want in [("--sweep-train-ratios", "0.5,1.5", "outside (0, 1)"),
                           ("--noise", "-1", "outside 0..1000"),
                           ("--noise-windows", "11", "outside 1..10")]:
        check(ev, "availability %s %s" % (opt, val), ["availability", "--trace", good, opt, val],
              2, want)
    # Item 11: --start of an availability matrix.
    matrix = os.path.join(tmp, "m.txt")
    with open(matrix, "w") as f:
        for h in range(3):
            f.write("\t".join("1" if (i + h) % 9 else "0" for i in range(24 * 20)) + "\n")
    for val in ["9223372036854775807", "-9223372036854775807", "99999-01-01"]:
        check(ev, "availability --start " + val,
              ["availability", "--trace", matrix, "--format", "availability-matrix", "--start",
               val], 2, "is outside 1970-01-01..2200-12-31")
    for val in ["9223372036854775807", "99999-01-01"]:
        check(ev, "schedule --start " + val,
              ["schedule", "--trace", matrix, "--format", "availability-matrix", "--start", val],
              2, "is outside 1970-01-01..2200-12-31")
    check(ev, "schedule --start date", ["schedule", "--trace", matrix, "--format",
                                        "availability-matrix", "--start", "1999-07-06",
                                        "--replicates", "1", "--submissions", "3"], 0)
    check(ev, "availability --start 2200-12-31",
          ["availability", "--trace", matrix, "--format", "availability-matrix", "--start",
           "2200-12-31"], 0)
    # A NUL byte in a field (a tar read as a matrix) is escaped: the reason was cut at it.
    nul = os.path.join(tmp, "nul.txt")
    with open(nul, "wb") as f:
        f.write(b"1\t1\n1\tx\x00y\n")
    check(ev, "availability matrix NUL", ["availability", "--trace", nul, "--format",
                                          "availability-matrix"], 2, "'x\\x00y' is not 0 or 1")
    # Item 12.
    for val in ["nan", "inf", "15"]:
        check(ev, "usage --utc-offset-hours " + val,
              ["usage", "--trace", good, "--utc-offset-hours", val], 2, "wants -14..14")
    extra_trace_cases(ev, tmp, good)
    session22_cases(ev, tmp, good)
    session23_cases(ev, tmp, good)
    # Good but unusual input still runs.
    check(ev, "availability good", ["availability", "--trace", good, "--max-window-hours", "31"],
          0)
    check(ev, "usage good", ["usage", "--trace", good, "--residual-steps", "2016", "--tests",
                             "5"], 0)
    check(ev, "schedule good", ["schedule", "--trace", good, "--replicates", "1",
                                "--submissions", "5", "--warmup-days", "2", "--pool", "0"], 0,
          "scheduled 100% of the submissions")
    # One stray sample a year after the rest: the jobs spread over a year of mostly silent
    # hosts go unscheduled. Said on stderr; a rate or mean over no job is null, not 0.
    stray = write_csv(os.path.join(tmp, "stray.csv"),
                      rows + [("vm0", t0 + 365 * 86400, 0.1, 2048)])
    stray_json = os.path.join(tmp, "stray.json")
    check(ev, "schedule stray timestamp", ["schedule", "--trace", stray, "--replicates", "4",
                                           "--submissions", "5", "--json", stray_json], 0,
          "jobs unscheduled (no usable host")
    try:
        with open(stray_json) as f:
            reps = json.load(f)["replicates"]
        empty = [r["summary"]["proactive"] for r in reps
                 if r["summary"]["proactive"]["scheduled"] == 0]
        if not empty or any(s["failure_rate"] is not None or s["avg_makespan_s"] is not None
                            for s in empty):
            FAILURES.append("schedule stray timestamp: want null rates for a replicate that "
                            "scheduled nothing, got %r" % [r["summary"]["proactive"] for r in reps])
    except (OSError, ValueError, KeyError) as e:
        FAILURES.append("schedule stray timestamp: no JSON (%s)" % e)
    check(ev, "schedule --proactive-tr bogus", ["schedule", "--trace", good, "--proactive-tr",
                                                "bogus"], 2, "must be service or own")
    # Both proactive TRs run and say which they used; tools/eval/schedule_tables.py (the doc's
    # tables) prints proactive's figures of each JSON.
    tables = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "eval",
                          "schedule_tables.py")
    runs = []
    for tr in ("own", "service"):
        out = os.path.join(os.path.dirname(good), "schedule-%s.json" % tr)
        check(ev, "schedule --proactive-tr " + tr,
              ["schedule", "--trace", good, "--replicates", "2", "--submissions", "5",
               "--warmup-days", "2", "--proactive-tr", tr, "--json", out], 0)
        try:
            with open(out) as f:
                j = json.load(f)
        except (OSError, ValueError) as e:
            FAILURES.append("schedule --proactive-tr %s: no JSON (%s)" % (tr, e))
            return
        if j.get("proactive_tr") != tr:
            FAILURES.append("schedule JSON proactive_tr %r, wanted %r" % (j.get("proactive_tr"), tr))
        runs.append("%s=%s" % (tr, out))
        p = subprocess.run([sys.executable, tables, "--detail", "run %s=%s" % (tr, out)],
                           capture_output=True, text=True, timeout=60)
        s = j["summary"]["proactive"]
        row = "| proactive | %.4f |" % s["failure_rate"]
        if p.returncode != 0 or row not in p.stdout or "proactive TR `%s`" % tr not in p.stdout:
            FAILURES.append("schedule_tables.py on %s: exit %d, no %r in %r" %
                            (tr, p.returncode, row, p.stdout[:300]))
    p = subprocess.run([sys.executable, tables, "--versus"] + runs, capture_output=True,
                       text=True, timeout=60)
    if p.returncode != 0 or p.stdout.count("\n| ") != 3:
        FAILURES.append("schedule_tables.py --versus: exit %d, %r" % (p.returncode, p.stdout[:400]))
    p = subprocess.run([sys.executable, tables, "x=" + good], capture_output=True, text=True,
                       timeout=60)
    if p.returncode != 2 or len(p.stderr.strip().splitlines()) != 1:
        FAILURES.append("schedule_tables.py on a trace file: exit %d, %r" % (p.returncode, p.stderr))


def extra_trace_cases(ev, tmp, good):
    """Outputs that name an input, option ranges, archives, empty results."""
    # An output naming the input (directly, through "./" or a link) is refused
    # and the input is intact: --cells X truncated the trace X before reading it.
    with open(good, "rb") as f:
        data = f.read()
    link = os.path.join(tmp, "link.csv")
    os.symlink(good, link)
    same = os.path.join(os.path.dirname(good), ".", os.path.basename(good))
    for cmd, opt in [("availability", "--cells"), ("availability", "--json"),
                     ("availability", "--days"), ("schedule", "--json"), ("usage", "--json")]:
        for trace, out in [(good, same), (link, good)]:
            check(ev, "%s %s = --trace" % (cmd, opt), [cmd, "--trace", trace, opt, out], 2,
                  "is the input --trace")
    with open(good, "rb") as f:
        if f.read() != data:
            FAILURES.append("an output option changed the trace")
    out = os.path.join(tmp, "both.out")
    check(ev, "availability --json = --cells", ["availability", "--trace", good, "--json", out,
                                                "--cells", out], 2, "is also --json")
    check(ev, "availability --cells = --days", ["availability", "--trace", good, "--cells", out,
                                                "--days", out], 2, "is also --cells")
    # A run that fails after the checks leaves an earlier --cells intact.
    cells = os.path.join(tmp, "earlier-cells.csv")
    with open(cells, "w") as f:
        f.write("earlier results\n")
    check(ev, "availability failing run keeps --cells",
          ["availability", "--trace", os.path.join(tmp, "missing.csv"), "--cells", cells], 2,
          "missing.csv")
    with open(cells) as f:
        if f.read() != "earlier results\n":
            FAILURES.append("a failing availability run emptied --cells")
    # --smp-options: ranges before the casts, strict booleans, named keys.
    for val, want in [("neighbor_offset_seconds=1e300",
                       "neighbor_offset_seconds wants an integer in [0, 86400], got '1e300'"),
                      ("recent_age_seconds=1e300", "recent_age_seconds wants an integer in [0,"),
                      ("long_age_seconds=-1", "long_age_seconds wants an integer in [0,"),
                      ("borrow_below_windows=1e10", "borrow_below_windows wants an integer in"),
                      ("borrow_below_windows=2.5", "borrow_below_windows wants an integer in"),
                      ("host_frailty=2", "host_frailty wants 0 or 1 (false or true), got '2'"),
                      ("censoring_aware=0.5", "censoring_aware wants 0 or 1"),
                      ("foo", "unknown option 'foo'"),
                      ("prior_windows", "malformed option 'prior_windows': want KEY=VALUE"),
                      ("bogus=1", "unknown option 'bogus'"),
                      ("frequency_weight=2", "frequency_weight wants a number in [0, 1]")]:
        check(ev, "availability --smp-options " + val,
              ["availability", "--trace", good, "--smp-options", val], 2, want)
    # A file named .tar.xz / .tar.gz that is no tarball says so.
    for name in ("fake.tar.xz", "fake.tar.gz"):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write("host,timestamp,cpu_load,free_mem_mb\na,1,0.1,100\n")
        check(ev, "availability " + name, ["availability", "--trace", path], 2,
              "not a tar (plain, gzip or xz compressed) or zip archive")
    # schedule: the work estimate, clock rates, the help's ranges.
    check(ev, "schedule 7e8 jobs", ["schedule", "--trace", good, "--submissions", "100000",
                                    "--replicates", "1000"], 2,
          "--replicates 1000 x --submissions 100000 x 7 --lengths are 700000000 jobs, above the "
          "limit of 1000000")
    check(ev, "schedule --clock-mhz 1,1e308", ["schedule", "--trace", good, "--clock-mhz",
                                               "1,1e308"], 2, "MAX <= 1000000")
    p = subprocess.run([ev, "schedule", "--help"], capture_output=True, text=True, timeout=30)
    for want in ["seed..seed+N-1, 1..1000", "MTTF/JCTF, in (0, 168]", "YYYY-MM-DD",
                 "MAX <= 1000000", "at most 1000000 jobs"]:
        if p.returncode != 0 or want not in p.stdout:
            FAILURES.append("schedule --help lacks %r" % want)
    # usage with nothing to train: "-" and null with a warning, not rows of 0.000.
    one = write_csv(os.path.join(tmp, "one.csv"), [("a", 1372629600, 0.1, 100)])
    out = os.path.join(tmp, "one.json")
    p = check(ev, "usage one sample", ["usage", "--trace", one, "--json", out], 0,
              "warning: nothing to train")
    if p is not None and p.returncode == 0:
        if "0.000" in p.stdout or "| upa vs last4 | - | - | - | 0 |" not in p.stdout:
            FAILURES.append("usage one sample: table %r" % p.stdout[-300:])
        with open(out) as f:
            c = json.load(f)["summary"]["upa_vs_last4"]
        if c != {"better": None, "equivalent": None, "worse": None, "tests": 0}:
            FAILURES.append("usage one sample: upa_vs_last4 %r, wanted nulls" % c)
    # Fewer hosts than the pool: the scheduling block is empty and says why.
    check(ev, "usage 4 hosts", ["usage", "--trace", good, "--tests", "5"], 0,
          "warning: no scheduling test")


def session22_cases(ev, tmp, good):
    """The second fuzzing pass (session 22): each case crashed, destroyed data or lied."""
    # Weights and window counts near the double's ends made predictions NaN
    # and indexed a reliability bin out of range (SIGSEGV).
    for val in ("other_day_type_weight=1.7e308", "neighbor_window_weight=1.7e308",
                "age_prior_windows=1.7e308", "prior_windows=1e-310",
                "other_day_type_weight=4.9e-324"):
        check(ev, "availability --smp-options " + val,
              ["availability", "--trace", good, "--smp-options", val], 2,
              "wants 0 or a number in [1e-06, 1e+06]")
    check(ev, "availability --smp-options at the bounds",
          ["availability", "--trace", good, "--smp-options",
           "other_day_type_weight=1e6,prior_windows=1e-6"], 0)
    # A list flag that names nothing was read as "all"; a negative working set.
    for args, want in [(["--methods", ","], "--methods names nothing"),
                       (["--day-types", ","], "--day-types names nothing"),
                       (["--working-set-mb", "-5"],
                        "--working-set-mb must be a number in [0, 1e+12], got -5")]:
        check(ev, "availability " + " ".join(args), ["availability", "--trace", good] + args, 2,
              want)
    check(ev, "schedule --working-set-mb -5",
          ["schedule", "--trace", good, "--working-set-mb", "-5"], 2,
          "--working-set-mb must be a number in [0, 1e+12], got -5")
    # A GWA trace is a directory: an output inside it replaced a VM's file.
    gwa = os.path.join(tmp, "gwa")
    os.mkdir(gwa)
    header = ("Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\t"
              "CPU usage [MHZ];\tCPU usage [%];\tMemory capacity provisioned [KB];\t"
              "Memory usage [KB];\tDisk read throughput [KB/s];\tDisk write throughput [KB/s];\t"
              "Network received throughput [KB/s];\tNetwork transmitted throughput [KB/s]\n")
    for vm in (1, 2):
        with open(os.path.join(gwa, "%d.csv" % vm), "w") as f:
            f.write(header)
            for i in range(21 * 288):
                t = 1372629600 + 300 * i
                f.write("%d;\t2;\t5000;\t500;\t%s;\t4194304;\t1048576;\t0;\t0;\t0;\t0\n"
                        % (t, "90" if (i // 12 + vm) % 7 == 0 else "10"))
    with open(os.path.join(gwa, "1.csv"), "rb") as f:
        member = f.read()
    for cmd, opt, out in [("availability", "--json", "1.csv"), ("availability", "--cells", "new.csv"),
                          ("schedule", "--json", "sub/../x.json"), ("usage", "--json", "x.json")]:
        check(ev, "%s %s inside the trace directory" % (cmd, opt),
              [cmd, "--trace", gwa, "--format", "gwa", opt, os.path.join(gwa, out)], 2,
              "is inside the input directory --trace")
    with open(os.path.join(gwa, "1.csv"), "rb") as f:
        if f.read() != member:
            FAILURES.append("an output inside the GWA directory changed a VM's file")
    if sorted(os.listdir(gwa)) != ["1.csv", "2.csv"]:
        FAILURES.append("an output was written into the GWA directory: %r" % os.listdir(gwa))
    check(ev, "availability gwa directory, --json outside it",
          ["availability", "--trace", gwa, "--format", "gwa", "--json",
           os.path.join(tmp, "gwa.json")], 0)
    # A host name that is not UTF-8: usage aborted in the JSON dump and left
    # an empty --json; now the name is written with U+FFFD.
    bad = os.path.join(tmp, "nonutf8.csv")
    with open(good, "rb") as f:
        data = f.read().replace(b"vm1,", b"bad\xff\xfehost,")
    with open(bad, "wb") as f:
        f.write(data)
    out = os.path.join(tmp, "nonutf8.json")
    for cmd in ("usage", "availability", "schedule"):
        p = check(ev, cmd + " non-UTF-8 host", [cmd, "--trace", bad, "--json", out], 0,
                  timeout=120)
        if p is not None and p.returncode == 0:
            with open(out, encoding="utf-8") as f:
                text = f.read()
            json.loads(text)
            if cmd == "usage" and "bad\ufffd\ufffdhost" not in text:
                FAILURES.append("usage non-UTF-8 host: name not written with U+FFFD")
    # A report that cannot be written to stdout is a failure, not exit 0.
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            p = subprocess.run([ev, "availability", "--trace", good], stdout=full,
                               stderr=subprocess.PIPE, text=True, timeout=120)
        if p.returncode != 1 or "cannot write the report to standard output" not in p.stderr:
            FAILURES.append("availability > /dev/full: exit %d, stderr %r" % (p.returncode,
                                                                              p.stderr[-300:]))
    # An SWF "log" with no line end was read on until killed (the search for the
    # newline restarted on every block): a line over 16 MiB is refused.
    check(ev, "turnaround /dev/zero", ["turnaround", "--swf", "/dev/zero"], 2,
          "/dev/zero:1: a line longer than 16 MiB: not an SWF log", timeout=60)
    # Input far larger than memory: one line and exit 1, not an uncaught bad_alloc.
    p = subprocess.run("ulimit -v 2000000; exec %s availability --trace /dev/zero" % ev,
                       shell=True, capture_output=True, text=True, timeout=120)
    if "AddressSanitizer failed to allocate" in p.stderr:
        print("skip: availability /dev/zero under ulimit (AddressSanitizer needs its shadow "
              "memory beyond any ulimit -v)")
    elif p.returncode != 1 or "out of memory" not in p.stderr:
        FAILURES.append("availability /dev/zero under ulimit: exit %d, stderr %r" %
                        (p.returncode, p.stderr[-300:]))


def session23_cases(ev, tmp, good):
    """The documentation review of session 23: limits the docs state, held."""
    # The thresholds the state manager accepts: th1 in (0, 1], th2 in [th1, 1]
    # (th2 1.5 and th1 0 ran, classifying nothing as S3 or as S1).
    for cmd in ("availability", "schedule"):
        check(ev, cmd + " --th2 1.5", [cmd, "--trace", good, "--th2", "1.5"], 2,
              "--th2 must be a number in [--th1, 1] = [0.2, 1], got 1.5")
        check(ev, cmd + " --th1 0", [cmd, "--trace", good, "--th1", "0"], 2,
              "--th1 must be a number in (0, 1], got 0")
    # The job limit is printed as the number it is (1e+06 read as the limit).
    check(ev, "schedule 1001000 jobs", ["schedule", "--trace", good, "--replicates", "1000",
                                        "--submissions", "143", "--lengths", "1,2,3,4,5,6,7"], 2,
          "are 1001000 jobs, above the limit of 1000000")
    # A span of 10,000 days and 300 s is over the documented 10,000 days
    # (exactly 10,000 days was refused too: 2,880,001 points, "above the limit
    # of 2.88e+06"; it is accepted now, a 16 s run, not repeated here).
    span = os.path.join(tmp, "span.csv")
    write_csv(span, [("a", 0, 0.1, 100), ("a", 864000300, 0.1, 100)])
    check(ev, "usage 10,000 days + 300 s", ["usage", "--trace", span], 2,
          "host a spans 8.64e+08 s (0 to 864000300), above the limit of 8.64e+08 s")
    # --max-hosts 0 is "all" in every command (usage refused it).
    check(ev, "usage --max-hosts 0", ["usage", "--trace", good, "--max-hosts", "0", "--tests", "1"],
          0, timeout=120)
    # Replay takes the machine and the times from the log: simulate-only flags
    # were ignored without a word.
    swf = os.path.join(tmp, "s23.swf")
    with open(swf, "w") as f:
        f.write(base_swf())
    for flag, val in (("--nodes", "64"), ("--local-load", "50"), ("--seed", "3")):
        check(ev, "turnaround replay " + flag, ["turnaround", "--swf", swf, flag, val], 2,
              flag + " is for --mode simulate")
    check(ev, "turnaround simulate --nodes", ["turnaround", "--swf", swf, "--mode", "simulate",
                                              "--nodes", "16", "--max-jobs", "5"], 0)


def session27_cases(ev, tmp, good):
    """The command-line audit of session 27."""
    # The replicates' seeds seed..seed+N-1 overflowed int64 (UBSan; seeds
    # printed as 9223372036854775807..-9223372036854775807).
    check(ev, "schedule seed overflow", ["schedule", "--trace", good, "--seed",
                                         "9223372036854775807", "--replicates", "2"], 2,
          "must stay within 0..2^63-1")
    check(ev, "schedule seed at the edge", ["schedule", "--trace", good, "--seed",
                                            "9223372036854775806", "--replicates", "2",
                                            "--submissions", "2", "--lengths", "1"], 0)
    # Two lengths with one JSON key ("1") lost one's results.
    check(ev, "schedule lengths twice", ["schedule", "--trace", good, "--lengths",
                                         "1.0000001,1.0000002"], 2, "--lengths names 1 hours twice")
    check(ev, "schedule lengths 1,1", ["schedule", "--trace", good, "--lengths", "1,1"], 2,
          "twice")
    # A repeated option: the last one used to win silently.
    check(ev, "availability --methods twice", ["availability", "--trace", good, "--methods",
                                               "smp", "--methods", "bm"], 2,
          "option --methods is given twice")
    # A repeated header column: the last one used to win silently.
    dup = os.path.join(tmp, "dupcol.csv")
    with open(dup, "w") as f:
        f.write("host,timestamp,cpu_load,free_mem_mb,cpu_load\nvm1,1000,0.1,100,0.95\n")
    check(ev, "duplicate column", ["availability", "--trace", dup], 2,
          "dupcol.csv:1: duplicate column 'cpu_load' (columns 3 and 5)")
    # The default noise windows stop at --max-window-hours (10 h failed after
    # the whole backtest, and no JSON was written).
    out = os.path.join(tmp, "noise4.json")
    check(ev, "noise with 4 h windows", ["availability", "--trace", good, "--max-window-hours",
                                         "4", "--noise", "1", "--methods", "smp",
                                         "--json", out], 0, timeout=180)
    if os.path.exists(out):
        with open(out) as f:
            windows = sorted(int(w) for w in json.load(f)["noise_injection"]["smp"]["1"])
        if windows != [1, 2, 3]:
            FAILURES.append("noise windows with --max-window-hours 4: %s" % windows)
    else:
        FAILURES.append("noise with 4 h windows: no JSON")
    # --histdb follows the services' rule: RocksDB's files went in among
    # unrelated ones with --histdb-reuse.
    swf = os.path.join(tmp, "s27.swf")
    with open(swf, "w") as f:
        f.write(base_swf())
    other = os.path.join(tmp, "notes-dir")
    os.makedirs(other)
    with open(os.path.join(other, "notes.txt"), "w") as f:
        f.write("keep\n")
    check(ev, "histdb among other files", ["turnaround", "--swf", swf, "--histdb", other,
                                           "--histdb-reuse"], 2, "--histdb")
    if sorted(os.listdir(other)) != ["notes.txt"]:
        FAILURES.append("--histdb wrote into %s: %s" % (other, os.listdir(other)))
    # A misspelt field of a model is named (K_First was ignored: TR 0.9, not 0.1).
    model = os.path.join(tmp, "kfirst.json")
    with open(model, "w") as f:
        f.write('{"format":"smp-tr-v1","M":3,"d":6,"init":1,"K":{"1":{"3":[0.1]}},'
                '"K_First":{"1":{"3":[0.9]}}}')
    check(ev, "tr-model K_First", ["tr-model", model], 2, 'did you mean "K_first"?')
    # --start / --period of a trace that is not a matrix were ignored unsaid.
    for cmd in ("availability", "schedule"):
        check(ev, cmd + " --period canonical", [cmd, "--trace", good, "--period", "7"], 2,
              "--period applies to availability matrices only")
    # A truncated .xz is named as such (it was "xz decoding failed (code 10)").
    import lzma
    with open(good, "rb") as f:
        packed = lzma.compress(f.read())
    cut = os.path.join(tmp, "cut.csv.xz")
    with open(cut, "wb") as f:
        f.write(packed[:len(packed) // 2])
    check(ev, "truncated xz", ["availability", "--trace", cut], 2, "truncated")

def session28_cases(ev, tmp, good):
    """Session 28."""
    # A --json that cannot be written at the end (full disk) is exit 2 with the
    # reason in every command (usage said exit 1; the others could exit 0 with
    # a short JSON lost at close).
    if os.path.exists("/dev/full"):
        swf = os.path.join(tmp, "s28.swf")
        with open(swf, "w") as f:
            f.write(base_swf())
        for cmd, args in [("availability", ["--trace", good, "--methods", "smp,last"]),
                          ("schedule", ["--trace", good, "--submissions", "2", "--lengths", "1"]),
                          ("usage", ["--trace", good, "--tests", "1"]),
                          ("turnaround", ["--swf", swf])]:
            check(ev, cmd + " --json /dev/full", [cmd] + args + ["--json", "/dev/full"], 2,
                  "write error on /dev/full (No space left on device)", timeout=180)
    # A day type without any relative error (11 days from a Monday: the only
    # weekend is in the test part) is null in the JSON, and stderr says so
    # (only "nothing at all scored" was said).
    short = os.path.join(tmp, "eleven-days.csv")
    with open(short, "w") as f:
        f.write("host,timestamp,cpu_load,free_mem_mb\n")
        for h in ("a", "b", "c"):
            for i in range(11 * 288):
                busy = (i // 12 + ord(h)) % 9 == 0
                f.write("%s,%d,%s,2000\n" % (h, 1372636800 + 300 * i, "0.95" if busy else "0.1"))
    out = os.path.join(tmp, "eleven-days.json")
    p = check(ev, "availability 11 days", ["availability", "--trace", short, "--json", out], 0)
    if p is not None and p.returncode == 0:
        if "warning: no weekend relative error" not in p.stderr:
            FAILURES.append("11 days: no weekend warning: %r" % p.stderr[-400:])
        if "warning: no weekday relative error" in p.stderr:
            FAILURES.append("11 days: a weekday warning: %r" % p.stderr[-400:])
        with open(out) as f:
            summary = json.load(f)["summary"]
        if summary["smp"]["weekend"]["2"]["avg_rel_err"] is not None:
            FAILURES.append("11 days: weekend 2 h %r" % summary["smp"]["weekend"]["2"])
        if summary["smp"]["weekday"]["2"]["avg_rel_err"] is None:
            FAILURES.append("11 days: weekday 2 h %r" % summary["smp"]["weekday"]["2"])
    for cmd in ("availability", "schedule"):
        check(ev, cmd + " --working-set-mb 1e300", [cmd, "--trace", good, "--working-set-mb",
                                                    "1e300"], 2,
              "--working-set-mb must be a number in [0, 1e+12]")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eval", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        turnaround_cases(a.eval, tmp)
        tr_model_cases(a.eval, tmp)
        tr_model_examples(a.eval)
        trace_cases(a.eval, tmp)
        session27_cases(a.eval, tmp, os.path.join(tmp, "good.csv"))
        session28_cases(a.eval, tmp, os.path.join(tmp, "good.csv"))
    if FAILURES:
        for f in FAILURES:
            print("FAIL: " + f)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
