#!/usr/bin/env python3
"""CLI test of `sojourn-eval availability` (issue 3) on the repo's demo trace.

Runs the real binary and checks what a researcher relies on:
  * the JSON has summary[method][day_type][window_hours] with the issue's keys
    for every method, both day types and windows "1".."10";
  * the per-cell CSV of --cells agrees with that summary: the average
    relative error and the cell count recomputed from the CSV rows equal the
    JSON's (so the CSV is the data behind the table, not another computation);
  * bad invocations exit 2 with a one-line reason and write nothing;
  * an hourly canonical trace gets a grid and revocation gap from its sample
    period, and a run that scores nothing says so (null averages, a warning);
  * the trace written as Bitbrains-style GWA (Unix time) and as Materna-style
    GWA (local date-times, decimal commas) gives the same report.

usage: eval_availability_cli_test.py --eval build/bin/sojourn-eval --trace data/demo/...csv.gz
"""
import argparse
import csv
import datetime
import gzip
import json
import os
import subprocess
import sys
import tempfile

METHODS = ["smp", "smp_paper", "last", "bm", "ar", "ma", "arma", "avail_quantile", "on_fraction"]
KEYS = {"avg_rel_err", "min_rel_err", "max_rel_err", "brier", "n"}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check_days_carryover(tmp, tool):
    """tools/eval/days_carryover.py on a --days CSV built to have a level that
    carries over on the training days (busy and quiet weeks) and turns over
    every day on the test days: yesterday's level fits the training days and
    misleads on the test days, which the tool must report."""
    path = os.path.join(tmp, "carry.csv")
    with open(path, "w") as f:
        f.write("date,day_type,hosts,train_hosts,up_steps,failures,failures_per_up_hour\n")
        day = datetime.date(2013, 7, 1)
        for d in range(70):
            if d < 35:
                busy = (d // 5) % 2 == 0  # five busy days, five quiet ones
            else:
                busy = d % 2 == 0  # busy and quiet days alternate
            fails = 30 if busy else 10
            f.write("%s,%s,10,%d,1000,%d,0\n" % (
                day + datetime.timedelta(days=d),
                "weekend" if (day + datetime.timedelta(days=d)).weekday() >= 5 else "weekday",
                10 if d < 35 else 0, fails))
    q = subprocess.run([sys.executable, tool, "--days", path, "--max-k", "3"],
                       capture_output=True, text=True, timeout=60)
    if q.returncode != 0:
        fail("days_carryover.py: exit %d, %r" % (q.returncode, q.stderr))
    rows = {}
    for line in q.stdout.splitlines():
        cols = [c.strip() for c in line.strip("|").split("|")]
        if len(cols) == 6 and cols[0].split(" ")[0].isdigit():
            rows[int(cols[0].split(" ")[0])] = (cols[0], [float(c) for c in cols[1:5]])
    if sorted(rows) != [1, 2, 3]:
        fail("days_carryover.py printed rows %r: %r" % (sorted(rows), q.stdout))
    label, (beta, beta_test, train, test) = rows[1]
    if not (beta > 0.5 and train < 0.8 and test > 1.0 and beta_test == 0.0
            and "selected" in label):
        fail("days_carryover.py K = 1: %r (wanted a training slope that fails on the test days)"
             % q.stdout)
    # Bad input: exit 2 with one line naming the file.
    with open(path, "w") as f:
        f.write("date,day_type\n2013-07-01,weekday\n")
    q = subprocess.run([sys.executable, tool, "--days", path],
                       capture_output=True, text=True, timeout=60)
    if q.returncode != 2 or "carry.csv" not in q.stderr or q.stderr.count("\n") != 1:
        fail("days_carryover.py on a bad CSV: exit %d, %r" % (q.returncode, q.stderr))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eval", required=True)
    ap.add_argument("--trace", required=True)
    a = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        js, cells = os.path.join(tmp, "r.json"), os.path.join(tmp, "cells.csv")
        days = os.path.join(tmp, "days.csv")
        p = subprocess.run([a.eval, "availability", "--trace", a.trace, "--json", js,
                            "--cells", cells, "--days", days],
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            fail("exit %d: %s" % (p.returncode, p.stderr[-500:]))
        if "smp" not in p.stdout or "avail_quantile" not in p.stdout:
            fail("the table on stdout does not name the methods")
        report = json.load(open(js))
        summary = report["summary"]
        # The host's frailty from its history up to each window, as the service has it.
        if report.get("smp_frailty") != "online":
            fail("smp_frailty is %r, wanted the default 'online'" % report.get("smp_frailty"))
        if report.get("smp_pool_at") != "training":
            fail("smp_pool_at is %r, wanted the default 'training'" % report.get("smp_pool_at"))
        min_test = report["protocol"]["min_test_windows"]
        for m in METHODS:
            for dt in ("weekday", "weekend"):
                for L in range(1, 11):
                    entry = summary.get(m, {}).get(dt, {}).get(str(L))
                    if entry is None or set(entry) < KEYS:
                        fail("summary[%s][%s][%d] lacks %s" % (m, dt, L, KEYS))

        # --days: one row per local day; the JSON's population_by_day["all"]
        # is the pooled rate over that day type's rows with up steps.
        day_rows = list(csv.DictReader(open(days)))
        if not day_rows:
            fail("--days wrote no rows")
        dates = [r["date"] for r in day_rows]
        if dates != sorted(set(dates)):
            fail("--days dates are not ascending and distinct")
        step_hours = report["protocol"]["step_seconds"] / 3600.0
        for dt in ("weekday", "weekend"):
            used = [r for r in day_rows if r["day_type"] == dt and float(r["up_steps"]) > 0]
            got = report["population_by_day"][dt]["all"]
            if got["days"] != len(used):
                fail("population_by_day %s: %d days, %d in --days" % (dt, got["days"], len(used)))
            up_hours = sum(float(r["up_steps"]) for r in used) * step_hours
            rate = sum(float(r["failures"]) for r in used) / up_hours if up_hours else 0
            if abs(got["rate_per_up_hour"] - rate) > 1e-9 * max(1, rate):
                fail("population_by_day %s: rate %r, %r from --days" % (dt, got["rate_per_up_hour"], rate))
            for r in used:
                if int(r["train_hosts"]) > int(r["hosts"]):
                    fail("--days %s: more training hosts than hosts" % r["date"])
        if "population failures per up hour by local day" not in p.stdout:
            fail("the report lacks the population's failures by day")
        check_days_carryover(tmp, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                               "..", "tools", "eval", "days_carryover.py"))

        rows = list(csv.DictReader(open(cells)))
        if not rows:
            fail("--cells wrote no rows")
        header = rows[0].keys()
        for col in ["host", "day_type", "start_hour", "window_hours", "init_state", "n_test",
                    "n_survived", "emp_tr"] + METHODS:
            if col not in header:
                fail("--cells lacks the column " + col)
        # avg_rel_err is the mean over start hours of the mean error of that
        # hour's scored cells (min / max: the extreme start-hour means).
        checked = 0
        for m in METHODS:
            for dt in ("weekday", "weekend"):
                for L in (1, 2, 5, 10):
                    by_hour = {}
                    for r in rows:
                        if r["day_type"] != dt or int(r["window_hours"]) != L:
                            continue
                        n, s = int(r["n_test"]), int(r["n_survived"])
                        emp = float(r["emp_tr"])
                        if abs(emp - s / n) > 1e-5 or not 0 <= float(r[m]) <= 1:
                            fail("bad row %s" % r)
                        if n >= min_test and emp > 0:
                            by_hour.setdefault(int(r["start_hour"]), []).append(
                                abs(float(r[m]) - emp) / emp)
                    entry = summary[m][dt][str(L)]
                    n_cells = sum(len(v) for v in by_hour.values())
                    if entry["n"] != n_cells:
                        fail("%s %s %d h: %d cells in the CSV, n = %d in the JSON"
                             % (m, dt, L, n_cells, entry["n"]))
                    if by_hour:
                        means = [sum(v) / len(v) for v in by_hour.values()]
                        want = (sum(means) / len(means), min(means), max(means))
                        got = (entry["avg_rel_err"], entry["min_rel_err"], entry["max_rel_err"])
                        if any(abs(x - y) > 1e-5 for x, y in zip(want, got)):
                            fail("%s %s %d h: CSV gives avg/min/max %r, JSON %r"
                                 % (m, dt, L, want, got))
                        checked += 1
        if checked < 20:
            fail("only %d (method, day type, length) entries could be checked" % checked)

        # tools/eval/cells_band.py (the doc's band numbers) reads the same CSV:
        # the whole band is every scored cell of the summary.
        band_tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                                 "eval", "cells_band.py")
        q = subprocess.run([sys.executable, band_tool, "--cells", cells, "--day-type", "weekday",
                            "--hours", "2"], capture_output=True, text=True, timeout=60)
        want = "%d scored cells, %d in the band" % ((summary["smp"]["weekday"]["2"]["n"],) * 2)
        if q.returncode != 0 or want not in q.stdout:
            fail("cells_band.py: exit %d, %r (wanted %r)" % (q.returncode, q.stdout, want))

        # --where-below METHOD=T keeps the scored cells that METHOD predicts below T
        # (counted here from the CSV, at T = the largest prediction of the first
        # method, day type and length whose predictions differ).
        for m, dt, L in [(m, dt, L) for m in METHODS for dt in ("weekday", "weekend")
                         for L in range(1, 11)]:
            scored = [r for r in rows if r["day_type"] == dt and r["window_hours"] == str(L)
                      and int(r["n_test"]) >= min_test and float(r["emp_tr"]) > 0]
            preds = [float(r[m]) for r in scored]
            if preds and min(preds) < max(preds):
                break
        else:
            fail("no method, day type and length with two different predictions")
        t = max(preds)
        below = sum(1 for x in preds if x < t)
        q = subprocess.run([sys.executable, band_tool, "--cells", cells, "--day-type", dt,
                            "--hours", str(L), "--where-below", "%s=%r" % (m, t)],
                           capture_output=True, text=True, timeout=60)
        want = "%d scored cells, %d in the band" % (len(scored), below)
        if q.returncode != 0 or want not in q.stdout:
            fail("cells_band.py --where-below %s=%r: exit %d, %r (wanted %r)"
                 % (m, t, q.returncode, q.stdout, want))

        # tools/eval/cells_bootstrap.py (the doc's host-bootstrap intervals):
        # its gap column is the difference of the JSON's avg_rel_err.
        boot_tool = os.path.join(os.path.dirname(band_tool), "cells_bootstrap.py")
        q = subprocess.run([sys.executable, boot_tool, "--cells", cells, "--resamples", "20"],
                           capture_output=True, text=True, timeout=120)
        if q.returncode != 0:
            fail("cells_bootstrap.py: exit %d, %r" % (q.returncode, q.stderr[-300:]))
        boot_rows = 0
        for line in q.stdout.splitlines():
            f = [x.strip() for x in line.strip("|").split("|")]
            if len(f) != 8 or f[0] not in ("weekday", "weekend"):
                continue
            dt, L, best, gap = f[0], f[1], f[2], float(f[3])
            want = summary["smp"][dt][L]["avg_rel_err"] - summary[best][dt][L]["avg_rel_err"]
            lo, hi = (float(x) for x in f[4].strip("[]").split(","))
            if abs(gap - want) > 1e-4 or not lo <= hi:
                fail("cells_bootstrap.py %s %s h: gap %r against %s, JSON %r, interval %r"
                     % (dt, L, gap, best, want, f[4]))
            boot_rows += 1
        if boot_rows < 10:
            fail("cells_bootstrap.py printed %d rows: %r" % (boot_rows, q.stdout[-300:]))
        q = subprocess.run([sys.executable, boot_tool, "--cells", js], capture_output=True,
                           text=True, timeout=60)
        if q.returncode != 2 or "not a --cells CSV" not in q.stderr:
            fail("cells_bootstrap.py on a JSON file: exit %d, %r" % (q.returncode, q.stderr))

        # tools/eval/availability_rule.py (the doc's decision-rule tables):
        # its losing cells are those of the JSON, and a worse Brier score on
        # the AFTER side breaks the rule.
        rule_tool = os.path.join(os.path.dirname(band_tool), "availability_rule.py")
        losing = 0
        for dt in ("weekday", "weekend"):
            for L in range(2, 11):
                smp = summary["smp"][dt][str(L)]["avg_rel_err"]
                others = [summary[m][dt][str(L)]["avg_rel_err"] for m in summary
                          if m not in ("smp", "smp_paper")]
                others = [v for v in others if v is not None]
                if smp is not None and others and smp >= min(others):
                    losing += 1
        q = subprocess.run([sys.executable, rule_tool, "--pair", "demo=%s,%s" % (js, js)],
                           capture_output=True, text=True, timeout=60)
        want = "losing cells %d -> %d: not more; holds" % (losing, losing)
        if q.returncode != 0 or want not in q.stdout or "| demo |" not in q.stdout:
            fail("availability_rule.py on one report twice: exit %d, %r (wanted %r)"
                 % (q.returncode, q.stdout[-400:], want))
        worse = json.load(open(js))
        worse["overall"]["smp"]["brier"] += 0.001
        worse_js = os.path.join(tmp, "worse.json")
        json.dump(worse, open(worse_js, "w"))
        q = subprocess.run([sys.executable, rule_tool, "--pair", "demo=%s,%s" % (js, worse_js)],
                           capture_output=True, text=True, timeout=60)
        if q.returncode != 0 or "Brier not higher on any run (all and busy hosts): no" not in q.stdout \
                or "does not hold" not in q.stdout:
            fail("availability_rule.py with a worse Brier: exit %d, %r" % (q.returncode, q.stdout[-400:]))
        q = subprocess.run([sys.executable, rule_tool, "--pair", "demo=%s" % js],
                           capture_output=True, text=True, timeout=60)
        if q.returncode != 2 or "--pair must be" not in q.stderr:
            fail("availability_rule.py with one report: exit %d, %r" % (q.returncode, q.stderr))

        # tools/eval/availability_tables.py (the doc's tables) on this report and
        # on one without a busy host, whose overall_busy figures are null (as
        # sojourn-eval writes them for such a trace).
        tables_tool = os.path.join(os.path.dirname(band_tool), "availability_tables.py")
        calm = json.load(open(js))
        calm["busy_hosts"] = 0
        for m in calm["overall_busy"]:
            calm["overall_busy"][m] = {k: (0 if k in ("cells", "cells_dropped") else None)
                                       for k in calm["overall_busy"][m]}
        calm_js = os.path.join(tmp, "calm.json")
        json.dump(calm, open(calm_js, "w"))
        for report_js in (js, calm_js):
            for extra in ([], ["--verdict"]):
                q = subprocess.run([sys.executable, tables_tool, "--name", "Demo", "--main",
                                    report_js] + extra, capture_output=True, text=True, timeout=60)
                if q.returncode != 0 or "weekday" not in q.stdout:
                    fail("availability_tables.py %s %s: exit %d, %r"
                         % (os.path.basename(report_js), extra, q.returncode, q.stderr[-300:]))
                if report_js == calm_js and extra and "overall_busy: Brier smp –" not in q.stdout:
                    fail("availability_tables.py --verdict without busy hosts: %r" % q.stdout[-300:])

        # --outages: a row per grid point, the rule's figures (the demo's 8 hosts are fewer than
        # the 10 the rule needs, so it is off everywhere; with --outage-min-hosts 1 the points
        # where fewer than half report are outages, as the JSON counts them).
        points_csv = os.path.join(tmp, "points.csv")
        for min_hosts in ("10", "1"):
            ojs = os.path.join(tmp, "outages.json")
            q = subprocess.run([a.eval, "availability", "--trace", a.trace, "--methods", "bm",
                                "--max-window-hours", "1", "--outage-min-hosts", min_hosts,
                                "--outages", points_csv, "--json", ojs],
                               capture_output=True, text=True, timeout=120)
            if q.returncode != 0:
                fail("--outages: exit %d, %r" % (q.returncode, q.stderr[-300:]))
            orep = json.load(open(ojs))
            pts = list(csv.DictReader(open(points_csv)))
            flagged = [p for p in pts if p["outage"] == "1"]
            want = [p for p in pts if int(p["hosts_present"]) >= int(min_hosts)
                    and int(p["hosts_reporting"]) < 0.5 * int(p["hosts_present"])]
            if len(pts) != orep["grid_points"] or len(flagged) != orep["outage_grid_points"] \
                    or flagged != want or any(int(p["hosts_reporting"]) > int(p["hosts_present"])
                                              for p in pts):
                fail("--outages --outage-min-hosts %s: %d rows (%d grid points), %d flagged "
                     "(%d in the JSON, %d by the rule)" % (min_hosts, len(pts), orep["grid_points"],
                                                          len(flagged), orep["outage_grid_points"],
                                                          len(want)))
            if min_hosts == "1" and not flagged:
                fail("--outages: the demo has no outage point with the rule on for any number")

        # The outage rule's figures (the demo's 8 hosts are fewer than the 10 it
        # needs, so it is off everywhere).
        if report["protocol"].get("outage_min_hosts") != 10 or \
                report.get("outage_few_hosts_grid_points") != (
                    report["grid_points"] if report["hosts"] < 10 else 0):
            fail("outage rule figures: min hosts %r, few-hosts points %r of %r (%d hosts)"
                 % (report["protocol"].get("outage_min_hosts"),
                    report.get("outage_few_hosts_grid_points"), report["grid_points"],
                    report["hosts"]))

        # Bad invocations: exit 2, one line, nothing written.
        bad = [
            ([a.eval, "availability", "--trace", os.path.join(tmp, "missing.csv")], "missing"),
            ([a.eval, "availability", "--trace", a.trace, "--format", "xml"], "xml"),
            ([a.eval, "availability", "--trace", a.trace, "--cells",
              os.path.join(tmp, "no", "such", "dir.csv")], "cannot write"),
            ([a.eval, "availability", "--trace", a.trace, "--smp-options", "prior_windows=-1"],
             "prior_windows"),
            ([a.eval, "availability", "--trace", a.trace, "--utc-offset", "1000"], "-14..14"),
            ([a.eval, "availability", "--trace", a.trace, "--time-zone", "Europe/Atlantis"],
             "--time-zone: "),
            ([a.eval, "availability", "--trace", a.trace, "--time-zone", "UTC", "--utc-offset",
              "0"], "give --utc-offset or --time-zone, not both"),
            ([a.eval, "availability", "--trace", a.trace, "--smp-frailty", "weekly"],
             "--smp-frailty must be training or online"),
            ([a.eval, "availability", "--trace", a.trace, "--smp-pool-at", "now"],
             "--smp-pool-at must be training, prior or window"),
            ([a.eval, "availability", "--trace", a.trace, "--reliability-bins", "100000000"],
             "--reliability-bins wants an integer in [1, 1000]"),
            ([a.eval, "availability", "--trace", a.trace, "--outage-min-hosts", "0"],
             "--outage-min-hosts wants an integer in [1, 1000000]"),
        ]
        for argv, needle in bad:
            q = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            lines = [l for l in q.stderr.splitlines() if l.strip()]
            if q.returncode != 2 or not lines or needle not in lines[-1]:
                fail("%s: exit %d, stderr %r" % (" ".join(argv[1:]), q.returncode, q.stderr))
        # An hourly canonical trace: the grid step and revocation gap default
        # from the sample period (a 300 s grid with a 900 s gap would make
        # every grid point a revocation), and the run scores cells.
        hourly = os.path.join(tmp, "hourly.csv")
        with open(hourly, "w") as f:
            f.write("host,timestamp,cpu_load,free_mem_mb\n")
            t0 = 1372629600  # 2013-07-01 00:00 local (UTC+0 for canonical traces)
            for h in range(3):
                for k in range(21 * 24):
                    busy = (k * 7 + h * 5) % 23 == 0  # an occasional busy hour: S3
                    f.write("vm%d,%d,%.2f,2048\n" % (h, t0 + 3600 * k, 0.9 if busy else 0.1))
        hj = os.path.join(tmp, "hourly.json")
        q = subprocess.run([a.eval, "availability", "--trace", hourly, "--json", hj],
                           capture_output=True, text=True, timeout=120)
        if q.returncode != 0 or "default grid step 3600 s, revocation gap 10800 s" not in q.stderr:
            fail("hourly canonical trace: exit %d, stderr %r" % (q.returncode, q.stderr[-400:]))
        hr = json.load(open(hj))
        if (hr["protocol"]["step_seconds"], hr["protocol"]["revocation_gap_seconds"]) != (3600, 10800):
            fail("hourly canonical trace: protocol %r" % hr["protocol"])
        if not hr["summary"]["smp"]["weekday"]["2"]["n"] > 0:
            fail("hourly canonical trace: no weekday 2 h cell was scored")
        if "warning:" in q.stderr:
            fail("hourly canonical trace: unexpected warning %r" % q.stderr[-400:])
        # Two mistakes a trace of another source can make, said on stderr: the
        # load in percent, and a host sampled less often than the revocation
        # gap (the default gap follows the median period over all hosts).
        percent = os.path.join(tmp, "percent.csv")
        with open(hourly) as src, open(percent, "w") as f:
            f.write(src.readline())
            for line in src:
                host, ts, load, mem = line.strip().split(",")
                f.write("%s,%s,%g,%s\n" % (host, ts, float(load) * 100, mem))
        q = subprocess.run([a.eval, "availability", "--trace", percent, "--methods", "bm"],
                           capture_output=True, text=True, timeout=120)
        if q.returncode != 0 or "have cpu_load above 1, up to 90" not in q.stderr \
                or "divided by 100" not in q.stderr:
            fail("load in percent: exit %d, stderr %r" % (q.returncode, q.stderr[-400:]))
        mixed = os.path.join(tmp, "mixed.csv")
        with open(mixed, "w") as f:
            f.write("host,timestamp,cpu_load,free_mem_mb\n")
            rows_out = []
            for h, period in (("fast0", 300), ("fast1", 300), ("slow", 3600)):
                for k in range(14 * 86400 // period):
                    rows_out.append((h, t0 + period * k))
            for h, ts in rows_out:
                f.write("%s,%d,0.1,2048\n" % (h, ts))
        q = subprocess.run([a.eval, "availability", "--trace", mixed, "--methods", "bm"],
                           capture_output=True, text=True, timeout=120)
        want = ("1 host is sampled less often than the revocation gap of 900 s, so every gap "
                "between its samples is a revocation (S5): slow (3600 s)")
        if q.returncode != 0 or want not in q.stderr or "fast0" in q.stderr:
            fail("a slow host: exit %d, stderr %r" % (q.returncode, q.stderr[-400:]))

        # One host reports progress by day type and start hour, not only when
        # it is done (a long one-host trace was silent for minutes).
        q = subprocess.run([a.eval, "availability", "--trace", hourly, "--max-hosts", "1"],
                           capture_output=True, text=True, timeout=120)
        pcts = [int(l.split()[1].rstrip("%")) for l in q.stderr.splitlines()
                if l.startswith("  backtest: ") and l.endswith("% done")]
        if q.returncode != 0 or not any(0 < p < 100 for p in pcts) or pcts[-1:] != [100]:
            fail("one host: progress %r, stderr %r" % (pcts, q.stderr[-400:]))

        # Nothing scored (explicit options that make most grid points S5, and
        # the outage rule on for 3 hosts, so that every window touches an
        # outage): the averages are null, not 0, and stderr says why.
        q = subprocess.run([a.eval, "availability", "--trace", hourly, "--json", hj, "--step",
                            "300", "--revocation-gap", "600", "--outage-min-hosts", "1"],
                           capture_output=True, text=True, timeout=120)
        hr = json.load(open(hj)) if q.returncode == 0 else {}
        if q.returncode != 0 or "warning: no test window was scored" not in q.stderr:
            fail("all-S5 run: exit %d, stderr %r" % (q.returncode, q.stderr[-400:]))
        e = hr["summary"]["smp"]["weekday"]["2"]
        if e["n"] != 0 or e["avg_rel_err"] is not None or e["brier"] is not None:
            fail("all-S5 run: summary entry %r (wanted nulls)" % e)
        if hr["overall"]["smp"]["acc_grand"] is not None:
            fail("all-S5 run: overall %r (wanted null acc_grand)" % hr["overall"]["smp"])

        # Windows scored (Brier) but no cell with enough test windows for a
        # relative error: the averages are null and stderr says why (the short
        # trace of session 22 printed only dashes).
        q = subprocess.run([a.eval, "availability", "--trace", hourly, "--json", hj,
                            "--min-test-windows", "1000"],
                           capture_output=True, text=True, timeout=120)
        hr = json.load(open(hj)) if q.returncode == 0 else {}
        if q.returncode != 0 or "warning: no cell has 1000 test windows" not in q.stderr:
            fail("too few test windows: exit %d, stderr %r" % (q.returncode, q.stderr[-400:]))
        e = hr["summary"]["smp"]["weekday"]["2"]
        if e["avg_rel_err"] is not None or e["brier"] is None:
            fail("too few test windows: summary entry %r (wanted a Brier, no error)" % e)
        check_host_order(a, tmp, summary)
        check_wall_clock_gwa(a, tmp)
    print("ok: %d cells, %d summary entries recomputed" % (len(rows), checked))


def check_host_order(a, tmp, summary):
    """The same trace with its hosts in the reverse order gives the same report:
    smp's numbers moved with the order of the hosts (session 28: a rounding
    residue of the frailty's rebuilt cohorts, frailty_test.cc)."""
    import gzip
    opener = gzip.open if a.trace.endswith(".gz") else open
    by_host = {}
    with opener(a.trace, "rt") as f:
        header = f.readline()
        for line in f:
            by_host.setdefault(line.split(",", 1)[0], []).append(line)
    reversed_trace = os.path.join(tmp, "reversed.csv")
    with open(reversed_trace, "w") as f:
        f.write(header)
        for host in reversed(list(by_host)):
            f.writelines(by_host[host])
    js = os.path.join(tmp, "reversed.json")
    p = subprocess.run([a.eval, "availability", "--trace", reversed_trace, "--json", js],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        fail("reversed hosts: exit %d: %s" % (p.returncode, p.stderr[-500:]))
        return
    other = json.load(open(js))["summary"]
    for m in METHODS:
        for dt in ("weekday", "weekend"):
            for L in range(1, 11):
                x, y = summary[m][dt][str(L)], other[m][dt][str(L)]
                for k in ("avg_rel_err", "brier", "n"):
                    if (x[k] is None) != (y[k] is None) or (
                            x[k] is not None and abs(x[k] - y[k]) > 1e-12 * max(1, abs(x[k]))):
                        fail("reversed hosts: summary[%s][%s][%d][%s] %r, %r in the trace's order"
                             % (m, dt, L, k, y[k], x[k]))


def write_gwa(canonical, out_dir, materna):
    """Writes the canonical trace as GWA per-VM CSVs: Bitbrains-style (Unix
    seconds, ';\t', decimal points) or GWA-T-13 Materna-style (the local wall
    clock at UTC+2 as DD.MM.YYYY HH:MM:SS, ';', decimal commas)."""
    os.makedirs(out_dir)
    files = {}
    sep = ";" if materna else ";\t"
    header = sep.join(["Timestamp [ms]", "CPU cores", "CPU usage [%]",
                       "Memory capacity provisioned [KB]", "Memory usage [KB]"]) + "\n"
    local = datetime.timezone(datetime.timedelta(hours=2))
    with gzip.open(canonical, "rt") as f:
        for r in csv.DictReader(f):
            out = files.get(r["host"])
            if out is None:
                out = files[r["host"]] = open(os.path.join(out_dir, r["host"] + ".csv"), "w")
                out.write(header)
            t = int(r["timestamp"])
            cap = float(r["total_mem_mb"]) * 1024
            nums = ["%.4f" % (float(r["cpu_load"]) * 100), "%.1f" % cap,
                    "%.1f" % (cap - float(r["free_mem_mb"]) * 1024)]
            if materna:
                stamp = datetime.datetime.fromtimestamp(t, local).strftime("%d.%m.%Y %H:%M:%S")
                nums = [x.replace(".", ",") for x in nums]
            else:
                stamp = str(t)
            out.write(sep.join([stamp, r["cpu_cores"]] + nums) + "\n")
    for out in files.values():
        out.close()


def check_wall_clock_gwa(a, tmp):
    """The same trace as a Bitbrains-style GWA directory (Unix time, default
    --utc-offset 2) and as a Materna-style one (local date-times, decimal
    commas, default --utc-offset 0) gives the same report: the date-times are
    read as the local clock they are."""
    reports = []
    for materna in (False, True):
        d = os.path.join(tmp, "materna" if materna else "bitbrains")
        write_gwa(a.trace, d, materna)
        js = d + ".json"
        q = subprocess.run([a.eval, "availability", "--trace", d, "--json", js, "--methods",
                            "smp,bm,avail_quantile"], capture_output=True, text=True, timeout=300)
        if q.returncode != 0:
            fail("GWA %s: exit %d, %r" % (d, q.returncode, q.stderr[-400:]))
        said = "timestamps are local date-times" in q.stderr
        if said != materna:
            fail("GWA %s: the wall-clock note is %s" % (d, "there" if said else "missing"))
        reports.append(json.load(open(js)))
    if reports[0]["protocol"]["utc_offset_seconds"] != 7200 or \
            reports[1]["protocol"]["utc_offset_seconds"] != 0:
        fail("GWA default UTC offsets %r, %r (wanted 7200 and 0)"
             % (reports[0]["protocol"]["utc_offset_seconds"],
                reports[1]["protocol"]["utc_offset_seconds"]))
    if not reports[0]["summary"]["smp"]["weekday"]["2"]["n"] > 0:
        fail("GWA: no weekday 2 h cell scored")
    for key in ("summary", "overall", "reliability"):
        if reports[0].get(key) != reports[1].get(key):
            fail("GWA Unix time and local date-times give different %s" % key)
    # The demo's four weeks of August and September 2013 are all summer time
    # in Amsterdam: the zone gives the report of the fixed UTC+2.
    d = os.path.join(tmp, "bitbrains")
    js = d + "-zone.json"
    q = subprocess.run([a.eval, "availability", "--trace", d, "--json", js, "--methods",
                        "smp,bm,avail_quantile", "--time-zone", "Europe/Amsterdam"],
                       capture_output=True, text=True, timeout=300)
    if q.returncode != 0:
        fail("GWA --time-zone: exit %d, %r" % (q.returncode, q.stderr[-400:]))
    zoned = json.load(open(js))
    if (zoned["protocol"]["time_zone"], zoned["protocol"]["utc_offset_seconds"]) != \
            ("Europe/Amsterdam", None) or reports[0]["protocol"]["time_zone"] != "":
        fail("GWA --time-zone: protocol %r" % zoned["protocol"])
    for key in ("summary", "overall", "reliability"):
        if reports[0].get(key) != zoned.get(key):
            fail("GWA --time-zone Europe/Amsterdam and --utc-offset 2 give different %s" % key)
    # Local date-times are on the lab's clock already.
    q = subprocess.run([a.eval, "availability", "--trace", os.path.join(tmp, "materna"),
                        "--time-zone", "Europe/Amsterdam"], capture_output=True, text=True,
                       timeout=300)
    if q.returncode != 2 or "already on the lab's clock" not in q.stderr.splitlines()[-1]:
        fail("GWA date-times with --time-zone: exit %d, %r" % (q.returncode, q.stderr[-400:]))


if __name__ == "__main__":
    main()
