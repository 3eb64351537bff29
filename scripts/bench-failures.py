#!/usr/bin/python3
"""Time to exit when a rank dies or stalls, without a launcher to clean up after it.

Starts 4 ranks of `ddpio train` (or `ddpio bench feed`) as separate processes, the way srun or
mpirun leave them (no `ddpio launch` stopping the rest), with --timeout T. Mid-epoch one rank is
killed (SIGKILL) or stalled (SIGSTOP); the script records when every other rank exits, and with
what. The goal (docs/RELIABILITY.md): every surviving rank exits within T + 5 s, with exit code 1
and a message naming what happened.

Usage: scripts/bench-failures.py --data DB [--timeout 10] [--job train|feed] [--ddpio PATH]
Prints a table and, with --json, one JSON line per scenario.
"""
import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(args, world, port, token):
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   DDPIO_STORE_TOKEN=token, DDPIO_JOB_ID="failures")
        if args.job == "train":
            cmd = [args.ddpio, "train", "--data", args.data, "--epochs", "50", "--batch-size", "16",
                   "--image-size", "32", "--group-size", "2", "--workers", "1", "--timeout", str(args.timeout)]
        else:
            # No ceiling rounds: the fault lands while the groups feed, as it did when this was measured.
            cmd = [args.ddpio, "bench", "feed", "--data", args.data, "--epochs", "20000", "--batch-size", "16",
                   "--image-size", "32", "--group-size", "2", "--workers", "1", "--ceiling-images", "0",
                   "--timeout", str(args.timeout)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    return procs


def scenario(args, victim, how):
    world = 4
    procs = start(args, world, free_port(), secrets.token_hex(8))
    time.sleep(args.warmup)  # let the job reach the middle of an epoch (measurement, not sync)
    if any(p.poll() is not None for p in procs):
        errs = [p.stderr.read() for p in procs if p.poll() is not None]
        raise SystemExit(f"a rank ended before the fault: {errs}")
    t0 = time.monotonic()
    os.kill(procs[victim].pid, signal.SIGKILL if how == "kill" else signal.SIGSTOP)
    exits = {}
    limit = t0 + args.timeout * 6 + 60
    while len(exits) < world - 1 and time.monotonic() < limit:
        for r, p in enumerate(procs):
            if r != victim and r not in exits and p.poll() is not None:
                exits[r] = (time.monotonic() - t0, p.returncode)
        time.sleep(0.02)
    for r, p in enumerate(procs):
        if p.poll() is None:
            p.kill()
        p.wait()
    messages = {}
    for r, p in enumerate(procs):
        if r == victim:
            continue
        err = p.stderr.read().strip().splitlines()
        messages[r] = next((l for l in reversed(err) if "error" in l), err[-1] if err else "")
    return {"victim": victim, "fault": "SIGKILL" if how == "kill" else "SIGSTOP", "timeout_s": args.timeout,
            "exits": {str(r): {"seconds": round(s, 2), "code": c} for r, (s, c) in exits.items()},
            "hung": [r for r in range(world) if r != victim and r not in exits],
            "messages": {str(r): m[:200] for r, m in messages.items()}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--timeout", type=int, default=10)
    ap.add_argument("--job", choices=["train", "feed"], default="train")
    ap.add_argument("--warmup", type=float, default=4.0, help="seconds before the fault")
    ap.add_argument("--ddpio", default=os.path.join(REPO, "build", "release", "tools", "ddpio"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    print(f"{args.job}, 4 ranks in groups of 2, --timeout {args.timeout}: seconds from the fault to each "
          f"surviving rank's exit (goal <= {args.timeout + 5})")
    print(f"{'fault':8} {'rank':>4} | " + " | ".join(f"rank {r}" for r in range(4)) + " | within goal")
    for victim in (1, 0):
        for how in ("kill", "stop"):
            rec = scenario(args, victim, how)
            cells = []
            for r in range(4):
                e = rec["exits"].get(str(r))
                cells.append("(fault)" if r == victim else ("HUNG" if e is None else f"{e['seconds']:5.1f} s ({e['code']})"))
            worst = max([e["seconds"] for e in rec["exits"].values()] or [1e9])
            ok = not rec["hung"] and worst <= args.timeout + 5
            print(f"{rec['fault']:8} {victim:>4} | " + " | ".join(cells) + f" | {'yes' if ok else 'NO'}")
            if args.json:
                print(json.dumps(rec))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
