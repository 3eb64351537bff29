"""A data-parallel job reading its dataset from S3, projected on paper with the model's
object-store terms (scripts/sim/model.py): what the store, a node and a reader must do for three
ways ddpio can read, and whether each stays within S3's limits.

The default job: ImageNet-1k (1,281,167 training images, ~110 KB mean JPEG: ~141 GB) on 1,024
GPUs (128 nodes x 8), each consuming ~2,000 images/s (an assumed A100 training rate for a
ResNet-50-class model with mixed precision; nothing here measures a GPU), one rank per GPU, shard
mode (each rank reads its own samples), S3 at ~5,500 GETs/s per partitioned prefix and 30 ms to
the first byte (the delaying proxy's setting in docs/PERFORMANCE.md; S3 gives 10-200 ms).

The three strategies:
  per-record exact  torch's exact random order with a dataset larger than the node's cache
                    budget: one GET per record (neighbours rarely share a reader's read-ahead)
  chunked exact     the exact order with the dataset within each node's cache folder (cache_gb >=
                    the dataset), the node's ranks sharing the folder: a record's whole chunk (up
                    to max_request_bytes, 8 MiB) comes in one GET, each chunk once per node; a
                    node needs 1 - (1 - 1/N)^k of the chunks in the first epoch and all of them
                    within a few, after which it asks the store nothing
  chunked block     the block order (--order block): chunks of --block-chunk records permuted per
                    epoch, each reader's lane shuffled within a window of --block-window chunks;
                    one GET per chunk (up to 64 MiB) per epoch, the node's ranks sharing one
                    cache folder, so only a chunk on the edge between two nodes' lanes is fetched
                    twice

Columns: GETs/s at the job's rate in the first epoch (the busiest: with chunked exact later epochs
fall towards none) as a multiple of one prefix's rate; store bytes; the cache each node needs; a
reader's Little bound (in flight / (first byte + transfer)) against the rate its GPU consumes;
the node link the first epoch needs; how long the first epoch takes and what binds it (the job's
rate, a reader's Little bound, the node's link, or the store's request rate over --prefixes); the
time to first batch: opening (rank 0 fetches the manifest and the 20 MB index) and then the first
batch's GETs (the reader sends its GETs in the order their records are needed; in the exact order
the first batch's records each by a GET of its own ahead of their chunks; in the block order the
chunks the first batch draws from).

  python3 scripts/sim/project.py                       # the table for the default job
  python3 scripts/sim/project.py --first-byte-ms 100 --prefixes 4 --json
  python3 scripts/sim/project.py --check               # the model against docs/PERFORMANCE.md
  python3 scripts/sim/project.py --svg docs/cluster-s3/plots/projection-gets.svg

Stdlib only, deterministic, a fraction of a second.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sim import model  # noqa: E402

MIB = 1 << 20
# The loader asks an object store for the batch being assembled and the 8 after it, at most 2,048
# records (loader.h kRemoteLookaheadBatches / kRemoteLookaheadRecords, loader_worker.cc).
LOOKAHEAD_BATCHES, LOOKAHEAD_RECORDS = 8, 2048
STRATEGIES = ("per-record exact", "chunked exact", "chunked block")


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="project.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    job = p.add_argument_group("the job")
    job.add_argument("--nodes", type=int, default=128, help="nodes (default 128)")
    job.add_argument("--gpus-per-node", type=int, default=8,
                     help="GPUs a node, one rank and one reader each (default 8)")
    job.add_argument("--images-per-s-per-gpu", type=float, default=2000,
                     help="images/s one GPU trains on (default 2,000: an assumed A100 rate, ResNet-50 class)")
    job.add_argument("--batch-size", type=int, default=64, help="per GPU (default 64: 65,536 a step on 1,024)")
    job.add_argument("--epochs", type=int, default=90, help="epochs of the job, for its total bytes (default 90)")
    data = p.add_argument_group("the dataset")
    data.add_argument("--records", type=int, default=1281167, help="default: ImageNet-1k's training set")
    data.add_argument("--record-kb", type=float, default=110, help="mean stored record, KB (default 110)")
    data.add_argument("--index-bytes-per-record", type=float, default=16,
                      help="the record index (ddpio-index.bin) per record (default 16: ~20 MB for ImageNet)")
    store = p.add_argument_group("the store and the network")
    store.add_argument("--first-byte-ms", type=float, default=30, help="latency to a GET's first byte (default 30)")
    store.add_argument("--gets-per-s-per-prefix", type=float, default=5500,
                       help="GETs/s S3 serves per partitioned prefix (default 5,500)")
    store.add_argument("--prefixes", type=int, default=1,
                       help="partitioned prefixes the dataset's objects span (default 1; `convert --shards K` "
                            "puts each shard under a prefix of its own)")
    store.add_argument("--node-gbit", type=float, default=100, help="a node's link to the store, Gbit/s (default 100)")
    store.add_argument("--get-mb-s", type=float, default=90,
                       help="most one GET's connection carries, MB/s (default 90: AWS's performance guidelines "
                            "plan one request per 85-90 MB/s; 0: only the node's link shared among its GETs)")
    reader = p.add_argument_group("ddpio's reader")
    reader.add_argument("--in-flight", type=int, default=model.DEFAULT_IN_FLIGHT,
                        help="GETs in flight per reader at least (default 16, max_in_flight; the window starts there)")
    reader.add_argument("--in-flight-limit", type=int, default=model.IN_FLIGHT_LIMIT,
                        help="GETs in flight per reader at most (default 128, DDPIO_S3_MAX_IN_FLIGHT): the window "
                             "opens to it for GETs small enough that 64 MiB holds that many")
    reader.add_argument("--whole-chunk-mib", type=float, default=8,
                        help="chunked exact: most one whole-chunk GET reaches, MiB (default 8, max_request_bytes)")
    reader.add_argument("--block-chunk", type=int, default=128, help="block order: records a chunk (default 128)")
    reader.add_argument("--block-window", type=int, default=128, help="block order: window, chunks (default 128)")
    reader.add_argument("--block-get-mib", type=float, default=64,
                        help="block order: most one GET of a chunk fetches, MiB (default 64, kMaxOrderChunkBytes)")
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="one JSON object (the job and the rows) instead of Markdown")
    out.add_argument("--check", action="store_true",
                     help="instead: the model against figures measured in docs/PERFORMANCE.md, within 20%% or not")
    out.add_argument("--svg", metavar="PATH",
                     help="also write GETs/s against GPUs (8 to 8,192, --gpus-per-node a node) for the three "
                          "strategies, with one prefix's rate, as an SVG")
    args = p.parse_args(argv)
    for name in ("nodes", "gpus_per_node", "batch_size", "records", "in_flight", "block_chunk", "prefixes"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def job_of(args):
    """The job's derived quantities, shared by the strategies."""
    readers = args.nodes * args.gpus_per_node
    record_bytes = args.record_kb * 1e3
    node_bps = args.node_gbit * 1e9 / 8
    rate = readers * args.images_per_s_per_gpu
    return {
        "nodes": args.nodes, "readers": readers, "per_node": args.gpus_per_node,
        "records": args.records, "record_bytes": record_bytes, "dataset_bytes": args.records * record_bytes,
        "images_per_s": rate, "epoch_s": args.records / rate, "reader_rate": args.images_per_s_per_gpu,
        "node_bytes_per_s": node_bps, "first_byte_s": args.first_byte_ms / 1e3, "in_flight": args.in_flight,
        "in_flight_limit": max(args.in_flight, args.in_flight_limit), "get_cap_bytes_per_s": args.get_mb_s * 1e6,
        # One GET's share of the node's link when every reader of the node keeps its GETs in flight.
        "get_bytes_per_s": model.get_bandwidth(node_bps, args.gpus_per_node * args.in_flight, args.get_mb_s * 1e6),
        "store_rps": args.gets_per_s_per_prefix * args.prefixes, "per_prefix": args.gets_per_s_per_prefix,
        "batch": args.batch_size, "first_read_ahead": min((LOOKAHEAD_BATCHES + 1) * args.batch_size,
                                                          LOOKAHEAD_RECORDS),
        "epochs": args.epochs,
    }


