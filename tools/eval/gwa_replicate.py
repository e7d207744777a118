#!/usr/bin/python3
"""Writes a GWA per-VM trace K times larger: every VM's CSV file K times, under new names, so that
`sojourn-eval availability|usage|schedule` can be timed on as many hosts as a larger held-out trace
may have (docs/EVALUATION.md, "Timings"). Standard library only.

  gwa_replicate.py SRC OUT_DIR K

SRC is a GWA tarball (.tar, .tar.gz, .tar.xz, ...) or directory of per-VM CSV files. Each file
DIR/N.csv becomes OUT_DIR/DIR/N{k}0000.csv for k = 0..K-1 (copy 0 included), keeping the
directory layout (Bitbrains Rnd: one directory per month, the same VM names in each). OUT_DIR
must not exist. Copies of a directory's files are hard links where the file system allows.

From the repository root (session 25's 1,000-VM trace):

  tools/eval/gwa_replicate.py ../shared/data/bitbrains-rnd-vm-load/bitbrains-rnd-100vms-2013Q3.tar.xz /tmp/bb1000 10

Exit 2 with a one-line reason on bad arguments or an unreadable source.
"""

import os
import shutil
import sys
import tarfile


def die(msg):
    sys.stderr.write("gwa_replicate.py: %s\n" % msg)
    sys.exit(2)


def copies(name, k):
    stem, ext = os.path.splitext(name)
    return ["%s%d0000%s" % (stem, i, ext) for i in range(k)]


def from_tar(src, out, k):
    n = 0
    try:
        with tarfile.open(src) as tar:
            for member in tar:
                if not member.isfile() or not member.name.endswith(".csv"):
                    continue
                parts = [p for p in member.name.split("/") if p not in ("", ".")]
                if any(p == ".." for p in parts):
                    die("%s: member %r leaves the archive" % (src, member.name))
                data = tar.extractfile(member).read()
                d = os.path.join(out, *parts[:-1])
                os.makedirs(d, exist_ok=True)
                for name in copies(parts[-1], k):
                    with open(os.path.join(d, name), "wb") as f:
                        f.write(data)
                n += 1
    except (tarfile.TarError, OSError, EOFError) as e:
        die("%s: %s" % (src, e))
    return n


def from_dir(src, out, k):
    n = 0
    for root, _, files in os.walk(src):
        rel = os.path.relpath(root, src)
        for f in sorted(files):
            if not f.endswith(".csv"):
                continue
            d = os.path.normpath(os.path.join(out, rel))
            os.makedirs(d, exist_ok=True)
            path = os.path.join(root, f)
            for name in copies(f, k):
                dst = os.path.join(d, name)
                try:
                    os.link(path, dst)
                except OSError:
                    shutil.copyfile(path, dst)
            n += 1
    return n


def main(argv):
    if len(argv) != 4 or argv[1] in ("-h", "--help"):
        sys.stdout.write(__doc__)
        return 0 if len(argv) == 2 and argv[1] in ("-h", "--help") else 2
    src, out = argv[1], argv[2]
    try:
        k = int(argv[3])
    except ValueError:
        die("K must be an integer, not %r" % argv[3])
    if k < 1 or k > 1000:
        die("K must be 1..1000, not %d" % k)
    if os.path.exists(out):
        die("%s already exists" % out)
    if not os.path.exists(src):
        die("%s: no such file or directory" % src)
    n = from_dir(src, out, k) if os.path.isdir(src) else from_tar(src, out, k)
    if n == 0:
        die("%s: no .csv files" % src)
    sys.stderr.write("wrote %d files (%d x %d) under %s\n" % (n * k, n, k, out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
