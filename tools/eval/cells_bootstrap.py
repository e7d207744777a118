#!/usr/bin/python3
"""Host-bootstrap intervals for smp against the best baseline, from `--cells`.

Reads the per-cell CSV of `sojourn-eval availability --cells OUT` and, for
every (day type, window length), compares --method (smp by default) with the
baseline whose average relative error over the scored cells is lowest (the
"best baseline" of the verdict tables; window_frequency and every column after
emp_tr other than --method and --exclude are candidates). The gap is
avg_rel_err(method) - avg_rel_err(best baseline), computed exactly as the JSON
summary computes avg_rel_err (the mean over start hours of the mean of
|pred - emp| / emp over that hour's cells with n_test >= --min-test-windows and
emp > 0), so the "gap" column equals the difference of the two summary entries.

Cells of one host share its behaviour, so they are not independent: the
interval resamples hosts with replacement (--resamples times, fixed --seed),
recomputes the gap against the same baseline each time, and prints its 2.5 %
and 97.5 % quantiles and the share of resamples in which the method loses
(gap > 0). An interval that contains 0 means that, with this many hosts, the
trace cannot tell the two methods apart at that length. Standard library only.

Commands behind docs/EVALUATION.md ("how sure are the verdicts"):

  E=build/bin/sojourn-eval
  $E availability --trace ../shared/data/bitbrains-rnd-vm-load/bitbrains-rnd-100vms-2013Q3.tar.xz \\
      --cells bb.csv
  tools/eval/cells_bootstrap.py --cells bb.csv
  $E availability --trace ../shared/data/microsoft99-desktop-availability/PingData00-even-rows.txt.gz \\
      --cells desktop.csv
  tools/eval/cells_bootstrap.py --cells desktop.csv
"""

import argparse
import collections
import csv
import random
import sys

FIXED = ["host", "day_type", "start_hour", "window_hours", "init_state", "n_test",
         "n_survived", "emp_tr"]


def die(reason):
    print("cells_bootstrap: " + reason, file=sys.stderr)
    sys.exit(2)


def quantile(sorted_values, q):
    """Linear interpolation between order statistics (numpy's default)."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", required=True, help="CSV written by sojourn-eval availability --cells")
    ap.add_argument("--method", default="smp", help="the method under test (default smp)")
    ap.add_argument("--exclude", default="smp_paper",
                    help="comma-separated columns that are not baselines (default smp_paper)")
    ap.add_argument("--min-hours", type=int, default=2,
                    help="shortest window length reported (default 2, the issue's claim)")
    ap.add_argument("--min-test-windows", type=int, default=3)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--influence", type=int, default=0, metavar="K",
                    help="after the table, for every row where the method loses, the K hosts "
                         "whose removal lowers the gap most (jackknife), with the gap without each")
    a = ap.parse_args()
    if a.resamples < 10:
        die("--resamples must be at least 10, got %d" % a.resamples)
    if a.influence < 0:
        die("--influence must be 0 or more, got %d" % a.influence)

    try:
        reader = csv.DictReader(open(a.cells, newline=""))
        header = reader.fieldnames or []
        rows = list(reader)
    except OSError as e:
        die(str(e))
    missing = [c for c in FIXED if c not in header]
    if missing:
        die("%s is not a --cells CSV (no column %s)" % (a.cells, missing[0]))
    if a.method not in header:
        die("%s has no column %r" % (a.cells, a.method))
    excluded = set(x for x in a.exclude.split(",") if x) | {a.method}
    baselines = [c for c in header[len(FIXED):] if c not in excluded]
    if not baselines:
        die("%s has no baseline column besides %s" % (a.cells, a.method))
    methods = [a.method] + baselines

    # (day type, length) -> host -> start hour -> [cells, sum of errors per method]
    groups = collections.defaultdict(dict)
    for line, r in enumerate(rows, start=2):
        try:
            n, emp, hours = int(r["n_test"]), float(r["emp_tr"]), int(r["window_hours"])
            if n < a.min_test_windows or emp <= 0 or hours < a.min_hours:
                continue
            errs = [abs(float(r[m]) - emp) / emp for m in methods]
            hour = int(r["start_hour"])
            if not 0 <= hour < 24:
                raise ValueError
        except (TypeError, ValueError):
            die("%s:%d: a non-numeric field" % (a.cells, line))
        acc = groups[(r["day_type"], hours)].setdefault(r["host"], {}).setdefault(
            hour, [0] + [0.0] * len(methods))
        acc[0] += 1
        for i, e in enumerate(errs):
            acc[i + 1] += e
    if not groups:
        die("%s has no scored cell of %d h or longer" % (a.cells, a.min_hours))

    def gap_of(per_host, sample, i, j):
        """avg_rel_err of method i minus that of method j over the hosts in
        sample (with repeats)."""
        count, ti, tj = [0] * 24, [0.0] * 24, [0.0] * 24
        for h in sample:
            for hour, acc in per_host[h].items():
                count[hour] += acc[0]
                ti[hour] += acc[i + 1]
                tj[hour] += acc[j + 1]
        hours = [hr for hr in range(24) if count[hr]]
        return sum((ti[hr] - tj[hr]) / count[hr] for hr in hours) / len(hours)

    rng = random.Random(a.seed)
    print("| day type | hours | best baseline | %s − best | 95 %% host-bootstrap interval | "
          "resamples where %s loses | hosts | cells |" % (a.method, a.method))
    print("|---|---:|---|---:|---|---:|---:|---:|")
    losing = []
    for (day_type, hours) in sorted(groups):
        print("cells_bootstrap: %s %d h" % (day_type, hours), file=sys.stderr)
        per_host = groups[(day_type, hours)]
        hosts = sorted(per_host)
        cells = sum(acc[0] for h in hosts for acc in per_host[h].values())
        # The lowest avg_rel_err is the lowest difference to the method's.
        best = min(range(1, len(methods)), key=lambda i: gap_of(per_host, hosts, i, 0))
        gap = gap_of(per_host, hosts, 0, best)
        gaps = []
        for _ in range(a.resamples):
            sample = [hosts[rng.randrange(len(hosts))] for _ in hosts]
            gaps.append(gap_of(per_host, sample, 0, best))
        gaps.sort()
        loses = sum(1 for g in gaps if g > 0) / len(gaps)
        print("| %s | %d | %s | %+.4f | [%+.4f, %+.4f] | %.0f %% | %d | %d |"
              % (day_type, hours, methods[best], gap, quantile(gaps, 0.025),
                 quantile(gaps, 0.975), 100 * loses, len(hosts), cells))
        if gap > 0 and a.influence > 0:
            without = sorted((gap_of(per_host, [x for x in hosts if x != h], 0, best), h)
                             for h in hosts)
            losing.append((day_type, hours, methods[best], gap, without[:a.influence]))
    for day_type, hours, baseline, gap, without in losing:
        print("\n%s %d h, %s − %s = %+.4f; without host: %s" % (
            day_type, hours, a.method, baseline, gap,
            ", ".join("%s %+.4f" % (h, g) for g, h in without)))


if __name__ == "__main__":
    main()
