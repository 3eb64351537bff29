"""The throughput model: a configuration's images/s is the smallest of what each resource allows.

X = images delivered to all ranks per second (the job's rate; in replicate mode every member of a
group counts the group's images). W = world size, ranks are node-major (rank r on node r // R).

  storage   X <= S / (b_s * f)        b_s = mean stored record bytes; f = storage reads per delivered
                                      image: 1 in shard mode for every G (the same bytes, whoever
                                      reads them); 1/G in replicate with leader reading; n_g/G in
                                      replicate with every member reading (n_g = distinct nodes in
                                      the group: members on one node share its page cache)
  IOPS      X <= I / (k * f)          k = IOs per record (measured: ~1 with prefetching)
  node cap  X <= C / (b_s * f * h_n)  h_n = share of the storage reads issued by node n
  network   X <= L / max_n(u_n, d_n)  u_n, d_n = bytes per delivered image leaving / entering node
                                      n's link: every transfer between members on different nodes
                                      (shard: leader -> each peer its share; replicate: along the
                                      chain 0 -> 1 -> ... -> G-1, or leader -> each peer with
                                      relay 'star'); L = link rate x 0.90 (tbf holds ~94 % of its
                                      rate here, TCP/IP headers take ~4 % of each 1514-byte frame)
  CPU       X <= 1 / (t_d * c + t_r * f)
                                      all ranks share the machine's cores: t_d = CPU time of one
                                      decode (+ augment), t_r = CPU time of one record read from
                                      the shared filesystem (page faults, the filesystem and block
                                      stack, the copy; here it is nearly as large as a decode);
                                      c = decodes per delivered image: 1, or 1/G for
                                      replicate+decoded with leader reading (the leader decodes
                                      once for the group). Both calibrated on the cluster with
                                      nothing limited: replicate G=2R with every member reading
                                      (t_d + t_r per image) and with the leader reading
                                      (t_d + t_r / 2R). The network's CPU cost is
                                      not a term: shard G=4 moved 3/4 of its data over TCP and ran
                                      within noise of G=1

With an object store (--store s3) the storage terms are the store's, with f_s = records fetched
from the store per delivered image: 1 in shard mode; 1/G in replicate with the leader fetching;
1 in replicate with every member fetching (each process fetches for itself: there is no page
cache that two ranks of a node share):
  store link      X <= L_s / (b_s * f_s)       L_s = the store's link x 0.90 (tbf, as the nodes'
                                               links)
  store requests  X <= Q * p / f_s             Q = GETs/s the gateway serves (measured, --store-rps),
                                               p = records per GET (1: sampled records are rarely
                                               neighbours, so coalescing seldom joins them)
  CPU             X <= 1 / (t_d * c + t_r * f_s + t_g * g + t_x * x): a record fetched, a GET
                  (g per image: f_s / records per GET) and a byte relayed between ranks (x per
                  image, every hop: here every hop costs CPU) priced apart, since a record costs
                  the client, the gateway and the delaying proxy little in a whole chunk and much
                  in a GET of its own; the four prices fitted (least squares, none below 0) to
                  unshaped runs' counters (calibrate_cpu)
  fetch, then decode
                  with whole chunks that must all arrive before an epoch decodes (the exact
                  order's; a block lane no longer than the window), fetching and decoding take
                  turns: a flow shop's makespan over the epochs (fetch_then_decode)
  start-up        a run's images/s count its time to the first batch (start_s, calibrated)

A store far away, or many readers on one store (scripts/sim/project.py projects a whole job with
these terms; a simulator run gets the latency bound from --store-first-byte-ms, the others when
their parameters are given):
  store latency   X <= F * rho / f_s           F = ranks fetching; rho = records one fetcher gets a
                                               second by Little's law: q requests in flight, each
                                               held for the first byte's latency t_0 plus its
                                               transfer, rho = q * p / (t_0 + p * b_s / B_g), B_g
                                               = one GET's share of bandwidth. However fast the
                                               reader decodes, it cannot pass rho (16 in flight at
                                               30 ms: 533 records/s with p = 1)
  store requests  Q = P * Q_p when the store is limited per partitioned prefix (S3: Q_p ~ 5,500
                  GETs/s, P = prefixes the dataset's objects span); a measured gateway's Q wins
  node link       X <= L_n / (b_s * max f_n)   L_n = a node's own link to the store (not the
                                               links between nodes), f_n = records node n fetches
                                               per delivered image
  records per GET p = what one GET brings that is used: 1 record by record; the order's chunk in
                  the block order (its records are all this reader's); up to max_request_bytes of
                  neighbours with whole chunks (used by whichever ranks of the node need them)
  exact order, a node's ranks sharing one cache folder and fetching whole chunks of k records:
                  a node needs a record of a chunk in an epoch with probability
                  1 - (1 - 1/N)^k (its ranks hold 1/N of a uniformly random order), so it fetches
                  that share of all chunks in the first epoch and the whole dataset over a few
"""
import math

