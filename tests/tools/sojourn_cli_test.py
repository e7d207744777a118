#!/usr/bin/env python3
"""Bad invocations of the `sojourn` CLI exit 2 with a one-line reason.

Each case is refused before any call is made (the broker and predictor
addresses point at a port nothing listens on, so a case that slipped through
would fail with exit 1 and a connection error instead).

usage: sojourn_cli_test.py --sojourn build/bin/sojourn
"""
import argparse
import subprocess
import sys

DEAD = ["--broker", "127.0.0.1:9", "--predictor", "127.0.0.1:9", "--timeout", "2"]
CASES = [
    # (arguments, text the one stderr line must contain)
    (["availability", "--host", b"\xff\xfe", "--window", "2h"], "not valid UTF-8"),
    (["availability", "--host", "vm1", "--window", "nan"], "finite"),
    (["availability", "--host", "vm1", "--window", "99999999999999999999"], "100 years"),
    (["availability", "--host", "vm1", "--window", "-2h"], "positive"),
    (["availability", "--host", "", "--window", "2h"], "--host"),
    (["availability", "--host", "x" * 300, "--window", "2h"], "255"),
    (["availability", "--host", "vm1", "--window", "2h", "--timeout", "nan"], "--timeout"),
    (["availability", "--host", "vm1", "--window", "2h", "--timeout", "1e308"], "--timeout"),
    (["rank", "--duration", "2h", "--hosts", ",,,"], "--hosts lists no host"),
    (["rank", "--duration", "2h", "--cpu", "inf"], "--cpu"),
    (["rank", "--duration", "2h", "--memory-mb", "nan"], "--memory-mb"),
    (["hosts", "--broker", ""], "--broker"),
    (["hosts", "--broker", "has space:1"], "--broker"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sojourn", required=True)
    a = ap.parse_args()
    failures = 0
    for args, needle in CASES:
        # Later options win, so a case's own --broker / --timeout overrides DEAD.
        argv = [a.sojourn.encode()] + [x if isinstance(x, bytes) else x.encode()
                                        for x in args[:1] + DEAD + args[1:]]
        p = subprocess.run(argv, capture_output=True, timeout=60)
        lines = [l for l in p.stderr.decode("utf-8", "replace").splitlines() if l.strip()]
        if p.returncode != 2 or len(lines) != 1 or needle not in lines[0]:
            failures += 1
            print("FAIL: %r: exit %d, stderr %r (wanted exit 2 and one line with %r)"
                  % (args, p.returncode, lines, needle))
    if failures:
        sys.exit(1)
    print("ok: %d bad invocations refused" % len(CASES))


if __name__ == "__main__":
    main()
