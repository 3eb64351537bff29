"""ddpio.DistributedSampler: torch.utils.data.DistributedSampler, index for index, plus explicit
padding, mid-epoch and elastic resume (docs/SAMPLER.md, docs/PYTHON.md)."""
import operator
import sys
import warnings

from ddpio import _ddpio

_PADDINGS = ("pad", "drop", "none", "mask")
_PERMUTATIONS = ("torch", "torch-legacy", "feistel")
_STATE_VERSION = 1


def _job_world():
    """(num_replicas, rank) from torch.distributed when initialised (torch is never imported
    here: if the script has not imported it, no process group exists), else the launcher's
    environment (torchrun, Slurm, Open MPI), else a single process."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    info = _ddpio.discover_rank()
    if info["source"] in ("slurm", "openmpi") and info["world_size"] > 1:
        # Inside an allocation a process started without srun/mpirun still sees these variables.
        warnings.warn(f"ddpio.DistributedSampler: no process group; taking rank {info['rank']} of "
                      f"{info['world_size']} from the {info['source']} environment (pass num_replicas "
                      f"and rank to choose)", stacklevel=3)
    return info["world_size"], info["rank"]


_MAX_INT64 = (1 << 63) - 1
_MAX_REPLICAS = (1 << 31) - 1
_SEED_RANGE = (-(1 << 63), (1 << 64) - 1)  # what torch's Generator.manual_seed accepts

# From this size on, torch 2.6 and later draw randperm with another algorithm than torch <= 2.5
# (docs/SAMPLER.md, "Large datasets"); below it both give the same order.
LARGE_RANDPERM = 0xFFFFFFFF // 20


def _torch_version():
    """(major, minor) of the installed torch, read from its package metadata (torch is not
    imported), or None when torch is not installed."""
    torch = sys.modules.get("torch")
    text = getattr(torch, "__version__", None) if torch is not None else None
    if text is None:
        try:
            import importlib.metadata
            text = importlib.metadata.version("torch")
        except Exception:  # not installed (PackageNotFoundError), or no metadata
            return None
    parts = []
    for piece in str(text).split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit()) or "0"
        parts.append(int(digits))
    return tuple(parts + [0] * (2 - len(parts)))


def default_permutation(size):
    """The permutation that gives the installed torch's DistributedSampler order for a dataset of
    `size` samples: "torch" below LARGE_RANDPERM (every torch agrees there); above it "torch" for
    torch >= 2.6 and "torch-legacy" for older. Without torch installed, a dataset that large is a
    ValueError asking to choose: ddpio does not guess which torch the order must match."""
    if size < LARGE_RANDPERM:
        return "torch"
    kind = installed_permutation()
    if kind is None:
        raise ValueError(
            f"a dataset of {size} samples (>= {LARGE_RANDPERM}) is shuffled differently by torch >= 2.6 and "
            "torch <= 2.5, and torch is not installed to tell which to match: pass permutation='torch' "
            "(torch >= 2.6), 'torch-legacy' (torch <= 2.5) or 'feistel' (O(1) memory, not torch's order)")
    return kind


def installed_permutation():
    """The permutation that gives the installed torch's order for a dataset of any size, without
    knowing the size: "torch" for torch >= 2.6, "torch-legacy" for older (both orders are the same
    below LARGE_RANDPERM, so each is its torch's order at every size); None without torch."""
    version = _torch_version()
    if version is None:
        return None
    return "torch" if version >= (2, 6) else "torch-legacy"


def order_kind(permutation, size):
    """The permutation as the order it gives a dataset of `size` samples: "torch-legacy" is
    "torch" below LARGE_RANDPERM, where the two agree."""
    return "torch" if permutation == "torch-legacy" and size < LARGE_RANDPERM else permutation


def check_seed_sum(seed, epoch):
    """torch seeds its generator with seed + epoch and fails on a sum outside manual_seed's range
    with this error; so does ddpio (instead of wrapping around)."""
    if not _SEED_RANGE[0] <= seed + epoch <= _SEED_RANGE[1]:
        raise RuntimeError(f"Overflow when unpacking long: seed + epoch = {seed} + {epoch} is outside "
                           f"[{_SEED_RANGE[0]}, {_SEED_RANGE[1]}], the range torch's generator takes")


def _int_arg(name, value, low, high=_MAX_INT64):
    try:
        value = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, not {type(value).__name__}") from None
    if value < low or value > high:
        raise ValueError(f"{name} must be in [{low}, {high}], not {value}")
    return value


class DistributedSampler:
    """Which dataset indices this rank gets each epoch — torch's DistributedSampler exactly.

    Same constructor and defaults as torch.utils.data.DistributedSampler (num_replicas and rank
    from torch.distributed when it is initialised, else from the launcher's environment), same
    set_epoch / __iter__ / __len__, so it is a drop-in `sampler=` for torch's DataLoader. With the
    same (len, num_replicas, rank, shuffle, seed, epoch, drop_last) every rank gets exactly
    torch's indices.

    Extras:
      padding="pad" | "drop" | "none" | "mask": how the last, uneven part of an epoch is dealt
        (default: "drop" if drop_last else "pad", torch's behaviour). "none" duplicates nothing
        and drops nothing (ranks may get one sample less); "mask" is "pad" with the padded
        duplicates flagged in stream(), so evaluation can leave them out.
      permutation=None | "torch" | "torch-legacy" | "feistel": torch's randperm as torch >= 2.6 or
        <= 2.5 draws it for datasets of 2^32/20 samples and more (they agree below), or an
        O(1)-memory permutation. None (default): the installed torch's (default_permutation).
      stream(): (indices, padding) numpy arrays of this rank's epoch.
      state_dict(samples_seen=None) / load_state_dict(state): resume mid-epoch, also with another
        num_replicas (elastic): the remaining samples of the epoch go to the new ranks once each.
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False,
                 padding=None, permutation=None):
        if num_replicas is None or rank is None:
            world, job_rank = _job_world()
            num_replicas = world if num_replicas is None else num_replicas
            rank = job_rank if rank is None else rank
        num_replicas = _int_arg("num_replicas", num_replicas, 1, _MAX_REPLICAS)
        rank = _int_arg("rank", rank, -_MAX_REPLICAS, _MAX_REPLICAS)
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        if padding is None:
            padding = "drop" if drop_last else "pad"
        if padding not in _PADDINGS:
            raise ValueError(f"padding must be one of {', '.join(_PADDINGS)}, not {padding!r}")
        if drop_last and padding != "drop":
            raise ValueError(f"drop_last=True contradicts padding={padding!r}: give one of them")
        if permutation is not None and permutation not in _PERMUTATIONS:
            raise ValueError(f"permutation must be None or one of {', '.join(_PERMUTATIONS)}, not {permutation!r}")
        self.dataset = dataset
        self.dataset_size = _int_arg("the dataset size", self._length(), 0)
        if permutation is None:
            permutation = default_permutation(self.dataset_size)
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.shuffle = bool(shuffle)
        self.seed = _int_arg("seed", seed, *_SEED_RANGE)  # torch's manual_seed range
        self.drop_last = padding == "drop"
        self.padding = padding
        self.permutation = permutation
        self._start = 0          # entries of this epoch's permutation consumed before (resume)
        self._handed_out = 0     # samples the current iterator has yielded
        self._iter_plan = None   # the plan the current iterator follows
        self._plan = None        # cache

    def _length(self):
        d = self.dataset
        return d if isinstance(d, int) and not isinstance(d, bool) else len(d)

    def _current_plan(self):
        key = (self.epoch, self._start, self.dataset_size, self.num_replicas, self.shuffle, self.seed,
               self.padding, self.permutation)
        if self._plan is None or self._plan_key != key:
            self._plan = _ddpio.make_plan(self.dataset_size, self.num_replicas, self.shuffle,
                                          self.seed % (1 << 64), self.padding, self.permutation,
                                          self.epoch % (1 << 64), self._start)
            self._plan_key = key
        return self._plan

    # torch's attributes, for code that reads them: this rank's samples this epoch, and the
    # entries all ranks take together (with padding; without it, the samples themselves).
    @property
    def num_samples(self):
        return len(self)

    @property
    def total_size(self):
        plan = self._current_plan()
        if self.padding == "none":
            return self.dataset_size - plan.start
        return plan.num_steps() * self.num_replicas

    def set_epoch(self, epoch):
        """Sets the epoch: the shuffle is seeded with seed + epoch, as torch's. A resumed position
        (load_state_dict) applies to its own epoch only."""
        epoch = _int_arg("epoch", epoch, -(1 << 63))
        if epoch != self.epoch:
            self._start = 0
        self.epoch = epoch
        self._handed_out = 0
        self._iter_plan = None

    def stream(self):
        """(indices, padding): this rank's indices for the epoch (from a resumed position on) as an
        int64 numpy array, and which of them are padding (duplicates added to even out ranks).
        Needs numpy."""
        check_seed_sum(self.seed, self.epoch)
        return self._current_plan().stream(self.rank)

    def __iter__(self):
        check_seed_sum(self.seed, self.epoch)
        size = self._length()
        if size != self.dataset_size:
            raise ValueError(f"the dataset had {self.dataset_size} samples when this sampler was made and has "
                             f"{size} now: make a new sampler")
        plan = self._current_plan()
        self._iter_plan = plan
        self._handed_out = 0
        return self._hand_out((self.epoch, self._start), plan)

    def _hand_out(self, position, plan):
        # In chunks: an epoch of 10^8 samples must not become one Python list before the first.
        begin, total = 0, plan.num_samples(self.rank)
        while begin < total:
            chunk = plan.indices(self.rank, begin, 1 << 16)
            begin += len(chunk)
            for index in chunk:
                self._handed_out += 1
                yield index
        if (self.epoch, self._start) == position:
            self._start = 0  # a resumed position is used once; the next pass is the whole epoch

    def __len__(self):
        return self._current_plan().num_samples(self.rank)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_plan"] = state["_iter_plan"] = None  # core objects; remade on demand
        state.pop("_plan_key", None)
        return state

    def state_dict(self, samples_seen=None):
        """The position to resume from: the epoch and how much of it is consumed.

        samples_seen: how many samples of this epoch (since a resume, if any) this rank has
        trained on — every rank the same number, as DDP steps together. Pass it whenever a
        DataLoader sits in between: its workers pull indices ahead of training (often the whole
        epoch at once), so the default — the samples this sampler has handed out — is only right
        when the training loop iterates the sampler itself."""
        plan = self._iter_plan if self._iter_plan is not None else self._current_plan()
        seen = self._handed_out if samples_seen is None else _int_arg("samples_seen", samples_seen, 0)
        return {
            "version": _STATE_VERSION, "epoch": self.epoch, "start": plan.consumed_after(seen),
            "dataset_size": self.dataset_size, "shuffle": self.shuffle, "seed": self.seed,
            "permutation": self.permutation,
        }

    def load_state_dict(self, state):
        """Resumes at a saved position: the next iteration of that epoch deals its remaining
        samples (with this sampler's num_replicas, which may differ from the saver's)."""
        if state.get("version") != _STATE_VERSION:
            raise ValueError(f"unknown sampler state version {state.get('version')!r} (this ddpio reads {_STATE_VERSION})")
        for key in ("dataset_size", "shuffle", "seed", "permutation"):
            if state[key] != getattr(self, key):
                raise ValueError(f"the saved sampler state has {key}={state[key]!r}, this sampler "
                                 f"{getattr(self, key)!r}: it resumes another order")
        start = _int_arg("start", state["start"], 0)
        if start > self.dataset_size:
            raise ValueError(f"the saved start {start} is beyond the dataset's {self.dataset_size} samples")
        self.epoch = _int_arg("epoch", state["epoch"], -(1 << 63))
        self._start = start
        self._handed_out = 0
        self._iter_plan = None

    def __repr__(self):
        return (f"ddpio.DistributedSampler(size={self.dataset_size}, num_replicas={self.num_replicas}, "
                f"rank={self.rank}, shuffle={self.shuffle}, seed={self.seed}, padding={self.padding!r}, "
                f"epoch={self.epoch})")
