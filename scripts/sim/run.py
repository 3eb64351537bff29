"""One measured configuration: shape the links, throttle the storage, drop the nodes' page
caches, run `ddpio bench feed` (or `ddpio train`) across the nodes, and read what moved: images/s
of the job, bytes read from the shared filesystem (blkio), bytes on every node's link (veth
counters), each rank's stall."""
import json
import os
import shutil
import subprocess
import time

from sim import jobs, model
from sim.cluster import SimError


def dataset_stats(ddpio, data):
    """(records, mean stored bytes per record) of a dataset, from `ddpio inspect --json`."""
    p = subprocess.run([ddpio, "inspect", data, "--json"], capture_output=True, text=True)
    if p.returncode != 0:
        raise SimError(f"ddpio inspect {data}: {p.stderr.strip()}")
    j = json.loads(p.stdout.strip().splitlines()[-1])
    return j["records"], j["payload_bytes"] / max(1, j["records"])


# A node's cache folder with --node-cache ({node}: the node's index), shared by its ranks.
NODE_CACHE = "/dev/shm/ddpio-sim-cache/node-{node}"


def remove_node_caches(nodes):
    for i in range(nodes):
        shutil.rmtree(NODE_CACHE.replace("{node}", str(i)), ignore_errors=True)
    try:
        os.rmdir(os.path.dirname(NODE_CACHE))  # the folder of the nodes' folders, once empty
    except OSError:
        pass


def job_argv(cfg):
    """The per-rank command for a configuration ({data} is each node's copy of the dataset)."""
    common = ["--data", "{data}", "--group-size", str(cfg["group_size"]), "--layout", cfg["layout"],
              "--mode", cfg["mode"], "--payload", cfg["payload"], "--readers", cfg["readers"],
              "--epochs", str(cfg["epochs"]), "--batch-size", str(cfg["batch_size"]),
              "--workers", str(cfg["workers"]), "--image-size", str(cfg["image_size"]),
              "--relay", cfg.get("relay", "chain"), "--read-ahead", str(cfg.get("read_ahead", 64)), "--json"]
    if cfg.get("order", "exact") == "block":
        common += ["--order", "block", "--block-window", "4"]
    if cfg.get("seq_len"):
        common += ["--seq-len", str(cfg["seq_len"])]
    common += list(cfg.get("job_args") or [])
    timeout = str(cfg.get("job_timeout", 300))  # seconds any one collective, send or receive may take
    if cfg["job"] == "train":
        return [cfg["ddpio"], "train", *common, "--timeout", timeout]
    # No ceiling rounds: their reads (every decoding rank's, peers' too) would count in the storage
    # traffic measured here, and their barriers would tie the groups together between epochs.
    return [cfg["ddpio"], "bench", "feed", *common, "--ceiling-images", "0", "--timeout", timeout]