def open_seconds(args, job):
    """Rank 0 fetches the manifest, then the index (one GET each, one after the other) and
    broadcasts them; the index's transfer runs at one connection's rate."""
    one_get = min(job["node_bytes_per_s"], args.get_mb_s * 1e6) if args.get_mb_s > 0 else job["node_bytes_per_s"]
    return 2 * job["first_byte_s"] + args.records * args.index_bytes_per_record / one_get


def per_record_exact(args, job):
    b = job["record_bytes"]
    gets = job["records"]  # each record fetched once a epoch, by the rank it is dealt to
    return {
        "strategy": "per-record exact", "records_per_get": 1.0, "get_bytes": b,
        "gets_epoch1": gets, "bytes_epoch1": gets * b, "bytes_job": job["epochs"] * gets * b,
        "node_bytes_epoch1": gets * b / job["nodes"],
        # Only what the readers asked ahead is held (their memory; no cache folder needed).
        "cache_per_node": job["per_node"] * job["first_read_ahead"] * b,
        # The first batch: its records' GETs, sent first (the reader sends GETs in order of need).
        "first": (job["batch"], job["per_node"] * job["batch"], b),
    }


def chunked_exact(args, job):
    b, n = job["record_bytes"], job["nodes"]
    k = model.records_per_get(args.whole_chunk_mib * MIB, b)
    chunks = math.ceil(job["records"] / k)
    first_share = model.share_of_chunks_needed(k, n, 1)
    gets = n * chunks * first_share
    # The first batch's records are spread over the whole dataset, about a chunk each: each comes
    # alone by a GET of its own ahead of the chunks (RemoteOptions::first_batch_records).
    first = (job["batch"], job["per_node"] * job["batch"], b)
    return {
        "strategy": "chunked exact", "records_per_get": job["records"] / n / (chunks * first_share),
        "get_bytes": k * b, "gets_epoch1": gets, "bytes_epoch1": gets * k * b,
        "bytes_job": n * chunks * model.share_of_chunks_needed(k, n, job["epochs"]) * k * b,
        "node_bytes_epoch1": chunks * first_share * k * b,
        "cache_per_node": job["dataset_bytes"],  # the condition of whole chunks: the dataset fits
        "chunk_records": k, "first": first,
        # The chunks a node still lacks shrink by (1 - 1/N)^k an epoch: later epochs ask for fewer.
        "gets_by_epoch": {e: n * chunks * (model.share_of_chunks_needed(k, n, e)
                                           - model.share_of_chunks_needed(k, n, e - 1))
                          for e in (1, 2, 3, 5, 10, 20)},
    }


