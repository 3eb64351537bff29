"""torch DDP fed by ddpio.Loader under torchrun's elastic agent: a node may die mid-epoch and the
job goes on as a smaller world (and grows back when it returns), resuming from its last
checkpoint with every sample of every epoch trained exactly once.

    torchrun --nnodes 2:3 --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint HOST:29400 \\
        --rdzv_id job1 --max_restarts 3 --redirects 1 --tee 1 \\
        examples/pytorch/train_elastic.py --data train.lmdb --group-size 2 \\
        --checkpoint-dir ck --checkpoint-every 20 --indices-out ck/indices

(--redirects 1 --tee 1: Debian 12's torchrun 1.13 fails on Python 3.11 without them.)

What makes the restart exact:
  - the checkpoint holds the model, the optimizer, the step and `loader.state_dict()` — where
    the job stands in the epoch's order, the same on every rank and valid for another world
    size; rank 0 writes it atomically (a temporary file, fsync, rename) after the step's
    all-reduce, so it is never half written and never ahead of a step every rank took;
  - on a restart every rank loads it; the loader continues the epoch's order from there on the
    new world, groups and leaders formed anew; a checkpoint of another dataset or other settings
    is refused, naming the difference;
  - `padding="mask"`: the sampler's padding is masked out of the loss, so no sample is trained
    twice in an epoch.
With --indices-out PREFIX each rank appends PREFIX.rank<R>.txt in `ddpio train --indices-out`'s
format (ddpio/trainer/index_log.h): scripts/tally-indices.py checks the whole run from them.

A rank that loses a peer fails within --timeout (the loader's sends and receives and the process
group's collectives) and exits 1 with an error naming what it was doing; torchrun's agent then
restarts the survivors.
"""
import argparse
import datetime
import hashlib
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import ddpio
import common