def run_config(cluster, cfg, params=None, echo=False):
    """Runs one configuration on an up cluster; returns its result record (raises SimError)."""
    cluster.shape(cfg["link_mbit"])
    s3 = cluster.store_kind == "s3"
    if s3:
        cluster.shape_store(cfg.get("store_link_mbit", 0))
    else:
        cluster.throttle(cfg["storage_mbps"], cfg["storage_iops"], cfg["node_mbps"])
        cluster.drop_caches()
    counters = (lambda: (cluster.store_bytes_sent(), 0)) if s3 else cluster.storage_counters
    s0, links0 = counters(), cluster.link_bytes()
    env = cluster.job_env()
    cache = NODE_CACHE if s3 and cfg.get("node_cache") else None
    if cache is not None:
        env["DDPIO_S3_CACHE_DIR"] = cache
        remove_node_caches(cluster.nodes)
    if s3 and cfg.get("whole_chunks") is not None:
        env["DDPIO_S3_WHOLE_CHUNKS"] = "1" if cfg["whole_chunks"] else "0"
    t0 = time.monotonic()
    try:
        results = jobs.launch(cluster, cfg["ddpio"], cfg["ranks_per_node"], job_argv(cfg),
                              timeout=cfg["timeout"], env=env, echo=echo)
    finally:
        if cache is not None:
            remove_node_caches(cluster.nodes)
    wall = time.monotonic() - t0
    s1, links1 = counters(), cluster.link_bytes()
    if any(r.rc != 0 for r in results):
        raise SimError("the job failed:\n" + jobs.failure_text(results))
    ranks = jobs.rank_json(results)
    world = cluster.nodes * cfg["ranks_per_node"]
    if len(ranks) != world:
        raise SimError(f"{len(ranks)} of {world} ranks printed a result")
    rec = {k: cfg.get(k) for k in ("nodes", "ranks_per_node", "link_mbit", "storage_mbps", "storage_iops",
                                   "node_mbps", "group_size", "mode", "payload", "readers", "layout", "relay",
                                   "read_ahead", "job", "epochs", "batch_size", "order", "node_cache",
                                   "whole_chunks", "store_first_byte_ms", "seq_len", "job_args")}
    rec.update(job_figures(ranks, cfg))
    rec["storage_bytes_read"] = s1[0] - s0[0]  # the store's link: response bytes, HTTP included
    rec["storage_ios"] = s1[1] - s0[1]
    if s3:
        rec.update(store="s3", store_link_mbit=cfg.get("store_link_mbit", 0), **store_figures(ranks))
        rec["storage_ios"] = rec["store_requests"]
    rec["link_tx_bytes"] = [links1[i][0] - links0[i][0] for i in range(cluster.nodes)]
    rec["link_rx_bytes"] = [links1[i][1] - links0[i][1] for i in range(cluster.nodes)]
    rec["network_bytes"] = sum(rec["link_tx_bytes"])
    rec["wall_s"] = round(wall, 2)
    if params is not None:
        p = model.predict(cfg, params)
        rec["predicted_images_per_s"] = round(p["images_per_s"], 1)
        rec["predicted_limit"] = p["limit"]
        rec["measured_vs_model"] = round(rec["images_per_s"] / p["images_per_s"], 3) if p["images_per_s"] else None
    return rec


def store_figures(ranks):
    """What the ranks asked of the object store: GET requests (records, and each rank's manifest
    and index), records fetched, retries, and the ranks that fetched records."""
    per_rank = {r: j.get("store") or {} for r, j in ranks.items()}
    total = lambda key: sum(s.get(key, 0) for s in per_rank.values())
    return {"store_requests": total("requests"), "store_records_fetched": total("records_fetched"),
            "store_retries": total("retries"),
            "store_ranks_fetching": sorted(r for r, s in per_rank.items() if s.get("records_fetched", 0) > 0),
            "store_requests_per_rank": [per_rank[r].get("requests", 0) for r in sorted(per_rank)]}


def job_figures(ranks, cfg):
    """Images/s of the whole job (images delivered to every rank over the job's span), the
    records and bytes ddpio says it read and sent, and each rank's stall."""
    ordered = [ranks[r] for r in sorted(ranks)]
    report = {}
    if cfg["job"] == "train":  # ranks step in lock-step: the job's rate is the sum of theirs
        rate = sum(j["samples_per_s"] for j in ordered)
        images = None
        stall = [round(j["stall_fraction"], 3) for j in ordered]
        steps = ordered[0].get("step_report") or {}
        report = {"straggler": steps.get("straggler"), "straggler_bottleneck": steps.get("bottleneck"),
                  "straggler_line": steps.get("line")}
    else:
        images = sum(j["images"] for j in ordered)
        span = max(j["end_unix_s"] for j in ordered) - min(j["start_unix_s"] for j in ordered)
        rate = images / span if span > 0 else 0.0
        stall = [round(j["loader_wait_s"] / j["seconds"], 3) if j["seconds"] > 0 else 0.0 for j in ordered]
    g = cfg["group_size"] if cfg["mode"] == "replicate" else 1
    return {
        "images": images,
        "images_per_s": round(rate, 1),
        "unique_images_per_s": round(rate / g, 1),
        "records_read": sum(j["records_read"] for j in ordered),
        "ddpio_bytes_read": sum(j["bytes_read"] for j in ordered),
        "ddpio_bytes_sent": sum(j["bytes_sent"] for j in ordered),
        "stall": stall,
        # The slowest rank's wait for its first batch: with whole chunks, what fills the pipe.
        "time_to_first_batch_s": round(max(j.get("time_to_first_batch_s", 0.0) for j in ordered), 3),
        **report,
    }
