#!/usr/bin/python3
"""Markdown tables of docs/EVALUATION-schedule.md from `sojourn-eval schedule --json` outputs.

Each RUN is TITLE=JSON. For every run: a summary table (one row per policy), and with
--detail also the per-replicate and by-length tables. --compare prints the acceptance table
of issue 6 (proactive against condor) over pairs of runs given as LABEL=MS_JSON,BB_JSON.

  tools/eval/schedule_tables.py --detail "Microsoft 1999, default=ms.json"
  tools/eval/schedule_tables.py --compare "default=ms.json,bb.json" "seeds 11..20=ms11.json,bb11.json"
  tools/eval/schedule_tables.py --versus "own windows=ms-own.json" "service=ms.json"

--versus prints proactive's and condor's figures of several runs, a row each (e.g. --proactive-tr
own against service on the same trace and seeds).

Standard library only (python3 on Debian 12); exits 2 with a one-line reason on bad input.
"""

import argparse
import json
import sys

POLICIES = ["proactive", "condor", "round_robin", "omniscient"]


def die(reason):
    print(f"schedule_tables.py: {reason}", file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            # A rate or mean over no job is null in the JSON; here it prints as nan.
            j = json.load(f, object_hook=lambda o: {k: float("nan") if v is None else v
                                                    for k, v in o.items()})
    except (OSError, ValueError) as e:
        die(f"{path}: {e}")
    for key in ("summary", "summary_2h_plus", "hosts", "days", "jobs"):
        if key not in j:
            die(f"{path}: not a sojourn-eval schedule JSON (no '{key}')")
    return j


def split_run(text):
    if "=" not in text:
        die(f"'{text}': expected TITLE=PATH")
    title, path = text.rsplit("=", 1)
    return title, path


def header(title, j):
    seeds = f"{j['seed']}..{j['seed'] + j['replicate_count'] - 1}"
    lo, hi = j["clock_mhz"]
    tr = j.get("proactive_tr", "own")
    return (f"**{title}** — {j['hosts']} hosts, {j['days']} days, {j['jobs']} jobs "
            f"({j['replicate_count']} replicates x {j['submissions']} submissions x "
            f"{len(j['by_length']['condor'])} lengths), pool {j['pool']}, seeds {seeds}, "
            f"clock {lo:.0f}–{hi:.0f} MHz, proactive TR `{tr}`, "
            f"run time {j.get('timing_seconds', 0):.1f} s")


def summary_table(j):
    out = ["| policy | failure_rate | failure_rate (≥ 2 h) | unscheduled_rate | avg_makespan_s | "
           "avg makespan (≥ 2 h) s | slowdown_vs_omniscient |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for p in POLICIES:
        if p not in j["summary"]:
            continue
        s, l = j["summary"][p], j["summary_2h_plus"][p]
        out.append(f"| {p} | {s['failure_rate']:.4f} | {l['failure_rate']:.4f} "
                   f"({l['failed']}/{l['scheduled']}) | {s['unscheduled_rate']:.4f} | "
                   f"{s['avg_makespan_s']:.0f} | {l['avg_makespan_s']:.0f} | "
                   f"{s['slowdown_vs_omniscient']:.4f} |")
    return out


def replicate_table(j):
    out = ["| seed | proactive ≥ 2 h failed | condor ≥ 2 h failed | proactive makespan h | "
           "condor makespan h |",
           "| ---: | ---: | ---: | ---: | ---: |"]
    fewer = same = more = 0
    for r in j["replicates"]:
        p, c = r["summary_2h_plus"]["proactive"], r["summary_2h_plus"]["condor"]
        pa, ca = r["summary"]["proactive"], r["summary"]["condor"]
        out.append(f"| {r['seed']} | {p['failed']}/{p['scheduled']} | {c['failed']}/{c['scheduled']} | "
                   f"{pa['avg_makespan_s'] / 3600:.3f} | {ca['avg_makespan_s'] / 3600:.3f} |")
        fewer += p["failed"] < c["failed"]
        same += p["failed"] == c["failed"]
        more += p["failed"] > c["failed"]
    out.append("")
    out.append(f"proactive fewer / as many / more ≥ 2 h failures than condor: "
               f"{fewer} / {same} / {more} replicates")
    return out


def length_key(h):
    return float(h)


def by_length_table(j):
    lengths = sorted(j["by_length"]["condor"], key=length_key)
    out = ["| policy | " + " | ".join(f"{h} h" for h in lengths) + " |",
           "| --- |" + " ---: |" * len(lengths)]
    for p in POLICIES:
        if p not in j["by_length"]:
            continue
        cells = []
        for h in lengths:
            s = j["by_length"][p][h]
            cells.append(f"{s['failure_rate']:.3f} / {s['avg_makespan_s'] / 3600:.2f}")
        out.append(f"| {p} | " + " | ".join(cells) + " |")
    return out


def pct(x):
    return f"{100 * x:.1f} %"


def compare_cell(j):
    p, c = j["summary_2h_plus"]["proactive"], j["summary_2h_plus"]["condor"]
    pa, ca = j["summary"]["proactive"], j["summary"]["condor"]
    rel = pa["avg_makespan_s"] / ca["avg_makespan_s"] - 1
    return (f"{pct(p['failure_rate'])} vs {pct(c['failure_rate'])}",
            f"{pa['avg_makespan_s']:.0f} vs {ca['avg_makespan_s']:.0f} s ({100 * rel:+.1f} %)".replace("-", "−"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="TITLE=JSON (with --compare: LABEL=MS_JSON,BB_JSON)")
    ap.add_argument("--detail", action="store_true", help="also per-replicate and by-length tables")
    ap.add_argument("--compare", action="store_true", help="issue 6 acceptance table over run pairs")
    ap.add_argument("--versus", action="store_true", help="proactive of several runs side by side")
    a = ap.parse_args()
    if a.compare:
        print("| run | Microsoft ≥ 2 h failures, proactive vs condor | makespan proactive vs condor | "
              "Bitbrains ≥ 2 h failures, proactive vs condor | makespan proactive vs condor |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for text in a.runs:
            label, paths = split_run(text)
            parts = paths.split(",")
            if len(parts) != 2:
                die(f"'{text}': expected LABEL=MS_JSON,BB_JSON")
            ms, bb = (compare_cell(load(p)) for p in parts)
            print(f"| {label} | {ms[0]} | {ms[1]} | {bb[0]} | {bb[1]} |")
        return
    if a.versus:
        print("| run | proactive failure_rate (≥ 2 h) | condor failure_rate (≥ 2 h) | "
              "proactive avg_makespan_s | condor avg_makespan_s | "
              "replicates with fewer / as many / more ≥ 2 h failures than condor |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for text in a.runs:
            title, path = split_run(text)
            j = load(path)
            p, c = j["summary_2h_plus"]["proactive"], j["summary_2h_plus"]["condor"]
            reps = [(r["summary_2h_plus"]["proactive"]["failed"], r["summary_2h_plus"]["condor"]["failed"])
                    for r in j["replicates"]]
            fewer = sum(x < y for x, y in reps)
            same = sum(x == y for x, y in reps)
            print(f"| {title} | {p['failure_rate']:.4f} ({p['failed']}/{p['scheduled']}) | "
                  f"{c['failure_rate']:.4f} ({c['failed']}/{c['scheduled']}) | "
                  f"{j['summary']['proactive']['avg_makespan_s']:.0f} | "
                  f"{j['summary']['condor']['avg_makespan_s']:.0f} | "
                  f"{fewer} / {same} / {len(reps) - fewer - same} |")
        return
    for i, text in enumerate(a.runs):
        title, path = split_run(text)
        j = load(path)
        if i:
            print()
        print(header(title, j))
        print()
        print("\n".join(summary_table(j)))
        if a.detail:
            print()
            print("Per replicate (seed): jobs of 2 h and more failed / scheduled, proactive vs condor; "
                  "average makespan (h), proactive vs condor:")
            print()
            print("\n".join(replicate_table(j)))
            print()
            print("By task length (failure rate / average makespan in hours):")
            print()
            print("\n".join(by_length_table(j)))


if __name__ == "__main__":
    main()
