#!/usr/bin/python3
"""Does the population's failure level carry over from one day to the next?

Reads the population's failures by local day that `sojourn-eval availability
--days OUT` writes, and asks, on the trace's own days, the question behind
`--smp-population-days K` (docs/EVALUATION.md, "one-month slices and day-level
shifts"): how well does the population's standardised failure ratio over the
K days before a day predict that day's ratio, with the credibility slope beta
fitted on the training days, and does that slope still hold on the test days?

Day-level version of availability::PopulationLevelModel (frailty.h):
  * training days: those that are training days of every host with up steps
    (train_hosts == hosts); test days: those of no host (train_hosts == 0);
  * the population's failure rate per up step of each day type, from the
    training days; E_d = up steps of day d x that rate, y_d = O_d / E_d - 1;
  * x_d(K) = (failures / E over the K days before d) - 1, over any days;
  * beta(K) = sum E_d x_d y_d / sum E_d x_d^2 over the training days that have
    --max-k days before them (the same days for every K), clamped to [0, 1];
  * the E-weighted mean squared error of y_d - beta x_d against that of y_d
    alone (no level, beta = 0), on those training days and on the test days
    (beta still the training days'). A ratio below 1 means the level helps.
The row marked "selected" is the K with the least training error: what a
choice of K on the training days alone would take.

The backtest's level is hour-level (the K days before each window start, the
hosts' own training halves); this is its day-level approximation, for a quick
look at a trace, not its exact numbers. Standard library only.

Commands behind docs/EVALUATION.md ("does the level carry over", session 26):

  B=../shared/data/bitbrains-rnd-vm-load/bitbrains-rnd-100vms-2013Q3.tar.xz
  build/bin/sojourn-eval availability --trace $B --methods smp --days days.csv
  tools/eval/days_carryover.py --days days.csv
"""

import argparse
import csv
import sys


def die(reason):
    print("days_carryover: " + reason, file=sys.stderr)
    sys.exit(2)


def read_days(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        die("%s: %s" % (path, e.strerror))
    need = ["date", "day_type", "hosts", "train_hosts", "up_steps", "failures"]
    if not rows:
        die("%s: no days" % path)
    missing = [k for k in need if k not in rows[0]]
    if missing:
        die("%s: not a --days CSV (no column %s)" % (path, ", ".join(missing)))
    days = []
    for line, r in enumerate(rows, start=2):
        try:
            d = {
                "date": r["date"],
                "weekend": r["day_type"] == "weekend",
                "hosts": int(r["hosts"]),
                "train_hosts": int(r["train_hosts"]),
                "up": float(r["up_steps"]),
                "failures": float(r["failures"]),
            }
        except ValueError as e:
            die("%s:%d: %s" % (path, line, e))
        if r["day_type"] not in ("weekday", "weekend"):
            die("%s:%d: day_type must be weekday or weekend, got %r" % (path, line, r["day_type"]))
        if d["up"] < 0 or d["failures"] < 0 or d["failures"] > d["up"]:
            die("%s:%d: need 0 <= failures <= up_steps" % (path, line))
        days.append(d)
    return days


def weighted_mse(points, beta):
    w = sum(e for _, _, e in points)
    return sum(e * (y - beta * x) ** 2 for x, y, e in points) / w if w > 0 else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--days", required=True, help="CSV written by sojourn-eval availability --days")
    ap.add_argument("--max-k", type=int, default=14,
                    help="largest K (days); training days need this many days before them "
                         "(default 14)")
    args = ap.parse_args()
    if not 1 <= args.max_k <= 60:
        die("--max-k must be in 1..60, got %d" % args.max_k)
    days = read_days(args.days)

    train = [i for i, d in enumerate(days) if d["hosts"] > 0 and d["train_hosts"] == d["hosts"]]
    test = [i for i, d in enumerate(days) if d["hosts"] > 0 and d["train_hosts"] == 0]
    rate = {}
    for weekend in (False, True):
        up = sum(days[i]["up"] for i in train if days[i]["weekend"] == weekend)
        fails = sum(days[i]["failures"] for i in train if days[i]["weekend"] == weekend)
        rate[weekend] = fails / up if up > 0 else 0.0
    if rate[False] <= 0 and rate[True] <= 0:
        die("%s: no failures on the training days" % args.days)
    e = [d["up"] * rate[d["weekend"]] for d in days]
    y = [(d["failures"] / e[i] - 1) if e[i] > 0 else None for i, d in enumerate(days)]

    def points(indices, k):
        out = []
        for i in indices:
            if i < args.max_k or y[i] is None:
                continue
            o_k = sum(days[j]["failures"] for j in range(i - k, i))
            e_k = sum(e[j] for j in range(i - k, i))
            if e_k <= 0:
                continue
            out.append((o_k / e_k - 1, y[i], e[i]))
        return out

    rows = []
    for k in range(1, args.max_k + 1):
        tr, te = points(train, k), points(test, k)
        if len(tr) < 2:
            die("%s: fewer than 2 training days with %d days before them (try a smaller --max-k)"
                % (args.days, args.max_k))
        den = sum(w * x * x for x, _, w in tr)
        beta = min(1.0, max(0.0, sum(w * x * yy for x, yy, w in tr) / den)) if den > 0 else 0.0
        den_te = sum(w * x * x for x, _, w in te)
        beta_te = (min(1.0, max(0.0, sum(w * x * yy for x, yy, w in te) / den_te))
                   if den_te > 0 else float("nan"))
        rows.append({
            "k": k, "beta": beta, "beta_test": beta_te, "n_train": len(tr), "n_test": len(te),
            "train": weighted_mse(tr, beta) / weighted_mse(tr, 0.0),
            "test": weighted_mse(te, beta) / weighted_mse(te, 0.0) if te else float("nan"),
        })
    selected = min(rows, key=lambda r: r["train"])["k"]
    print("training days %d, test days %d; failures per up step on the training days: "
          "weekday %.6f, weekend %.6f" % (len(train), len(test), rate[False], rate[True]))
    print()
    print("| K | beta (training days) | beta the test days would fit | training MSE / no level | "
          "test MSE / no level | pairs (training, test) |")
    print("|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print("| %d%s | %.2f | %.2f | %.3f | %.3f | %d, %d |" % (
            r["k"], " (selected)" if r["k"] == selected else "", r["beta"], r["beta_test"],
            r["train"], r["test"], r["n_train"], r["n_test"]))


if __name__ == "__main__":
    main()
