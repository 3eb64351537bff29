"""Running one ddpio job across the simulated nodes: `ddpio launch --nnodes N --node-rank I` in
every node's namespace at once, as a real multi-node job is started (one launcher per node, one
shared DDPIO_STORE_TOKEN, rank 0's store on node 0's address)."""
import json
import os
import re
import secrets
import signal
import subprocess
import threading
import time

RANK_LINE = re.compile(r"^\[rank (\d+)\] (\{.*\})\s*$")


class NodeResult:
    def __init__(self, node):
        self.node = node
        self.rc = None
        self.end = None
        self.out = []
        self.err = []


def ddpio_launch(ddpio, nnodes, node_rank, nproc, master, port, cmd, address=None):
    """The per-node launcher command: `ddpio launch` (`address`: the node's own, unused)."""
    return [ddpio, "launch", "--nnodes", str(nnodes), "--node-rank", str(node_rank), "--nproc-per-node",
            str(nproc), "--master-addr", master, "--master-port", str(port), "--", *cmd]


def launch(cluster, ddpio, nproc, argv, timeout=900, port=29500, env=None, echo=False, nodes=None,
           watch=None, stop_on_failure=True, launcher=ddpio_launch, token=None):
    """Runs `ddpio launch ... -- argv` on every node (or on `nodes`, a list of node indices: the
    first serves rank 0); argv and the values of `env` may hold {data} (the node's dataset path,
    argv only) and {node}. When one
    node's launcher fails the others are stopped (SIGTERM: each stops its ranks) unless
    stop_on_failure is False. `launcher` builds each node's command (default `ddpio launch`;
    fault.py passes torchrun's elastic agent). `watch()`, when given, is called every poll (~0.2 s) while the job
    runs (fault injection). Returns [NodeResult] in the order of `nodes`, each with `end`, the
    monotonic time its launcher was seen to exit; a node past `timeout` is killed (rc -9)."""
    nodes = list(range(cluster.nodes)) if nodes is None else list(nodes)
    token = token or secrets.token_hex(16)  # DDPIO_STORE_TOKEN, the same on every node
    procs, results, readers = [], [], []
    base_env = dict(os.environ, DDPIO_STORE_TOKEN=token, **(env or {}))
    base_env.pop("DDPIO_JOB_ID", None)
    for node_rank, i in enumerate(nodes):
        cmd = [a.replace("{data}", cluster.data_path(i) or "").replace("{node}", str(i)) for a in argv]
        full = launcher(ddpio, len(nodes), node_rank, nproc, cluster.address(nodes[0]), port, cmd,
                        address=cluster.address(i))
        node_env = dict(base_env, **{k: str(v).replace("{node}", str(i)) for k, v in (env or {}).items()})
        p = subprocess.Popen(cluster.node_command(i, full), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=node_env, start_new_session=True)
        r = NodeResult(i)
        procs.append(p)
        results.append(r)
        for stream, sink, fd in ((p.stdout, r.out, 1), (p.stderr, r.err, 2)):
            t = threading.Thread(target=_pump, args=(stream, sink, i, fd if echo else 0), daemon=True)
            t.start()
            readers.append(t)
    deadline = time.monotonic() + timeout
    stopping = False
    while any(p.poll() is None for p in procs):
        now = time.monotonic()
        for p, r in zip(procs, results):
            if r.end is None and p.poll() is not None:
                r.end = now
        if watch is not None:
            watch()
        failed = [p for p in procs if p.poll() not in (None, 0)]
        if failed and not stopping and stop_on_failure:
            stopping = True
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGTERM)
            deadline = min(deadline, time.monotonic() + 15)
        if time.monotonic() > deadline:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
            break
        try:
            procs[[p.poll() for p in procs].index(None)].wait(timeout=0.2)
        except (subprocess.TimeoutExpired, ValueError):
            pass
    for p, r in zip(procs, results):
        r.rc = p.wait()
        r.end = r.end or time.monotonic()
    for t in readers:
        t.join(timeout=5)
    return results


def _pump(stream, sink, node, echo_fd):
    for line in stream:
        sink.append(line)
        if echo_fd:
            os.write(echo_fd, f"[node {node}] {line}".encode())


def rank_json(results):
    """{rank: the JSON object it printed} from every node's output."""
    out = {}
    for r in results:
        for line in r.out:
            m = RANK_LINE.match(line)
            if m:
                try:
                    out[int(m.group(1))] = json.loads(m.group(2))
                except json.JSONDecodeError:
                    pass
    return out


def failure_text(results, lines=12):
    bad = [r for r in results if r.rc != 0]
    parts = []
    for r in bad:
        tail = "".join(r.err[-lines:])
        parts.append(f"node {r.node} exited {r.rc}:\n{tail}")
    return "\n".join(parts)
