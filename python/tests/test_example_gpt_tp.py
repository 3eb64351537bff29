"""examples/pytorch/train_gpt_tp.py under torchrun: 4 ranks in tensor-parallel groups of 2 train a
tiny GPT on a mixture of two token datasets (real text tokenized with SentencePiece). Each group's
ranks get identical batches (the script checks every step; the test checks the records), only the
groups' first ranks read, the two data-parallel groups get disjoint sequences, and both datasets
are drawn."""
import glob
import json
import os
import socket
import subprocess
import sys

import pytest

import ddpio

sentencepiece = pytest.importorskip("sentencepiece")

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch", "train_gpt_tp.py")
WORLD, TP, STEPS = 4, 2, 12


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mixture(tmp_path_factory):
    d = tmp_path_factory.mktemp("gpt")
    files = sorted(glob.glob("/usr/share/doc/*/copyright"))
    halves = (files[:60], files[60:120])
    texts = []
    for part, name in zip(halves, ("a", "b")):
        with open(d / f"{name}.jsonl", "w", encoding="utf-8") as out:
            for f in part:
                with open(f, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                texts.append(text)
                out.write(json.dumps({"text": text}) + "\n")
    (d / "train.txt").write_text("\n".join(texts), encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(input=str(d / "train.txt"), model_prefix=str(d / "m"),
                                             vocab_size=300, minloglevel=2, num_threads=2)
    for name in ("a", "b"):
        ddpio.convert(d / f"{name}.jsonl", d / f"{name}.tok", source="jsonl", tokenizer=d / "m.model")
    return d


def test_tensor_parallel_groups_train_on_identical_batches_of_a_mixture(mixture, tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--rdzv_backend", "c10d",
               "--rdzv_endpoint", f"127.0.0.1:{free_port()}", "--nproc_per_node", str(WORLD),
               "--redirects", "1", "--tee", "1", os.path.abspath(SCRIPT),
               "--data", f"{mixture / 'a.tok'}:0.7", "--data", f"{mixture / 'b.tok'}:0.3",
               "--seq-len", "32", "--batch-size", "4", "--tp-size", str(TP), "--steps", str(STEPS),
               "--out", str(out)]
    env = dict(os.environ)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(ddpio.__file__)))
    env["OMP_NUM_THREADS"] = "1"
    run = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    records = [json.load(open(out / f"rank{r}.json")) for r in range(WORLD)]
    assert [r["reader"] for r in records] == [True, False, True, False]
    for first in range(0, WORLD, TP):
        group = records[first:first + TP]
        for other in group[1:]:
            assert [s["digest"] for s in other["steps"]] == [s["digest"] for s in group[0]["steps"]]
            assert [s["indices"] for s in other["steps"]] == [s["indices"] for s in group[0]["steps"]]
    # The data-parallel groups: disjoint sequences within each epoch, both datasets drawn.
    for epoch in {s["epoch"] for s in records[0]["steps"]}:
        a = {i for s in records[0]["steps"] if s["epoch"] == epoch for i, v in zip(s["indices"], s["valid"]) if v}
        b = {i for s in records[2]["steps"] if s["epoch"] == epoch for i, v in zip(s["indices"], s["valid"]) if v}
        assert not a & b
    sources = [x for r in records for s in r["steps"] for x in s["source"]]
    assert 0 in sources and 1 in sources
    assert len(records[0]["steps"]) == STEPS
