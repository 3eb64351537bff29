#!/usr/bin/env python3
"""What `ddpio convert --max-side N` buys: loader speed and pixel cost, measured in one run.

Converts one ImageFolder as it is and with each --max-side, then runs `ddpio bench loader`
(RandomResizedCrop 224 + flip) over every dataset in rounds, in a rotating order, and reports the
median images/s of each with its own full-decode ceiling and the median per-round speedup over the
original. The pixel cost: every image through the evaluation geometry (Resize 256, CenterCrop 224,
exact decode) from the shrunk dataset against the same from the original — what resizing at
conversion changes compared with resizing at load time.

    PYTHONPATH=build/release/python /usr/bin/python3 scripts/bench-max-side.py --src /tmp/rp-big
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
    ap.add_argument("--src", required=True, help="ImageFolder of photos (scripts/real-photos.py makes one)")
    ap.add_argument("--work", default="/tmp/ddpio-max-side", help="where the datasets are written (replaced)")
    ap.add_argument("--sides", default="512,320,256")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--ddpio", default=os.path.join(REPO, "build", "release", "tools", "ddpio"))
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    sides = [0] + [int(s) for s in a.sides.split(",")]
    name = lambda s: "original" if s == 0 else f"--max-side {s}"
    path = lambda s: os.path.join(a.work, "original" if s == 0 else f"max{s}")
    conv = {}
    for s in sides:
        extra = [] if s == 0 else ["--max-side", str(s)]
        out = subprocess.run([a.ddpio, "convert", "--src", a.src, "--out", path(s), "--quiet", "--json", *extra],
                             check=True, capture_output=True, text=True).stdout
        conv[s] = json.loads(out.strip().splitlines()[-1])
    rates = {s: [] for s in sides}
    ceilings = {s: [] for s in sides}
    for r in range(a.rounds):
        order = sides[r % len(sides):] + sides[:r % len(sides)]
        for s in order:
            out = subprocess.run([a.ddpio, "bench", "loader", "--data", path(s), "--workers", str(a.workers),
                                  "--batch-size", "64", "--epochs", "2", "--json"],
                                 check=True, capture_output=True, text=True).stdout
            j = json.loads(out.strip().splitlines()[-1])
            rates[s].append(j["images_per_s"])
            ceilings[s].append(j["ceiling_images_per_s"])
        print(f"round {r + 1}/{a.rounds}: " + ", ".join(f"{name(s)} {rates[s][-1]:.0f}" for s in sides),
              file=sys.stderr)

    sys.path.insert(0, os.path.join(REPO, "build", "release", "python"))
    import numpy as np
    import ddpio

    def eval_images(p):
        loader = ddpio.Loader(p, batch_size=50, train=False, decode="exact", shuffle=False, padding="none",
                              arrays="numpy", workers=a.workers)
        return np.concatenate([np.array(b["images"]) for b in loader])  # copies: batches go back

    reference = eval_images(path(0)).astype(np.int16)
    print(f"\n{conv[0]['records']} images from {a.src}, {a.workers} workers, batch 64, RandomResizedCrop 224 + "
          f"flip, median of {a.rounds} rounds (order rotated each round)\n")
    print("| dataset | stored | convert images/s | loader images/s | its full-decode ceiling | speedup vs original "
          "(median of per-round ratios) | eval pixels vs original: mean abs diff, 99th percentile, max |")
    print("|---|---|---|---|---|---|---|")
    for s in sides:
        ratio = statistics.median(x / y for x, y in zip(rates[s], rates[0]))
        if s == 0:
            diff = "—"
        else:
            d = np.abs(eval_images(path(s)).astype(np.int16) - reference)
            diff = f"{d.mean():.2f}, {np.percentile(d, 99):.0f}, {d.max()}"
        print(f"| {name(s)} | {conv[s]['bytes'] / 1e6:.1f} MB | {conv[s]['images_per_s']:.0f} | "
              f"{statistics.median(rates[s]):.0f} | {statistics.median(ceilings[s]):.0f} | {ratio:.2f}x | {diff} |")


if __name__ == "__main__":
    main()
