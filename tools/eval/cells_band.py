#!/usr/bin/python3
"""Calibration of one band of cells from `sojourn-eval availability --cells OUT`.

Selects the scored cells of one day type and window length (n_test >= the
protocol's minimum, 3 by default, and emp_tr > 0, as the relative error does),
optionally only those where another method predicts exactly a value
(--where avail_quantile=1) or less than one (--where-below window_frequency=1:
the cells whose host had a failing training window), and among them those whose prediction by --method
lies in [--lo, --hi). Prints the number of cells, the mean predicted TR of
--method and of --compare methods, the mean empirical TR, and each method's
contribution to the average relative error of the whole day type and length
(sum over the band of |pred - emp| / emp divided by the number of cells of the
day type and length). Standard library only.

Commands behind docs/EVALUATION.md ("a stronger shrinkage prior", "Where smp loses"):

  E=build/bin/sojourn-eval
  scripts/split-trace-halves /tmp/halves
  $E availability --trace /tmp/halves/desktop-a.txt.gz --format availability-matrix --cells da.csv
  tools/eval/cells_band.py --cells da.csv --day-type weekend --hours 10 \\
      --where avail_quantile=1 --lo 0 --hi 0.9 --compare avail_quantile
  $E availability --trace /tmp/halves/vm-all --format gwa --cells bb.csv
  tools/eval/cells_band.py --cells bb.csv --day-type weekend --hours 2 --lo 0.5 --hi 0.8 \\
      --compare window_frequency
  tools/eval/cells_band.py --cells bb.csv --day-type weekday --hours 2 --lo 0.5 --hi 0.8 \\
      --compare window_frequency

Behind "Where smp loses" (calibration by the host's own training history; both
traces, as the commands of the section "Commands" write their cells):

  for w in --where --where-below; do
    tools/eval/cells_band.py --cells cells.csv --day-type weekend --hours 2 \\
        $w window_frequency=1 --compare bm
  done
"""

import argparse
import csv
import sys


def die(reason):
    print("cells_band: " + reason, file=sys.stderr)
    sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", required=True, help="CSV written by --cells")
    ap.add_argument("--day-type", required=True, choices=["weekday", "weekend"])
    ap.add_argument("--hours", required=True, type=int, help="window length in hours")
    ap.add_argument("--method", default="smp")
    ap.add_argument("--lo", type=float, default=0.0)
    ap.add_argument("--hi", type=float, default=1.000001)
    ap.add_argument("--where", action="append", default=[],
                    help="METHOD=VALUE: only cells where METHOD predicts exactly VALUE")
    ap.add_argument("--where-below", action="append", default=[],
                    help="METHOD=VALUE: only cells where METHOD predicts less than VALUE")
    ap.add_argument("--compare", action="append", default=[], help="other methods to report")
    ap.add_argument("--min-test-windows", type=int, default=3)
    a = ap.parse_args()

    try:
        rows = list(csv.DictReader(open(a.cells, newline="")))
    except OSError as e:
        die(str(e))
    wheres = []  # (method, value, True for "equal", False for "below")
    for flag, ws, equal in (("--where", a.where, True), ("--where-below", a.where_below, False)):
        for w in ws:
            m, sep, v = w.partition("=")
            try:
                value = float(v)
            except ValueError:
                sep = ""
            if not sep:
                die("%s needs METHOD=VALUE, got %r" % (flag, w))
            wheres.append((m, value, equal))
    methods = [a.method] + a.compare
    if rows:
        for m in methods + [m for m, _, _ in wheres]:
            if m not in rows[0]:
                die("no column %r in %s" % (m, a.cells))

    scored = [r for r in rows
              if r["day_type"] == a.day_type and int(r["window_hours"]) == a.hours
              and int(r["n_test"]) >= a.min_test_windows and float(r["emp_tr"]) > 0]
    if not scored:
        die("no scored cells for %s %d h" % (a.day_type, a.hours))
    band = [r for r in scored
            if all((float(r[m]) == v) if eq else (float(r[m]) < v) for m, v, eq in wheres)
            and a.lo <= float(r[a.method]) < a.hi]
    print("%s %d h: %d scored cells, %d in the band" % (a.day_type, a.hours, len(scored), len(band)))
    if not band:
        return
    emp = sum(float(r["emp_tr"]) for r in band) / len(band)
    print("  mean empirical TR %.4f" % emp)
    for m in methods:
        pred = sum(float(r[m]) for r in band) / len(band)
        contrib = sum(abs(float(r[m]) - float(r["emp_tr"])) / float(r["emp_tr"])
                      for r in band) / len(scored)
        print("  %-18s mean predicted %.4f, share of the average relative error %.4f"
              % (m, pred, contrib))


if __name__ == "__main__":
    main()
