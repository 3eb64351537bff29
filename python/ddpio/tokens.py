"""Token batches for language models: ddpio.Loader(path, batch_size, seq_len=S) over a token dataset.

The dataset's documents, in an order drawn per epoch as torch.randperm(documents) seeded with
seed + epoch (or as stored with shuffle=False), are concatenated into one stream and cut into
sequences of S + 1 ids (Megatron-LM's GPTDataset convention): `tokens` are a sequence's first S,
`labels` its last S. A sequence's content depends on (dataset, seq_len, seed, epoch, shuffle)
only, so the sequences are dealt to ranks like any samples by ddpio.DistributedSampler: exactly
once per epoch (padding="mask" flags the duplicates that even out ranks: their loss_mask is 0),
and resumable mid-epoch with another world size (state_dict / load_state_dict).

A batch is a dict of torch tensors (numpy arrays with arrays="numpy"), shared with the arrays the
core filled (torch.from_numpy: no copy):
  tokens, labels          int64 [B, S]
  position_ids            int64 [B, S]: 0 at each sequence's start and at each document start
  document_ids            int64 [B, S]: 0, 1, ... per document piece of a sequence
  loss_mask               float32 [B, S]: 1, and 0 on a padding sequence
  cu_seqlens              int32 [pieces + 1]: the pieces' boundaries over the batch's B * S
                          tokens flattened, as flash attention's variable-length kernels take them
  max_seqlen              int: the longest piece
  indices                 int64 [B]: which sequences of the epoch
  source                  int64 [B]: which dataset each sequence is from

Tensor- (or context-) parallel groups, whose ranks must all train on the same batch: tp_size=T
(groups of T consecutive ranks of torch.distributed's world) or device_mesh=a DeviceMesh with "dp"
and "tp" dimensions. Each group's first rank reads and broadcasts every batch to the others (Gloo,
or the mesh's NCCL group on GPUs); the data-parallel ranks (groups) get disjoint sequences.

Several datasets mix by weight: ddpio.Loader([a, b], weights=[0.7, 0.3], seq_len=S). Position n of
an epoch takes the dataset whose share lags its weight most (weight x (n + 1) - taken; Megatron's
rule weighs max(n, 1)), so every prefix of the stream holds each within a sequence or two of its
weight; a dataset asked for more
than it holds starts another shuffled pass of itself (loader/token_mixture.h). An epoch has the
datasets' sequences added up (sequences_per_epoch= to choose).
"""
import collections
import concurrent.futures
import os
import warnings

from ddpio import _ddpio
from ddpio.dataset import dataset_location
from ddpio.sampler import DistributedSampler

_STATE_VERSION = 1


