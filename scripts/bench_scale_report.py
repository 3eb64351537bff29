#!/usr/bin/env python3
"""The helper of scripts/bench-scale.sh: makes its source, measures its runs, writes its report.

    images       --out DIR [--count 256] [--size 48] [--seed 0]
                 distinct small JPEGs (Pillow): a gradient, a few shapes and some noise each
    list         --root DIR --out FILE (--count N | --bytes B) [--classes C]
                 a list file of N 'relative/path label' lines cycling through the images under DIR
                 (sorted); label i % C, or with C = 0 the index of the file's top-level folder;
                 --bytes B: N = B / the mean file size
    measure      --out JSON --stdout FILE --stderr FILE [--cgroup DIR] -- COMMAND...
                 runs COMMAND (moved into the memory cgroup DIR before it starts, if given), reads
                 /proc/PID/status every 50 ms for the peaks of VmRSS, RssAnon, RssFile and RssShmem,
                 and writes wall seconds, the peaks, the child's rusage (max RSS, major faults, blocks
                 read), the load average before, the cgroup's counters and COMMAND's --json line
    first-batch  --data DB [--batch-size 256] [--image-size 32] [--workers 2]
                 seconds from constructing ddpio.Loader to holding its first batch (needs ddpio's
                 Python package on PYTHONPATH and numpy)
    report       --work WORK --plot FILE
                 the Markdown table (stdout), WORK/summary.json and the SVG plot, from WORK/runs/

Pure standard library except `images` (Pillow) and `first-batch` (ddpio, numpy).
"""
import argparse
import json
import math
import os
import random
import signal
import subprocess
import sys
import time

STATUS_KEYS = ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM")
MIB = 1048576.0


# ---- images, list ---------------------------------------------------------------------------------

def make_images(a):
    from PIL import Image, ImageDraw, ImageFilter

    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    s = a.size
    for i in range(a.count):
        c0 = [rng.randrange(256) for _ in range(3)]
        c1 = [rng.randrange(256) for _ in range(3)]
        img = Image.linear_gradient("L").resize((s, s)).rotate(rng.randrange(360))
        img = Image.composite(Image.new("RGB", (s, s), tuple(c0)), Image.new("RGB", (s, s), tuple(c1)), img)
        d = ImageDraw.Draw(img)
        for _ in range(rng.randint(1, 4)):
            x0, y0 = rng.randrange(s), rng.randrange(s)
            box = [x0, y0, x0 + rng.randint(4, s // 2), y0 + rng.randint(4, s // 2)]
            colour = tuple(rng.randrange(256) for _ in range(3))
            rng.choice((d.ellipse, d.rectangle))(box, fill=colour)
        noise = Image.effect_noise((s, s), rng.uniform(5, 60)).convert("RGB")
        img = Image.blend(img, noise, rng.uniform(0.05, 0.3))
        if rng.random() < 0.3:
            img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.5, 1.5)))
        img.save(os.path.join(a.out, f"img_{i:04d}.jpg"), quality=rng.randint(75, 95))


def write_list(a):
    files = sorted(os.path.relpath(os.path.join(d, f), a.root)
                   for d, _, fs in os.walk(a.root) for f in fs if f.lower().endswith((".jpg", ".jpeg")))
    if not files:
        sys.exit(f"bench_scale_report: no JPEG under {a.root}")
    if any("\n" in f for f in files):
        sys.exit(f"bench_scale_report: a file name under {a.root} has a newline (not listable)")
    sizes = [os.path.getsize(os.path.join(a.root, f)) for f in files]
    if a.count is None:  # --bytes: as many records as reach that many source bytes
        a.count = max(1, round(a.bytes / (sum(sizes) / len(sizes))))
    folders = sorted({f.split(os.sep)[0] for f in files if os.sep in f})
    folder_label = {name: k for k, name in enumerate(folders)}
    total = 0
    with open(a.out, "w") as out:
        for i in range(a.count):
            k = i % len(files)
            label = i % a.classes if a.classes else folder_label.get(files[k].split(os.sep)[0], 0)
            out.write(f"{files[k]} {label}\n")
            total += sizes[k]
    print(json.dumps({"records": a.count, "distinct_files": len(files), "source_bytes": total,
                      "mean_file_bytes": sum(sizes) / len(sizes)}))


