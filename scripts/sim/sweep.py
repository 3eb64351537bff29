"""The sweep: where group feeding wins and where it loses, measured next to the model.

One cluster (N nodes x R ranks) is made once; every configuration runs on it with its own link
rate and storage limits, from cold page caches. Sections:
  calibrate  nothing limited, 3 interleaved rounds: CPU time per decode and per record read (the
             model's CPU bound) and IOs per record; with --store s3, four runs whose counters
             price a decode, a record fetched, a GET and a byte relayed (model.calibrate_cpu) and
             the time to the first batch
  grid       storage MB/s x link Mbit/s x (shard/encoded G in 1, R, 2R; replicate/encoded and
             replicate/decoded, G in R, 2R, strided groups, with each replicate baseline where
             every member reads for itself)
  headline   4 x 2, 1 Gbit/s, storage at ~1/4 of the CPU-bound rate: replicate G = 2 and 4 against
             every member reading, 3 interleaved rounds, medians
  shard      shard G in 1, R, 2R under an IOPS limit and under a per-node client cap
  relay      replicate G = 2R through the chain and through the star on slow links (bytes per link)
  readahead  the leader's read-ahead window under a throughput and an IOPS limit
  train      `ddpio train` (32 px crops: the data path, not the model, sets the pace), replicate
             G = 2R at the headline storage, leader reading against every member reading
Writes results.jsonl (one line per run), sweep.md (the tables) and SVG plots (gnuplot) to --out.
"""
import json
import os
import statistics
import subprocess
import time

from sim import model, run
from sim.cluster import SimError


def model_params(cfg, record_bytes, cpu_rate, ios_per_record=1.0, relay_rate=None, records=0):
    """The model's parameters. cpu_rate: images/s with nothing limited and one decode and one
    read per delivered image (replicate G=2R, every member reading); relay_rate: the same with
    the leader reading (one decode and 1/2R reads per image). Without relay_rate all CPU time is
    charged to decoding. records: the dataset's, when known: whether it fits a reader's memory
    (256 MiB, RemoteOptions::memory_bytes; a node's cache folder, 16 GiB, with --node-cache), for
    the exact order's whole chunks."""
    header = 8 + 4 + 1  # index, label, valid per sample in the message header
    g = 2 * cfg["ranks_per_node"]
    per_image = 1.0 / cpu_rate
    read_s = 0.0
    if relay_rate:  # per_image = t_d + t_r; 1/relay_rate = t_d + t_r / g
        read_s = max(0.0, (per_image - 1.0 / relay_rate) / (1.0 - 1.0 / g))
    return {"record_bytes": record_bytes, "decoded_bytes": cfg["image_size"] ** 2 * 3 + header,
            "cpu_rate": cpu_rate, "relay_rate": relay_rate, "decode_s": per_image - read_s, "read_s": read_s,
            "ios_per_record": ios_per_record, "records": records,
            "dataset_fits": records > 0 and records * record_bytes <= (
                (16 << 30) if cfg.get("node_cache") else (256 << 20))}


def store_work(rec, cfg):
    """What a store run did per delivered image, from its counters (model.cpu_work's keys)."""
    images = max(1, rec["images"] or 0)
    decodes = 1.0 / cfg["group_size"] if (cfg["mode"] == "replicate" and cfg["payload"] == "decoded"
                                          and cfg["readers"] == "leader") else 1.0
    return {"decodes": decodes, "records": rec["store_records_fetched"] / images,
            "gets": rec["store_requests"] / images, "relay_bytes": rec["ddpio_bytes_sent"] / images}


def store_calibration_cfgs(base_cfg, ranks_per_node):
    """The unshaped runs that price the CPU's four kinds of work with an object store: replicate
    G=2R with every member fetching (whole chunks: a member needs half of each), and record by
    record; the leader fetching with the encoded and with the decoded relay."""
    base = dict(base_cfg, link_mbit=0, mode="replicate", layout="strided", group_size=2 * ranks_per_node)
    return [dict(base, readers="all"), dict(base), dict(base, payload="decoded"),
            dict(base, readers="all", whole_chunks=False)]


def steady_rate(rec):
    """A run's images/s after its first batch: its span less its time to the first batch (the
    start-up, priced apart as the model's start_s), when both are known."""
    images, rate = rec.get("images") or 0, rec["images_per_s"]
    start = rec.get("time_to_first_batch_s") or 0.0
    if images <= 0 or rate <= 0 or start <= 0 or images / rate <= start:
        return rate
    return images / (images / rate - start)


