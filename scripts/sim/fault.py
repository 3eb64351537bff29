"""A node lost for good, measured: `ddpio train` (or the PyTorch example fed by ddpio.Loader) runs
across the nodes with checkpoints and an index log; once rank 0 has taken --kill-after-step
steps, node K is lost (FAULTS: a power loss — its link cut, then every process in its namespace
SIGKILLed —, a crash, or a partition). Measured: how long each
survivor takes to notice and exit (it must exit non-zero, naming the peer that vanished), then
the job is started again on the surviving nodes — a smaller world, groups and leaders re-formed —
resuming from the last checkpoint, and the whole run is tallied: every sample of every epoch
exactly once, the steps redone since the checkpoint counted (scripts/tally-indices.py)."""
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

from sim import cluster as cl
from sim import jobs, run
from sim.cluster import SimError

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TALLY = os.path.join(SCRIPTS, "tally-indices.py")
EXAMPLE = os.path.join(os.path.dirname(SCRIPTS), "examples", "pytorch", "train_elastic.py")


def fault_argv(cfg, ck, checkpoint_every, idx):
    """Every rank's command: `ddpio train` or the PyTorch example, checkpointing to `ck` and
    logging its indices to `idx`, resuming when a checkpoint is there."""
    if cfg.get("program", "train") == "python":
        return ["/usr/bin/python3", EXAMPLE, "--data", "{data}", "--group-size", str(cfg["group_size"]),
                "--mode", cfg["mode"], "--layout", cfg["layout"], "--epochs", str(cfg["epochs"]),
                "--batch-size", str(cfg["batch_size"]), "--workers", str(cfg["workers"]),
                "--image-size", str(cfg["image_size"]), "--timeout", str(cfg.get("job_timeout", 300)),
                "--checkpoint-dir", ck, "--checkpoint-every", str(checkpoint_every), "--indices-out", idx]
    return run.job_argv(cfg) + ["--checkpoint-dir", ck, "--checkpoint-every", str(checkpoint_every),
                                "--resume", "--indices-out", idx]


def fault_env(cluster, cfg):
    """The ranks' environment: the store's, and the ddpio package for the Python example."""
    env = cluster.job_env()
    if cfg.get("program", "train") == "python":
        env["PYTHONPATH"] = cfg["python_path"]
    return env


def steps_logged(path):
    """Optimizer steps rank 0 has logged so far (its index log)."""
    try:
        with open(path, encoding="ascii") as f:
            return sum(1 for line in f if line.startswith("step "))
    except FileNotFoundError:
        return 0


def first_step_time(path, after_ns):
    """Wall time (unix ns) of the first step line written after `after_ns`, or None."""
    with open(path, encoding="ascii") as f:
        for line in f:
            w = line.split()
            if w and w[0] == "step" and int(w[1]) > after_ns:
                return int(w[1])
    return None


FAULTS = {
    "power": "the node's link cut, then every process of it killed (a power loss: its peers get no reset)",
    "kill": "every process of the node killed (its kernel lives on and resets their connections: a crash)",
    "link": "the node's link cut, its processes left running (a partition: they must exit on their own)",
}


def inject(cluster, node, fault):
    if fault in ("power", "link"):
        cl.cut_link(cluster.ns(node))
    if fault in ("power", "kill"):
        cl.kill_netns(cluster.ns(node))


def named_by_address(address, command):
    """A node's command in a UTS namespace whose hostname is the node's address: torch's gloo
    backend finds its interface by resolving the hostname, and the namespaces share this
    machine's (which resolves to 127.0.0.1)."""
    return ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', address, *command]


def script_launcher(cfg):
    """`ddpio launch` on every node; for the Python example each node named by its address."""
    if cfg.get("program", "train") != "python":
        return jobs.ddpio_launch

    def command(ddpio, nnodes, node_rank, nproc, master, port, cmd, address=None):
        return named_by_address(address, jobs.ddpio_launch(ddpio, nnodes, node_rank, nproc, master, port, cmd))
    return command