def chunked_block(args, job):
    b, n = job["record_bytes"], job["nodes"]
    c = args.block_chunk
    gets_per_chunk = math.ceil(c * b / (args.block_get_mib * MIB))
    chunks = math.ceil(job["records"] / c)
    # A node's lanes are consecutive runs of the permuted chunks: a chunk on the boundary between
    # two nodes is fetched by both (within a node the shared folder's claims fetch it once), so
    # the N - 1 boundaries add N - 1 fetches, however long a node's run is next to a chunk.
    edges = n - 1
    lane = job["records"] / job["readers"]
    held = model.block_records_held(lane, c, args.block_window, job["first_read_ahead"])
    # The first batch waits for the chunks it draws from, whole (sent first: in order of need).
    chunks_first = model.block_first_chunks(lane, c, args.block_window, job["batch"]) * gets_per_chunk
    first = (chunks_first, job["per_node"] * chunks_first, c * b / gets_per_chunk)
    gets = (chunks + edges) * gets_per_chunk
    epoch_bytes = (job["records"] + edges * c) * b
    return {
        "strategy": "chunked block", "records_per_get": c / gets_per_chunk, "get_bytes": c * b / gets_per_chunk,
        "gets_epoch1": gets, "bytes_epoch1": epoch_bytes, "bytes_job": job["epochs"] * epoch_bytes,
        "node_bytes_epoch1": epoch_bytes / n, "cache_per_node": job["per_node"] * held * b,
        "lane_records": lane, "first": first,
    }