def store_params(cfg, record_bytes, calib, records):
    """model_params for an object store, the CPU priced from the calibration runs' counters
    (model.calibrate_cpu): [(cfg, record)]. cpu_rate / relay_rate are the first two runs' medians,
    as in the filesystem's calibration, for the report."""
    def median_of(match):
        rates = [r["images_per_s"] for c, r in calib if match(c)]
        return statistics.median(rates) if rates else None
    every = median_of(lambda c: c["readers"] == "all" and c.get("whole_chunks") is None)
    leader = median_of(lambda c: c["readers"] == "leader" and c["payload"] == "encoded")
    params = model_params(cfg, record_bytes, every, 1.0, leader, records=records)
    # The four prices need runs that tell them apart: record by record (GETs) and the decoded relay
    # (bytes relayed, fewer decodes). A sweep without them (before they were added) prices decodes
    # and records alone, as the model did then.
    full = any(c.get("whole_chunks") is False for c, _ in calib) and any(
        c["payload"] == "decoded" for c, _ in calib)
    terms = None if full else ("decodes", "records")
    params.update(model.calibrate_cpu([(store_work(r, c), steady_rate(r)) for c, r in calib], terms))
    starts = [r["time_to_first_batch_s"] for _, r in calib if r.get("time_to_first_batch_s")]
    params["start_s"] = statistics.median(starts) if starts else 0.0
    single = [r for c, r in calib if c.get("whole_chunks") is False]
    if single:
        params["gets_per_record"] = statistics.median(
            r["store_requests"] / max(1, r["store_records_fetched"]) for r in single)
    return params


def add_flags(p, ddpio, workdir):
    p.add_argument("--data", required=True, help="dataset (~100 KB photos; see scripts/bench-cluster.sh)")
    p.add_argument("--out", required=True, help="report folder (created)")
    p.add_argument("--quick", action="store_true", help="a few minutes: fewer storage rates, one link rate, "
                                                        "one headline round")
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--ranks-per-node", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--store", choices=["fs", "s3"], default="fs",
                   help="fs: the shared filesystem (default); s3: an object store (Ceph's RADOS Gateway in its own "
                        "namespace behind a shaped link); its section is 'store'")
    p.add_argument("--store-first-byte-ms", type=float, default=0,
                   help="--store s3: each response's first byte held this long after its request (a "
                        "delaying proxy in front of the gateway: a real object store's 10-200 ms; 0: none)")
    p.add_argument("--sections", default=None,
                   help="comma-separated subset to run (calibrate always runs); default with --store fs: "
                        "grid,headline,shard,relay,readahead,train; with --store s3: store")
    p.add_argument("--workdir", default=workdir)
    p.add_argument("--ddpio", default=ddpio)
    p.add_argument("--node-cpus", type=float, default=0)


