#!/usr/bin/python3
"""How far apart two `sojourn-eval` reports are, per method.

Reads the `summary` of two `sojourn-eval availability --json` or
`sojourn-eval turnaround --json` reports (summary[method][day type][window] or
summary[kernel][quantity], each ending in an object of numbers: avg_rel_err,
brier, n, ... or dv, r2_adj, coverage, n). For every method, the largest
relative difference |a - b| / |a| over every number of every cell, and how
many cells differ at all (a number against null counts as an infinite
difference). Two backtests of the same history (a trace and its `sojourn
export` after `sojourn-replay`, docs/EVALUATION.md "Backtesting a cluster's own
history"; a log and its `sojourn export-jobs`, docs/EVALUATION-turnaround.md
"Backtesting a cluster's own jobs") differ only by floating-point rounding; a
larger difference means different inputs. Exits 1 when the reports do not hold
the same methods and cells, or, with --max X, when a difference is above X.
Standard library only.

usage: tools/eval/compare_summaries.py [--max X] A.json B.json
"""
import json
import math
import sys


def cells(node, path=()):
    """(path, {name: number}) for every innermost object under `node`."""
    if all(not isinstance(v, dict) for v in node.values()):
        yield path, node
        return
    for key, value in node.items():
        if isinstance(value, dict):
            yield from cells(value, path + (key,))


def difference(x, y):
    if x == y:
        return 0.0
    if x is None or y is None:
        return math.inf
    return abs(x - y) / max(abs(x), 1e-300)


def main():
    args = sys.argv[1:]
    limit = None
    if len(args) == 4 and args[0] == "--max":
        try:
            limit = float(args[1])
        except ValueError:
            sys.exit(f"--max wants a number, got {args[1]!r}")
        args = args[2:]
    if len(args) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    a, b = (dict(cells(json.load(open(p))["summary"])) for p in args)
    if sorted(a) != sorted(b):
        print("the reports hold different methods or cells", file=sys.stderr)
        sys.exit(1)
    print(f"{'method':18} {'cells differing':>16} {'max relative difference':>24}")
    overall = 0.0
    for method in dict.fromkeys(path[0] for path in a):
        worst, differing, count = 0.0, 0, 0
        for path in (p for p in a if p[0] == method):
            count += 1
            x, y = a[path], b[path]
            differing += x != y
            for name in set(x) | set(y):
                worst = max(worst, difference(x.get(name), y.get(name)))
        overall = max(overall, worst)
        print(f"{method:18} {differing:>9} of {count:<4} {worst:>24.3g}")
    if limit is not None and overall > limit:
        print(f"a difference of {overall:.3g} is above --max {limit:g}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