class TokenLoader:
    """Batches of packed sequences of a token dataset (see the module's docstring). Made by
    ddpio.Loader(path, batch_size, seq_len=S, ...), or directly."""

    def __init__(self, path, batch_size=1, shuffle=True, *, seq_len, weights=None, seed=0, drop_last=False,
                 padding=None, num_replicas=None, rank=None, prefetch=2, arrays="torch",
                 sequences_per_epoch=0, tp_size=None, device_mesh=None):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, not {batch_size!r}")
        if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len < 1:
            raise ValueError(f"seq_len must be a positive int, not {seq_len!r}")
        if arrays not in ("torch", "numpy"):
            raise ValueError(f"arrays must be 'torch' or 'numpy', not {arrays!r}")
        if not isinstance(prefetch, int) or prefetch < 1:
            raise ValueError(f"prefetch must be a positive int, not {prefetch!r}")
        if padding is None:
            padding = "drop" if drop_last else "mask"
        paths = list(path) if isinstance(path, (list, tuple)) else [path]
        if not paths:
            raise ValueError("no dataset given")
        if weights is None:
            weights = [1.0] * len(paths)
        weights = [float(w) for w in weights]
        if len(weights) != len(paths):
            raise ValueError(f"{len(paths)} datasets but {len(weights)} weights")
        self.paths = [dataset_location(p) for p in paths]
        self.path = self.paths[0] if len(self.paths) == 1 else self.paths
        self.weights = weights
        self.batch_size = batch_size
        self.seq_len = seq_len
        self.shuffle = bool(shuffle)
        self.seed = seed
        self.drop_last = bool(drop_last)
        self._arrays = arrays
        self._prefetch = prefetch
        self._sequences = _ddpio.TokenSequences([os.fsdecode(p) for p in self.paths], weights, seq_len,
                                                seed % (1 << 64), self.shuffle, sequences_per_epoch)
        self._tp = _TensorParallel.make(tp_size, device_mesh, num_replicas, rank)
        if self._tp is not None:
            if arrays != "torch":
                raise ValueError("tensor-parallel groups send torch tensors: arrays='torch'")
            num_replicas, rank = self._tp.dp_size, self._tp.dp_rank
        # The sequences are already in the epoch's shuffled order: the sampler deals them out (to
        # data-parallel ranks: a tensor-parallel group's members get the same).
        # (It never shuffles, so which permutation it would use does not matter: say one, so that
        # it does not ask torch which one a large epoch takes.)
        self.sampler = DistributedSampler(len(self._sequences), num_replicas=num_replicas, rank=rank,
                                          shuffle=False, seed=0, padding=padding, permutation="torch")
        self.sequences_per_epoch = len(self._sequences)
        self._identities = [self._sequences.source_identity(d) for d in range(self._sequences.sources)]
        self._batches_seen = 0
        self._sequences_seen = 0
        self._tokens_seen = 0
        self._per_source = [0] * self._sequences.sources
        self._finished = None  # the last epoch iterated to its end

    @property
    def is_reader(self):
        """Whether this rank reads the dataset (not a tensor-parallel peer fed by its group's)."""
        return self._tp is None or self._tp.is_leader

    @property
    def epoch(self):
        return self.sampler.epoch

    def set_epoch(self, epoch):
        self.sampler.set_epoch(epoch)
        self._batches_seen = 0

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def counters(self):
        """What this loader has handed out, and the dataset's size."""
        s = self._sequences
        return {"sequences_per_epoch": len(s), "batches": self._batches_seen,
                "sequences": self._sequences_seen, "tokens": self._tokens_seen,
                "sources": [{"path": p, "weight": w, "documents": s.source_documents(d),
                             "tokens": s.source_tokens(d), "sequences_per_pass": s.source_sequences(d),
                             "sequences": self._per_source[d]}
                            for d, (p, w) in enumerate(zip(self.paths, self.weights))]}

    def _fill(self, epoch, indices, padding):
        import numpy as np
        b, s = len(indices), self.seq_len
        out = {
            "tokens": np.empty((b, s), np.int64), "labels": np.empty((b, s), np.int64),
            "position_ids": np.empty((b, s), np.int64), "document_ids": np.empty((b, s), np.int64),
            "loss_mask": np.empty((b, s), np.float32),
        }
        cu = np.empty(b * s + 1, np.int32)
        source = np.empty(b, np.int64)
        idx = np.ascontiguousarray(indices, dtype=np.uint64)
        valid = np.ascontiguousarray(~padding, dtype=np.bool_)
        count, longest = self._sequences.fill(epoch % (1 << 64), idx, valid, out["tokens"], out["labels"], out["position_ids"],
                                              out["document_ids"], out["loss_mask"], cu, source)
        out["cu_seqlens"] = cu[:count]
        out["max_seqlen"] = int(longest)
        out["indices"] = idx.astype(np.int64)
        out["source"] = source
        return out

    def _convert(self, batch):
        if self._arrays == "numpy":
            return batch
        import torch
        return {k: (torch.from_numpy(v) if not isinstance(v, int) else v) for k, v in batch.items()}

    def _count(self, item):
        self._batches_seen += 1
        self._sequences_seen += len(item["indices"])
        self._tokens_seen += int(item["loss_mask"].sum())
        for d in item["source"].tolist():
            self._per_source[d] += 1

    def __iter__(self):
        # The epoch is the one set when the iteration starts: a set_epoch meanwhile is for the next.
        epoch = self.sampler.epoch
        if self.shuffle and self._finished == epoch:
            warnings.warn(f"ddpio.Loader: epoch {epoch} is iterated again with the same document order; call "
                          "loader.set_epoch(epoch) before each epoch, or every epoch sees the same sequences",
                          stacklevel=2)
        if self._tp is not None and not self._tp.is_leader:
            for item in self._tp.receive(epoch):
                self._count(item)
                yield item
            return
        for number, item in enumerate(self._read(epoch)):
            if self._tp is not None:
                self._tp.send(item, epoch, number)
            self._count(item)
            yield self._convert(item)
        self._finished = epoch
        if self._tp is not None:
            self._tp.finish(epoch)

    def _read(self, epoch):
        indices, padding = self.sampler.stream()
        cut = len(indices) - len(indices) % self.batch_size if self.drop_last else len(indices)
        starts = iter(range(0, cut, self.batch_size))
        # One filling thread, prefetch batches ahead. An executor's thread is joined when the
        # interpreter exits (after at most the fill it is in), so a loop that stops early never
        # leaves a thread inside the core at shutdown.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ddpio-tokens") as pool:
            pending = collections.deque()

            def submit_next():
                at = next(starts, None)
                if at is not None:
                    end = min(at + self.batch_size, cut)
                    pending.append(pool.submit(self._fill, epoch, indices[at:end], padding[at:end]))

            for _ in range(self._prefetch):
                submit_next()
            try:
                while pending:
                    try:
                        item = pending.popleft().result()
                    except BaseException:
                        if self._tp is not None:
                            self._tp.fail(epoch)
                        raise
                    submit_next()
                    yield item
            finally:
                for future in pending:
                    future.cancel()

    def state_dict(self):
        """Where to resume: the epoch and the sequences this rank has trained on in it."""
        seen = min(self._batches_seen * self.batch_size, len(self.sampler))
        return {"version": _STATE_VERSION, "seq_len": self.seq_len, "seed": self.seed,
                "shuffle": self.shuffle, "weights": self.weights, "datasets": self._identities,
                "sequences_per_epoch": self.sequences_per_epoch,
                "sampler": self.sampler.state_dict(samples_seen=seen)}

    def load_state_dict(self, state):
        """Resumes mid-epoch, also with another number of ranks: the epoch's remaining sequences
        are dealt to this loader's ranks once each."""
        if state.get("version") != _STATE_VERSION:
            raise ValueError(f"unknown token loader state version {state.get('version')!r}")
        mine = {"seq_len": self.seq_len, "seed": self.seed, "shuffle": self.shuffle, "weights": self.weights,
                "datasets": self._identities, "sequences_per_epoch": self.sequences_per_epoch}
        for key, value in mine.items():
            if state.get(key) != value:
                raise ValueError(f"the saved state has {key}={state.get(key)!r}, this loader {value!r}: "
                                 "its sequences are other ones")
        self.sampler.load_state_dict(state["sampler"])
        self._batches_seen = 0

    def __repr__(self):
        return (f"ddpio.TokenLoader({self.path!r}, batch_size={self.batch_size}, seq_len={self.seq_len}, "
                f"{len(self._sequences)} sequences an epoch)")