CHECKPOINT = "checkpoint.pt"
# What a checkpoint must agree on to be resumed from (the world size may differ).
SETTINGS = ("batch_size", "seed", "image_size", "group_size", "mode", "lr", "epochs")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--data", required=True, help="a dataset made by `ddpio convert` (path or s3:// URL)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--workers", type=int, default=1, help="decoding threads per rank")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--group-size", type=int, default=1, help="ranks per group: one reader each")
    p.add_argument("--mode", choices=["shard", "replicate"], default="shard")
    p.add_argument("--layout", choices=["contiguous", "strided"], default="contiguous")
    p.add_argument("--timeout", type=float, default=300,
                   help="seconds any one collective, send or receive may take (default 300)")
    p.add_argument("--checkpoint-dir", required=True, help="where checkpoint.pt is kept (resumed from if there)")
    p.add_argument("--checkpoint-every", type=int, default=50, help="optimizer steps between checkpoints")
    p.add_argument("--indices-out", default=None, help="PREFIX: each rank logs the indices it trained on")
    return p.parse_args()


def dataset_identity(path):
    """What names a dataset wherever it is mounted: its size, classes and payload (not its path)."""
    dataset = ddpio.Dataset(path)
    info, classes = dataset.info(), ",".join(dataset.classes)
    return {"size": info["size"], "payload_bytes": info["payload_bytes"],
            "classes": hashlib.sha1(classes.encode()).hexdigest()[:16]}


def settings_of(args, dataset):
    s = {k: getattr(args, k) for k in SETTINGS}
    s["dataset"] = dataset
    return s


def difference(saved, mine):
    """The first setting a checkpoint disagrees on, said, or None."""
    for key in sorted(set(saved) | set(mine)):
        if saved.get(key) != mine.get(key):
            return f"{key}: the checkpoint's {saved.get(key)!r}, this run's {mine.get(key)!r}"
    return None


def load_checkpoint(path, settings):
    if not os.path.exists(path):
        return None
    state = torch.load(path, map_location="cpu")
    diff = difference(state.get("settings", {}), settings)
    if diff is not None:
        raise SystemExit(f"train_elastic.py: error: {path} was written by another run ({diff}); "
                         "remove it or give another --checkpoint-dir")
    return state


def save_checkpoint(path, state):
    """Atomically: a reader sees the old checkpoint or the new one, never a mixture."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class IndexLog:
    """PREFIX.rank<R>.txt, `ddpio train --indices-out`'s format (ddpio/trainer/index_log.h)."""

    def __init__(self, prefix, rank):
        os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
        self.file = open(f"{prefix}.rank{rank}.txt", "a", encoding="ascii")
        self.rank = rank

    def start(self, attempt, world, replicas, epoch, step):
        self._write(f"start {time.time_ns()} attempt {attempt} world {world} rank {self.rank} "
                    f"replicas {replicas} epoch {epoch} step {step}")

    def step(self, epoch, step, indices):
        self._write(f"step {time.time_ns()} epoch {epoch} step {step} {len(indices)} "
                    + " ".join(map(str, indices)))

    def _write(self, line):
        self.file.write(line + "\n")
        self.file.flush()


def train(args, job):
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    torch.set_num_threads(1)
    loader = job["loader"] = ddpio.Loader(args.data, batch_size=args.batch_size, image_size=args.image_size, train=True,
                          workers=args.workers, group_size=args.group_size, mode=args.mode, layout=args.layout,
                          seed=args.seed, padding="mask", timeout=args.timeout)
    model = common.make_model(len(ddpio.Dataset(args.data).classes))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    path = os.path.join(args.checkpoint_dir, CHECKPOINT)
    settings = settings_of(args, dataset_identity(args.data))
    state = load_checkpoint(path, settings)
    step, epoch = 0, 0
    if state is not None:
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        loader.load_state_dict(state["loader"])
        step, epoch = state["step"], state["loader"]["epoch"]
    # The attempt's name, the same on every rank: rank 0's clock at its start.
    attempt = torch.tensor([time.time_ns()], dtype=torch.int64)
    dist.broadcast(attempt, 0)
    log = IndexLog(args.indices_out, rank) if args.indices_out else None
    replicas = args.group_size if args.mode == "replicate" else 1
    if log is not None:
        log.start(int(attempt.item()), world, replicas, epoch, step)
    if rank == 0:
        print(f"[train_elastic.py] world {world}, starting at epoch {epoch} step {step}"
              + (" (resumed)" if state is not None else ""), flush=True)
    loss_fn = nn.CrossEntropyLoss(reduction="none")
    model.train()
    for e in range(epoch, args.epochs):
        if e != epoch or state is None:
            loader.set_epoch(e)  # a resumed epoch continues where load_state_dict put it
        for batch in loader:
            valid = batch["valid"]
            if log is not None:
                # Before the gradients go into the all-reduce: a step that completed anywhere
                # was logged by every rank.
                log.step(e, step + 1, batch["indices"][valid].tolist())
            x, y = common.normalise(batch["images"]), batch["labels"]
            optimizer.zero_grad(set_to_none=True)
            # The mean over the step's valid samples on every rank: the sampler's padding (masked)
            # weighs nothing, whatever rank it falls on.
            count = valid.sum().to(torch.float64).reshape(1)
            dist.all_reduce(count)
            per_sample = loss_fn(model(x), y) * valid.to(torch.float32)
            loss = per_sample.sum() * (world / max(count.item(), 1.0))
            loss.backward()
            optimizer.step()
            step += 1
            if rank == 0 and step % args.checkpoint_every == 0:
                save_checkpoint(path, {"settings": settings, "step": step, "model": model.module.state_dict(),
                                       "optimizer": optimizer.state_dict(), "loader": loader.state_dict()})
        report = loader.report()  # collective: where the epoch's steps went, the slowest rank named
        if rank == 0:
            print(f"[train_elastic.py] epoch {e}: {report['line']}", flush=True)
    if rank == 0 and step % args.checkpoint_every != 0:
        # The end, so that running the job again finds it done.
        save_checkpoint(path, {"settings": settings, "step": step, "model": model.module.state_dict(),
                               "optimizer": optimizer.state_dict(), "loader": loader.state_dict()})
    digest = hashlib.sha1()
    for p in model.module.parameters():  # equal on every rank (not BatchNorm's running statistics)
        digest.update(p.detach().contiguous().numpy().tobytes())
    print(json.dumps({"rank": rank, "world_size": world, "steps": step, "epochs": args.epochs,
                      "param_checksum": digest.hexdigest()[:16], "counters": loader.counters()}), flush=True)
    loader.close()
    dist.barrier()
    dist.destroy_process_group()


def main():
    args = parse_args()
    if args.checkpoint_every < 1 or args.epochs < 1 or args.timeout <= 0:
        raise SystemExit("train_elastic.py: error: --checkpoint-every and --epochs must be at least 1, "
                         "--timeout positive")
    job = {}
    try:
        train(args, job)
    except (RuntimeError, ddpio.Error) as e:
        # A lost peer: the process group's collective or the loader's send or receive failed.
        # Exit 1, saying so and naming the ranks that vanished (the loader's census of the
        # job): torchrun's agent restarts the survivors.
        rank = os.environ.get("RANK", "?")
        said = str(e)
        if "loader" in job and "stopped answering" not in said and "the job's store (" not in said:
            try:
                line = job["loader"].census()["line"]
                said += f"; {line}" if line else ""
            except ddpio.Error:
                pass
        print(f"train_elastic.py: rank {rank}: error: {said}", file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
