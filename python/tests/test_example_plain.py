"""examples/pytorch/train_plain.py — a script written the way PyTorch users write one — runs
unchanged under torchrun: interrupted mid-epoch (its `finally` saves the checkpoint), restarted
(it resumes), and over both runs every rank trained on exactly its torch DistributedSampler share
of every epoch, in order, none lost and none repeated; validation with padding="mask" saw every
sample exactly once."""
import glob
import json
import os
import socket
import subprocess
import sys

import torch.utils.data

import ddpio

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch", "train_plain.py")
WORLD, EPOCHS, BATCH = 2, 2, 8


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(args, cwd):
    # --standalone's c10d rendezvous, on a free port instead of its fixed 29400 (tests run beside
    # each other).
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--rdzv_backend", "c10d",
               "--rdzv_endpoint", f"127.0.0.1:{free_port()}", "--nproc_per_node", str(WORLD),
               "--redirects", "1", "--tee", "1", os.path.abspath(SCRIPT), *args]
    env = dict(os.environ)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    # The package under test, whatever the working directory.
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(ddpio.__file__)))
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


def test_the_plain_script_is_interrupted_resumes_and_trains_on_every_sample_once(dataset_96px, dataset, tmp_path):
    out = tmp_path / "run"
    common = ["--data", str(dataset_96px), "--val", str(dataset), "--out", str(out), "--epochs", str(EPOCHS),
              "--batch-size", str(BATCH)]
    first = torchrun(common + ["--interrupt-at", "9"], tmp_path)  # mid-epoch 1 (7 steps an epoch)
    assert first.returncode != 0, first.stdout
    assert "KeyboardInterrupt: interrupted at step 9" in first.stdout + first.stderr
    assert (out / "checkpoint.pt").exists(), "the finally did not save the checkpoint"
    second = torchrun(common, tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    # (torchrun's --tee prefixes each line with the rank: the JSON starts at its brace)
    summary = json.loads(next(line[line.index("{"):] for line in reversed(second.stdout.splitlines())
                              if '{"world_size"' in line))
    n, n_val = len(ddpio.Dataset(dataset_96px)), len(ddpio.Dataset(dataset))
    assert summary["val_exact_once"] and summary["val_images"] == n_val, summary
    assert summary["resumed_from_epoch"] == 1 and summary["steps"] == 2 * 7, summary
    for rank in range(WORLD):
        trained = {e: [] for e in range(EPOCHS)}
        labels = []
        for path in sorted(glob.glob(str(out / f"rank{rank}-from*.json")), key=os.path.getmtime):
            record = json.loads(open(path).read())
            for epoch, indices, batch_labels in zip(record["epochs"], record["indices"], record["labels"]):
                trained[epoch] += indices
                labels += list(zip(indices, batch_labels))
        for epoch in range(EPOCHS):
            sampler = torch.utils.data.DistributedSampler(range(n), num_replicas=WORLD, rank=rank, seed=0)
            sampler.set_epoch(epoch)
            assert trained[epoch] == list(sampler), f"rank {rank} epoch {epoch}"
        ds = ddpio.Dataset(dataset_96px)
        assert all(ds[i][1] == label for i, label in labels)
