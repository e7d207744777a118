#!/usr/bin/python3
"""Markdown tables of docs/EVALUATION.md from `sojourn-eval availability --json` reports.

Prints either a trace's "### Tables: ..." section (relative error and Brier per day
type, overall all / busy hosts, reliability all / busy hosts, the dropped-cells /
timing line, and with --figs the training-ratio sweep (Fig. 12) and noise injection
(Fig. 14) tables), or with --verdict the trace's verdict table (smp minus the best
baseline per window length) followed by the `overall:` and `overall_busy:` Brier lines.
Standard library only.

Exact commands (from the repository root, after `scripts/build`):

  E=build/bin/sojourn-eval
  D=../shared/data/microsoft99-desktop-availability/PingData00-even-rows.txt.gz
  B=../shared/data/bitbrains-rnd-vm-load/bitbrains-rnd-100vms-2013Q3.tar.xz
  FIGS="--methods smp,smp_paper,window_frequency,ar,avail_quantile \
        --sweep-train-ratios 0.3,0.4,0.5,0.6,0.7 --noise 0,1,2,4,10"
  $E availability --trace $D --json desktop.json
  $E availability --trace $B --json bitbrains.json
  $E availability --trace $D $FIGS --json desktop-figs.json
  $E availability --trace $B $FIGS --json bitbrains-figs.json

  # "### Tables: ..." sections (each up to, not including, "### Notes and caveats")
  tools/eval/availability_tables.py --name Desktop \
      --title 'desktop availability matrix (Microsoft 1999, {hosts} hosts)' \
      --main desktop.json --figs desktop-figs.json
  tools/eval/availability_tables.py --name Bitbrains \
      --title 'Bitbrains Rnd VMs (GWA-T-12, {hosts} VMs, Jul–Sep 2013)' \
      --main bitbrains.json --figs bitbrains-figs.json

  # "### Verdict" tables with their `overall:` / `overall_busy:` lines
  tools/eval/availability_tables.py --verdict --name 'Desktop trace' --main desktop.json
  tools/eval/availability_tables.py --verdict --name Bitbrains --main bitbrains.json

Conventions: bold marks the method with the lowest unrounded value per column; the
verdict's "best baseline" is the lowest average relative error among all methods
except smp and smp_paper (so window_frequency counts as a baseline); the verdict
covers window lengths from 2 h (issue 3 acceptance 3). Timings are those of the
--main run (`timing_seconds`).
"""

import argparse
import json
import sys

METHOD_ORDER = ["smp", "smp_paper", "window_frequency", "last", "bm", "ar", "ma",
                "arma", "avail_quantile", "on_fraction"]
NOT_BASELINES = {"smp", "smp_paper"}
DAY_TYPES = ["weekday", "weekend"]


def ordered_methods(keys):
    keys = list(keys)
    known = [m for m in METHOD_ORDER if m in keys]
    return known + sorted(k for k in keys if k not in METHOD_ORDER)


def numeric_keys(d):
    return sorted(d.keys(), key=float)


def table(header, rows):
    out = ["| " + " | ".join(header) + " |",
           "|---|" + "".join("---:|" for _ in header[1:])]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def window_table(summary, day_type, field):
    methods = ordered_methods(summary.keys())
    hours = numeric_keys(summary[methods[0]][day_type])
    best = {}
    for h in hours:
        vals = [summary[m][day_type][h][field] for m in methods
                if summary[m][day_type][h].get(field) is not None]
        best[h] = min(vals) if vals else None
    rows = []
    for m in methods:
        row = [m]
        for h in hours:
            v = summary[m][day_type][h].get(field)
            if v is None:
                row.append("–")
                continue
            s = "%.4f" % v
            row.append("**%s**" % s if v == best[h] else s)
        rows.append(row)
    return table(["method"] + ["%s h" % h for h in hours], rows)


def fmt(spec, v):
    """`spec % v`, or a dash for a figure the report has no data for (null)."""
    return "–" if v is None else spec % v


def overall_table(overall):
    rows = []
    for m in ordered_methods(overall.keys()):
        o = overall[m]
        rows.append([m, fmt("%.4f", o["acc_grand"]), fmt("%.4f", o["acc_paper_style"]),
                     fmt("%.4f", o["acc_worst"]), fmt("%.5f", o["brier"]), fmt("%d", o["cells"]),
                     fmt("%d", o["cells_dropped"])])
    return table(["method", "acc_grand", "acc_paper_style", "acc_worst", "brier", "cells",
                  "cells_dropped"], rows)


def reliability_table(rel):
    methods = ordered_methods(rel.keys())
    bins = rel[methods[0]]
    header = ["method"] + ["%.1f–%.1f" % (b["bin_lo"], b["bin_hi"]) for b in bins]
    rows = []
    for m in methods:
        row = [m]
        for b in rel[m]:
            if not b["n"] or b["observed"] is None:
                row.append("–")
            else:
                row.append("%.3f (%d)" % (b["observed"], b["n"]))
        rows.append(row)
    return table(header, rows)


def sweep_table(sweep):
    ratios = numeric_keys(sweep)
    methods = ordered_methods(sweep[ratios[0]].keys())
    rows = []
    for r in ratios:
        row = ["%.2f" % float(r)]
        for m in methods:
            e = sweep[r].get(m)
            row.append("–" if e is None else
                       "%.4f / %.4f" % (e["avg_rel_err"], e["max_avg_rel_err"]))
        rows.append(row)
    return table(["train ratio"] + methods, rows)