def torchrun_launcher(max_restarts):
    """Each node's command under torchrun's elastic agent: c10d rendezvous on the first node,
    any number of nodes from all but one to all (a node may be lost, and come back)."""
    def command(ddpio, nnodes, node_rank, nproc, master, port, cmd, address=None):
        # torchrun 1.13 gives its workers MASTER_ADDR = the rank-0 agent's hostname, and the
        # namespaces share this machine's: each node gets a UTS namespace named by its address.
        return named_by_address(address, [
                "/usr/bin/python3", "-m", "torch.distributed.run", "--no_python",
                "--nnodes", f"{max(1, nnodes - 1)}:{nnodes}", "--nproc_per_node", str(nproc),
                "--rdzv_backend", "c10d", "--rdzv_endpoint", f"{master}:{port}", "--rdzv_id", "ddpio-sim",
                "--max_restarts", str(max_restarts), "--monitor_interval", "1",
                # In a namespace the node's hostname does not resolve to its address, so torchrun
                # cannot tell which agent hosts the rendezvous store: say it.
                "--rdzv_conf", f"is_host={'true' if node_rank == 0 else 'false'}",
                "--redirects", "1", "--tee", "1", *cmd])
    return command


def start_lines(path):
    """(unix ns, step) of every start line of an index log."""
    out = []
    with open(path, encoding="ascii") as f:
        for line in f:
            w = line.split()
            if w and w[0] == "start":
                out.append((int(w[1]), int(w[w.index("step") + 1])))
    return out


def run_fault(cluster, cfg, kill_node, kill_after_step, checkpoint_every, samples, echo=False, agent="script",
              rejoin_after=0, fault="power"):
    """agent "script": the job under `ddpio launch`; after the kill the survivors must exit on
    their own (timed), and this script starts the job again on them. agent "torchrun": one job
    under torchrun's elastic agent on every node; after the kill the agents on the survivors
    restart their workers as a smaller world by themselves."""
    if agent == "torchrun":
        return run_fault_torchrun(cluster, cfg, kill_node, kill_after_step, checkpoint_every, samples, echo,
                                  rejoin_after, fault)
    work = tempfile.mkdtemp(prefix="ddpio-fault-")
    try:
        ck, idx = os.path.join(work, "ck"), os.path.join(work, "indices")
        argv = fault_argv(cfg, ck, checkpoint_every, idx)
        killed = {}

        def watch():
            if not killed and steps_logged(idx + ".rank0.txt") >= kill_after_step:
                killed["t"] = time.monotonic()
                inject(cluster, kill_node, fault)

        first = jobs.launch(cluster, cfg["ddpio"], cfg["ranks_per_node"], argv, timeout=cfg["timeout"],
                            env=fault_env(cluster, cfg), echo=echo, watch=watch, stop_on_failure=False,
                            launcher=script_launcher(cfg))
        if not killed:
            raise SimError(f"the job ended before rank 0 logged {kill_after_step} steps:\n"
                           + jobs.failure_text(first))
        survivors = [r for r in first if r.node != kill_node]
        detection = {r.node: round(r.end - killed["t"], 2) for r in survivors}
        errors = {r.node: next((line.strip() for line in r.err if "error" in line), "") for r in survivors}
        exit_codes = {r.node: r.rc for r in first}
        # A partition: the cut node's ranks run on and must exit on their own too (no orphan).
        cut = next(r for r in first if r.node == kill_node)
        cut_fields = ({"cut_node_exit_code": cut.rc, "cut_node_exit_s": round(cut.end - killed["t"], 2)}
                      if fault == "link" else {})
        # The restart: the surviving nodes, a smaller world, from the last checkpoint.
        nodes = [i for i in range(cluster.nodes) if i != kill_node]
        restart_ns = time.time_ns()
        t0 = time.monotonic()
        second = jobs.launch(cluster, cfg["ddpio"], cfg["ranks_per_node"], argv, timeout=cfg["timeout"],
                             env=fault_env(cluster, cfg), echo=echo, nodes=nodes,
                             launcher=script_launcher(cfg))
        wall = time.monotonic() - t0
        if any(r.rc != 0 for r in second):
            raise SimError("the restarted job failed:\n" + jobs.failure_text(second))
        first_step = first_step_time(idx + ".rank0.txt", restart_ns)
        tally = tally_of(idx, samples, cfg["epochs"])
        ranks = jobs.rank_json(second)
        detection_max = max(detection.values()) if detection else None
        return {
            "nodes": cluster.nodes, "ranks_per_node": cfg["ranks_per_node"], "group_size": cfg["group_size"],
            "mode": cfg["mode"], "epochs": cfg["epochs"], "batch_size": cfg["batch_size"],
            "job_timeout_s": cfg.get("job_timeout"), "killed_node": kill_node,
            "killed_after_step": kill_after_step, "checkpoint_every": checkpoint_every,
            "survivor_exit_codes": {str(k): v for k, v in exit_codes.items() if k != kill_node},
            "detection_s": {str(k): v for k, v in detection.items()},
            "detection_max_s": detection_max, "agent": "script", "program": cfg.get("program", "train"),
            "fault": fault, **cut_fields,
            "survivor_errors": {str(k): v[:300] for k, v in errors.items()},
            "restart_world": len(nodes) * cfg["ranks_per_node"],
            "restart_to_first_step_s": round((first_step - restart_ns) / 1e9, 2) if first_step else None,
            "restart_wall_s": round(wall, 2),
            "restart_params": sorted({j.get("param_checksum") for j in ranks.values()}),
            **tally_fields(tally),
        }
    finally:
        keep(work)