LINK_EFFICIENCY = 0.90
# RemoteOptions::min_chunk_share: in the exact order whole chunks only from this share on.
MIN_CHUNK_SHARE = 0.5
# The block order's chunk (pipeline_options.h block_chunk).
BLOCK_CHUNK_RECORDS = 128
# RemoteOptions::max_request_bytes: the exact order's whole chunk, one GET.
EXACT_CHUNK_BYTES = 8 << 20
# The remote reader's GETs in flight: at least max_in_flight (storage/remote/remote_options.h),
# opening up to in_flight_limit while its responses' mean size times the window stays within 64 MiB
# (storage/s3/in_flight_window.h).
DEFAULT_IN_FLIGHT = 16
IN_FLIGHT_LIMIT = 128
IN_FLIGHT_BYTES = 64 << 20


def groups(world, g, layout):
    """The groups' member lists (global ranks, leader first)."""
    n = world // g
    if layout == "strided":
        return [[k + j * n for j in range(g)] for k in range(n)]
    return [list(range(k * g, (k + 1) * g)) for k in range(n)]


def transfers(cfg):
    """[(src rank, dst rank, images per delivered image)] of one configuration."""
    world = cfg["nodes"] * cfg["ranks_per_node"]
    g = cfg["group_size"]
    if g == 1 or cfg["readers"] == "all":
        return []
    out = []
    per_rank = 1.0 / world  # each rank receives 1/W of the delivered images
    for members in groups(world, g, cfg["layout"]):
        if cfg["mode"] == "shard" or cfg.get("relay", "chain") == "star":
            out += [(members[0], m, per_rank) for m in members[1:]]
        else:
            out += [(members[i], members[i + 1], per_rank) for i in range(g - 1)]
    return out


def storage_reads(cfg):
    """{node: stored records read per delivered image}."""
    world = cfg["nodes"] * cfg["ranks_per_node"]
    node = lambda r: r // cfg["ranks_per_node"]
    g = cfg["group_size"]
    reads = {n: 0.0 for n in range(cfg["nodes"])}
    per_rank = 1.0 / world
    for members in groups(world, g, cfg["layout"]):
        if cfg["mode"] == "shard":
            for m in members:  # each member's share, read by its leader or by itself
                reads[node(m if cfg["readers"] == "all" else members[0])] += per_rank
        elif cfg["readers"] == "all":  # each member reads the group stream; a node's cache serves it once
            for n in {node(m) for m in members}:
                reads[n] += per_rank
        else:
            reads[node(members[0])] += per_rank
    return reads


