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
  CPU             as above, with t_r the CPU time of one fetch (client and gateway share this
                  machine's cores), calibrated on the store
"""
LINK_EFFICIENCY = 0.90


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


def store_fetches(cfg):
    """(records fetched from the object store per delivered image, ranks fetching)."""
    world = cfg["nodes"] * cfg["ranks_per_node"]
    g = cfg["group_size"]
    fetchers = world if cfg["readers"] == "all" else world // g
    if cfg["mode"] == "replicate" and cfg["readers"] == "leader":
        return 1.0 / g, fetchers
    return 1.0, fetchers


def store_bounds(cfg, params):
    """The object store's bounds on X (images/s), by name."""
    f, _ = store_fetches(cfg)
    out = {}
    if cfg.get("store_link_mbit", 0) > 0:
        out["store link"] = cfg["store_link_mbit"] * 1e6 / 8 * LINK_EFFICIENCY / (params["record_bytes"] * f)
    if params.get("store_rps", 0) > 0:
        out["store requests"] = params["store_rps"] * params.get("records_per_request", 1.0) / f
    return out


def predict(cfg, params):
    """{'images_per_s', 'limit', 'bounds': {name: images/s}} for a configuration.

    params: record_bytes (mean stored bytes), decoded_bytes (one decoded sample + its share of
    the header), decode_s and read_s (CPU seconds of the whole machine per decode and per record
    read, calibrated), ios_per_record."""
    bounds = {}
    reads = storage_reads(cfg)
    f = sum(reads.values())
    if cfg.get("store") == "s3":
        f = store_fetches(cfg)[0]
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
    decodes = 1.0 / cfg["group_size"] if (cfg["mode"] == "replicate" and cfg["payload"] == "decoded"
                                          and cfg["readers"] == "leader") else 1.0
    bounds["cpu"] = 1.0 / (params["decode_s"] * decodes + params["read_s"] * f)
    limit = min(bounds, key=bounds.get)
    return {"images_per_s": bounds[limit], "limit": limit, "bounds": bounds}


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
