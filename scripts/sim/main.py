"""scripts/sim-cluster.sh: a simulated multi-node cluster on this one machine (root required).

  run     one configuration, end to end: make the cluster, run the job, print one JSON line, tear
          everything down (also on failure and Ctrl-C)
  sweep   storage bandwidth x link rate x group size x mode/payload, predicted and measured;
          writes a table, SVG plots and JSON lines to --out
  up / launch / down
          the pieces, for tests and exploration: `up` prints the cluster's name; `launch NAME
          --nproc-per-node R -- ddpio ...` runs a job on every node ({data} = the node's copy of
          the dataset, {node} = its index); `down NAME` removes it
  fault   a node lost for good: `ddpio train` (or, --program python, the PyTorch example
          examples/pytorch/train_elastic.py fed by ddpio.Loader) with checkpoints, node --kill-node killed (every
          process, SIGKILL) after --kill-after-step steps; prints the survivors' detection times,
          the restart on the smaller world and the exact-once tally as one JSON line
          (DDPIO_SIM_KEEP=1 keeps the run's checkpoints and index logs, and names the folder)
  status / clean
          list clusters left on this machine; remove them all

The dataset lives on a throttled shared filesystem (--store fs, the default) or in an object
store (--store s3: Ceph's RADOS Gateway in a namespace of its own behind --store-link-mbit, the
dataset uploaded to s3://ddpio-sim/data; `sweep --store s3` runs the section 'store').
"""
import argparse
import json
import os
import secrets
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sim import cluster as cl  # noqa: E402
from sim import fault, jobs, report, run, sweep  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DDPIO = os.path.join(REPO, "build", "release", "tools", "ddpio")
# The shared filesystem's image lives in memory (tmpfs) by default: its speed is then set by the
# throttle alone, not by this machine's disk (which warmed up from run to run by 30 %).
WORKDIR = "/dev/shm/ddpio-sim" if os.path.isdir("/dev/shm") else "/var/tmp/ddpio-sim"


def make_cluster(args, name=None):
    c = cl.Cluster(name or f"ds{secrets.token_hex(3)}")
    try:
        c.up_network(args.nodes)
        if getattr(args, "data", None):
            if args.store == "s3":
                c.up_store_s3(args.data, getattr(args, "ddpio", DEFAULT_DDPIO),
                              getattr(args, "store_first_byte_ms", 0))
            else:
                c.up_storage(args.data, args.workdir)
        throttle = getattr(args, "throttle_node", None)
        if getattr(args, "node_cpus", 0) or throttle is not None:
            if throttle is not None and not 0 <= throttle < args.nodes:
                raise cl.SimError(f"--throttle-node {throttle}: the cluster has nodes 0-{args.nodes - 1}")
            c.cpu_cap(args.node_cpus, {throttle: args.throttle_cpus} if throttle is not None else None)
    except BaseException:
        c.down(quiet=True)
        raise
    return c


def add_cluster_flags(p, data_required):
    p.add_argument("--nodes", type=int, default=4, help="simulated nodes (default 4)")
    p.add_argument("--data", required=data_required, help="dataset every node mounts read-only")
    p.add_argument("--store", choices=["fs", "s3"], default="fs",
                   help="fs: a shared filesystem every node mounts (default); s3: an object store (Ceph's RADOS "
                        "Gateway in a namespace of its own behind --store-link-mbit), the dataset uploaded to "
                        "s3://ddpio-sim/data")
    p.add_argument("--store-first-byte-ms", type=float, default=0,
                   help="--store s3: each response's first byte held this long after its request (a "
                        "delaying proxy in front of the gateway: a real object store's 10-200 ms; 0: none)")
    p.add_argument("--workdir", default=WORKDIR, help=f"where the filesystem image lives (default {WORKDIR})")
    p.add_argument("--node-cpus", type=float, default=0, help="CPU cores per node (default: uncapped)")
    p.add_argument("--throttle-node", type=int, default=None,
                   help="one node made slow (a straggler): its CPU capped at --throttle-cpus cores; with "
                        "--job train the straggler report should name a rank of it")
    p.add_argument("--throttle-cpus", type=float, default=0.25,
                   help="--throttle-node: that node's CPU cores (default 0.25)")


