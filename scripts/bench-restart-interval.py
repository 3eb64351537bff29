#!/usr/bin/env python3
"""Choosing `convert --restart-interval`: crop-decode speed against bytes added, in one run.

Converts one ImageFolder with no restart markers and with a marker every 1, 2, 4, 8 MCUs and
every row (64: the largest divisor of a row's MCUs up to 64, i.e. the whole row for photos up to
1024 px with 4:2:0), then runs `ddpio bench loader` over every dataset in rounds (order rotated;
exact and fast decode, RandomResizedCrop 224 + flip, 2 workers) and reports medians: the bytes
each interval adds, conversion images/s, the loader, the single-thread crop-decode line (the
crop's segments alone) and the full-decode ceiling.

    scripts/real-photos.py --out /tmp/rp100 --count 1500 --long-side 450,650 --quality 95
    /usr/bin/python3 scripts/bench-restart-interval.py --src /tmp/rp100
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", required=True)
    ap.add_argument("--work", default="/tmp/ddpio-restart-interval")
    ap.add_argument("--intervals", default="0,1,2,4,8,64")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--ddpio", default=os.path.join(REPO, "build", "release", "tools", "ddpio"))
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    intervals = [int(v) for v in a.intervals.split(",")]
    conv = {}
    for k in intervals:
        out = subprocess.run([a.ddpio, "convert", "--src", a.src, "--out", f"{a.work}/r{k}", "--restart-interval",
                              str(k), "--quiet", "--json"], check=True, capture_output=True, text=True).stdout
        conv[k] = json.loads(out.strip().splitlines()[-1])
    runs = {(k, m): [] for k in intervals for m in ("exact", "fast")}
    for r in range(a.rounds):
        order = intervals[r % len(intervals):] + intervals[:r % len(intervals)]
        for k in order:
            for m in ("exact", "fast"):
                out = subprocess.run([a.ddpio, "bench", "loader", "--data", f"{a.work}/r{k}", "--workers",
                                      str(a.workers), "--batch-size", "64", "--epochs", "2", "--decode", m,
                                      "--sample-images", "300", "--json"],
                                     check=True, capture_output=True, text=True).stdout
                runs[(k, m)].append(json.loads(out.strip().splitlines()[-1]))
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    med = lambda k, m, key: statistics.median(j[key] for j in runs[(k, m)])
    base = conv[0]["bytes"]
    print(f"\n{conv[0]['records']} images from {a.src}, {a.workers} workers, median of {a.rounds} rounds\n")
    print("| restart interval (MCUs) | bytes vs none | convert images/s | loader exact | loader fast | "
          "crop-decode (segments alone) | full-decode ceiling | exact segments vs whole: differing samples |")
    print("|---|---|---|---|---|---|---|---|")
    for k in intervals:
        differ = sum(j["segments_vs_whole_exact"]["differ"] for m in ("exact", "fast") for j in runs[(k, m)])
        crop = med(k, "exact", "crop_decode_images_per_s") if k else 0
        print(f"| {k if k else 'none'} | {conv[k]['bytes'] / base - 1:+.2%} | {conv[k]['images_per_s']:.0f} | "
              f"{med(k, 'exact', 'images_per_s'):.0f} | {med(k, 'fast', 'images_per_s'):.0f} | "
              f"{crop:.0f} | {med(k, 'exact', 'ceiling_images_per_s'):.0f} | {differ} |")


if __name__ == "__main__":
    main()
