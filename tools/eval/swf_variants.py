#!/usr/bin/python3
"""Writes the stress variants of an SWF log that docs/EVALUATION-turnaround.md times the replay on
("Larger machines and bursts"). Standard library only; the input may be gzip-compressed.

  scale K        job sizes (fields 5 and 8, when positive) and the header's MaxNodes / MaxProcs
                 multiplied by K: the same workload on a machine K times larger (a replay of it
                 gives the same summary as the original; only the cost grows).
  burst FIRST N  the submit time (field 2) of the N jobs after job line FIRST set to that of job
                 line FIRST (1-based, counting job lines only): N jobs submitted in one second.

From the repository root (session 24's logs):

  tools/eval/swf_variants.py ../shared/data/swf-sdsc-sp2/SDSC-SP2-1998-4.2-cln.swf.gz /tmp/x8.swf scale 8
  tools/eval/swf_variants.py ../shared/data/swf-sdsc-sp2/SDSC-SP2-1998-4.2-cln.swf.gz /tmp/x128.swf scale 128
  tools/eval/swf_variants.py ../shared/data/swf-sdsc-sp2/SDSC-SP2-1998-4.2-cln.swf.gz /tmp/burst1k.swf burst 10000 1000
  tools/eval/swf_variants.py ../shared/data/swf-sdsc-sp2/SDSC-SP2-1998-4.2-cln.swf.gz /tmp/burst5k.swf burst 10000 5000

Exit 2 with a one-line reason on bad arguments or an unreadable log.
"""

import gzip
import re
import sys


def die(msg):
    sys.stderr.write("swf_variants.py: %s\n" % msg)
    sys.exit(2)


def positive_int(text, what):
    try:
        v = int(text)
    except ValueError:
        die("%s must be an integer, not %r" % (what, text))
    if v < 1:
        die("%s must be at least 1, not %d" % (what, v))
    return v


def main(argv):
    if len(argv) < 4 or argv[3] not in ("scale", "burst"):
        die("usage: swf_variants.py IN OUT scale K | burst FIRST N (see the docstring)")
    src, dst, mode = argv[1], argv[2], argv[3]
    if mode == "scale":
        if len(argv) != 5:
            die("scale takes one argument, K")
        k = positive_int(argv[4], "K")
    else:
        if len(argv) != 6:
            die("burst takes two arguments, FIRST and N")
        first = positive_int(argv[4], "FIRST")
        count = positive_int(argv[5], "N")
    opener = gzip.open if src.endswith(".gz") else open
    try:
        lines = opener(src, "rt").read().splitlines()
    except OSError as e:
        die("%s: %s" % (src, e))
    out = []
    job = 0
    burst_submit = None
    for line in lines:
        if line.lstrip().startswith(";"):
            m = re.match(r"(\s*;\s*Max(?:Nodes|Procs):\s*)(\d+)\s*$", line)
            if mode == "scale" and m:
                line = m.group(1) + str(int(m.group(2)) * k)
            out.append(line)
            continue
        f = line.split()
        if len(f) != 18:
            out.append(line)
            continue
        job += 1
        if mode == "scale":
            for i in (4, 7):
                if int(f[i]) > 0:
                    f[i] = str(int(f[i]) * k)
        elif job == first:
            burst_submit = f[1]
        elif burst_submit is not None and first < job <= first + count:
            f[1] = burst_submit
        out.append(" ".join(f))
    if mode == "burst" and job < first + count:
        die("%s has %d job lines, fewer than FIRST + N = %d" % (src, job, first + count))
    with open(dst, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv)