def noise_table(per_method):
    injections = numeric_keys(per_method)
    hours = numeric_keys(per_method[injections[0]])
    rows = []
    for k in injections:
        row = [k]
        for h in hours:
            e = per_method[k].get(h)
            row.append("–" if e is None or e.get("discrepancy") is None else
                       "%.4f (%d)" % (e["discrepancy"], e["hosts"]))
        rows.append(row)
    return table(["injections"] + ["%s h" % h for h in hours], rows)


def tables_section(name, title, main, figs):
    out = []
    if title:
        out += ["### Tables: " + title.format(hosts=main["hosts"],
                                              busy_hosts=main["busy_hosts"]), ""]
    summary = main["summary"]
    any_method = ordered_methods(summary.keys())[0]
    for day_type in DAY_TYPES:
        if day_type not in summary[any_method]:
            continue
        out += ["**%s, %s: average relative error over start hours** "
                "(lower is better; bold = best; window hours)" % (name, day_type), ""]
        out += window_table(summary, day_type, "avg_rel_err") + [""]
        out += ["**%s, %s: Brier score over test windows** (window hours)" % (name, day_type),
                ""]
        out += window_table(summary, day_type, "brier") + [""]
    out += ["**%s, overall, all hosts (%d)**" % (name, main["hosts"]), ""]
    out += overall_table(main["overall"]) + [""]
    out += ["**%s, overall, busy hosts (%d)**" % (name, main["busy_hosts"]), ""]
    out += overall_table(main["overall_busy"]) + [""]
    for key, which in (("reliability", "all hosts"), ("reliability_busy", "busy hosts")):
        out += ["**%s, reliability, %s**: observed survival fraction (test windows) per bin "
                "of predicted TR" % (name, which), ""]
        out += reliability_table(main[key]) + [""]
    t = main["timing_seconds"]
    out += ["cells without a training window starting in S1/S2 (dropped for every method): "
            "%d; global-outage grid points: %d of %d; timing: read %.1f s, backtest %.1f s."
            % (main["cells_without_history"], main["outage_grid_points"], main["grid_points"],
               t["read"], t["backtest"]), ""]
    src = figs if figs is not None else main
    if src.get("train_ratio_sweep"):
        out += ["**%s: training-ratio sweep (weekdays; Fig. 12)** — average over window "
                "lengths of the per-length average relative error / the largest per-length "
                "average (\"max-average error\")" % name, ""]
        out += sweep_table(src["train_ratio_sweep"]) + [""]
    for m in ordered_methods((src.get("noise_injection") or {}).keys()):
        out += ["**%s: noise injection (Fig. 14), %s** — mean prediction discrepancy "
                "|TR_noisy − TR_clean| / TR_clean, weekday windows from 08:00 in S1 "
                "(hosts used in brackets)" % (name, m), ""]
        out += noise_table(src["noise_injection"][m]) + [""]
    return out


def brier_line(label, overall):
    smp = overall["smp"]["brier"]
    wf = overall["window_frequency"]["brier"]
    parts = ["smp %s" % fmt("%.5f", smp), "window_frequency %s" % fmt("%.5f", wf)]
    if "smp_paper" in overall:
        parts.append("smp_paper %s" % fmt("%.5f", overall["smp_paper"]["brier"]))
    if smp is None or not wf:
        # No test window (e.g. overall_busy of a trace without a busy host).
        return "%s: Brier %s -> no comparison." % (label, ", ".join(parts))
    change = (wf - smp) / wf * 100.0
    where = "below" if change >= 0 else "above"
    return ("%s: Brier %s -> smp's Brier is %.1f %% %s window_frequency's."
            % (label, ", ".join(parts), abs(change), where))


def verdict_section(name, main, min_hours):
    summary = main["summary"]
    baselines = [m for m in ordered_methods(summary.keys()) if m not in NOT_BASELINES]
    hours = [h for h in numeric_keys(summary["smp"][DAY_TYPES[0]]) if float(h) >= min_hours]
    out = ["**%s: smp against the best baseline per window length (average relative error; "
           "negative = smp better)**" % name, ""]
    rows = []
    for day_type in DAY_TYPES:
        if day_type not in summary["smp"]:
            continue
        row = [day_type]
        for h in hours:
            smp = summary["smp"][day_type][h]["avg_rel_err"]
            cands = [(summary[m][day_type][h]["avg_rel_err"], m) for m in baselines
                     if summary[m][day_type][h].get("avg_rel_err") is not None]
            if smp is None or not cands:
                row.append("–")  # no scored cell of that length
                continue
            best_v, best_m = min(cands)
            row.append("%+.4f (%s)" % (smp - best_v, best_m))
        rows.append(row)
    out += table(["day type"] + ["%s h" % h for h in hours], rows) + [""]
    out += [brier_line("overall", main["overall"]), ""]
    out += [brier_line("overall_busy", main["overall_busy"]), ""]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--name", required=True, help="trace label, e.g. Desktop")
    ap.add_argument("--main", required=True, help="JSON of the run with all methods")
    ap.add_argument("--figs", help="JSON of the Fig. 12/14 run (--sweep-train-ratios, --noise)")
    ap.add_argument("--title", help="print '### Tables: TITLE' first ({hosts} and {busy_hosts} "
                    "are replaced)")
    ap.add_argument("--verdict", action="store_true",
                    help="print the verdict table and the overall Brier lines instead")
    ap.add_argument("--min-hours", type=float, default=2.0,
                    help="shortest window of the verdict table (default 2)")
    args = ap.parse_args()
    with open(args.main) as f:
        main_report = json.load(f)
    figs = None
    if args.figs:
        with open(args.figs) as f:
            figs = json.load(f)
    if args.verdict:
        lines = verdict_section(args.name, main_report, args.min_hours)
    else:
        lines = tables_section(args.name, args.title, main_report, figs)
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
