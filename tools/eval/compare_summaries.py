#!/usr/bin/python3
"""How far apart two `sojourn-eval availability --json` reports are, per method.

For every method in both reports, the largest relative difference
|a - b| / |a| over every number of every cell of `summary` (day type, window
length: avg_rel_err, brier, n, ...), and how many cells differ at all. Two
backtests of the same samples (a trace and its `sojourn export` after
`sojourn-replay`, docs/EVALUATION.md "Backtesting a cluster's own history")
differ only by floating-point rounding; a larger difference means different
inputs. Exits 1 when the reports do not hold the same methods, day types and
lengths. Standard library only.

usage: tools/eval/compare_summaries.py A.json B.json
"""
import json
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    a, b = (json.load(open(p))["summary"] for p in sys.argv[1:])
    keys = lambda s: sorted((m, d, w) for m in s for d in s[m] for w in s[m][d])
    if keys(a) != keys(b):
        print("the reports hold different methods, day types or window lengths", file=sys.stderr)
        sys.exit(1)
    print(f"{'method':18} {'cells differing':>16} {'max relative difference':>24}")
    for m in a:
        worst, differing, cells = 0.0, 0, 0
        for d in a[m]:
            for w in a[m][d]:
                cells += 1
                x, y = a[m][d][w], b[m][d][w]
                if x != y:
                    differing += 1
                for k, v in x.items():
                    if v != y.get(k):
                        worst = max(worst, abs(v - y[k]) / max(abs(v), 1e-300))
        print(f"{m:18} {differing:>9} of {cells:<4} {worst:>24.3g}")


if __name__ == "__main__":
    main()