def reader_terms(job, row):
    """A reader's Little bound in records/s, whether it covers its GPU, and the GETs in flight
    that would."""
    row["in_flight"] = model.in_flight_window(row["get_bytes"], job["in_flight"], job["in_flight_limit"])
    get_bytes_per_s = model.get_bandwidth(job["node_bytes_per_s"], job["per_node"] * row["in_flight"],
                                          job["get_cap_bytes_per_s"])
    transfer = row["get_bytes"] / get_bytes_per_s
    gets_per_s = model.little_rate(row["in_flight"], job["first_byte_s"], transfer)
    needed_gets = job["reader_rate"] / row["records_per_get"]
    row["transfer_s"] = transfer
    row["little_records_per_s"] = gets_per_s * row["records_per_get"]
    row["little_covers"] = row["little_records_per_s"] >= job["reader_rate"]
    row["in_flight_needed"] = model.in_flight_needed(needed_gets, job["first_byte_s"], transfer)


def store_terms(job, row):
    row["gets_per_s"] = row["gets_epoch1"] / job["epoch_s"]
    row["times_per_prefix"] = row["gets_per_s"] / job["per_prefix"]
    row["prefixes_needed"] = model.prefixes_needed(row["gets_per_s"], job["per_prefix"])
    row["node_gbit_needed"] = row["node_bytes_epoch1"] / job["epoch_s"] * 8 / 1e9


def epoch_one(job, row):
    """How long the first epoch takes: the slowest of the job's own rate, a reader's Little
    bound, the node's link and the store's request rate (bounds, not a simulation)."""
    times = {
        "the GPUs": job["epoch_s"],
        "Little": job["records"] / job["readers"] / row["little_records_per_s"],
        "node link": row["node_bytes_epoch1"] / job["node_bytes_per_s"],
        "requests": row["gets_epoch1"] / job["store_rps"],
    }
    row["epoch1_bound"] = max(times, key=times.get)
    row["epoch1_s"] = times[row["epoch1_bound"]]


def first_batch(args, job, row):
    """Time to first batch: opening, then the slowest of the rounds of in-flight GETs a reader
    waits for, its node's bytes over the node's link, and every node's GETs at the store's rate."""
    opening = open_seconds(args, job)
    per_reader, per_node, get_bytes = row["first"]
    rounds = math.ceil(per_reader / job["in_flight"] - 1e-9)
    waits = (rounds * (job["first_byte_s"] + get_bytes / job["get_bytes_per_s"]),
             per_node * get_bytes / job["node_bytes_per_s"],
             job["nodes"] * per_node / job["store_rps"])
    row["ttfb_s"] = opening + max(waits)
    row["open_s"] = opening


def project(args):
    job = job_of(args)
    job["open_s"] = open_seconds(args, job)
    rows = []
    for make in (per_record_exact, chunked_exact, chunked_block):
        row = make(args, job)
        reader_terms(job, row)
        store_terms(job, row)
        epoch_one(job, row)
        first_batch(args, job, row)
        rows.append(row)
    return job, rows


def size(n):
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n / 1e3:,.0f} KB"


def count(x):
    return f"{x:,.0f}" if x >= 10 else f"{x:,.1f}"