_INT_FIELDS = ("tokens", "labels", "position_ids", "document_ids", "loss_mask")


class _TensorParallel:
    """A tensor-parallel group: its first rank reads, the others receive each batch from it over a
    Gloo process group of the group's ranks (torch.distributed.broadcast), so every member trains on
    the same batch and the storage is read once per group."""

    @staticmethod
    def make(tp_size, device_mesh, num_replicas, rank):
        if tp_size is None and device_mesh is None:
            return None
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError("tensor-parallel groups (tp_size, device_mesh) need torch.distributed initialised")
        if num_replicas is not None or rank is not None:
            raise ValueError("give tp_size or device_mesh, or num_replicas and rank, not both")
        world, me = dist.get_world_size(), dist.get_rank()
        if device_mesh is not None:
            # A torch DeviceMesh (torch >= 2.2), or anything shaped like one, with dimensions named
            # "dp" and "tp": its "tp" process group carries the batches (on the GPU when NCCL's).
            group = device_mesh.get_group("tp")
            get_global_rank = getattr(dist, "get_global_rank", None) or dist.distributed_c10d._get_global_rank
            leader = get_global_rank(group, 0)
            return _TensorParallel(group, leader, me == leader, device_mesh.size("tp"), device_mesh.size("dp"),
                                   device_mesh.get_local_rank("dp"))
        if not isinstance(tp_size, int) or isinstance(tp_size, bool) or tp_size < 1 or world % tp_size:
            raise ValueError(f"tp_size must divide the world size {world}, not {tp_size!r}")
        mine = None
        for first in range(0, world, tp_size):  # every rank makes every group, in the same order
            group = dist.new_group(ranks=list(range(first, first + tp_size)), backend="gloo")
            if first <= me < first + tp_size:
                mine = (group, first)
        group, leader = mine
        return _TensorParallel(group, leader, me == leader, tp_size, world // tp_size, me // tp_size)

    def __init__(self, group, leader, is_leader, tp_size, dp_size, dp_rank):
        import torch
        import torch.distributed as dist
        self.group, self.leader, self.is_leader = group, leader, is_leader
        self.tp_size, self.dp_size, self.dp_rank = tp_size, dp_size, dp_rank
        # NCCL sends device memory: the batches then travel (and peers get them) on this GPU.
        self.device = (torch.device("cuda", torch.cuda.current_device())
                       if dist.get_backend(group) == "nccl" else None)

    def _broadcast(self, tensor):
        import torch.distributed as dist
        if self.device is not None:
            tensor = tensor.to(self.device)
        dist.broadcast(tensor, src=self.leader, group=self.group)
        return tensor

    # A batch's header: state (1 a batch follows, 0 the epoch ended, -1 the reader failed), the
    # epoch and the batch's number in it (a peer out of step with its reader raises instead of
    # training on another batch), rows, columns, cu_seqlens entries, max_seqlen.
    def _header(self, state, epoch, number=0, b=0, s=0, cu=0, longest=0):
        import torch
        return self._broadcast(torch.tensor([state, epoch % (1 << 62), number, b, s, cu, longest],
                                            dtype=torch.int64)).tolist()

    def send(self, item, epoch, number):
        import numpy as np
        import torch
        b, s = item["tokens"].shape
        cu = len(item["cu_seqlens"])
        self._header(1, epoch, number, b, s, cu, item["max_seqlen"])
        flat = np.concatenate([item[k].astype(np.int64).ravel() for k in _INT_FIELDS] +
                              [item["cu_seqlens"].astype(np.int64), item["indices"], item["source"]])
        self._broadcast(torch.from_numpy(flat))

    def finish(self, epoch):
        self._header(0, epoch)

    def fail(self, epoch):
        self._header(-1, epoch)

    def receive(self, epoch):
        import torch
        number = 0
        while True:
            state, their_epoch, their_number, b, s, cu, longest = \
                self._broadcast(torch.zeros(7, dtype=torch.int64)).tolist()
            if state < 0:
                raise RuntimeError("the reader of this tensor-parallel group failed (its error is in its log)")
            if their_epoch != epoch % (1 << 62) or (state == 1 and their_number != number):
                raise RuntimeError(
                    f"out of step with the reader of this tensor-parallel group (rank {self.leader}): it sent "
                    f"batch {their_number} of epoch {their_epoch} while this rank expected batch {number} of "
                    f"epoch {epoch}; every member of a group must set the same epochs and take the same batches")
            if state == 0:
                return
            number += 1
            flat = self._broadcast(torch.empty(5 * b * s + cu + 2 * b, dtype=torch.int64))
            item, at = {}, 0
            for k in _INT_FIELDS:
                item[k] = flat[at:at + b * s].view(b, s)
                at += b * s
            item["loss_mask"] = item["loss_mask"].to(torch.float32)
            item["cu_seqlens"] = flat[at:at + cu].to(torch.int32)
            at += cu
            item["indices"] = flat[at:at + b]
            item["source"] = flat[at + b:at + 2 * b]
            item["max_seqlen"] = int(longest)
            yield item
