"""A tiny GPT-style language model trained on a mixture of two token datasets with ddpio.Loader,
under torchrun, with tensor-parallel groups simulated by groups of ranks.

    torchrun --nproc_per_node 4 examples/pytorch/train_gpt_tp.py \\
        --data wiki.tok:0.7 --data code.tok:0.3 --seq-len 64 --tp-size 2 --out run

Each group of --tp-size consecutive ranks plays one tensor-parallel group: its first rank reads
the datasets and ddpio broadcasts every batch to the others (Gloo on CPU), so a group's ranks hold
identical batches — this script checks it on every step (an all-gather of a digest of the batch
within the group) — while the data-parallel groups get disjoint sequences. The model itself is
data-parallel over all ranks (DistributedDataParallel): real tensor parallelism would shard its
layers over the group; what the data loader owes it, identical batches, is the same.

Writes OUT/rank{R}.json: the sequences (indices, sources) each step trained on, the digests, the
losses and the loader's counters.
"""
import argparse
import hashlib
import json
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import ddpio


class TinyGPT(nn.Module):
    """Token and position embeddings, causal self-attention blocks, a vocabulary head."""

    def __init__(self, vocab, seq_len, dim=64, heads=4, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq_len, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)
        self.register_buffer("causal", torch.triu(torch.full((seq_len, seq_len), float("-inf")), 1))

    def forward(self, tokens, position_ids):
        x = self.tok(tokens) + self.pos(position_ids)
        s = tokens.shape[1]
        x = self.blocks(x, mask=self.causal[:s, :s])
        return self.head(self.norm(x))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", action="append", required=True, help="DATASET:WEIGHT (repeat to mix)")
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--tp-size", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vocab", type=int, default=0,
                   help="vocabulary size (default: the datasets' own, recorded by a SentencePiece conversion)")
    p.add_argument("--out", required=True)
    return p.parse_args()


def main():
    args = parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    paths, weights = zip(*((d.rsplit(":", 1)[0], float(d.rsplit(":", 1)[1])) for d in args.data))
    loader = ddpio.Loader(list(paths), batch_size=args.batch_size, seq_len=args.seq_len, weights=list(weights),
                          seed=args.seed, tp_size=args.tp_size)
    vocab = args.vocab or max(ddpio.Dataset(p).info().get("vocab_size") or 0 for p in paths)
    if vocab == 0:
        raise SystemExit("the datasets do not record their vocabulary size: give --vocab")
    torch.manual_seed(args.seed)  # the same initial model on every rank
    model = nn.parallel.DistributedDataParallel(TinyGPT(vocab, args.seq_len))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    group_first = rank - rank % args.tp_size
    tp_group = [dist.new_group(list(range(g, g + args.tp_size)))
                for g in range(0, dist.get_world_size(), args.tp_size)][rank // args.tp_size]
    record = {"rank": rank, "reader": loader.is_reader, "steps": []}
    step, epoch = 0, 0
    while step < args.steps:
        loader.set_epoch(epoch)
        for batch in loader:
            if step == args.steps:
                break
            digest = hashlib.sha1(batch["tokens"].numpy().tobytes() + batch["labels"].numpy().tobytes()
                                  + batch["indices"].numpy().tobytes()).digest()[:8]
            mine = torch.tensor(list(digest), dtype=torch.int64)
            theirs = [torch.zeros_like(mine) for _ in range(args.tp_size)]
            dist.all_gather(theirs, mine, group=tp_group)
            if any(not torch.equal(t, mine) for t in theirs):
                raise RuntimeError(f"rank {rank}: the tensor-parallel group starting at {group_first} "
                                   "got different batches")
            logits = model(batch["tokens"], batch["position_ids"])
            per_token = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), reduction="none")
            mask = batch["loss_mask"].flatten()
            loss = (per_token * mask).sum() / mask.sum().clamp(min=1)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            record["steps"].append({"epoch": epoch, "indices": batch["indices"].tolist(),
                                    "source": batch["source"].tolist(), "digest": digest.hex(),
                                    "loss": float(loss), "valid": batch["loss_mask"].amax(1).tolist()})
            if rank == 0 and step % 5 == 0:
                print(f"step {step} loss {float(loss):.3f} (ln vocab {math.log(vocab):.3f})", flush=True)
            step += 1
        epoch += 1
    record["counters"] = loader.counters()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
