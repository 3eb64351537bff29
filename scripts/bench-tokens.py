#!/usr/bin/env python3
"""Token batches: ddpio.Loader(seq_len=S) beside a peer shaped like Megatron-LM's GPTDataset, on
the same synthesised data.

  scripts/bench-tokens.py --dir /var/tmp/tokbench [--documents 1000000 --mean-length 1000]
                          [--seq-len 2048 --batch-size 8 --batches 300 --rounds 5]

Makes (once, kept in --dir): a flat uint16 token file of --documents documents (lengths drawn
around --mean-length, each ending in EOS 0; ~1 billion tokens by default), the ddpio token dataset
converted from it (`ddpio convert --from tokens`), and the same ids as a Megatron indexed dataset
(.bin / .idx, written as Megatron's _IndexWriter writes them). Then measures, interleaved A/B over
--rounds rounds, medians reported:
  - time to the first batch in a fresh process, index building included: ddpio (lengths from the
    dataset's metadata, torch.randperm document order, prefix sums) vs the peer (numpy memmap of
    .bin/.idx, document shuffle, sample index by cumsum and searchsorted, sample shuffle, a torch
    DataLoader with 2 workers);
  - tokens/s over --batches batches: ddpio.Loader (its fill thread) vs the peer's DataLoader
    (2 worker processes), and the ceiling: the same windows sliced from a numpy memmap of the flat
    file in one thread, no loader (what reading the bytes costs).
Prints a JSON line per measurement and a Markdown table. Needs numpy and torch.
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time

import numpy as np

EOS = 0


def synthesise(d, documents, mean_length, seed=1):
    flat = os.path.join(d, "flat.bin")
    lengths_path = os.path.join(d, "lengths.npy")
    if os.path.exists(flat) and os.path.exists(lengths_path):
        return flat, np.load(lengths_path)
    rng = np.random.default_rng(seed)
    lengths = np.maximum(1, rng.lognormal(np.log(mean_length) - 0.5, 1.0, documents)).astype(np.int64)
    lengths = np.minimum(lengths, 200000)
    total = int(lengths.sum())
    print(f"synthesising {documents} documents, {total} tokens", file=sys.stderr, flush=True)
    ids = np.empty(total, np.uint16)
    chunk = 1 << 26
    for at in range(0, total, chunk):
        n = min(chunk, total - at)
        ids[at:at + n] = rng.integers(1, 32000, n, dtype=np.uint16)
    ends = np.cumsum(lengths)
    ids[ends - 1] = EOS  # each document's last id
    ids.tofile(flat)
    np.save(lengths_path, lengths)
    return flat, lengths


def write_megatron(d, flat, lengths):
    prefix = os.path.join(d, "megatron_text_document")
    if os.path.exists(prefix + ".idx"):
        return prefix
    os.link(flat, prefix + ".bin") if not os.path.exists(prefix + ".bin") else None
    pointers = np.zeros(len(lengths), np.int64)
    pointers[1:] = np.cumsum(lengths[:-1] * 2)
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", 8))  # uint16
        f.write(struct.pack("<Q", len(lengths)))
        f.write(struct.pack("<Q", len(lengths) + 1))
        f.write(lengths.astype(np.int32).tobytes())
        f.write(pointers.tobytes())
        f.write(np.arange(len(lengths) + 1, dtype=np.int64).tobytes())
    return prefix


PEER = r'''
import struct, sys, time
import numpy as np
import torch
import torch.utils.data


class GPTLike(torch.utils.data.Dataset):
    """Megatron's GPTDataset, reduced to what it does per sample: a shuffled document order, a
    sample index of (document position, offset) per sample start, a shuffled sample order, and
    each sample's S + 1 ids gathered from the memory-mapped .bin."""

    def __init__(self, prefix, seq_len, seed):
        idx = np.memmap(prefix + ".idx", mode="r", dtype=np.uint8)
        count = struct.unpack("<Q", bytes(idx[18:26]))[0]
        self.sizes = np.frombuffer(idx, np.int32, count, 34)
        self.pointers = np.frombuffer(idx, np.int64, count, 34 + 4 * count)
        self.bin = np.memmap(prefix + ".bin", mode="r", dtype=np.uint16)
        rng = np.random.RandomState(seed)
        self.doc_idx = rng.permutation(count).astype(np.int32)
        cum = np.cumsum(self.sizes[self.doc_idx], dtype=np.int64)
        n = int((cum[-1] - 1) // seq_len)
        starts = np.arange(n + 1, dtype=np.int64) * seq_len
        self.pos = np.searchsorted(cum, starts, side="right")
        self.off = starts - (cum[self.pos] - self.sizes[self.doc_idx[self.pos]])
        self.shuffle_idx = rng.permutation(n)
        self.seq_len = seq_len

    def __len__(self):
        return len(self.shuffle_idx)

    def __getitem__(self, i):
        j = self.shuffle_idx[i]
        p, o = self.pos[j], self.off[j]
        need, parts = self.seq_len + 1, []
        while need > 0:
            d = self.doc_idx[p]
            start = self.pointers[d] // 2 + o
            take = min(need, int(self.sizes[d]) - o)
            parts.append(self.bin[start:start + take])
            need -= take
            p, o = p + 1, 0
        window = torch.from_numpy(np.concatenate(parts).astype(np.int64))
        return {"tokens": window[:-1], "labels": window[1:]}


def loader(prefix, seq_len, batch, seed):
    return torch.utils.data.DataLoader(GPTLike(prefix, seq_len, seed), batch_size=batch, num_workers=2,
                                       persistent_workers=False)
'''

# Both print the seconds from after the imports (torch's among them) to the first batch.
FIRST_DDPIO = r'''
import sys, time
import torch
import ddpio
t = time.perf_counter()
loader = ddpio.Loader(sys.argv[1], batch_size=int(sys.argv[3]), seq_len=int(sys.argv[2]), seed=7)
batch = next(iter(loader))
print(time.perf_counter() - t)
'''

FIRST_PEER = r'''
import sys, time
''' + PEER + r'''
t = time.perf_counter()
batch = next(iter(loader(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), 7)))
print(time.perf_counter() - t)
'''

RATE = r'''
import sys, time
import numpy as np
kind, path, seq_len, batch, batches = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
''' + PEER + r'''
if kind == "ddpio":
    import ddpio
    it = iter(ddpio.Loader(path, batch_size=batch, seq_len=seq_len, seed=7))