def add_job_flags(p):
    p.add_argument("--ranks-per-node", type=int, default=2)
    p.add_argument("--link-mbit", type=int, default=1000, help="each node's link, each way (0: unshaped)")
    p.add_argument("--storage-mbps", type=float, default=0, help="shared filesystem, MB/s in total (0: unlimited)")
    p.add_argument("--storage-iops", type=int, default=0, help="shared filesystem, IOs/s in total (0: unlimited)")
    p.add_argument("--node-mbps", type=float, default=0, help="per-node client cap, MB/s (0: none)")
    p.add_argument("--store-link-mbit", type=int, default=1000,
                   help="--store s3: the store's link, Mbit/s each way (0: unshaped)")
    p.add_argument("--store-rps", type=float, default=0,
                   help="--store s3, with --cpu-rate: GETs/s the gateway serves here with nothing else "
                        "limited (the model's request-rate bound)")
    p.add_argument("--group-size", type=int, default=1)
    p.add_argument("--mode", choices=["shard", "replicate"], default="shard")
    p.add_argument("--payload", choices=["encoded", "decoded"], default="encoded")
    p.add_argument("--readers", choices=["leader", "all"], default="leader",
                   help="leader: the group's leader reads for it; all: every member reads itself (the baseline)")
    p.add_argument("--layout", choices=["contiguous", "strided"], default="contiguous")
    p.add_argument("--order", choices=["exact", "block"], default="exact",
                   help="the sample order (block: --block-window 4, the order for many readers on a store)")
    p.add_argument("--node-cache", action="store_true",
                   help="--store s3: the ranks of a node share a cache folder (DDPIO_S3_CACHE_DIR, made "
                        "empty before the run and removed after it), so a node fetches a chunk once; "
                        "default: none, every epoch from the store")
    p.add_argument("--relay", choices=["chain", "star"], default="chain", help="replicate: how data reaches members")
    p.add_argument("--read-ahead", type=int, default=64, help="records a leader hints to storage ahead")
    p.add_argument("--job", choices=["feed", "train"], default="feed", help="ddpio bench feed or ddpio train")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--workers", type=int, default=1, help="decoding threads per rank")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--seq-len", type=int, default=0,
                   help="a token dataset: ids per training sequence, passed to ddpio as --seq-len (0: images)")
    p.add_argument("--job-arg", dest="job_args", action="append", default=[], metavar="ARG",
                   help="one more argument for every rank's ddpio command, as is (repeat it; e.g. "
                        "--job-arg=--hidden=128)")
    p.add_argument("--timeout", type=int, default=900, help="seconds the job may take")
    p.add_argument("--ddpio", default=DEFAULT_DDPIO, help="the ddpio binary (default: build/release)")
    p.add_argument("--cpu-rate", type=float, default=0,
                   help="decodes/s of the whole job when nothing else limits it; with it, the model's prediction "
                        "is printed next to the measurement")
    p.add_argument("--relay-rate", type=float, default=0,
                   help="with --cpu-rate: images/s of replicate G=2R with nothing limited, which splits the CPU "
                        "time between decoding and reading (see model.py)")


def config_of(args):
    keys = ("nodes", "ranks_per_node", "link_mbit", "storage_mbps", "storage_iops", "node_mbps", "group_size",
            "mode", "payload", "readers", "layout", "relay", "read_ahead", "job", "epochs", "batch_size", "workers",
            "image_size", "store", "store_link_mbit", "store_first_byte_ms", "order", "node_cache",
            "timeout", "ddpio", "seq_len", "job_args")
    return {k: getattr(args, k) for k in keys}


