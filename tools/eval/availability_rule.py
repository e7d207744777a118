#!/usr/bin/python3
"""The decision rule of docs/EVALUATION.md for a change of smp's defaults, over several runs.

For each run it compares two `sojourn-eval availability` reports, BEFORE and AFTER: smp's pooled Brier score (all
hosts and busy hosts) and the losing cells, the (day type, window length >= 2 h) where smp's average relative error
is not below the best baseline's (every method but smp and smp_paper, as the verdict tables count them). It prints a
Markdown table, a row per run, and the rule's verdict: AFTER holds iff its Brier is not higher than BEFORE's on any
run, all and busy hosts, and its losing cells summed over the runs are not more. Exit 0 either way (it reports; it
does not decide); 2 on bad input. Standard library only.

Either runs sojourn-eval itself (--run NAME=PATH[,FORMAT], twice: with --before and with --after arguments), or
reads reports already written (--pair NAME=BEFORE.json,AFTER.json). From the repository root, after
`scripts/build`, the session 20 table ("the host's frailty from its history up to the window"; about 4.5 minutes on
2 cores):

  scripts/split-trace-halves /tmp/halves
  tools/eval/availability_rule.py --before "--smp-frailty training" \\
      --run desktop=../shared/data/microsoft99-desktop-availability/PingData00-even-rows.txt.gz \\
      --run Bitbrains=../shared/data/bitbrains-rnd-vm-load/bitbrains-rnd-100vms-2013Q3.tar.xz \\
      --run desktop-a=/tmp/halves/desktop-a.txt.gz,availability-matrix \\
      --run desktop-b=/tmp/halves/desktop-b.txt.gz,availability-matrix \\
      --run bitbrains-a=/tmp/halves/bitbrains-a,gwa --run bitbrains-b=/tmp/halves/bitbrains-b,gwa

The session 18 table ("always borrowing the other day type") is the same six runs with --before
"--smp-frailty training --smp-options borrow_below_windows=8" --after "--smp-frailty training" (about 3 minutes).

Progress goes to stderr; --keep DIR keeps each run's JSON.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

NOT_BASELINES = {"smp", "smp_paper"}


def die(msg):
    sys.stderr.write("availability_rule.py: %s\n" % msg)
    sys.exit(2)


def losing_cells(report, min_hours=2):
    """[(day type, hours, smp - best, best method)] where smp does not beat the best baseline."""
    summary = report.get("summary")
    if not isinstance(summary, dict) or "smp" not in summary:
        die("report has no summary for smp (was it run with --methods including smp and a baseline?)")
    out = []
    for day_type in ("weekday", "weekend"):
        for hours in sorted(summary["smp"].get(day_type, {}), key=float):
            if float(hours) < min_hours:
                continue
            smp = summary["smp"][day_type][hours]["avg_rel_err"]
            if smp is None:
                continue
            best = None
            for method, by_day in summary.items():
                if method in NOT_BASELINES:
                    continue
                v = by_day.get(day_type, {}).get(hours, {}).get("avg_rel_err")
                if v is not None and (best is None or v < best[0]):
                    best = (v, method)
            if best is not None and smp >= best[0]:
                out.append((day_type, hours, smp - best[0], best[1]))
    return out


def brier(report, key):
    try:
        return report[key]["smp"]["brier"]
    except (KeyError, TypeError):
        die("report has no %s.smp.brier" % key)


def describe(cells):
    if not cells:
        return "none"
    return ", ".join("%s %s h %+.4f (%s)" % c for c in cells)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        die("cannot read report %s: %s" % (path, e))


def run_eval(binary, name, path, fmt, extra, out):
    cmd = [binary, "availability", "--trace", path, "--json", out] + extra
    if fmt:
        cmd += ["--format", fmt]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        die("%s: %s failed (exit %d): %s" % (name, " ".join(cmd), r.returncode,
                                              (r.stderr.strip().splitlines() or [""])[-1]))
    return load(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--run", action="append", default=[], metavar="NAME=PATH[,FORMAT]",
                    help="a trace to run twice (repeatable)")
    ap.add_argument("--pair", action="append", default=[], metavar="NAME=BEFORE.json,AFTER.json",
                    help="two reports already written (repeatable)")
    ap.add_argument("--before", default="", help="extra sojourn-eval arguments of the BEFORE runs")
    ap.add_argument("--after", default="", help="extra sojourn-eval arguments of the AFTER runs")
    ap.add_argument("--eval", default="build/bin/sojourn-eval", help="the sojourn-eval binary")
    ap.add_argument("--keep", help="directory for each run's JSON (default: a temporary one)")
    args = ap.parse_args()
    if not args.run and not args.pair:
        die("give at least one --run or --pair")
    if args.run and args.before == args.after:
        die("--before and --after are the same: both runs would be one")

    runs = []  # (name, before report, after report)
    for p in args.pair:
        name, sep, files = p.partition("=")
        before, comma, after = files.partition(",")
        if not sep or not name or not comma or not before or not after:
            die("--pair must be NAME=BEFORE.json,AFTER.json, got '%s'" % p)
        runs.append((name, load(before), load(after)))
    if args.run:
        out_dir = args.keep or tempfile.mkdtemp(prefix="sojourn-rule-")
        os.makedirs(out_dir, exist_ok=True)
        for i, r in enumerate(args.run):
            name, sep, rest = r.partition("=")
            path, _, fmt = rest.partition(",")
            if not sep or not name or not path:
                die("--run must be NAME=PATH[,FORMAT], got '%s'" % r)
            reports = []
            for side, extra in (("before", args.before), ("after", args.after)):
                sys.stderr.write("[%d/%d] %s, %s\n" % (i + 1, len(args.run), name, side))
                out = os.path.join(out_dir, "%s-%s.json" % (name, side))
                reports.append(run_eval(args.eval, name, path, fmt, shlex.split(extra), out))
            runs.append((name, reports[0], reports[1]))

    print("| run | smp Brier, all hosts: before → after | busy hosts: before → after "
          "| losing cells before | after |")
    print("|---|---|---|---|---|")
    brier_ok = True
    lost = [0, 0]
    for name, before, after in runs:
        all_b, all_a = brier(before, "overall"), brier(after, "overall")
        busy_b, busy_a = brier(before, "overall_busy"), brier(after, "overall_busy")
        lose_b, lose_a = losing_cells(before), losing_cells(after)
        lost[0] += len(lose_b)
        lost[1] += len(lose_a)
        # Busy hosts may be absent from a run (null); only numbers compare.
        for b, a in ((all_b, all_a), (busy_b, busy_a)):
            if b is not None and a is not None and a > b:
                brier_ok = False
        fmt = lambda v: "-" if v is None else "%.5f" % v
        print("| %s | %s → %s | %s → %s | %s | %s |" % (name, fmt(all_b), fmt(all_a), fmt(busy_b),
                                                        fmt(busy_a), describe(lose_b), describe(lose_a)))
    holds = brier_ok and lost[1] <= lost[0]
    print()
    print("rule: Brier not higher on any run (all and busy hosts): %s; losing cells %d -> %d: %s; %s"
          % ("yes" if brier_ok else "no", lost[0], lost[1], "not more" if lost[1] <= lost[0] else "more",
             "holds" if holds else "does not hold"))


if __name__ == "__main__":
    main()
