#!/usr/bin/python3
"""The ablation table of docs/EVALUATION.md ("Verdict", "Ablation"): smp against window_frequency with one
option of the library's default EstimatorOptions switched, or the prior source changed, per row.

Runs `sojourn-eval availability --methods smp,window_frequency` once per (trace, variant) and prints the
Markdown table (Brier of smp, all and busy hosts, its reduction against window_frequency, and smp's
acc_grand). Standard library only. From the repository root, after `scripts/build` (4 minutes on 2 cores
before session 20; 45 minutes with session 20's first online host frailty, whose default Bitbrains run took 2 minutes;
the faster shrinkage of the same session brought that run to 72 s):

  tools/eval/availability_ablation.py \\
      --trace desktop=../shared/data/microsoft99-desktop-availability/PingData00-even-rows.txt.gz \\
      --trace bitbrains=../shared/data/bitbrains-rnd-vm-load/bitbrains-rnd-100vms-2013Q3.tar.xz

Progress goes to stderr; --keep DIR keeps each run's JSON.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

# (description, extra arguments); the first row is the defaults.
VARIANTS = [
    ("library defaults, prior pooled over hosts", []),
    ("host frailty from the training half only, not the history up to each window (as before session 20)",
     ["--smp-frailty", "training"]),
    ("borrowing the other day type only below 8 windows (as before session 18)",
     ["--smp-options", "borrow_below_windows=8"]),
    ("without the load band of the first sojourn (as before session 13)",
     ["--smp-options", "load_band_first_sojourn=0"]),
    ("every length from the 10 h windows (as before session 10)", ["--train-windows", "longest"]),
    ("without host frailty by day type (one ratio over all days, as before session 9)",
     ["--smp-options", "frailty_by_day_type=0"]),
    ("with the session 6 prior strength (prior_windows=6)", ["--smp-options", "prior_windows=6"]),
    ("with a prior worth 24 windows", ["--smp-options", "prior_windows=24"]),
    ("without the long age class (two age classes, as before session 6)",
     ["--smp-options", "long_age_seconds=0"]),
    ("with the per-class age prior (session 6, off by default)", ["--smp-options", "per_class_age_prior=1"]),
    ("without level-corrected borrowing (the borrowed windows as they are, as before session 5)",
     ["--smp-options", "level_corrected_borrowing=0"]),
    ("without host frailty", ["--smp-options", "host_frailty=0"]),
    ("shrinkage prior from the same host’s other start hours", ["--smp-prior", "hours"]),
    ("no shrinkage prior", ["--smp-prior", "none"]),
    ("no shrinkage prior, no age passed", ["--smp-prior", "none", "--smp-age", "off"]),
    ("without shrinkage (prior_windows=0)", ["--smp-options", "prior_windows=0"]),
    ("without other-day-type borrowing", ["--smp-options", "borrow_below_windows=0"]),
    ("without neighbouring start times", ["--smp-options", "neighbor_window_weight=0"]),
    ("without age conditioning", ["--smp-options", "recent_age_seconds=0"]),
    ("without first-sojourn kernel", ["--smp-options", "first_sojourn_kernel=0"]),
    ("with recency weighting (half-life 4 windows)", ["--smp-options", "recency_half_life_windows=4"]),
    ("with frequency blend 0.5", ["--smp-options", "frequency_weight=0.5"]),
    ("all issue-7 options, host frailty and the load band off (censoring-aware SMP only)",
     ["--smp-options",
      "prior_windows=0,borrow_below_windows=0,neighbor_window_weight=0,recent_age_seconds=0,host_frailty=0,"
      "load_band_first_sojourn=0"]),
]


def reduction(overall):
    smp, wf = overall["smp"]["brier"], overall["window_frequency"]["brier"]
    return 100.0 * (1.0 - smp / wf) if wf else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--trace", action="append", required=True, metavar="NAME=PATH",
                    help="a trace to run (repeatable); NAME labels its rows")
    ap.add_argument("--eval", default="build/bin/sojourn-eval", help="the sojourn-eval binary")
    ap.add_argument("--keep", help="directory for each run's JSON (default: a temporary one)")
    args = ap.parse_args()
    traces = []
    for t in args.trace:
        name, sep, path = t.partition("=")
        if not sep or not name or not path:
            sys.exit("availability_ablation.py: --trace must be NAME=PATH, got '%s'" % t)
        traces.append((name, path))
    out_dir = args.keep or tempfile.mkdtemp(prefix="sojourn-ablation-")
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    for i, (desc, extra) in enumerate(VARIANTS):
        for name, path in traces:
            out = os.path.join(out_dir, "%s-%02d.json" % (name, i))
            cmd = [args.eval, "availability", "--trace", path, "--methods", "smp,window_frequency",
                   "--json", out] + extra
            sys.stderr.write("[%d/%d] %s: %s\n" % (i + 1, len(VARIANTS), name, desc))
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                sys.exit("availability_ablation.py: %s failed (exit %d): %s"
                         % (" ".join(cmd), r.returncode, r.stderr.strip().splitlines()[-1:]))
            with open(out) as f:
                rep = json.load(f)
            o, b = rep["overall"], rep["overall_busy"]
            rows.append("| %s | %s | `%s` | %.5f | %.1f %% | %.5f | %.1f %% | %.4f |" % (
                name, desc, " ".join(extra) or "(none)", o["smp"]["brier"], reduction(o),
                b["smp"]["brier"], reduction(b), o["smp"]["acc_grand"]))
    print("| trace | smp variant | extra arguments | smp Brier (all) | Brier reduction vs window_frequency "
          "| smp Brier (busy) | Brier reduction vs window_frequency | smp acc_grand |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