def exact_chunk_share(cfg):
    """The share of each chunk a fetcher needs an epoch in the exact order, as the pipeline gives it
    (ddpio/pipeline/settings.cc, ReaderStoreOverrides): its streams of the job's, or with a cache
    folder its node's (--node-cache)."""
    world = cfg["nodes"] * cfg["ranks_per_node"]
    g = cfg["group_size"]
    shard = cfg["mode"] == "shard"
    streams = world if shard else max(1, world // g)
    if cfg.get("node_cache"):
        mine = cfg["ranks_per_node"] if shard else max(1, cfg["ranks_per_node"] // g)
    else:
        mine = g if shard and cfg["readers"] == "leader" else 1
    return min(1.0, mine / streams)


def fetches_whole_chunks(cfg, params):
    """Whether a fetcher brings whole chunks: the block order's are its own; in the exact order
    when the dataset fits its budget (params dataset_fits, default False: not known) and it needs
    at least half of each chunk an epoch (RemoteOptions::min_chunk_share), unless the run says
    (cfg whole_chunks True or False: DDPIO_S3_WHOLE_CHUNKS=1 or 0)."""
    if (cfg.get("order") or "exact") == "block":
        return True
    if cfg.get("whole_chunks") is not None:
        return params.get("dataset_fits", False) and bool(cfg["whole_chunks"])
    return params.get("dataset_fits", False) and exact_chunk_share(cfg) >= MIN_CHUNK_SHARE


def store_fetches(cfg, params=None):
    """(records fetched from the object store per delivered image, ranks fetching). With whole
    chunks in the exact order a fetcher fetches every chunk its samples fall in — all of them at
    the shares it applies to — once over the run: 1/share its records in the first epoch, nothing
    after (params None: as record by record)."""
    world = cfg["nodes"] * cfg["ranks_per_node"]
    g = cfg["group_size"]
    fetchers = world if cfg["readers"] == "all" else world // g
    f = 1.0 / g if cfg["mode"] == "replicate" and cfg["readers"] == "leader" else 1.0
    if params is not None and (cfg.get("order") or "exact") == "exact" and fetches_whole_chunks(cfg, params):
        f = f / exact_chunk_share(cfg) / max(1, cfg.get("epochs", 1))
    if params is not None and (cfg.get("order") or "exact") == "block" and params.get("records", 0) > 0:
        # Each fetch unit — a lane's reader, or a node whose ranks' adjacent lanes share a cache
        # folder — fetches the chunks its lanes touch: its records plus, at its edges, about one
        # chunk shared with the next unit (fetched by both). Over the dataset: 1 + units * k / n.
        world = cfg["nodes"] * cfg["ranks_per_node"]
        units = cfg["nodes"] if cfg.get("node_cache") else world
        f *= 1 + units * BLOCK_CHUNK_RECORDS / params["records"]
    return f, fetchers


def store_node_fetches(cfg):
    """{node: records fetched from the object store per delivered image}: each fetcher's share
    lands on its own node (no page cache between ranks: each process fetches for itself)."""
    world = cfg["nodes"] * cfg["ranks_per_node"]
    node = lambda r: r // cfg["ranks_per_node"]
    per_rank = 1.0 / world
    fetched = {n: 0.0 for n in range(cfg["nodes"])}
    for members in groups(world, cfg["group_size"], cfg["layout"]):
        if cfg["readers"] == "all":
            for m in members:
                fetched[node(m)] += per_rank
        elif cfg["mode"] == "shard":
            fetched[node(members[0])] += per_rank * len(members)
        else:  # replicate, the leader fetching the group's one stream
            fetched[node(members[0])] += per_rank
    return fetched


def store_request_rate(params):
    """GETs/s the store serves: a measured gateway's (store_rps), else per partitioned prefix
    times the prefixes the dataset spans (store_rps_per_prefix, store_prefixes); 0 when unknown."""
    if params.get("store_rps", 0) > 0:
        return params["store_rps"]
    return params.get("store_rps_per_prefix", 0) * params.get("store_prefixes", 1)


def store_bounds(cfg, params):
    """The object store's bounds on X (images/s), by name."""
    f, fetchers = store_fetches(cfg, params)
    out = {}
    # Records a GET brings: given, else a whole chunk's (up to 8 MiB) in the exact order's whole
    # chunks, else one.
    whole = (cfg.get("order") or "exact") == "exact" and fetches_whole_chunks(cfg, params)
    p = params.get("records_per_request") or (
        records_per_get(EXACT_CHUNK_BYTES, params["record_bytes"]) if whole else 1.0)
    if cfg.get("store_link_mbit", 0) > 0:
        out["store link"] = cfg["store_link_mbit"] * 1e6 / 8 * LINK_EFFICIENCY / (params["record_bytes"] * f)
    q = store_request_rate(params)
    if q > 0:
        out["store requests"] = q * p / f
    if cfg.get("store_first_byte_ms", 0) > 0:
        transfer = p * params["record_bytes"] / params["store_get_bytes_per_s"] \
            if params.get("store_get_bytes_per_s", 0) > 0 else 0.0
        in_flight = params.get("store_in_flight") or in_flight_window(p * params["record_bytes"])
        rho = little_rate(in_flight, cfg["store_first_byte_ms"] / 1e3, transfer) * p
        out["store latency"] = fetchers * rho / f
    if cfg.get("store_node_mbit", 0) > 0:
        worst = max(store_node_fetches(cfg).values())
        out["node link"] = cfg["store_node_mbit"] * 1e6 / 8 / (params["record_bytes"] * worst)
    return out


# --- The object store's terms, one at a time (used above and by scripts/sim/project.py) ---


def little_rate(in_flight, first_byte_s, transfer_s=0.0):
    """Requests a second a reader completes with `in_flight` outstanding, each held for the first
    byte's latency plus its transfer (Little's law, L = lambda * W, solved for lambda)."""
    return in_flight / (first_byte_s + transfer_s)


def in_flight_window(get_bytes, floor=DEFAULT_IN_FLIGHT, limit=IN_FLIGHT_LIMIT, max_bytes=IN_FLIGHT_BYTES):
    """The most GETs of get_bytes a reader's window opens to: the limit, or what max_bytes holds of
    them, never below the floor (the window opens only as far as the rate needs: this is its most)."""
    by_bytes = int(max_bytes // get_bytes) if get_bytes > 0 else limit
    return max(floor, min(limit, by_bytes))


def in_flight_needed(requests_per_s, first_byte_s, transfer_s=0.0):
    """Requests a reader must keep in flight to complete `requests_per_s` (Little's law, for L)."""
    return math.ceil(requests_per_s * (first_byte_s + transfer_s) - 1e-9)  # not 61 -> 62 by rounding


def get_bandwidth(node_bytes_per_s, gets_on_node, get_cap_bytes_per_s=0.0):
    """Bytes/s one GET receives: its share of the node's link among the node's GETs in flight,
    no more than one connection carries (get_cap_bytes_per_s; 0: no cap)."""
    share = node_bytes_per_s / max(1, gets_on_node)
    return min(share, get_cap_bytes_per_s) if get_cap_bytes_per_s > 0 else share


def records_per_get(get_limit_bytes, record_bytes, chunk_records=0):
    """Records one whole-chunk GET brings: the order's chunk (chunk_records, the block order) when
    it fits in one GET, else as many as the GET's byte limit reaches."""
    reach = max(1, int(get_limit_bytes // record_bytes))
    return min(chunk_records, reach) if chunk_records > 0 else reach


def prefixes_needed(gets_per_s, gets_per_s_per_prefix):
    """Partitioned prefixes the dataset's objects must span for the store to serve gets_per_s."""
    return max(1, math.ceil(gets_per_s / gets_per_s_per_prefix - 1e-9))


def share_of_chunks_needed(chunk_records, nodes, epochs=1):
    """Share of a dataset's chunks a node has needed a record of after `epochs` epochs of a
    uniformly random order dealt over `nodes` nodes (its ranks hold 1/nodes of each epoch):
    1 - (1 - 1/nodes)^(chunk_records * epochs). With whole chunks and one cache folder per node,
    the node has fetched exactly these chunks, each once."""
    return 1.0 - (1.0 - 1.0 / nodes) ** (chunk_records * epochs)


def expected_distinct(draws, bins):
    """Expected distinct bins hit by `draws` uniform draws (records of a batch among chunks)."""
    return bins * (1.0 - (1.0 - 1.0 / bins) ** draws)


def block_records_held(lane_records, chunk_records, window_chunks, lookahead_records):
    """Records a block-order reader holds at most: its window's chunks (window + 2 started and not
    finished, docs/SAMPLER.md) and what it asks ahead, but never more than its lane's records
    (a lane shorter than the window is shuffled whole, all of its chunks started at once)."""
    return min(lane_records, (window_chunks + 2) * chunk_records + lookahead_records)


def block_first_chunks(lane_records, chunk_records, window_chunks, first_records):
    """Expected chunks a block-order reader must fetch before it has its first `first_records`
    records. The lane's record at place j takes the key j + u, u uniform in [0, window x chunk)
    (sampler/block_order.h) and the lane is sorted by key; the first records are those whose keys
    fall below a threshold t with sum_j P(j + u < t) = first_records. A chunk is needed when any
    of its records is among them; never fewer than the chunks first_records fill (the threshold is
    loose for a handful of records). The lane is taken to start at a chunk's edge."""
    n, span = int(lane_records), float(window_chunks * chunk_records)
    k = min(first_records, n)
    lo, hi = 0.0, n + span
    for _ in range(60):  # bisection on t: the expected count below t grows with t
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _expected_keys_below(mid, n, span) < k else (lo, mid)
    chunks = 0.0
    for c in range(0, min(n, math.ceil(hi)), chunk_records):  # places at or past t are never first
        none = 1.0
        for j in range(c, min(n, c + chunk_records)):
            none *= 1.0 - min(1.0, max(0.0, (hi - j) / span))
        chunks += 1.0 - none
    return max(chunks, math.ceil(k / chunk_records))


def _expected_keys_below(t, n, span):
    """sum over places j < n of P(j + u < t), u uniform in [0, span): places at or below t - span
    count 1, those between t - span and t count (t - j) / span (closed form: the lane may be long)."""
    whole = min(n, max(0, math.floor(t - span) + 1))
    end = min(n, max(0, math.ceil(t)))
    if end <= whole:
        return float(whole)
    count = end - whole
    return whole + (count * t - (whole + end - 1) * count / 2) / span


def predict(cfg, params):
    """{'images_per_s', 'limit', 'bounds': {name: images/s}} for a configuration.

    params: record_bytes (mean stored bytes), decoded_bytes (one decoded sample + its share of
    the header), decode_s and read_s (CPU seconds of the whole machine per decode and per record
    read, calibrated), ios_per_record."""
    bounds = {}
    reads = storage_reads(cfg)
    f = sum(reads.values())
    if cfg.get("store") == "s3":
        bounds.update(store_bounds(cfg, params))
    elif cfg["storage_mbps"] > 0:
        bounds["storage"] = cfg["storage_mbps"] * 1e6 / (params["record_bytes"] * f)
    if cfg.get("store") != "s3" and cfg["storage_iops"] > 0:
        bounds["iops"] = cfg["storage_iops"] / (params["ios_per_record"] * f)
    if cfg.get("store") != "s3" and cfg.get("node_mbps", 0) > 0:
        worst = max(reads.values())
        bounds["node cap"] = cfg["node_mbps"] * 1e6 / (params["record_bytes"] * worst)
    if cfg["link_mbit"] > 0:
        worst = max(link_bytes_per_image(cfg, params))
        if worst > 0:
            bounds["network"] = cfg["link_mbit"] * 1e6 / 8 * LINK_EFFICIENCY / worst
    bounds["cpu"] = 1.0 / cpu_seconds(cpu_work(cfg, params), params)
    if cfg.get("store") == "s3" and front_loaded(cfg, params):
        bounds["fetch, then decode"] = fetch_then_decode(cfg, params, bounds)
    limit = min(bounds, key=bounds.get)
    return {"images_per_s": with_start(cfg, params, bounds[limit]), "limit": limit, "bounds": bounds}


def with_start(cfg, params, rate):
    """A run's images/s over its whole span, its start-up included: params start_s (the time to the
    first batch with nothing limited, calibrated; 0: none) before the run's images at `rate`. The
    run's images: the dataset's records (params records) each epoch, delivered to every member of
    a group in replicate mode."""
    start = params.get("start_s", 0.0)
    if start <= 0 or params.get("records", 0) <= 0 or rate <= 0:
        return rate
    images = params["records"] * max(1, cfg.get("epochs", 1) or 1) * (
        cfg["group_size"] if cfg["mode"] == "replicate" else 1)
    return images / (images / rate + start)


# --- Whole chunks that must all arrive before an epoch decodes: fetching and decoding in turn ---
# A batch of the exact order draws its records from all over the dataset, so with whole chunks a
# fetcher decodes little of an epoch before it has (nearly) all the chunks it fetches in it (the
# first batch alone is fetched record by record ahead of them). Fetching and decoding then take
# turns, as two machines of a flow shop with an epoch as the job: an epoch's fetch F_e (its bytes
# over the store's bounds) comes before its decode C_e (decodes and relays, CPU), and the next
# epoch's fetch may run beside this one's decode:
#   makespan = F_1 + sum_{e=2..E} max(F_e, C_{e-1}) + C_E
# The exact order fetches all its chunks in the first epoch (F_e = 0 after). All the work's CPU
# time is a floor beside it (fetching costs CPU too, on these shared cores). The block order
# streams, even in a lane no longer than its window: a record's key is its place plus a spread of
# at most the window (docs/SAMPLER.md), so its first records are in its first chunk and decoding
# follows the chunks as they come; the smaller bound holds, as record by record.


def front_loaded(cfg, params):
    """Whether a fetcher's epoch waits for all its chunks before it decodes (see above): the
    exact order's whole chunks."""
    return (cfg.get("order") or "exact") == "exact" and fetches_whole_chunks(cfg, params)


def fetch_then_decode(cfg, params, bounds):
    """Images/s of a front-loaded configuration: the flow shop's makespan over the run's epochs, or
    all of its CPU time if longer. bounds: the store's (their smallest prices the fetch)."""
    epochs = max(1, cfg.get("epochs", 1) or 1)
    store = min(v for k, v in bounds.items() if k in ("store link", "store requests", "store latency",
                                                       "node link")) if any(
        k in bounds for k in ("store link", "store requests", "store latency", "node link")) else math.inf
    fetch_total = epochs / store  # seconds per image of an epoch, the whole run's fetch
    fetch = [fetch_total] + [0.0] * (epochs - 1)
    work = cpu_work(cfg, params)
    decode = cpu_seconds(dict(work, records=0.0, gets=0.0), params)
    span = fetch[0] + sum(max(fetch[e], decode) for e in range(1, epochs)) + decode
    span = max(span, epochs * cpu_seconds(work, params))
    return epochs / span


# --- The CPU bound: the machine's CPU seconds per delivered image, by kind of work ---
# Every rank, the gateway and the delaying proxy share this machine's cores, so CPU time per
# delivered image is a sum over the work each image causes:
#   decode_s x decodes + read_s x records read or fetched + get_s x GETs + relay_byte_s x bytes
#   sent between ranks (every hop costs a send and a receive here, across a node's link or not).
# With the shared filesystem only the first two are calibrated (get_s and relay_byte_s are 0:
# shard G=4 moved 3/4 of its data over TCP and ran within noise of G=1). With an object store a
# fetched record's CPU depends on how it came — one GET each, or ~90 to a whole chunk — and the
# decoded relay's 150 KB samples cost what the encoded payload's 95 KB did not show, so all four
# are calibrated (calibrate_cpu) from unshaped runs' counters.
CPU_TERMS = (("decodes", "decode_s"), ("records", "read_s"), ("gets", "get_s"), ("relay_bytes", "relay_byte_s"))


def cpu_work(cfg, params):
    """{'decodes', 'records', 'gets', 'relay_bytes'} per delivered image of a configuration: what
    the model expects its ranks to do (cpu_seconds prices it)."""
    decodes = 1.0 / cfg["group_size"] if (cfg["mode"] == "replicate" and cfg["payload"] == "decoded"
                                          and cfg["readers"] == "leader") else 1.0
    gets = 0.0
    if cfg.get("store") == "s3":
        records = store_fetches(cfg, params)[0]
        if (cfg.get("order") or "exact") == "block":
            gets = records / BLOCK_CHUNK_RECORDS
        elif fetches_whole_chunks(cfg, params):
            gets = records / records_per_get(EXACT_CHUNK_BYTES, params["record_bytes"])
        else:
            gets = records * params.get("gets_per_record", 1.0)
    else:
        records = sum(storage_reads(cfg).values())
    payload = params["record_bytes"] if cfg["payload"] == "encoded" else params.get("decoded_bytes", 0)
    relay = sum(share for _, _, share in transfers(cfg)) * payload
    return {"decodes": decodes, "records": records, "gets": gets, "relay_bytes": relay}


def cpu_seconds(work, params):
    """The machine's CPU seconds per delivered image for `work` (cpu_work's, or a run's counters)."""
    return sum(params.get(key, 0.0) * work[name] for name, key in CPU_TERMS)


def calibrate_cpu(runs, terms=None):
    """{decode_s, read_s, get_s, relay_byte_s} from runs with nothing but the CPU limiting them:
    [(work per delivered image as cpu_work gives it, measured images/s)]. Least squares of
    sum(t_k x work_k) = 1 / rate over the runs, every t_k >= 0 (the best of the least-squares
    fits on each subset of the terms whose solution is non-negative: four terms, 15 subsets).
    terms: the names to fit (default all four); the others are 0."""
    names = [n for n, _ in CPU_TERMS if terms is None or n in terms]
    keys = dict(CPU_TERMS)
    best = None
    for mask in range(1, 1 << len(names)):
        use = [n for i, n in enumerate(names) if mask >> i & 1]
        t = _least_squares([[w[n] for n in use] for w, _ in runs], [1.0 / r for _, r in runs])
        if t is None or min(t) < 0:
            continue
        resid = sum((sum(ti * w[n] for ti, n in zip(t, use)) - 1.0 / r) ** 2 for w, r in runs)
        if best is None or resid < best[0] - 1e-18 or (abs(resid - best[0]) <= 1e-18 and len(use) > len(best[1])):
            best = (resid, use, t)
    out = {key: 0.0 for _, key in CPU_TERMS}
    if best is not None:
        out.update({keys[n]: ti for n, ti in zip(best[1], best[2])})
    return out


def _least_squares(a, b):
    """x minimising |a x - b| by the normal equations (a few columns, well scaled by the caller
    or not: solved by Gaussian elimination with partial pivoting); None when singular."""
    n = len(a[0])
    m = [[sum(row[i] * row[j] for row in a) for j in range(n)] + [sum(row[i] * bi for row, bi in zip(a, b))]
         for i in range(n)]
    scale = [max(abs(m[i][i]), 1e-300) for i in range(n)]
    for i in range(n):  # equilibrate: columns differ by 10^5 (bytes against decodes)
        for j in range(n + 1):
            m[i][j] /= scale[i]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[piv][col]) < 1e-12:
            return None
        m[col], m[piv] = m[piv], m[col]
        for r in range(n):
            if r != col:
                k = m[r][col] / m[col][col]
                m[r] = [x - k * y for x, y in zip(m[r], m[col])]
    return [m[i][n] / m[i][i] for i in range(n)]


def link_bytes_per_image(cfg, params):
    """(max uplink, max downlink) bytes per delivered image over the nodes: the model's view of
    the busiest link."""
    b = params["record_bytes"] if cfg["payload"] == "encoded" else params["decoded_bytes"]
    node = lambda r: r // cfg["ranks_per_node"]
    up = {n: 0.0 for n in range(cfg["nodes"])}
    down = dict(up)
    for src, dst, share in transfers(cfg):
        if node(src) != node(dst):
            up[node(src)] += share * b
            down[node(dst)] += share * b
    return max(up.values()), max(down.values())
