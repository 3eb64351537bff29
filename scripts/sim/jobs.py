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
        self.out = []
        self.err = []


def launch(cluster, ddpio, nproc, argv, timeout=900, port=29500, env=None, echo=False):
    """Runs `ddpio launch ... -- argv` on every node; argv may hold {data} (the node's dataset
    path) and {node}. When one node's launcher fails the others are stopped (SIGTERM: each stops
    its ranks). Returns [NodeResult] in node order; a node past `timeout` is killed (rc -9)."""
    token = secrets.token_hex(16)
    procs, results, readers = [], [], []
    base_env = dict(os.environ, DDPIO_STORE_TOKEN=token, **(env or {}))
    base_env.pop("DDPIO_JOB_ID", None)
    for i in range(cluster.nodes):
        cmd = [a.replace("{data}", cluster.data_path(i) or "").replace("{node}", str(i)) for a in argv]
        full = [ddpio, "launch", "--nnodes", str(cluster.nodes), "--node-rank", str(i), "--nproc-per-node",
                str(nproc), "--master-addr", cluster.address(0), "--master-port", str(port), "--", *cmd]
        p = subprocess.Popen(cluster.node_command(i, full), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=base_env, start_new_session=True)
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
        failed = [p for p in procs if p.poll() not in (None, 0)]
        if failed and not stopping:
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