def keep(work):
    """Removes a run's folder (checkpoints, index logs) unless DDPIO_SIM_KEEP is set, when it is
    left for reading and named."""
    if os.environ.get("DDPIO_SIM_KEEP"):
        print(f"sim-cluster: the run's checkpoints and index logs are in {work}", file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)


def tally_fields(tally):
    """What a fault run reports of the tally."""
    return {"tally_ok": tally["ok"], "steps_redone": tally["redone_steps"],
            "tally_epochs": [{k: e[k] for k in ("epoch", "missing", "repeated", "missing_first", "repeated_first")}
                             for e in tally["epochs"] if e["missing"] or e["repeated"]],
            "samples_lost": sum(e["missing"] for e in tally["epochs"]),
            "samples_repeated": sum(e["repeated"] for e in tally["epochs"]),
            "attempts": tally["attempts"]}


def tally_of(idx, samples, epochs):
    """scripts/tally-indices.py's JSON for the run's index logs."""
    p = subprocess.run(["/usr/bin/python3", TALLY, idx, "--samples", str(samples), "--epochs", str(epochs),
                        "--json"], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise SimError(f"tally-indices: {p.stderr.strip()}")
    return json.loads(p.stdout)


def steps_since(path, after_ns):
    """Step lines of an index log written after `after_ns`."""
    with open(path, encoding="ascii") as f:
        return sum(1 for line in f if line.startswith("step ") and int(line.split()[1]) > after_ns)


def run_fault_torchrun(cluster, cfg, kill_node, kill_after_step, checkpoint_every, samples, echo,
                       rejoin_after=0, fault="power"):
    """rejoin_after > 0: once the smaller world has taken that many steps, the lost node comes back
    (its agent started again) and the agents grow the world back to every node."""
    if fault == "link":
        raise SimError("--fault link needs --agent script: under torchrun the cut node's agent waits out its "
                       "rendezvous timeout (torchrun's own behaviour), which says nothing of ddpio")
    if kill_node == 0:
        raise SimError("under torchrun the first node hosts the c10d rendezvous (torchrun's own single "
                       "point of failure): kill another node")
    work = tempfile.mkdtemp(prefix="ddpio-fault-")
    try:
        ck, idx = os.path.join(work, "ck"), os.path.join(work, "indices")
        argv = fault_argv(cfg, ck, checkpoint_every, idx)
        killed, rejoin = {}, {}
        token, port, log = secrets.token_hex(16), 29400, idx + ".rank0.txt"
        launcher = torchrun_launcher(max_restarts=2)

        def watch():
            if not killed and steps_logged(log) >= kill_after_step:
                killed["ns"] = time.time_ns()
                inject(cluster, kill_node, fault)
            elif killed and rejoin_after > 0 and "proc" not in rejoin:
                restart = [t for t, _ in start_lines(log) if t > killed["ns"]]
                if restart and steps_since(log, restart[0]) >= rejoin_after:
                    if fault != "kill":
                        cl.restore_link(cluster.ns(kill_node))  # the node is back, powered and cabled
                    cmd = [a.replace("{data}", cluster.data_path(kill_node) or "") for a in argv]
                    full = launcher(cfg["ddpio"], cluster.nodes, kill_node, cfg["ranks_per_node"],
                                    cluster.address(0), port, cmd, address=cluster.address(kill_node))
                    rejoin["ns"] = time.time_ns()
                    rejoin["out"] = open(os.path.join(work, "rejoin.log"), "w+")
                    rejoin["proc"] = subprocess.Popen(
                        cluster.node_command(kill_node, full), stdout=rejoin["out"], stderr=subprocess.STDOUT,
                        env=dict(os.environ, DDPIO_STORE_TOKEN=token, **fault_env(cluster, cfg)),
                        start_new_session=True)

        results = jobs.launch(cluster, cfg["ddpio"], cfg["ranks_per_node"], argv, timeout=cfg["timeout"],
                              env=fault_env(cluster, cfg), echo=echo, watch=watch, stop_on_failure=False,
                              port=port, launcher=launcher, token=token)
        if not killed:
            raise SimError(f"the job ended before rank 0 logged {kill_after_step} steps")
        survivors = [r for r in results if r.node != kill_node]
        rejoined_rc = None
        if "proc" in rejoin:
            try:
                rejoined_rc = rejoin["proc"].wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(rejoin["proc"].pid, 9)
                rejoined_rc = rejoin["proc"].wait()
            rejoin["out"].seek(0)
            if rejoined_rc != 0:
                raise SimError(f"the node that came back exited {rejoined_rc}:\n{rejoin['out'].read()[-3000:]}")
        if any(r.rc != 0 for r in survivors):
            raise SimError("torchrun did not finish the job on the survivors:\n" + jobs.failure_text(survivors))
        restart = [t for t, step in start_lines(idx + ".rank0.txt") if t > killed["ns"]]
        first_step = first_step_time(idx + ".rank0.txt", restart[0]) if restart else None
        tally = tally_of(idx, samples, cfg["epochs"])
        return {
            "agent": "torchrun", "nodes": cluster.nodes, "ranks_per_node": cfg["ranks_per_node"],
            "group_size": cfg["group_size"], "mode": cfg["mode"], "layout": cfg["layout"],
            "epochs": cfg["epochs"], "batch_size": cfg["batch_size"], "job_timeout_s": cfg.get("job_timeout"),
            "killed_node": kill_node, "killed_after_step": kill_after_step, "checkpoint_every": checkpoint_every,
            "program": cfg.get("program", "train"), "fault": fault,
            "kill_to_restart_s": round((restart[0] - killed["ns"]) / 1e9, 2) if restart else None,
            "kill_to_first_step_s": round((first_step - killed["ns"]) / 1e9, 2) if first_step else None,
            "restarts": len(restart),
            "rejoined_after_steps": rejoin_after if "proc" in rejoin else None,
            "rejoin_to_restart_s": (round((min(t for t, _ in start_lines(idx + ".rank0.txt") if t > rejoin["ns"])
                                          - rejoin["ns"]) / 1e9, 2) if "proc" in rejoin else None),
            **tally_fields(tally),
        }
    finally:
        keep(work)