def markdown(args, job, rows):
    prefix = f"{job['per_prefix']:,.0f}/s"
    lines = [
        f"{job['nodes']} nodes x {job['per_node']} GPUs at {job['reader_rate']:,.0f} images/s each = "
        f"{job['images_per_s']:,.0f} images/s; {job['records']:,} records of {size(job['record_bytes'])} "
        f"({size(job['dataset_bytes'])}): an epoch every {job['epoch_s']:.2f} s. First byte "
        f"{args.first_byte_ms:g} ms, {job['in_flight']}–{job['in_flight_limit']} GETs in flight a reader (its "
        f"window), {args.node_gbit:g} Gbit/s a "
        f"node (one GET: {job['get_bytes_per_s'] / 1e6:.0f} MB/s), {args.prefixes} "
        f"prefix{'es' if args.prefixes != 1 else ''} at {prefix}.",
        "",
        f"| strategy | records per GET | GETs/s, epoch 1 | × {prefix} | prefixes needed | store bytes, epoch 1 "
        f"| store bytes, {job['epochs']} epochs | cache per node |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['strategy']} | {count(r['records_per_get'])} | {r['gets_per_s']:,.0f} "
                     f"| {r['times_per_prefix']:,.1f} | {r['prefixes_needed']:,} | {size(r['bytes_epoch1'])} "
                     f"| {size(r['bytes_job'])} | {size(r['cache_per_node'])} |")
    for r in rows:
        if "gets_by_epoch" in r:
            lines += ["", f"{r['strategy']}, GETs an epoch (chunks of {r['chunk_records']} records): " + ", ".join(
                f"epoch {e}: {g:,.0f}" for e, g in r["gets_by_epoch"].items()) + "."]
    lines += [
        "",
        f"| strategy | a reader needs, records/s | its Little bound (its window's most in flight, "
        f"{args.first_byte_ms:g} ms) | covered? (in flight needed) | node link needed, epoch 1 "
        f"| epoch 1 takes (binds) | time to first batch |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['strategy']} | {job['reader_rate']:,.0f} | {r['little_records_per_s']:,.0f} "
                     f"({r['in_flight']}) "
                     f"| {'yes' if r['little_covers'] else 'no'} ({r['in_flight_needed']:,}) "
                     f"| {r['node_gbit_needed']:,.1f} Gbit/s | {r['epoch1_s']:,.2f} s ({r['epoch1_bound']}) "
                     f"| {r['ttfb_s']:.2f} s |")
    return "\n".join(lines)


def as_json(args, job, rows):
    keep = lambda r: {k: v for k, v in r.items() if k != "first"}
    return json.dumps({"assumptions": vars(args), "job": job, "strategies": [keep(r) for r in rows]},
                      indent=1, sort_keys=True)


# --- The model against what docs/PERFORMANCE.md measured ("Object storage") ---


