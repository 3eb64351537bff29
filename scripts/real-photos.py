#!/usr/bin/env python3
"""Makes an ImageFolder of real-photo JPEGs for benchmarks (no download beyond Debian's archive).

The 13 nature photographs of Debian's mate-backgrounds package (1280x1024 to 2560x1920, camera
JPEGs) are cut into random crops: each crop covers 35-100% of its photo's shorter side with an
aspect ratio in [3/4, 4/3], is resampled (Pillow, antialiased) to a longer side drawn uniformly from
--long-side (never upscaled, so a crop may stay smaller), and saved as a baseline JPEG. The class is the photo the crop came from, so the folder
is learnable. Same seed, same files.

    scripts/real-photos.py --out /tmp/photos --count 2000 --long-side 400,600   # ~100 KB each
    scripts/real-photos.py --out /tmp/big --count 1000 --long-side 800,1600     # for convert --max-side

Needs python3-pil; fetches mate-backgrounds with `apt-get download` into --cache when it is not
installed (/usr/share/backgrounds/mate).
"""
import argparse
import glob
import os
import random
import subprocess
import sys

from PIL import Image

INSTALLED = "/usr/share/backgrounds/mate"


def photos(cache):
    found = sorted(glob.glob(f"{INSTALLED}/nature/*.jpg")) + [f"{INSTALLED}/abstract/Elephants.jpg"]
    if all(os.path.exists(p) for p in found) and len(found) > 1:
        return found
    root = os.path.join(cache, "mate")
    tree = os.path.join(root, "usr/share/backgrounds/mate")
    if not os.path.isdir(tree):
        os.makedirs(root, exist_ok=True)
        subprocess.run(["apt-get", "download", "mate-backgrounds"], cwd=cache, check=True, capture_output=True)
        deb = sorted(glob.glob(os.path.join(cache, "mate-backgrounds_*.deb")))[-1]
        subprocess.run(["dpkg", "-x", deb, root], check=True)
    return sorted(glob.glob(f"{tree}/nature/*.jpg")) + [f"{tree}/abstract/Elephants.jpg"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder to create (one sub-folder per source photo)")
    ap.add_argument("--count", type=int, default=2000, help="images to write (default 2000)")
    ap.add_argument("--long-side", default="400,600", help="MIN,MAX longer side in pixels (default 400,600)")
    ap.add_argument("--quality", type=int, default=90, help="JPEG quality (default 90)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", default="/tmp/ddpio-photo-cache", help="where the .deb is unpacked if needed")
    a = ap.parse_args()
    lo, hi = (int(v) for v in a.long_side.split(","))
    if os.path.exists(a.out):
        sys.exit(f"real-photos: {a.out} exists; remove it or choose another --out")
    os.makedirs(a.cache, exist_ok=True)
    sources = [Image.open(p).convert("RGB") for p in photos(a.cache)]
    rng = random.Random(a.seed)
    total = 0
    for i in range(a.count):
        k = i % len(sources)
        src = sources[k]
        w, h = src.size
        ratio = rng.uniform(3 / 4, 4 / 3)
        side = rng.uniform(0.35, 1.0) * min(w, h)
        cw, ch = min(w, int(side * ratio ** 0.5)), min(h, int(side / ratio ** 0.5))
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        longer = min(rng.randint(lo, hi), max(cw, ch))  # never upscaled: real photo detail only
        f = longer / max(cw, ch)
        crop = src.crop((x, y, x + cw, y + ch)).resize((max(1, round(cw * f)), max(1, round(ch * f))), Image.BILINEAR)
        d = os.path.join(a.out, f"photo_{k:02d}")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, f"img_{i:06d}.jpg")
        crop.save(path, quality=a.quality)
        total += os.path.getsize(path)
    print(f"wrote {a.count} JPEGs from {len(sources)} photos to {a.out}, mean {total / a.count / 1e3:.1f} KB")


if __name__ == "__main__":
    main()