# ---- measure --------------------------------------------------------------------------------------

def read_status(pid):
    """The STATUS_KEYS of /proc/PID/status in bytes; {} once the process is gone."""
    got = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in STATUS_KEYS:
                    got[key] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return got


def read_cgroup(path):
    out = {}
    for name in ("memory.max_usage_in_bytes", "memory.failcnt", "memory.limit_in_bytes"):
        try:
            out[name] = int(open(os.path.join(path, name)).read())
        except (OSError, ValueError):
            pass
    try:
        for line in open(os.path.join(path, "memory.stat")):
            k, v = line.split()
            if k in ("cache", "rss", "mapped_file", "pgmajfault", "total_cache", "total_rss"):
                out[k] = int(v)
        for line in open(os.path.join(path, "memory.oom_control")):
            k, v = line.split()
            if k == "oom_kill":
                out["oom_kill"] = int(v)
    except (OSError, ValueError):
        pass
    return out


def last_json_line(path):
    try:
        lines = [l for l in open(path, errors="replace").read().splitlines() if l.strip()]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


def measure(a):
    cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
    if not cmd:
        sys.exit("bench_scale_report measure: no command after --")

    def enter_cgroup():  # runs in the child between fork and exec: the command starts inside it
        with open(os.path.join(a.cgroup, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    load1 = float(open("/proc/loadavg").read().split()[0])
    peaks = {k: 0 for k in STATUS_KEYS}
    samples = 0
    with open(a.stdout, "wb") as out, open(a.stderr, "wb") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, preexec_fn=enter_cgroup if a.cgroup else None)
        # Stopped (bench-scale.sh's cleanup sends SIGTERM): the command is stopped too, and reaped below.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: proc.send_signal(signal.SIGTERM))
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            for k, v in read_status(proc.pid).items():
                peaks[k] = max(peaks[k], v)
            samples += 1
            time.sleep(a.interval)
        wall = time.monotonic() - t0
    proc.returncode = 0  # reaped above; keeps Popen from waiting again
    rec = {"command": cmd, "wall_s": wall, "load1_before": load1, "samples": samples,
           "interval_s": a.interval, "exit": os.waitstatus_to_exitcode(status),
           "peak_bytes": peaks, "rusage": {"maxrss_bytes": ru.ru_maxrss * 1024, "majflt": ru.ru_majflt,
                                            "inblock_bytes": ru.ru_inblock * 512,
                                            "user_s": ru.ru_utime, "sys_s": ru.ru_stime},
           "result": last_json_line(a.stdout)}
    if a.cgroup:
        rec["cgroup"] = read_cgroup(a.cgroup)
    try:
        with open(a.out, "w") as f:
            json.dump(rec, f, indent=1)
    except OSError as e:  # the work folder removed under a stopped run
        print(f"bench_scale_report measure: {e}", file=sys.stderr)
    sys.exit(0 if rec["exit"] == 0 else 1)


# ---- first batch ----------------------------------------------------------------------------------

def first_batch(a):
    import ddpio  # noqa: the package built next to the program (PYTHONPATH)

    t0 = time.monotonic()
    loader = ddpio.Loader(a.data, batch_size=a.batch_size, image_size=a.image_size, num_workers=a.workers,
                          arrays="numpy")
    t1 = time.monotonic()
    next(iter(loader))
    t2 = time.monotonic()
    loader.close()
    print(json.dumps({"construct_s": t1 - t0, "first_batch_s": t2 - t0}))


# ---- report ---------------------------------------------------------------------------------------

def load(work, name):
    try:
        return json.load(open(os.path.join(work, "runs", name)))
    except (OSError, ValueError):
        return None


def fmt(x, spec=",.0f"):
    return "—" if x is None else format(x, spec)


def anon_mib(m):
    return None if not m else m["peak_bytes"]["RssAnon"] / MIB


def file_mib(m):
    return None if not m else m["peak_bytes"]["RssFile"] / MIB


def ok_result(m, key):
    return m["result"].get(key) if m and m.get("exit") == 0 and m.get("result") else None


def count_row(work, n):
    conv, ver, ld = (load(work, f"n{n}-{s}.json") for s in ("convert", "verify", "loader"))
    fb = load(work, f"n{n}-first-batch.json")
    info = ver["result"] if ver and ver.get("result") else {}
    return {"records": n, "dataset_bytes": info.get("file_bytes"),
            "convert_images_per_s": ok_result(conv, "images_per_s"), "convert_wall_s": conv and conv["wall_s"],
            "convert_peak_anon_mib": anon_mib(conv), "verify_wall_s": ver and ver["wall_s"],
            "verified": info.get("verified"), "first_batch_s": fb and fb.get("first_batch_s"),
            "loader_construct_s": fb and fb.get("construct_s"),
            "loader_images_per_s": ok_result(ld, "images_per_s"), "loader_peak_anon_mib": anon_mib(ld),
            "loader_peak_file_mib": file_mib(ld),
            "loader_peak_rss_mib_own": (ok_result(ld, "peak_rss_bytes") or 0) / MIB or None,
            "loader_load1_before": ld and ld["load1_before"],
            "runs": {"convert": conv, "verify": ver, "loader": ld, "first_batch": fb}}


BIG_RUNS = (("cold-limited", "cold cache, {mem} GiB cgroup"), ("cold", "cold cache, no limit"),
            ("warm", "warm cache, no limit"))


def big_rows(work, params):
    conv, info = load(work, "big-convert.json"), load(work, "big-inspect.json")
    rows = []
    for key, label in BIG_RUNS:
        m = load(work, f"big-{key}.json")
        if m is None:
            continue
        cg = m.get("cgroup") or {}
        rows.append({"run": key, "label": label.format(mem=params.get("mem_gb")),
                     "records": params.get("big_records"), "dataset_bytes": info and info.get("file_bytes"),
                     "convert_images_per_s": ok_result(conv, "images_per_s"),
                     "convert_wall_s": conv and conv["wall_s"], "convert_peak_anon_mib": anon_mib(conv),
                     "exit": m["exit"], "oom_kill": cg.get("oom_kill"),
                     "loader_images_per_s": ok_result(m, "images_per_s"), "loader_peak_anon_mib": anon_mib(m),
                     "loader_peak_file_mib": file_mib(m), "read_from_disk_mib": m["rusage"]["inblock_bytes"] / MIB,
                     "major_faults": m["rusage"]["majflt"], "wall_s": m["wall_s"],
                     "load1_before": m["load1_before"], "cgroup": cg or None})
    return rows


def print_table(rows, big, params):
    print("| records | dataset MiB | convert images/s | convert s | verify s | first batch s | "
          "loader images/s | loader peak anon MiB | loader peak file-backed MiB | convert peak anon MiB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        mib = r["dataset_bytes"] and r["dataset_bytes"] / MIB
        print(f"| {r['records']:,} | {fmt(mib, ',.1f')} | {fmt(r['convert_images_per_s'])} | "
              f"{fmt(r['convert_wall_s'], ',.1f')} | {fmt(r['verify_wall_s'], ',.2f')} | "
              f"{fmt(r['first_batch_s'], ',.2f')} | {fmt(r['loader_images_per_s'])} | "
              f"{fmt(r['loader_peak_anon_mib'], ',.0f')} | {fmt(r['loader_peak_file_mib'], ',.0f')} | "
              f"{fmt(r['convert_peak_anon_mib'], ',.0f')} |")
    for i, r in enumerate(big):
        mib = r["dataset_bytes"] and r["dataset_bytes"] / MIB
        ips = fmt(r["loader_images_per_s"]) if r["exit"] == 0 else (
            "**OOM-killed**" if r.get("oom_kill") else f"**failed (exit {r['exit']})**")
        conv = (fmt(r["convert_images_per_s"]), fmt(r["convert_wall_s"], ",.1f")) if i == 0 else ("″", "″")
        print(f"| {fmt(r['records'], ',')} photos, {r['label']} | {fmt(mib, ',.1f')} | {conv[0]} | {conv[1]} | "
              f"— | — | {ips} | {fmt(r['loader_peak_anon_mib'], ',.0f')} | "
              f"{fmt(r['loader_peak_file_mib'], ',.0f')} | "
              f"{fmt(r['convert_peak_anon_mib'], ',.0f') if i == 0 else '″'} |")


def print_notes(work, rows, big, params, start):
    p = params
    print(f"\n{p['distinct_files']} distinct {p['image_side']} px JPEGs ({p['source_kind']}) cycled by a list file, "
          f"{p['classes']:,} labels; `bench loader --workers {p['workers']} {p['loader_flags']}`; one run each, "
          f"{os.cpu_count()} cores. Peaks: /proc/PID/status sampled every 50 ms (RssAnon = heap, stacks, batch "
          f"slots; RssFile = the mapped program, libraries and LMDB pages).")
    base = load(work, "program-start.json")
    if base:
        print(f"For reference, `ddpio --version` alone (the program's start, warm cache): {base['wall_s']:.2f} s, "
              f"{anon_mib(base):,.0f} MiB anonymous, {file_mib(base):,.0f} MiB file-backed: a floor under every "
              f"figure above (the libraries it links and initialises).")
    if big:
        cg = next((r["cgroup"] for r in big if r["cgroup"]), None) or {}
        print(f"Big rows: {p['big_images']} repeated to {p.get('big_records', 0):,} records; each cold run after "
              f"`sync; echo 3 > /proc/sys/vm/drop_caches`; the limited one in a memory cgroup of "
              f"{p['mem_gb']} GiB" + (f" (reached {cg.get('memory.max_usage_in_bytes', 0) / MIB:,.0f} MiB, "
                                       f"failcnt {cg.get('memory.failcnt')})" if cg else "") + ".")
        for r in big:
            print(f"  {r['label']}: read {r['read_from_disk_mib']:,.0f} MiB from disk, {r['major_faults']:,} major "
                  f"faults, {r['wall_s']:.1f} s wall, load {r['load1_before']} before")
        if start:
            print(f"  of which starting the program (its shared libraries), as `ddpio --version` after dropping "
                  f"caches reads: {start['rusage']['inblock_bytes'] / MIB:,.0f} MiB in {start['wall_s']:.1f} s")
    loads = [r["loader_load1_before"] for r in rows if r["loader_load1_before"] is not None]
    loads += [r["load1_before"] for r in big]
    if loads:
        span = f"{min(loads)}" if min(loads) == max(loads) else f"{min(loads)}–{max(loads)}"
        print(f"Load average (1 min) before the loader runs: {span} on {os.cpu_count()} cores "
              f"(it includes this script's previous step; much above that, other work competed).")
    bad = [r["records"] for r in rows if r["verified"] is False]
    if bad:
        print(f"**inspect --verify found bad records at {bad}**")


def log_ticks(lo, hi):
    """The x range, from the power of ten at or below lo to the first 1, 2 or 5 x 10^k at or above hi."""
    steps = [m * 10.0 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 2) for m in (1, 2, 5)]
    first = 10.0 ** math.floor(math.log10(lo))
    last = next(t for t in steps if t >= hi * (1 - 1e-9) and t > first)
    return first, last, [t for t in steps if first <= t <= last]


def nice_max(v):
    if v <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    return next(m * e for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if m * e >= v)


def svg_panel(x0, y0, w, h, xs_range, series, ylabel):
    """One panel: a log x-axis (records), a linear y-axis from 0; series = [(name, colour, [(x, y)])]."""
    lo, hi, ticks = xs_range
    ymax = nice_max(max([y for _, _, pts in series for _, y in pts] + [0]))
    px = lambda x: x0 + (math.log10(x) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * w
    py = lambda y: y0 + h - y / ymax * h
    out = [f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#999"/>']
    for t in ticks:
        major = abs(math.log10(t) - round(math.log10(t))) < 1e-9
        grey = "#ccc" if major else "#eee"
        out.append(f'<line x1="{px(t):.1f}" y1="{y0}" x2="{px(t):.1f}" y2="{y0 + h}" stroke="{grey}"/>')
        out.append(f'<text x="{px(t):.1f}" y="{y0 + h + 14}" text-anchor="middle" font-size="10">{t:,.0f}</text>')
    for k in range(5):
        y = ymax * k / 4
        out.append(f'<line x1="{x0}" y1="{py(y):.1f}" x2="{x0 + w}" y2="{py(y):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{x0 - 4}" y="{py(y) + 3:.1f}" text-anchor="end" font-size="10">{y:,.0f}</text>')
    out.append(f'<text x="{x0 - 48}" y="{y0 + h / 2}" font-size="11" text-anchor="middle" '
               f'transform="rotate(-90 {x0 - 48} {y0 + h / 2})">{ylabel}</text>')
    for i, (name, colour, pts) in enumerate(series):
        pts = [(x, y) for x, y in pts if y is not None]
        if pts:
            path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
            out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>' for x, y in pts]
        lx = x0 + 280 * i  # the legend: one row above the panel
        out.append(f'<rect x="{lx}" y="{y0 - 12}" width="12" height="3" fill="{colour}"/>'
                   f'<text x="{lx + 18}" y="{y0 - 7}" font-size="11">{name}</text>')
    return out


def write_svg(path, rows):
    xs = [r["records"] for r in rows]
    xr = log_ticks(min(xs), max(xs))
    w, h, left = 560, 200, 80
    body = ['<svg xmlns="http://www.w3.org/2000/svg" width="680" height="600" font-family="sans-serif">',
            '<rect width="100%" height="100%" fill="white"/>',
            '<text x="340" y="22" text-anchor="middle" font-size="14">ddpio: the cost of scale (bench-scale.sh)</text>']
    body += svg_panel(left, 60, w, h, xr, [
        ("convert images/s", "#1f77b4", [(r["records"], r["convert_images_per_s"]) for r in rows]),
        ("loader images/s (bench loader, 1 epoch)", "#d62728",
         [(r["records"], r["loader_images_per_s"]) for r in rows]),
    ], "images/s")
    body += svg_panel(left, 340, w, h, xr, [
        ("loader peak anonymous MiB", "#2ca02c", [(r["records"], r["loader_peak_anon_mib"]) for r in rows]),
        ("convert peak anonymous MiB", "#9467bd", [(r["records"], r["convert_peak_anon_mib"]) for r in rows]),
    ], "MiB")
    body.append(f'<text x="{left + w / 2}" y="580" text-anchor="middle" font-size="11">records (log scale)</text>')
    body.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(body) + "\n")


def report(a):
    params = json.load(open(os.path.join(a.work, "params.json")))
    rows = [count_row(a.work, n) for n in params["counts"]]
    big = big_rows(a.work, params) if not params.get("skip_big") else []
    start = load(a.work, "big-program-start.json") if big else None
    print_table(rows, big, params)
    print_notes(a.work, rows, big, params, start)
    write_svg(a.plot, rows)
    summary = {"params": params, "counts": rows, "big": big,
               "big_runs": {k: load(a.work, f"big-{k}.json") for k, _ in BIG_RUNS} if big else None,
               "program_start_warm": load(a.work, "program-start.json"), "program_start_cold": start,
               "plot": a.plot}
    with open(os.path.join(a.work, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("images")
    s.add_argument("--out", required=True)
    s.add_argument("--count", type=int, default=256)
    s.add_argument("--size", type=int, default=48)
    s.add_argument("--seed", type=int, default=0)
    s = sub.add_parser("list")
    s.add_argument("--root", required=True)
    s.add_argument("--out", required=True)
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--count", type=int)
    g.add_argument("--bytes", type=float)
    s.add_argument("--classes", type=int, default=0)
    s = sub.add_parser("measure")
    s.add_argument("--out", required=True)
    s.add_argument("--stdout", required=True)
    s.add_argument("--stderr", required=True)
    s.add_argument("--cgroup")
    s.add_argument("--interval", type=float, default=0.05)
    s.add_argument("command", nargs=argparse.REMAINDER)
    s = sub.add_parser("first-batch")
    s.add_argument("--data", required=True)
    s.add_argument("--batch-size", type=int, default=256)
    s.add_argument("--image-size", type=int, default=32)
    s.add_argument("--workers", type=int, default=2)
    s = sub.add_parser("report")
    s.add_argument("--work", required=True)
    s.add_argument("--plot", required=True)
    a = p.parse_args()
    {"images": make_images, "list": write_list, "measure": measure, "first-batch": first_batch,
     "report": report}[a.cmd](a)


if __name__ == "__main__":
    main()
