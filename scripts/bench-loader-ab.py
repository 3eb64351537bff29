#!/usr/bin/env python3
"""Compares ddpio binaries' `bench loader` in one run: the A/B behind docs/PERFORMANCE.md's
before/after loader figures.

Every round runs each binary once (`--workers 2 --epochs 3`), in alternating order; every ratio
is taken against the ceiling measured in the same round by the LAST binary named (give the newest
last: its ceiling is the marker-free one). Prints medians over rounds, per-round ratios, and the
paired speed-up of each binary over the first.

    scripts/bench-loader-ab.py --data /tmp/rp100-seg --rounds 5 --decode fast OLD/ddpio NEW/ddpio
"""
import argparse
import json
import statistics
import subprocess


def run(binary, data, decode, workers):
    out = subprocess.run([binary, "bench", "loader", "--data", data, "--workers", str(workers), "--epochs", "3",
                          "--decode", decode, "--json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="dataset (ddpio convert output)")
    p.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    p.add_argument("--decode", default="fast", choices=["fast", "exact"])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("binaries", nargs="+", help="ddpio programs; the last one's ceiling is the reference")
    a = p.parse_args()
    rates = {b: [] for b in a.binaries}
    crop = {b: [] for b in a.binaries}
    ceiling, stored = [], []
    for r in range(a.rounds):
        for b in (a.binaries if r % 2 == 0 else a.binaries[::-1]):
            j = run(b, a.data, a.decode, a.workers)
            rates[b].append(j["images_per_s"])
            crop[b].append(j.get("crop_decode_images_per_s", 0))
            if b == a.binaries[-1]:
                ceiling.append(j["ceiling_images_per_s"])
                stored.append(j.get("stored_full_decode_per_core_images_per_s", 0) * j["workers"])
    med = statistics.median
    print(f"{a.decode}: ceiling {med(ceiling):.0f} images/s (as stored: {med(stored):.0f}); "
          f"rounds: {', '.join(f'{c:.0f}' for c in ceiling)}")
    for b in a.binaries:
        ratios = [rates[b][i] / ceiling[i] for i in range(a.rounds)]
        print(f"  {b}: loader {med(rates[b]):.0f} images/s, {med(ratios):.3f} of the ceiling "
              f"({', '.join(f'{x:.2f}' for x in ratios)}); crop-decode {med(crop[b]):.0f}")
    for b in a.binaries[1:]:
        paired = [rates[b][i] / rates[a.binaries[0]][i] for i in range(a.rounds)]
        print(f"  {b} / {a.binaries[0]}: {med(paired):.3f} (paired per round)")


if __name__ == "__main__":
    main()
