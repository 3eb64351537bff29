"""The sweep's report: sweep.md (tables, predicted next to measured) and SVG plots drawn by
gnuplot from the data files it leaves beside them (plots/*.dat, plots/*.gp)."""
import os
import platform
import shutil
import statistics
import subprocess
import time
from collections import defaultdict



def load(out):
    """The records of a sweep's results.jsonl (for redrawing its report)."""
    import json
    with open(os.path.join(out, "results.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def rebuild(out):
    """Rewrites sweep.md and the plots of a finished sweep from its results.jsonl (the model's
    parameters are recomputed from the calibration runs it holds)."""
    import statistics
    from sim import sweep
    results = load(out)
    calib = [r for r in results if r["section"] == "calibrate"]
    if calib and calib[0].get("store") == "s3" and "time_to_first_batch_s" in calib[0]:
        # The model is priced again from the calibration runs and every run predicted anew (the
        # model may have changed since the sweep ran; the measurements have not). Sweeps from
        # before runs recorded their first batch ran an older reader (record by record where
        # this one fetches whole chunks): their own predictions stand, as below.
        first = calib[0]
        record_bytes = first["ddpio_bytes_read"] / max(1, first["records_read"])
        cfg = {"ranks_per_node": first["ranks_per_node"], "image_size": 224, "group_size": first["group_size"]}
        leaders = [r for r in calib if r["readers"] == "leader"]
        records = leaders[0]["records_read"] // max(1, leaders[0].get("epochs") or 1) if leaders else 0
        runs = [(dict(r, whole_chunks=r.get("whole_chunks")), r) for r in calib]
        params = sweep.store_params(cfg, record_bytes, runs, records=records)
        from sim import model
        for r in results:
            if r["section"] != "calibrate":
                p = model.predict(dict(r, store="s3"), params)
                r.update(predicted_images_per_s=round(p["images_per_s"], 1), predicted_limit=p["limit"],
                         measured_vs_model=round(r["images_per_s"] / p["images_per_s"], 3))
        write(out, results, params, record_bytes, sum(r.get("wall_s", 0) for r in results))
        return
    every = [r["images_per_s"] for r in calib if r["readers"] == "all"]
    leader = [r["images_per_s"] for r in calib if r["readers"] == "leader"]
    if not every or not leader:
        raise SystemExit(f"{out}/results.jsonl has no calibration runs")
    first = calib[0]
    record_bytes = first["ddpio_bytes_read"] / max(1, first["records_read"])
    cfg = {"ranks_per_node": first["ranks_per_node"], "image_size": 224}
    ios = statistics.median(r["storage_ios"] / max(1, r["records_read"]) for r in calib if r["readers"] == "all")
    params = sweep.model_params(cfg, record_bytes, statistics.median(every), ios, statistics.median(leader))
    params.update(cpu_rounds=every, relay_rounds=leader)
    write(out, results, params, record_bytes, sum(r.get("wall_s", 0) for r in results))


def write(out, results, params, record_bytes, seconds):
    plots = os.path.join(out, "plots")
    os.makedirs(plots, exist_ok=True)
    lines = [f"# Cluster sweep ({time.strftime('%Y-%m-%d %H:%M')})", ""]
    if results:
        r0 = results[0]
        lines += [f"{r0['nodes']} nodes x {r0['ranks_per_node']} ranks on one {os.cpu_count()}-core machine "
                  f"({platform.node()}); batch {r0['batch_size']}, 1 decoding worker per rank; "
                  f"{record_bytes / 1e3:.1f} KB per stored record. Every run starts from cold page caches.", ""]
    if params and "get_s" in params:
        lines += [f"Calibration, nothing limited (the runs marked calibrate below, least squares of CPU time "
                  f"per image over them): {params['decode_s'] * 1e3:.3f} ms of CPU per decode, "
                  f"{params['read_s'] * 1e3:.3f} ms per record fetched, {params['get_s'] * 1e3:.3f} ms per GET, "
                  f"{params['relay_byte_s'] * 1e9:.3f} ms per MB relayed between ranks; "
                  f"{params.get('gets_per_record', 1):.2f} GETs per record record by record; "
                  f"{params.get('start_s', 0):.2f} s to the first batch. The model: "
                  "scripts/sim/model.py (docs/PERFORMANCE.md, \"Many hosts\").", ""]
    elif params:
        rounds = lambda k: ", ".join("%.0f" % x for x in params.get(k) or [])
        lines += [f"Calibration, nothing limited, replicate G=2R: every member reading {params['cpu_rate']:.0f} "
                  f"images/s (rounds {rounds('cpu_rounds')}), the leader reading {params['relay_rate'] or 0:.0f} "
                  f"images/s (rounds "
                  f"{rounds('relay_rounds')}): {params['decode_s'] * 1e3:.3f} ms of CPU per decode, "
                  f"{params['read_s'] * 1e3:.3f} ms per record read; {params['ios_per_record']:.2f} IOs per "
                  "record. The model: scripts/sim/model.py (docs/PERFORMANCE.md, \"Many hosts\").", ""]
    sections = defaultdict(list)
    for r in results:
        sections[r["section"]].append(r)
    for name, title in (("calibrate", "Calibration: nothing limited"),
                        ("grid", "Grid: storage x link x group size"),
                        ("headline", "Replicate against every member reading (medians of interleaved rounds)"),
                        ("shard", "Shard under an IOPS limit, a per-node client cap and a throughput limit"),
                        ("relay", "Replicate relay: chain against star (bytes per node link)"),
                        ("readahead", "The leader's read-ahead window"),
                        ("train", "ddpio train (32 px crops), replicate, leader reading against every member reading"),
                        ("store", "Object store: replicate, the leader fetching against every member fetching "
                                  "(medians of interleaved rounds; storage = bytes over the store's link, IOs = GETs)")):
        if name in sections:
            lines += [f"## {title}", ""] + table(sections[name], name) + [""]
    made = []
    if shutil.which("gnuplot"):
        made += throughput_plots(plots, sections.get("grid", []))
        made += best_group_plots(plots, sections.get("grid", []))
        made += model_plot(plots, results)
        made += relay_plot(plots, sections.get("relay", []))
        made += store_plot(plots, sections.get("store", []))
    else:
        lines += ["(gnuplot not found: no plots; scripts/install-deps.sh installs gnuplot-nox)", ""]
    if made:
        lines += ["## Plots", ""] + [f"- `plots/{m}`" for m in made] + [""]
    disagree = [r for r in results if r.get("measured_vs_model") and abs(r["measured_vs_model"] - 1) > 0.2]
    lines += [f"{len(results)} runs in {seconds / 60:.1f} min; {len(disagree)} of them more than 20% away "
              "from the model (marked ! above).", ""]
    with open(os.path.join(out, "sweep.md"), "w") as f:
        f.write("\n".join(lines))


def label(r):
    s = ("train " if r.get("job") == "train" else "") + f"{r['mode']}/{r['payload']} G={r['group_size']}"
    if r["readers"] == "all":
        s += " every member reads"
    if r.get("order"):
        s += f", {r['order']} order"
    if r.get("node_cache"):
        s += ", a node's cache folder"
    if r.get("whole_chunks") is not None:
        s += ", whole chunks" if r["whole_chunks"] else ", record by record"
    if (r.get("epochs") or 1) > 1:
        s += f", {r['epochs']} epochs"
    return s


def limits(r):
    out = [f"{r['link_mbit']} Mbit" if r["link_mbit"] else "unshaped"]
    if r.get("store") == "s3":
        out.append(f"store {r['store_link_mbit']} Mbit" if r.get("store_link_mbit") else "store unshaped")
    if r["storage_mbps"]:
        out.append(f"{r['storage_mbps']:g} MB/s")
    if r["storage_iops"]:
        out.append(f"{r['storage_iops']} IOPS")
    if r["node_mbps"]:
        out.append(f"{r['node_mbps']:g} MB/s/node")
    return ", ".join(out)


def table(rows, section):
    # Repeated configurations (headline rounds) collapse to their median.
    groups = defaultdict(list)
    for r in rows:
        key = (limits(r), label(r), r.get("relay"), r.get("read_ahead"), r["layout"])
        groups[key].append(r)
    head = ["limits", "configuration", "images/s", "model", "meas/model", "limit", "storage MB read",
            "storage IOs", "max link MB (tx/rx)"]
    if section == "relay":
        head[-1] = "tx MB per node"
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (lim, lab, relay, ra, layout), rs in groups.items():
        rate = statistics.median(r["images_per_s"] for r in rs)
        r = rs[0]
        conf = lab + (f", {layout}" if r["group_size"] > 1 else "")
        if r["mode"] == "replicate" and r["readers"] == "leader" and relay != "chain":
            conf += f", {relay}"
        if section == "readahead":
            conf += f", read-ahead {ra}"
        if len(rs) > 1:
            rounds = ", ".join("%.0f" % x["images_per_s"] for x in rs)
            conf += f" ({len(rs)} rounds: {rounds})"
        pred = r.get("predicted_images_per_s")
        ratio = rate / pred if pred else None
        mark = " !" if ratio and abs(ratio - 1) > 0.2 else ""
        if section == "relay":
            links = " / ".join(f"{x / 1e6:.0f}" for x in r["link_tx_bytes"])
        else:
            links = f"{max(r['link_tx_bytes']) / 1e6:.0f} / {max(r['link_rx_bytes']) / 1e6:.0f}"
        out.append("| " + " | ".join([lim, conf, f"{rate:.0f}", f"{pred:.0f}" if pred else "-",
                                      f"{ratio:.2f}{mark}" if ratio else "-", r.get("predicted_limit", "-"),
                                      f"{r['storage_bytes_read'] / 1e6:.0f}", str(r["storage_ios"]), links]) + " |")
    return out


def gnuplot(plots, name, script):
    path = os.path.join(plots, name + ".gp")
    with open(path, "w") as f:
        f.write(script)
    subprocess.run(["gnuplot", os.path.abspath(path)], cwd=plots, check=True, capture_output=True)
    return name + ".svg"


def throughput_plots(plots, grid):
    made = []
    by = defaultdict(list)
    for r in grid:
        by[(r["mode"], r["payload"], r["link_mbit"])].append(r)
    for (mode, payload, link), rs in sorted(by.items()):
        series = defaultdict(list)
        for r in rs:
            key = f"G={r['group_size']}" + (" every member reads" if r["readers"] == "all" else "")
            series[key].append((r["storage_mbps"], r["images_per_s"], r.get("predicted_images_per_s", 0)))
        name = f"throughput-{mode}-{payload}-{link}mbit"
        dat, plot = [], []
        for i, (key, pts) in enumerate(sorted(series.items())):
            dat.append(f"# {key}")
            dat += [f"{s} {m} {p}" for s, m, p in sorted(pts)]
            dat += ["", ""]
            plot.append(f"'{name}.dat' index {i} using 1:2 with linespoints lw 2 pt 7 lc {i + 1} title '{key}'")
            plot.append(f"'{name}.dat' index {i} using 1:3 with lines dt 2 lw 1.5 lc {i + 1} notitle")
        with open(os.path.join(plots, name + ".dat"), "w") as f:
            f.write("\n".join(dat))
        made.append(gnuplot(plots, name, f"""set terminal svg size 720,440 dynamic font 'sans,11'
set output '{name}.svg'
set title '{mode} / {payload}, {link} Mbit/s links: images/s against storage (dashed: model)'
set xlabel 'shared storage, MB/s'
set ylabel 'images/s (job)'
set logscale x 2
set key left top
set grid
plot {', '.join(plot)}
"""))
    return made


def best_group_plots(plots, grid):
    made = []
    by = defaultdict(list)
    for r in grid:
        if r["readers"] == "all":
            continue
        by[(r["mode"], r["payload"])].append(r)
    for (mode, payload), rs in sorted(by.items()):
        storages = sorted({r["storage_mbps"] for r in rs})
        links = sorted({r["link_mbit"] for r in rs})
        best = {}
        for r in rs:
            k = (r["storage_mbps"], r["link_mbit"])
            if k not in best or r["images_per_s"] > best[k]["images_per_s"]:
                best[k] = r
        name = f"best-group-{mode}-{payload}"
        dat = []
        for yi, link in enumerate(links):
            for xi, s in enumerate(storages):
                r = best.get((s, link))
                if r:
                    dat.append(f"{xi} {yi} {r['group_size']} {r['images_per_s']:.0f}")
            dat.append("")
        with open(os.path.join(plots, name + ".dat"), "w") as f:
            f.write("\n".join(dat))
        xt = ", ".join(f"'{s:g}' {i}" for i, s in enumerate(storages))
        yt = ", ".join(f"'{l}' {i}" for i, l in enumerate(links))
        made.append(gnuplot(plots, name, f"""set terminal svg size 640,{160 + 90 * len(links)} dynamic font 'sans,11'
set output '{name}.svg'
set title '{mode} / {payload}: the best group size (cell: G, images/s)'
set xlabel 'shared storage, MB/s'
set ylabel 'link, Mbit/s'
set xtics ({xt})
set ytics ({yt})
set xrange [-0.5:{len(storages) - 0.5}]
set yrange [-0.5:{len(links) - 0.5}]
set cblabel 'best G'
set palette defined (1 '#f7f7f7', 2 '#c6dbef', 4 '#6baed6', 8 '#2171b5')
set cbrange [1:8]
set cbtics (1, 2, 4, 8)
plot '{name}.dat' using 1:2:3 with image pixels notitle, \\
     '' using 1:2:(sprintf('G=%d\\n%d/s', $3, $4)) with labels notitle
"""))
    return made


def model_plot(plots, results):
    pts = [r for r in results if r.get("predicted_images_per_s")]
    if not pts:
        return []
    name = "model"
    with open(os.path.join(plots, name + ".dat"), "w") as f:
        for limit in sorted({r["predicted_limit"] for r in pts}):
            f.write(f"# {limit}\n")
            f.write("\n".join(f"{r['predicted_images_per_s']} {r['images_per_s']}" for r in pts
                              if r["predicted_limit"] == limit))
            f.write("\n\n\n")
    limits = sorted({r["predicted_limit"] for r in pts})
    top = max(max(r["predicted_images_per_s"], r["images_per_s"]) for r in pts) * 1.1
    plot = [f"'{name}.dat' index {i} using 1:2 with points pt 7 ps 0.8 title 'limited by {l}'"
            for i, l in enumerate(limits)]
    plot += ["x title 'measured = model' lc rgb 'black'", "0.8*x dt 2 lc rgb 'gray' title '±20%'",
             "1.2*x dt 2 lc rgb 'gray' notitle"]
    return [gnuplot(plots, name, f"""set terminal svg size 560,520 dynamic font 'sans,11'
set output '{name}.svg'
set title 'Measured against the model (every run of the sweep)'
set xlabel 'predicted images/s'
set ylabel 'measured images/s'
set xrange [0:{top}]
set yrange [0:{top}]
set key left top
set grid
plot {', '.join(plot)}
""")]


def store_plot(plots, store):
    """Images/s and GETs per configuration at each store link (medians of the rounds)."""
    if not store:
        return []
    name = "store"
    groups = defaultdict(list)
    for r in store:
        if r.get("order"):
            who = f"shard, {r['order']} order" + (", a node's folder" if r.get("node_cache") else "")
        else:
            who = "every member fetching" if r["readers"] == "all" else f"leader fetching, {r['payload']}"
        groups[(r["store_link_mbit"], who)].append(r)
    rows = []
    for (mbit, who), rs in sorted(groups.items()):
        rows.append((f"{who}, store {mbit} Mbit", statistics.median(r["images_per_s"] for r in rs),
                     statistics.median(r["storage_ios"] for r in rs)))
    with open(os.path.join(plots, name + ".dat"), "w") as f:
        f.write("\n".join(f"\"{a}\" {b:.1f} {c:.0f}" for a, b, c in rows))
    return [gnuplot(plots, name, f"""set terminal svg size 820,460 dynamic font 'sans,11'
set output '{name}.svg'
set title 'Object store: images/s of the job and GETs to the store (replicate G = 2 x ranks per node, or shard)'
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8
set ylabel 'images/s, GETs'
set xtics rotate by -30
set grid ytics
plot '{name}.dat' using 2:xtic(1) title 'images/s (median)', '' using 3 title 'GETs to the store'
""")]


def relay_plot(plots, relay):
    if not relay:
        return []
    name = "relay-links"
    rows = []
    for r in relay:
        for n, (tx, rx) in enumerate(zip(r["link_tx_bytes"], r["link_rx_bytes"])):
            rows.append((f"{r['relay']} {r['link_mbit']}M n{n}", tx / 1e6, rx / 1e6))
    with open(os.path.join(plots, name + ".dat"), "w") as f:
        f.write("\n".join(f"\"{a}\" {b:.1f} {c:.1f}" for a, b, c in rows))
    return [gnuplot(plots, name, f"""set terminal svg size 820,420 dynamic font 'sans,11'
set output '{name}.svg'
set title 'Replicate, G = 2 x ranks per node: MB each node link carried (star vs chain)'
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8
set ylabel 'MB'
set xtics rotate by -40
set grid ytics
plot '{name}.dat' using 2:xtic(1) title 'sent (uplink)', '' using 3 title 'received (downlink)'
""")]