class Sweep:
    def __init__(self, args, cluster):
        self.args = args
        self.cluster = cluster
        self.records, self.record_bytes = run.dataset_stats(args.ddpio, args.data)
        self.out = args.out
        self.results = []
        self.params = None
        self.log = open(os.path.join(self.out, "results.jsonl"), "a")

    def cfg(self, **over):
        a = self.args
        c = {"nodes": a.nodes, "ranks_per_node": a.ranks_per_node, "link_mbit": 1000, "storage_mbps": 0,
             "storage_iops": 0, "node_mbps": 0, "group_size": 1, "mode": "shard", "payload": "encoded",
             "readers": "leader", "layout": "contiguous", "job": "feed", "epochs": 1, "batch_size": a.batch_size,
             "workers": a.workers, "image_size": a.image_size, "timeout": 1800, "ddpio": a.ddpio,
             "relay": "chain", "read_ahead": 64, "store": a.store, "store_link_mbit": 0}
        c.update(over)
        return c

    def measure(self, section, cfg):
        t0 = time.monotonic()
        rec = run.run_config(self.cluster, cfg, self.params)
        rec.update(section=section, relay=cfg["relay"], read_ahead=cfg["read_ahead"])
        self.results.append(rec)
        self.log.write(json.dumps(rec) + "\n")
        self.log.flush()
        pred = f" model {rec['predicted_images_per_s']:7.0f} ({rec['predicted_limit']})" if self.params else ""
        print(f"[{section}] {describe(cfg):58} {rec['images_per_s']:7.0f} img/s{pred}  "
              f"storage {rec['storage_bytes_read'] / 1e6:6.0f} MB  {time.monotonic() - t0:5.1f} s", flush=True)
        return rec

    # ----- sections ------------------------------------------------------------------------
    def calibrate(self):
        """Nothing limited, links unshaped, interleaved rounds, medians: replicate G=2R with every
        member reading (a decode and a read per delivered image) and with the leader reading (a
        decode and 1/2R reads). Both deliver the same images, so start-up and the end of the epoch
        weigh the same in both (a shard G=1 run is 2R times shorter and was 10-30 % slower per
        image for that alone)."""
        g = 2 * self.args.ranks_per_node
        if self.args.store == "s3":
            return self.calibrate_store()
        rates, relays, ios = [], [], []
        base = dict(link_mbit=0, mode="replicate", layout="strided", group_size=g)
        for _ in range(1 if self.args.quick else 3):
            rec = self.measure("calibrate", self.cfg(readers="all", **base))
            rates.append(rec["images_per_s"])
            ios.append(rec["storage_ios"] / max(1, rec["records_read"]))
            rec = self.measure("calibrate", self.cfg(**base))
            relays.append(rec["images_per_s"])
        cfg = self.cfg()
        self.params = model_params(cfg, self.record_bytes, statistics.median(rates), statistics.median(ios),
                                   statistics.median(relays), records=self.records)
        self.params.update(cpu_rounds=rates, relay_rounds=relays)
        print(f"calibrated: {self.params['cpu_rate']:.0f} images/s with every member reading, "
              f"{self.params['relay_rate']:.0f} with the leader reading (G={g}): "
              f"{self.params['decode_s'] * 1e3:.3f} ms of CPU per decode, {self.params['read_s'] * 1e3:.3f} ms "
              f"per record read; {self.params['ios_per_record']:.2f} IOs per record, "
              f"{self.record_bytes / 1e3:.1f} KB per record", flush=True)

    def calibrate_store(self):
        """The object store's calibration (store_calibration_cfgs): interleaved rounds, every run
        a point of the least-squares fit."""
        calib = []
        for _ in range(1 if self.args.quick else 3):
            for c in store_calibration_cfgs(self.cfg(), self.args.ranks_per_node):
                calib.append((c, self.measure("calibrate", c)))
        self.params = store_params(self.cfg(), self.record_bytes, calib, self.records)
        p = self.params
        print(f"calibrated: CPU per decode {p['decode_s'] * 1e3:.3f} ms, per record fetched "
              f"{p['read_s'] * 1e3:.3f} ms, per GET {p['get_s'] * 1e3:.3f} ms, per MB relayed "
              f"{p['relay_byte_s'] * 1e9:.3f} ms; {p['gets_per_record']:.2f} GETs per record record by record; "
              f"{p['start_s']:.2f} s to the first batch; "
              f"{self.record_bytes / 1e3:.1f} KB per record", flush=True)

    def replicate_cfgs(self, **over):
        r = self.args.ranks_per_node
        out = []
        for g in (r, 2 * r):
            for payload in ("encoded", "decoded"):
                out.append(self.cfg(mode="replicate", payload=payload, layout="strided", group_size=g, **over))
            out.append(self.cfg(mode="replicate", layout="strided", group_size=g, readers="all", **over))
        return out

    def grid(self):
        r = self.args.ranks_per_node
        storages = (25, 100) if self.args.quick else (25, 50, 100, 200, 400)
        links = (1000,) if self.args.quick else (250, 1000)
        for link in links:
            for s in storages:
                for g in (1, r, 2 * r):
                    self.measure("grid", self.cfg(link_mbit=link, storage_mbps=s, group_size=g))
                for c in self.replicate_cfgs(link_mbit=link, storage_mbps=s):
                    self.measure("grid", c)

    def headline_storage(self):
        """Storage MB/s at which the every-member-reads baseline runs at <= 1/4 of its CPU bound
        (a decode and a read per image)."""
        return max(5, int(self.params["cpu_rate"] / 4 * self.record_bytes / 1e6))

    def headline(self):
        s = self.headline_storage()
        cfgs = []
        for g in (2, 4):
            cfgs.append(self.cfg(mode="replicate", layout="strided", group_size=g, readers="all", storage_mbps=s))
            cfgs.append(self.cfg(mode="replicate", layout="strided", group_size=g, storage_mbps=s))
        for _ in range(1 if self.args.quick else 3):
            for c in cfgs:  # interleaved rounds: every configuration sees the same machine state
                self.measure("headline", c)

    def shard(self):
        r = self.args.ranks_per_node
        iops = max(50, int(self.params["cpu_rate"] / 3))
        node = max(5, int(self.params["cpu_rate"] / 3 * self.record_bytes / 1e6 / self.args.nodes))
        for limits in ({"storage_iops": iops}, {"node_mbps": node}, {"storage_mbps": self.headline_storage()}):
            for g in (1, r, 2 * r):
                self.measure("shard", self.cfg(group_size=g, **limits))

    def relay(self):
        g = 2 * self.args.ranks_per_node
        for link in (250,) if self.args.quick else (250, 500):
            for relay in ("star", "chain"):
                self.measure("relay", self.cfg(mode="replicate", layout="strided", group_size=g, link_mbit=link,
                                               relay=relay))

    def readahead(self):
        r = self.args.ranks_per_node
        iops = max(50, int(self.params["cpu_rate"]))  # without read-ahead ~1/20 of it: slow enough
        for limits in ({"storage_mbps": 100}, {"storage_iops": iops}):
            for ra in (0, 8, 64, 256):
                self.measure("readahead", self.cfg(group_size=r, read_ahead=ra, **limits))

    def store(self):
        """The object store behind 100 Mbit/s and 1 Gbit/s (with the default 4 nodes x 2
        ranks): replicate G=2R with every member fetching against the leader fetching, the
        payload decoded and encoded; shard mode over two epochs in the exact and the block order,
        a node's ranks sharing a cache folder; interleaved rounds, medians."""
        g = 2 * self.args.ranks_per_node
        base = dict(mode="replicate", layout="strided", group_size=g)
        cfgs = []
        for mbit in (100, 1000):
            cfgs.append(self.cfg(readers="all", store_link_mbit=mbit, **base))
            cfgs.append(self.cfg(payload="decoded", store_link_mbit=mbit, **base))
            cfgs.append(self.cfg(store_link_mbit=mbit, **base))
            # Both orders over two epochs, shard mode, a node's ranks sharing a cache folder: the
            # exact order under the chunk-share rule (a node needs 1/4 of each chunk: the records
            # asked for) and the block order (whole chunks of its own).
            for order in ("exact", "block"):
                cfgs.append(self.cfg(order=order, node_cache=True, epochs=2, store_link_mbit=mbit))
        for _ in range(1 if self.args.quick else 3):
            for c in cfgs:
                self.measure("store", c)

    def train(self):
        s = self.headline_storage()
        g = 2 * self.args.ranks_per_node
        for readers in ("all", "leader"):
            self.measure("train", self.cfg(job="train", image_size=32, mode="replicate", layout="strided",
                                           group_size=g, readers=readers, storage_mbps=s))