def cmd_run(args):
    cfg = config_of(args)
    params = None
    if args.cpu_rate > 0:
        records, record_bytes = run.dataset_stats(args.ddpio, args.data)
        params = sweep.model_params(cfg, record_bytes, args.cpu_rate, ios_per_record=1.0,
                                    relay_rate=args.relay_rate or None, records=records)
        params["store_rps"] = args.store_rps
    c = make_cluster(args)
    try:
        rec = run.run_config(c, cfg, params, echo=args.verbose)
    finally:
        c.down()
    print(json.dumps(rec), flush=True)


def cmd_fault(args):
    args.job = "train"
    cfg = config_of(args)
    cfg["job_timeout"] = args.job_timeout
    cfg["program"] = args.job_program
    if args.job_program == "python":
        cfg["python_path"] = os.path.abspath(args.python_path or os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(args.ddpio))), "python"))
        if not os.path.isfile(os.path.join(cfg["python_path"], "ddpio", "__init__.py")):
            raise cl.SimError(f"--program python: no ddpio package in {cfg['python_path']} (build it, or give "
                              "--python-path)")
    kill = args.nodes - 1 if args.kill_node is None else args.kill_node
    if args.rejoin_after_steps and args.agent != "torchrun":
        raise cl.SimError("--rejoin-after-steps needs --agent torchrun (the agents grow the world)")
    if not 0 <= kill < args.nodes or args.nodes < 2:
        raise cl.SimError(f"--kill-node {kill}: the cluster has nodes 0-{args.nodes - 1} (and needs 2)")
    samples, _ = run.dataset_stats(args.ddpio, args.data)
    c = make_cluster(args)
    try:
        c.shape(cfg["link_mbit"])
        rec = fault.run_fault(c, cfg, kill, args.kill_after_step, args.checkpoint_every, samples,
                              echo=args.verbose, agent=args.agent, rejoin_after=args.rejoin_after_steps,
                              fault=args.fault)
    finally:
        c.down()
    print(json.dumps(rec), flush=True)
    return 0 if rec["tally_ok"] else 1


def cmd_up(args):
    c = make_cluster(args, args.name)
    if args.link_mbit:
        c.shape(args.link_mbit)
    print(json.dumps({"name": c.name, "nodes": c.nodes, "addresses": [c.address(i) for i in range(c.nodes)],
                      "data": [c.data_path(i) for i in range(c.nodes)] if args.data else None}), flush=True)


def cmd_launch(args):
    c = cl.Cluster.load(args.name)
    argv = args.program
    if not argv:
        raise cl.SimError("no command: put it after --")
    results = jobs.launch(c, args.ddpio, args.nproc_per_node, argv, timeout=args.timeout, port=args.port)
    for r in results:
        for line in r.out:
            sys.stdout.write(f"[node {r.node}] {line}")
        for line in r.err:
            sys.stderr.write(f"[node {r.node}] {line}")
    bad = [r for r in results if r.rc != 0]
    sys.stdout.flush()
    return 0 if not bad else (bad[0].rc if bad[0].rc > 0 else 1)


def cmd_down(args):
    cl.Cluster.load(args.name).down()


def cmd_status(_):
    for name in cl.existing():
        c = cl.Cluster.load(name)
        print(f"{name}: {c.nodes} nodes, {len(c.state['resources'])} resources")


def cmd_clean(_):
    for name in cl.existing():
        cl.Cluster.load(name).down(quiet=True)
        print(f"removed {name}")


def _interrupted(signum, frame):
    raise KeyboardInterrupt()