elif kind == "peer":
    it = iter(loader(path, seq_len, batch, 7))
else:  # the ceiling: the same windows sliced from a memmap of the flat file, one thread
    flat = np.memmap(path, mode="r", dtype=np.uint16)
    n = (len(flat) - 1) // seq_len
    order = np.random.RandomState(7).permutation(n)
    def windows():
        at = 0
        while True:
            rows = order[at:at + batch]
            at += batch
            out = np.empty((batch, seq_len + 1), np.int64)
            for r, k in enumerate(rows):
                out[r] = flat[k * seq_len:(k + 1) * seq_len + 1]
            yield out
    it = windows()
next(it)  # started (workers up, first batch) before the clock
t = time.perf_counter()
for _ in range(batches):
    next(it)
print(batches * batch * seq_len / (time.perf_counter() - t))
'''


def run(code, *args, env=None):
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                         env=env, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"bench-tokens: a measurement failed:\n{out.stderr}")
    return float(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", required=True)
    p.add_argument("--documents", type=int, default=1_000_000)
    p.add_argument("--mean-length", type=int, default=1000)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--batches", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--program", default=os.environ.get("DDPIO_PROGRAM", "ddpio"))
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    flat, lengths = synthesise(a.dir, a.documents, a.mean_length)
    prefix = write_megatron(a.dir, flat, lengths)
    ds = os.path.join(a.dir, "ddpio.tok")
    if not os.path.exists(ds):
        t = time.perf_counter()
        subprocess.run([a.program, "convert", "--from", "tokens", "--src", flat, "--dtype", "uint16", "--eos",
                        str(EOS), "--out", ds, "--quiet"], check=True)
        seconds = time.perf_counter() - t
        print(json.dumps({"convert_seconds": seconds, "tokens": int(lengths.sum()),
                          "documents": len(lengths), "tokens_per_s": lengths.sum() / seconds}), flush=True)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    first = {"ddpio": [], "peer": []}
    rate = {"ddpio": [], "peer": [], "ceiling": []}
    for r in range(a.rounds):
        first["ddpio"].append(run(FIRST_DDPIO, ds, a.seq_len, a.batch_size, env=env))
        first["peer"].append(run(FIRST_PEER, prefix, a.seq_len, a.batch_size, env=env))
        for kind, path in (("ddpio", ds), ("peer", prefix), ("ceiling", flat)):
            rate[kind].append(run(RATE, kind, path, a.seq_len, a.batch_size, a.batches, env=env))
        print(json.dumps({"round": r, "first_batch_s": {k: v[-1] for k, v in first.items()},
                          "tokens_per_s": {k: v[-1] for k, v in rate.items()}}), flush=True)
    med = {k: statistics.median(v) for k, v in rate.items()}
    paired = statistics.median(d / p for d, p in zip(rate["ddpio"], rate["peer"]))
    print(f"\n{len(lengths):,} documents, {int(lengths.sum()):,} tokens; seq_len {a.seq_len}, batch {a.batch_size}; "
          f"medians of {a.rounds} interleaved rounds\n")
    print("| | ddpio.Loader | Megatron-like peer (DataLoader, 2 workers) | ceiling (memmap slices, 1 thread) |")
    print("|---|---|---|---|")
    print(f"| time to first batch (s), fresh process, after imports | {statistics.median(first['ddpio']):.2f} | "
          f"{statistics.median(first['peer']):.2f} | — |")
    print(f"| tokens/s (M) | {med['ddpio'] / 1e6:.1f} | {med['peer'] / 1e6:.1f} | {med['ceiling'] / 1e6:.1f} |")
    print(f"\nddpio / peer, paired per round: {paired:.2f}x; ddpio / ceiling: {med['ddpio'] / med['ceiling']:.2f}")


if __name__ == "__main__":
    main()