def describe(cfg):
    parts = [("train " if cfg["job"] == "train" else "") + f"{cfg['mode'][:5]}/{cfg['payload'][:3]} G={cfg['group_size']}"]
    if cfg["readers"] == "all":
        parts.append("every member reads")
    if cfg["relay"] != "chain":
        parts.append(cfg["relay"])
    if cfg["read_ahead"] != 64:
        parts.append(f"ra={cfg['read_ahead']}")
    lim = [f"{cfg['link_mbit']} Mbit" if cfg["link_mbit"] else "unshaped"]
    if cfg.get("store") == "s3":
        lim.append(f"store {cfg['store_link_mbit']} Mbit" if cfg.get("store_link_mbit") else "store unshaped")
    for k, unit in (("storage_mbps", "MB/s"), ("storage_iops", "IOPS"), ("node_mbps", "MB/s/node")):
        if cfg[k]:
            lim.append(f"{cfg[k]:g} {unit}")
    return " ".join(parts) + ", " + ", ".join(lim)


def main(args, make_cluster):
    os.makedirs(args.out, exist_ok=True)
    args.nodes = args.nodes
    cluster = make_cluster(args)
    started = time.time()
    try:
        s = Sweep(args, cluster)
        s.calibrate()
        sections = args.sections or ("store" if args.store == "s3" else "grid,headline,shard,relay,readahead,train")
        wanted = [x.strip() for x in sections.split(",") if x.strip() and x.strip() != "calibrate"]
        if (args.store == "s3") != (wanted == ["store"]) and wanted:
            raise SimError("--store s3 runs the section 'store' (and only it); the others need --store fs")
        for name in wanted:
            if not hasattr(s, name):
                raise SimError(f"unknown section '{name}'")
            getattr(s, name)()
    finally:
        cluster.down()
    from sim import report
    report.write(args.out, s.results, s.params, s.record_bytes, time.time() - started)
    print(f"report: {os.path.join(args.out, 'sweep.md')}", flush=True)