def main():
    parser = argparse.ArgumentParser(prog="sim-cluster.sh", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="one configuration end to end; prints one JSON line")
    add_cluster_flags(p, data_required=True)
    add_job_flags(p)
    p.add_argument("--verbose", action="store_true", help="echo the ranks' output")
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("fault", help="a node killed mid-training, the job restarted smaller; one JSON line")
    add_cluster_flags(p, data_required=True)
    add_job_flags(p)
    p.add_argument("--kill-node", type=int, default=None, help="the node killed (default: the last)")
    p.add_argument("--agent", choices=["script", "torchrun"], default="script",
                   help="who restarts the job on the survivors: this script (after they exit on their own; "
                        "timed), or torchrun's elastic agent on every node (--nnodes N-1:N, c10d on node 0)")
    p.add_argument("--program", dest="job_program", choices=["train", "python"], default="train",
                   help="the job: `ddpio train` (default) or examples/pytorch/train_elastic.py (torch DDP fed by "
                        "ddpio.Loader, resuming from the Loader's state_dict; the package from --python-path)")
    p.add_argument("--python-path", default=None,
                   help="--program python: the folder holding the ddpio package (default: the python/ folder "
                        "beside --ddpio's build, e.g. build/release/python)")
    p.add_argument("--fault", choices=sorted(fault.FAULTS), default="power",
                   help="how the node is lost: " + "; ".join(f"{k}: {v}" for k, v in sorted(fault.FAULTS.items()))
                        + " (default power)")
    p.add_argument("--kill-after-step", type=int, default=10, help="killed once rank 0 took this many steps")
    p.add_argument("--rejoin-after-steps", type=int, default=0,
                   help="--agent torchrun: the lost node comes back once the smaller world took this many "
                        "steps, and the world grows again (default 0: it stays lost)")
    p.add_argument("--checkpoint-every", type=int, default=4, help="optimizer steps between checkpoints")
    p.add_argument("--job-timeout", type=int, default=30,
                   help="ddpio's --timeout: how long a rank waits for a vanished peer (default 30 s)")
    p.add_argument("--verbose", action="store_true", help="echo the ranks' output")
    p.set_defaults(fn=cmd_fault)
    p = sub.add_parser("sweep", help="the sweep: table, plots, predicted vs measured")
    sweep.add_flags(p, DEFAULT_DDPIO, WORKDIR)
    p.set_defaults(fn=lambda a: sweep.main(a, make_cluster))
    p = sub.add_parser("report", help="redraw a finished sweep's table and plots from its results.jsonl")
    p.add_argument("--out", required=True, help="the sweep's report folder")
    p.set_defaults(fn=lambda a: report.rebuild(a.out))
    p = sub.add_parser("up", help="make a cluster and print its name (JSON)")
    add_cluster_flags(p, data_required=False)
    p.add_argument("--name", help="cluster name (default: random)")
    p.add_argument("--link-mbit", type=int, default=0)
    p.set_defaults(fn=cmd_up)
    p = sub.add_parser("launch", help="run `ddpio launch` on every node of a cluster at once",
                       usage="sim-cluster.sh launch NAME --nproc-per-node R [--port P] -- PROGRAM ARGS...")
    p.add_argument("name")
    p.add_argument("--nproc-per-node", type=int, required=True)
    p.add_argument("--port", type=int, default=29500)
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--ddpio", default=DEFAULT_DDPIO)
    p.set_defaults(fn=cmd_launch)
    p = sub.add_parser("down", help="remove a cluster")
    p.add_argument("name")
    p.set_defaults(fn=cmd_down)
    sub.add_parser("status", help="clusters left on this machine").set_defaults(fn=cmd_status)
    sub.add_parser("clean", help="remove every cluster left on this machine").set_defaults(fn=cmd_clean)
    # Everything after the first "--" is the program `launch` runs on every rank.
    argv = sys.argv[1:]
    program = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.program = program
    # Ctrl-C and SIGTERM unwind through the `finally` blocks that tear clusters down.
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        if args.command not in ("status", "report"):
            cl.need_root()
        return args.fn(args) or 0
    except cl.SimError as e:
        print(f"sim-cluster: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("sim-cluster: interrupted; cluster removed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