def checks():
    """[(what, measured, model, why)]: each a figure measured on this machine and the model's
    prediction from the terms above, with nothing fitted to that figure."""
    out = []
    # The delaying proxy's table: one reader, 16 in flight (measured before the window opened
    # beyond them), 30 ms to the first byte. The exact order fetches record by record: Little's
    # bound 533 records/s against the same reader without the delay (545 images/s, its CPU bound
    # with the gateway on the same cores).
    cfg = {"nodes": 1, "ranks_per_node": 1, "link_mbit": 0, "storage_mbps": 0, "storage_iops": 0,
           "node_mbps": 0, "group_size": 1, "mode": "shard", "payload": "encoded", "readers": "all",
           "layout": "contiguous", "store": "s3", "store_first_byte_ms": 30}
    params = {"record_bytes": 93e3, "decoded_bytes": 0, "decode_s": 1 / 545, "read_s": 0.0, "ios_per_record": 1.0,
              "store_in_flight": 16}
    p = model.predict(cfg, params)
    out.append(("exact order, 30 ms first byte, images/s", 433, p["images_per_s"],
                f"bound: {p['limit']} (Little 16 / 0.030 s = 533; CPU 545 without the delay)"))
    # The same with the window held at 16 (DDPIO_S3_MAX_IN_FLIGHT=16), 4,500 records, against the
    # local reader's 1,632 images/s in the same rounds: Little binds.
    params = dict(params, record_bytes=95e3, decode_s=1 / 1632)
    p = model.predict(cfg, params)
    out.append(("exact order, 30 ms, window held at 16, images/s (4,500 records)", 513, p["images_per_s"],
                f"bound: {p['limit']} (Little 16 / 0.030 s = 533; the local reader 1,632)"))
    # The block order behind the same proxy: Little allows 16 x 128 records per (30 ms + a chunk's
    # transfer), far above; the machine's CPU binds: the local reader's 1,410 images/s plus the
    # proxy's own 2.0 CPU-seconds an epoch of 4,500 images on the same 2 cores.
    params = {"record_bytes": 93e3, "decoded_bytes": 0, "decode_s": 1 / 1410, "read_s": 2.0 / 4500 / 2,
              "ios_per_record": 1.0, "records_per_request": 128, "store_get_bytes_per_s": 220e6}
    p = model.predict(cfg, params)
    out.append(("block order, 30 ms first byte, images/s", 1025, p["images_per_s"],
                f"bound: {p['limit']} (Little {p['bounds']['store latency']:,.0f}: a chunk's 12 MB at the "
                "~220 MB/s the proxy relays a CPU-second); without the proxy's CPU the model says 1,410 (0.73)"))
    # GETs of whole chunks. Block order, 4,500 records in chunks of 128: one GET a chunk.
    out.append(("block order, ddpio's GETs an epoch (4,500 records, chunk 128)", 36, math.ceil(4500 / 128),
                "one GET per chunk: ceil(4,500 / 128)"))
    # Exact order with whole chunks, 1,500 records in a 146 MB file, 8 MiB GETs.
    k = model.records_per_get(8 * MIB, 146e6 / 1500)
    out.append(("exact order, whole chunks, chunk GETs an epoch (1,500 records, 146 MB)", 18, math.ceil(1500 / k),
                f"{k} records per 8 MiB GET"))
    # One node's two ranks sharing a cache folder (4,500 records, 419 MB): each chunk once; a folder
    # each: each rank fetches every chunk it has a record in (all of them); none: record by record.
    # The gateway's counts include each opening rank's manifest and index (2 requests).
    k = model.records_per_get(8 * MIB, 419e6 / 4500)
    chunks = math.ceil(4500 / k)
    out.append(("node cache, one folder shared by 2 ranks, requests", 53, chunks + 2,
                f"{chunks} chunks of {k} records, each once for the node (share needed: "
                f"{model.share_of_chunks_needed(k, 1):.2f}), + manifest and index"))
    out.append(("node cache, a folder per rank, requests", 106,
                2 * (chunks * model.share_of_chunks_needed(k, 2) + 2),
                f"each rank needs 1 - (1/2)^{k} of the chunks"))
    out.append(("node cache, no folder (record by record), requests", 4830, 4500 + 2 * 2,
                "one GET per record (4,900 records were fetched for 4,500: 400 twice)"))
    # Record by record: GETs per image. The model takes one; neighbours that fall in one read-ahead
    # join a GET, more often the smaller the dataset is next to the read-ahead.
    out.append(("record by record, GETs per image (4,500 records)", 0.969, 1.0, "coalesced neighbours: 3%"))
    out.append(("record by record, GETs per image (1,500 records)", 0.813, 1.0,
                "coalesced neighbours: a 576-record read-ahead is 38% of this dataset"))
    # Time to first batch, 30 ms added: exact order record by record, batch 64, 2 workers (medians of
    # 3 rounds with and without the proxy, the reader sending its GETs in order of need).
    first_batch_only = math.ceil(64 / 16) * 0.030
    out.append(("exact order record by record, what 30 ms adds to the time to first batch, s",
                0.348 - 0.244, first_batch_only,
                f"the first batch's 64 GETs in rounds of 16: {first_batch_only:.2f} s"))
    return out


def check_markdown():
    lines = ["| figure (docs/PERFORMANCE.md, \"Object storage\") | measured | model | measured / model | within 20% "
             "| the model's terms |", "|---|---|---|---|---|---|"]
    for what, measured, predicted, why in checks():
        ratio = measured / predicted
        fmt = (lambda x: f"{x:,.3f}") if measured < 10 else (lambda x: f"{x:,.0f}")
        lines.append(f"| {what} | {fmt(measured)} | {fmt(predicted)} | {ratio:.2f} "
                     f"| {'yes' if abs(ratio - 1) <= 0.2 else '**no**'} | {why} |")
    return "\n".join(lines)


# --- The plot: GETs/s against GPUs, stdlib only ---


def sweep_gpus(args):
    """[(gpus, {strategy: GETs/s in epoch 1 at the job's rate})] from 8 GPUs to 8,192."""
    points = []
    gpus = 8
    while gpus <= 8192:
        sub = argparse.Namespace(**dict(vars(args), nodes=max(1, gpus // args.gpus_per_node)))
        job, rows = project(sub)
        points.append((job["readers"], {r["strategy"]: r["gets_per_s"] for r in rows}))
        gpus *= 2
    return points


def svg(args, path):
    points = sweep_gpus(args)
    width, height, left, right, top, bottom = 720, 440, 80, 170, 40, 60
    xs = [g for g, _ in points]
    ys = [v for _, by in points for v in by.values()] + [args.gets_per_s_per_prefix]
    x0, x1 = math.log10(xs[0]), math.log10(xs[-1])
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    px = lambda g: left + (math.log10(g) - x0) / (x1 - x0) * (width - left - right)
    py = lambda v: height - bottom - (math.log10(v) - y0) / (y1 - y0) * (height - top - bottom)
    colours = {"per-record exact": "#c0392b", "chunked exact": "#2471a3", "chunked block": "#1e8449"}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2:.0f}" y="20" text-anchor="middle" font-size="13">GETs/s in epoch 1 at the job\'s '
           f'rate ({args.records:,} records, {args.images_per_s_per_gpu:,.0f} images/s a GPU)</text>']
    for e in range(y0, y1 + 1):
        y = py(10 ** e)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{10 ** e:,}</text>')
    for g in xs:
        x = px(g)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{height - bottom}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{height - bottom + 16}" text-anchor="middle">{g:,}</text>')
    this_job = args.nodes * args.gpus_per_node
    if xs[0] <= this_job <= xs[-1]:
        x = px(this_job)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{height - bottom}" stroke="#888" '
                   f'stroke-dasharray="2 3"/>')
        out.append(f'<text x="{x + 4:.1f}" y="{top + 12}" fill="#555">this job: {this_job:,}</text>')
    out.append(f'<text x="{(left + width - right) / 2:.0f}" y="{height - 20}" text-anchor="middle">GPUs '
               f'({args.gpus_per_node} a node)</text>')
    out.append(f'<text x="18" y="{(top + height - bottom) / 2:.0f}" text-anchor="middle" '
               f'transform="rotate(-90 18 {(top + height - bottom) / 2:.0f})">GETs/s (log)</text>')
    y = py(args.gets_per_s_per_prefix)
    out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="black" '
               f'stroke-dasharray="6 4"/>')
    out.append(f'<text x="{width - right + 6}" y="{y + 4:.1f}">S3, one prefix: {args.gets_per_s_per_prefix:,.0f}/s'
               f'</text>')
    for i, name in enumerate(STRATEGIES):
        pts = " ".join(f"{px(g):.1f},{py(by[name]):.1f}" for g, by in points)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colours[name]}" stroke-width="2"/>')
        out += [f'<circle cx="{px(g):.1f}" cy="{py(by[name]):.1f}" r="2.5" fill="{colours[name]}"/>'
                for g, by in points]
        ly = top + 20 + 18 * i
        out.append(f'<line x1="{width - right + 8}" y1="{ly}" x2="{width - right + 28}" y2="{ly}" '
                   f'stroke="{colours[name]}" stroke-width="2"/>')
        out.append(f'<text x="{width - right + 32}" y="{ly + 4}">{name}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.check:
        print(check_markdown())
        return 0
    job, rows = project(args)
    print(as_json(args, job, rows) if args.json else markdown(args, job, rows))
    if args.svg:
        svg(args, args.svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
