"""ddpio.Loader: a rank's batches as torch tensors (or numpy arrays), straight from ddpio's C++
pipeline: sampler, readers, group feeding, decoding and augmentation all run in C++ threads, and a
batch's images are the pipeline's own memory (no copy).

    loader = ddpio.Loader("/data/train.lmdb", batch_size=256, group_size=8)
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for batch in loader:
            train_step(batch["images"], batch["labels"])
"""
import atexit
import collections.abc
import inspect
import numbers
import os
import sys
import threading
import warnings
import weakref

from ddpio import _ddpio
from ddpio.dataset import dataset_location
from ddpio.errors import FailedPreconditionError
from ddpio.sampler import _SEED_RANGE, check_seed_sum, default_permutation, installed_permutation, order_kind

# The library's settings table (ddpio/pipeline/settings.h): every setting's default, which the
# signature below shows, and its type and range, which the library checks for Python as for the
# program's flags. This file converts Python's values (augment objects, normalize, held_memory,
# seeds) and checks only what exists in Python alone.
_D = _ddpio.pipeline_defaults()
# The settings the Loader takes under torch's names or derives from another argument (the
# argument named here); every other setting of the table is a keyword of its own name.
_DERIVED = {
    "workers": "num_workers", "mean": "normalize", "stddev": "normalize", "image_height": "image_size",
    "scale_min": "augment", "scale_max": "augment", "ratio_min": "augment", "ratio_max": "augment",
    "flip_probability": "augment", "augment_seed": "seed", "held_batches": "held_memory",
    "held_overflow": "device", "warn_repeated_epoch": "set_epoch (the Loader warns itself)",
    "prefetch_records": "(always on)",
}
_ARRAYS = ("torch", "numpy")

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
DEFAULT_HELD_MEMORY = 1 << 30  # bytes of batches the loop may keep zero-copy (held_memory)

# state_dict()'s format. Version 2 carries what the epoch's order — and so a position in it —
# depends on, so that a state is refused by a loader whose order differs; states without a
# version (ddpio before it) hold only epoch, position and dataset_size.
_STATE_VERSION = 3  # 3: the order (exact or block) recorded; 2 (read too): the exact order

_live = weakref.WeakSet()
_live_lock = threading.Lock()


def _close_all():
    with _live_lock:
        loaders = list(_live)
    for loader in loaders:
        loader.close()
    _ddpio.leave_job()


atexit.register(_close_all)


def _torch_group():
    """Rank, world size and store of torch.distributed's process group when one is initialised
    (torch is never imported here: without it imported no group exists). The loader joins the job
    through that store whatever the init method — env://, tcp://, file:// — so it is the same job
    with the same ranks as torch's. A group whose store cannot be reached is an error, never a
    silent fallback to a world of one."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return {}
    try:
        store = dist.distributed_c10d._get_default_store()
        rank, world = dist.get_rank(), dist.get_world_size()
    except (AttributeError, RuntimeError) as e:
        raise FailedPreconditionError(
            f"torch.distributed is initialised but ddpio cannot reach its store ({e}); the loader would not "
            "know its rank") from None
    group = dict(torch_rank=int(rank), torch_world_size=int(world), torch_store=store)
    # The TCPStore behind it (through any PrefixStores), reached directly by the heartbeats that
    # name a vanished rank after a failure (Loader.census).
    inner = store
    while hasattr(inner, "underlying_store"):
        inner = inner.underlying_store
    host, port = getattr(inner, "host", None), getattr(inner, "port", None)
    if isinstance(host, str) and isinstance(port, int) and port > 0:
        group.update(torch_store_host=host, torch_store_port=int(port))
    return group


def _check_launcher(group):
    """torchrun with a c10d rendezvous (--standalone, --rdzv-backend c10d) serves no store the
    loader could join through: say what to do instead of failing on a missing token."""
    env = os.environ
    if (group or "TORCHELASTIC_RUN_ID" not in env or env.get("DDPIO_STORE_TOKEN")
            or env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"):
        return
    raise FailedPreconditionError(
        "under torchrun's c10d rendezvous (--standalone or --rdzv-backend c10d) there is no launcher "
        "store to join: call torch.distributed.init_process_group() before creating the ddpio.Loader "
        "(it then joins through torch's store), or start torchrun with --master-addr/--master-port "
        "and no --rdzv-backend (its agent store), or set DDPIO_STORE_TOKEN")


def _int(name, value, minimum=1, maximum=None):
    """An integer in [minimum, maximum] (minimum None: any integer)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        bound = f"in [{minimum}, {maximum}]" if maximum is not None else f"at least {minimum}"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return int(value)


def _triple(name, value):
    try:
        t = tuple(float(v) for v in value)
    except TypeError:
        raise ValueError(f"{name} must be three numbers (one per channel), got {value!r}") from None
    if len(t) != 3:
        raise ValueError(f"{name} must be three numbers (one per channel), got {len(t)}")
    return t


def _size_pair(name, value):
    """(height, width) from an int or a pair, as torchvision's size arguments."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value, value)
    try:
        h, w = value
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an int or (height, width), got {value!r}") from None
    return _int(f"{name} height", h, None), _int(f"{name} width", w, None)  # range: the library's


def _normalization(normalize):
    """(mean, std) for output="float": None → [0, 1] as torchvision's ToTensor; "imagenet"; or a
    (mean, std) pair of triples."""
    if normalize is None:
        return (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
    if isinstance(normalize, str):
        if normalize != "imagenet":
            raise ValueError(f"normalize must be None, 'imagenet' or (mean, std), got {normalize!r}")
        return IMAGENET_MEAN, IMAGENET_STD
    try:
        mean, std = normalize
    except (TypeError, ValueError):
        raise ValueError(f"normalize must be None, 'imagenet' or (mean, std), got {normalize!r}") from None
    return _triple("normalize mean", mean), _triple("normalize std", std)


_GEOMETRY = ("RandomResizedCrop", "RandomHorizontalFlip", "Resize", "CenterCrop")


def _augment(augment):
    """The geometry a torchvision transform (or a Compose, or a list) asks for, read from the
    objects' attributes (torchvision is not imported): {"train", "size", "scale", "ratio", "flip",
    "resize"}; keys absent when the transforms do not say. Anything but the four geometric
    transforms is a ValueError that says where such a transform runs instead."""
    if augment is None:
        return {}
    items = getattr(augment, "transforms", augment)
    if not isinstance(items, (list, tuple)):
        items = [items]
    out = {}
    for t in items:
        kind = type(t).__name__
        if kind not in _GEOMETRY:
            raise ValueError(
                f"augment: {kind} is not applied by ddpio.Loader, which runs RandomResizedCrop, "
                "RandomHorizontalFlip, Resize and CenterCrop in C++; give the output type with output= and "
                "normalize=, and run other transforms on each batch (on the GPU: see docs/PYTHON.md, "
                "'Transforms on the batch')")
        interpolation = str(getattr(t, "interpolation", "bilinear")).lower()
        if kind in ("RandomResizedCrop", "Resize") and "bilinear" not in interpolation:
            raise ValueError(f"augment: {kind} with interpolation {interpolation}: ddpio resamples bilinearly "
                             "(antialiased, as torchvision on PIL images)")
        if kind == "RandomResizedCrop":
            out.update(train=True, size=_size_pair("RandomResizedCrop size", t.size),
                       scale=tuple(float(v) for v in t.scale), ratio=tuple(float(v) for v in t.ratio))
        elif kind == "RandomHorizontalFlip":
            out["flip"] = float(t.p)
        elif kind == "Resize":
            size = t.size
            if isinstance(size, (list, tuple)):
                if len(size) != 1:
                    raise ValueError("augment: Resize((h, w)) stretches the image; ddpio resizes the shorter "
                                     "side (Resize(int)) then center-crops")
                size = size[0]
            out.update(train=False, resize=_int("Resize size", size, 1, 16384))
        else:  # CenterCrop
            out.update(train=False, size=_size_pair("CenterCrop size", t.size))
    if out.get("train") is False and "scale" in out:
        raise ValueError("augment mixes RandomResizedCrop (training) with Resize/CenterCrop (evaluation)")
    return out


class Loader:
    """Iterates this rank's batches of a converted dataset, epoch by epoch — torch's DataLoader over
    a DistributedSampler, in C++.

    Each batch is a dict: ``images`` (N, 3, H, W) — uint8 as stored (channels-last in memory: the
    view of the loader's buffer) or float32 —, ``labels`` (int64), ``indices`` (int64, the dataset
    indices), ``valid`` (bool: False for the sampler's padding with ``padding="mask"`` and for
    skipped bad samples), ``epoch`` and ``step``.

    Arguments (docs/PYTHON.md has the whole table):
      path: the dataset (``ddpio convert``). batch_size: samples per batch (per rank; default 1).
      shuffle: default ``train``. num_workers (or workers): decoding threads (0: every core).
      image_size: output size, an int or (height, width). train: RandomResizedCrop + flip (True) or
        Resize + CenterCrop. augment: torchvision's RandomResizedCrop / RandomHorizontalFlip /
        Resize / CenterCrop objects (or a Compose of them), whose parameters are used.
      decode: "fast" (only the crop's region) or "exact" (torchvision's pixels, within 1 level).
      output: "uint8" or "float"; normalize (float only): None ([0, 1], as ToTensor), "imagenet" or
        (mean, std).
      seed: the sampler's and the augmentation's seed (as DistributedSampler's; negatives too).
      drop_last: drop a short last batch (DataLoader's). padding: the sampler's "pad" (torch's
        default), "drop" (DistributedSampler's drop_last=True), "none" or "mask".
      permutation: None (the installed torch's order), "torch", "torch-legacy" or "feistel".
      order: "exact" (default: torch's DistributedSampler order) or "block" (chunks of block_chunk
        records permuted each epoch, each reader shuffling within block_window chunks of its own:
        an s3:// dataset is fetched a whole chunk per GET with a bounded cache). block_lanes: the
        lanes the chunks are dealt to (0: one per reader); a state_dict() records them, and a loader
        resuming it on another world size passes block_lanes=state["block_lanes"].
      group_size: ranks per group; only each group's leader reads the dataset and sends its
        peers their data (mode "shard" / "replicate"; payload "encoded" / "decoded"). Every member
        names its dataset; a member naming another one (or a missing one) fails the group.
        read_ahead: records a leader asks storage for ahead; depth: messages it may run ahead.
      cache_dir, cache_gb: with an s3:// dataset, a local folder of fetched records that later
        epochs and runs read instead of the store, and its budget in GiB (None: the environment's
        DDPIO_S3_CACHE_DIR / DDPIO_S3_CACHE_GB). whole_chunks: a dataset that fits the cache is
        fetched a whole chunk (up to 8 MiB) at a time, about one GET per chunk an epoch, when the
        reader (the node, with a shared cache_dir) needs at least half of each chunk an epoch
        (None: DDPIO_S3_WHOLE_CHUNKS, else that rule; True: whatever share it needs; False: only
        the records asked for). Ranks of a node given the same cache_dir fetch each chunk once
        between them.
        store_max_requests_per_s: requests a second the whole job may send the store (0: no cap;
        each reading rank takes an equal share); a reader also slows down by itself when the
        store answers 503 SlowDown / 429, and speeds up again after.
      Every setting's type, default and range: ddpio._ddpio.pipeline_settings().
      device: None or "cpu" (host tensors), or a CUDA device the loader copies each batch to.
      held_memory: bytes of batches the loop may keep zero-copy beyond the two a for loop holds
        itself (default 1 GiB); batches kept beyond it are handed out as copies — the loop never
        stalls on what it keeps.
      pin_memory, persistent_workers: accepted for torch's sake (slots are always page-locked;
        the workers always persist).
      arrays: "torch" (default) or "numpy" (torch is then never imported).
      seq_len: for a token dataset (language models): batches of its documents packed into
        sequences of seq_len tokens, as dicts of tensors (ddpio.tokens.TokenLoader; takes
        batch_size, shuffle, seed, drop_last, padding, arrays).
    Under torch.distributed (any init method) or a launcher (torchrun, Slurm, Open MPI) the loader
    joins the job; every rank must create its loaders in the same order. Not for torch DataLoader
    workers (it decodes in its own threads): iterate it directly.
    """

    def __new__(cls, path=None, batch_size=1, shuffle=None, *, seq_len=None, **kwargs):
        if seq_len is not None:
            from ddpio.tokens import TokenLoader
            if shuffle is None:
                shuffle = True
            return TokenLoader(path, batch_size, shuffle, seq_len=seq_len, **kwargs)
        return super().__new__(cls)

    def __init__(self, path, batch_size=1, shuffle=None, *, num_workers=None, workers=None, image_size=None,
                 train=None, augment=None, decode=_D["decode"], output=_D["output"], normalize=None,
                 seed=_D["seed"], drop_last=_D["drop_last"], padding=_D["padding"], permutation=None,
                 group_size=_D["group_size"], mode=_D["mode"], payload=_D["payload"], layout=_D["layout"],
                 readers=_D["readers"], relay=_D["relay"], read_ahead=_D["read_ahead"], depth=_D["depth"],
                 device=None, prefetch=_D["prefetch"], held_memory=DEFAULT_HELD_MEMORY,
                 held_timeout=_D["held_timeout"], timeout=_D["timeout"], bad_samples=_D["bad_samples"],
                 resize_size=_D["resize_size"], cache_dir=_D["cache_dir"], cache_gb=_D["cache_gb"],
                 whole_chunks=_D["whole_chunks"], order=_D["order"], block_chunk=_D["block_chunk"],
                 block_window=_D["block_window"], block_lanes=_D["block_lanes"],
                 store_max_requests_per_s=_D["store_max_requests_per_s"],
                 arrays="torch", pin_memory=True, persistent_workers=False, seq_len=None):
        self._pipe = None
        self._pid = os.getpid()
        if arrays not in _ARRAYS:
            raise ValueError(f"arrays must be one of {', '.join(map(repr, _ARRAYS))}, got {arrays!r}")
        if num_workers is not None and workers is not None and num_workers != workers:
            raise ValueError(f"num_workers={num_workers!r} and workers={workers!r}: give one of them")
        threads = num_workers if num_workers is not None else (workers if workers is not None else _D["workers"])
        seed = _int("seed", seed, *_SEED_RANGE)
        geometry = _augment(augment)
        if train is not None and "train" in geometry and bool(train) != geometry["train"]:
            raise ValueError(f"train={train!r} contradicts augment (a {'training' if geometry['train'] else 'evaluation'} "
                             "transform)")
        train = geometry.get("train", _D["train"] if train is None else bool(train))
        if image_size is not None and "size" in geometry and _size_pair("image_size", image_size) != geometry["size"]:
            raise ValueError(f"image_size={image_size!r} contradicts augment's size {geometry['size']}")
        height, width = geometry.get("size") or _size_pair("image_size", _D["image_size"] if image_size is None
                                                           else image_size)
        if output == "uint8" and normalize is not None:
            raise ValueError("normalize applies to output='float' (uint8 batches are the stored pixels)")
        mean, std = _normalization(normalize)
        scale = geometry.get("scale", (_D["scale_min"], _D["scale_max"]))
        ratio = geometry.get("ratio", (_D["ratio_min"], _D["ratio_max"]))
        self.drop_last = bool(drop_last)
        self.pin_memory = bool(pin_memory)
        self.persistent_workers = bool(persistent_workers)
        self.shuffle = bool(train if shuffle is None else shuffle)
        self.seed = seed
        self.padding = padding
        self.order = order
        self._block = (block_chunk, block_window)
        # The library's settings by their table names (_ddpio.pipeline_settings()).
        options = dict(
            batch_size=batch_size, image_size=width, image_height=height,
            resize_size=geometry.get("resize", resize_size),
            scale_min=scale[0], scale_max=scale[1], ratio_min=ratio[0], ratio_max=ratio[1],
            flip_probability=geometry.get("flip", _D["flip_probability"]), workers=threads, prefetch=prefetch,
            held_timeout=held_timeout, group_size=group_size, timeout=timeout, train=train,
            shuffle=self.shuffle, drop_last=self.drop_last, seed=seed % (1 << 64),
            augment_seed=seed % (1 << 64), warn_repeated_epoch=False, mean=mean, stddev=std,
            decode=decode, output=output, mode=mode, payload=payload, readers=readers, relay=relay,
            read_ahead=read_ahead, depth=depth, layout=layout, padding=padding, bad_samples=bad_samples,
            cache_dir=cache_dir, cache_gb=cache_gb, whole_chunks=whole_chunks, order=order,
            block_chunk=block_chunk, block_window=block_window, block_lanes=block_lanes,
            store_max_requests_per_s=store_max_requests_per_s)
        if permutation is not None:
            options["permutation"] = permutation
        # The library checks every setting, as for a C++ trainer; only then are they used here.
        _ddpio.check_pipeline_options(dict(options))
        self.batch_size = int(batch_size)
        self.num_workers = int(threads)
        self._float = output == "float"
        batch_bytes = self.batch_size * height * width * 3 * (4 if self._float else 1)
        held_memory = _int("held_memory", held_memory, 0)
        options["held_batches"] = 2 + held_memory // batch_bytes
        self._held_batches = options["held_batches"]
        self._torch = None
        self._device = None
        if arrays == "torch":
            self._setup_torch(device, options)
        elif device is not None:
            raise ValueError("device needs arrays='torch'")
        # A kept batch past held_memory: a copy (on the device: wait for a release).
        options["held_overflow"] = "copy" if self._device is None else "wait"
        self.path = os.fsdecode(dataset_location(path))
        self._options_mode = mode
        self._epoch = 0
        self._start = 0           # where the next pass starts (a loaded position, or 0)
        self._pending = True      # no pass started since set_epoch / load_state_dict
        self._generation = 0      # iterators started; an iterator works while it is the newest
        self._finished = None     # the epoch whose last pass ran from its start to its end
        self._warned_copy = False
        self._dataset = None
        self._sampler = None
        group = _torch_group()
        _check_launcher(group)
        options.update(group)
        # The installed torch's order, which needs no size (its two algorithms agree below the size
        # where they part): the dataset is opened once, by the pipeline — from an object store
        # that is one manifest and one index, not two of each.
        chosen = permutation if permutation is not None else installed_permutation()
        kind = options["permutation"] = chosen or "torch"
        pipe = _ddpio.Pipeline(self.path, options)  # (takes the options out of the dict)
        size = int(pipe.dataset_size)
        if chosen is None:
            try:
                default_permutation(size)  # without torch, a size where torch's orders part is refused
            except ValueError:
                pipe.mark_failed()
                pipe.close()
                raise
        self._permutation = order_kind(kind, size)
        self._pipe = pipe
        with _live_lock:
            _live.add(self)

    def _setup_torch(self, device, options):
        try:
            import torch
        except ImportError as e:
            raise ImportError("ddpio.Loader(arrays='torch') needs PyTorch (python3-torch); "
                              "pass arrays='numpy' for numpy arrays") from e
        self._torch = torch
        if device is not None:
            self._device = torch.device(device)
            if self._device.type == "cuda":
                index = self._device.index
                if index is None:
                    index = torch.cuda.current_device() if torch.cuda.is_available() else 0
                self._device = torch.device("cuda", index)
                options["device_index"] = index
            elif self._device.type == "cpu":
                self._device = None
            else:
                raise ValueError(f"device must be None, 'cpu' or a CUDA device, got {device!r}")
        if self._device is None and torch.cuda.is_available():
            options["pin_device"] = torch.cuda.current_device()  # slots CUDA knows as pinned

    # --- the epoch -----------------------------------------------------------------------------
    def set_epoch(self, epoch):
        """The epoch the next iteration runs (shuffling and augmentation are seeded by
        seed + epoch, as torch's DistributedSampler; any integer, negatives too). The position
        load_state_dict() set stays for its own epoch (as DistributedSampler.set_epoch keeps it), so
        a loop that calls set_epoch at the top of every epoch resumes where the state stood."""
        epoch = _int("epoch", epoch, -(1 << 63), (1 << 64) - 1)
        if not (self._pending and epoch == self._epoch):
            self._start = 0
        self._epoch = epoch
        self._pending = True
        if self._sampler is not None:
            self._sampler.set_epoch(self._epoch)

    @property
    def epoch(self):
        return self._epoch

    def __len__(self):
        """Batches this rank gets in the whole current epoch (torch's len(DataLoader))."""
        return self._open().batches_in_epoch(self._epoch % (1 << 64))

    def __iter__(self):
        """A new pass over the current epoch (from a loaded state's position, once). A loader runs
        one pass at a time: an older iterator still in use afterwards raises RuntimeError instead of
        drawing from the new pass."""
        pipe = self._open()
        check_seed_sum(self.seed, self._epoch)
        if self.shuffle and self._start == 0 and self._finished == self._epoch:
            warnings.warn(f"ddpio.Loader: epoch {self._epoch} is iterated again with the same shuffle; call "
                          "loader.set_epoch(epoch) before each epoch (as with DistributedSampler.set_epoch), or "
                          "every epoch sees the same order", stacklevel=2)
        start = self._start
        pipe.start_epoch(self._epoch % (1 << 64), start)
        self._start, self._pending = 0, False  # a loaded position serves one pass
        self._generation += 1
        return _Epoch(self, pipe, self._generation, self._epoch, start)

    def _batch(self, item, epoch):
        host_images, labels, indices, valid, _, step, device = item
        images = host_images if self._float else host_images.transpose(0, 3, 1, 2)  # NHWC memory as NCHW
        batch = {"images": images, "labels": labels, "indices": indices, "valid": valid,
                 "epoch": epoch, "step": step}
        torch = self._torch
        if torch is not None:
            for key in ("images", "labels", "indices", "valid"):
                batch[key] = torch.from_numpy(batch[key])
            if device is not None:
                self._on_device(batch, host_images, device)
        return batch

    def _on_device(self, batch, host_images, address):
        """The batch on the GPU: images are the loader's device buffer (staged by its own stream,
        complete when handed out), kept alive — with the slot — by the host array they belong to;
        the small arrays are copied."""
        torch = self._torch
        typestr = "<f4" if self._float else "|u1"  # float n,3,H,W or uint8 n,H,W,3: as the host array
        images = torch.as_tensor(_DeviceArray(address, host_images.shape, typestr, host_images), device=self._device)
        batch["images"] = images if self._float else images.permute(0, 3, 1, 2)
        for key in ("labels", "indices", "valid"):
            batch[key] = batch[key].to(self._device)

    def _note_copies(self):
        """Once per loader: say (through warnings) that the loop keeps more than held_memory."""
        if self._warned_copy or self._device is not None:
            return
        if self._pipe.counters()["batches_copied"]:
            self._warned_copy = True
            warnings.warn(
                f"ddpio.Loader: the loop keeps more than {self._held_batches} batches (held_memory); further "
                "batches are handed out as copies in ordinary memory. Raise held_memory to keep them "
                "zero-copy, or keep less (clone() what you need)", stacklevel=3)

    # --- torch's attributes --------------------------------------------------------------------
    @property
    def dataset(self):
        """The records as a ddpio.Dataset (opened on first use)."""
        if self._dataset is None:
            from ddpio.dataset import Dataset
            self._dataset = Dataset(self.path)
        return self._dataset

    @property
    def sampler(self):
        """A ddpio.DistributedSampler giving this rank's order (shard: its share of the world;
        replicate: its group's share), following set_epoch. The exact order only: in the block order
        the indices are each batch's ``indices``."""
        if self.order != "exact":
            raise ValueError(f"Loader.sampler gives the exact order's indices; this loader has order={self.order!r}, "
                             "whose indices are each batch's 'indices'")
        if self._sampler is None:
            from ddpio.sampler import DistributedSampler
            pipe = self._open()
            replicate = pipe.group_size > 1 and self._mode() == "replicate"
            self._sampler = DistributedSampler(
                int(pipe.dataset_size), num_replicas=pipe.num_groups if replicate else pipe.world_size,
                rank=pipe.group_rank if replicate else pipe.rank, shuffle=self.shuffle, seed=self.seed,
                padding=self.padding, permutation=self._permutation)
            self._sampler.set_epoch(self._epoch)
        return self._sampler

    def _mode(self):
        return self._options_mode

    # --- resume ----------------------------------------------------------------------------------
    def _order(self):
        """What the epoch's order — and so which samples a position means — depends on: the
        dataset (its content digest: a copy is the same dataset, another conversion is not), its
        size, shuffle, and with shuffle the seed and the permutation; and the padding, which
        decides which samples an epoch holds; the order (exact or block) and, for the block order, its
        chunk, window and lanes. Not the world size, the group size nor the mode: a position is a
        prefix of the order whoever consumed it (elastic resume)."""
        pipe = self._open()
        size = int(pipe.dataset_size)
        mine = {"dataset": pipe.dataset_digest, "dataset_size": size, "shuffle": self.shuffle,
                "seed": self.seed, "permutation": order_kind(self._permutation, size), "padding": self.padding,
                "order": self.order}
        if self.order == "block":
            mine.update(block_chunk=self._block[0], block_window=self._block[1], block_lanes=int(pipe.order_lanes))
        return mine

    def state_dict(self):
        """Where this loader stands: the epoch and the samples of its order consumed by the
        batches handed out so far, on every rank together — the same on every rank, and valid
        for another world size (elastic resume). Until a pass starts after set_epoch() or
        load_state_dict(), where that pass will start. With what the order depends on, so that
        load_state_dict refuses the state in a loader whose order differs."""
        pipe = self._open()
        position = self._start if self._pending else int(pipe.resume_position)
        return {"version": _STATE_VERSION, "epoch": self._epoch, "position": position, **self._order()}

    def load_state_dict(self, state):
        """The next iteration continues where ``state`` (from ``state_dict()``) stood. A state of
        another order — another dataset, seed, shuffle, permutation or padding — is a ValueError
        naming the difference; a state without a version (older ddpio) can be checked for its
        dataset's size only, and is taken with a warning."""
        if not isinstance(state, collections.abc.Mapping):
            raise ValueError(f"not a ddpio.Loader state (a dict from state_dict()): {state!r}")
        missing = [key for key in ("epoch", "position", "dataset_size") if key not in state]
        if missing:
            raise ValueError(f"not a ddpio.Loader state: {', '.join(missing)} missing in {state!r}")
        epoch = _int("the state's epoch", state["epoch"], -(1 << 63), (1 << 64) - 1)
        position = _int("the state's position", state["position"], 0)
        size = _int("the state's dataset_size", state["dataset_size"], 0)
        mine = self._order()
        if size != mine["dataset_size"]:
            raise ValueError(f"the state is of a dataset of {size} samples; {self.path} has {mine['dataset_size']}")
        version = state.get("version")
        if version is None and mine["order"] != "exact":
            raise ValueError("the state has no version (an older ddpio's): its position counts samples of the exact "
                             f"order, and this loader has order={mine['order']!r} — resuming would train some samples "
                             "twice and others never")
        if version is None:
            warnings.warn(
                "ddpio.Loader.load_state_dict: the state has no version (an older ddpio's): it does not record "
                "the dataset, seed, shuffle, permutation and padding it was taken with, so this loader cannot "
                "check they are its own; it resumes assuming so. The states it gives from now on record them",
                stacklevel=2)
        elif isinstance(version, bool) or version not in (2, _STATE_VERSION):
            raise ValueError(f"unknown ddpio.Loader state version {version!r} (this ddpio reads versions 2 and "
                             f"{_STATE_VERSION} and states without a version)")
        else:
            _check_same_order(state, mine, self.path)
        if position > size:
            raise ValueError(f"the state's position {position} is beyond the dataset's {size} samples")
        self._epoch, self._start, self._pending = epoch, position, True
        if self._sampler is not None:
            self._sampler.set_epoch(epoch)

    # --- what it did -----------------------------------------------------------------------------
    def counters(self):
        """This rank's counters since the loader was made: records_read and bytes_read (0 on a
        group's peers), bytes_sent, bytes_received, messages_sent/received, network_wait_s,
        loader_wait_s (the loop waiting for a batch), batches, images, batches_copied,
        reads_directly, decode_threads (this rank's decoding threads; a leader sending decoded
        pixels counts its whole group's, its peers 0), time_to_first_batch_s (from opening the
        pipeline to its first batch; 0 before it); for a
        dataset in an object store also store_requests, store_retries, store_bytes,
        store_records_fetched, store_memory_hits, store_disk_hits, store_misses, store_refetches,
        store_chunk_records (records that came with their chunk before being asked for),
        store_peer_chunks (chunks left to another process sharing the cache folder, read from it),
        store_served_evicted (records removed from the cache folder once served: the block order
        on a dataset larger than the folder's budget),
        store_throttles (503 SlowDown / 429 / timed-out answers), store_rate_limit_per_s (the
        request rate the reader's governor allows now; 0: unlimited)
        (a peer fed by its leader: the one request that read the manifest)."""
        return self._open().counters()

    def report(self):
        """The straggler report of the batches handed out since the last report (or the start),
        gathered from every rank — collective: every rank calls it at the same point (every N
        steps, each epoch's end). Per rank and stage ("wait": the loop waiting in next();
        "outside": the loop's time between batches — forward, backward, torch's all-reduce,
        which the loader cannot tell apart; "read", "decode", "relay": the loader's threads) the
        share of the step and the p50/p99 per step, and in "line" the slowest rank and its
        bottleneck when one stands out ("rank 5 (node 2): 38% of its step waiting for batches
        from leader rank 4; rank 4 (node 2): storage read p99 61 ms ..."), else "no straggler".
        Returns {"epoch", "first_step", "last_step", "straggler" (a rank or None),
        "bottleneck", "line", "ranks": [{"rank", "node", "fed_by", "steps", "step_ms",
        "own_ms", "stages"}]}. The same on every rank."""
        return self._open().report()

    def census(self):
        """After a failure (a collective of the training loop that timed out, a lost connection):
        which ranks of the job stopped answering — every rank beats on the job's store, and the
        ranks whose beats stood still are named with the address they advertised. Returns
        {"vanished": [ranks], "addresses": {rank: address}, "store_lost": bool (the store's host
        itself is gone), "line": one sentence, "" when every rank answers}. Takes about 2.5
        heartbeat periods (a twentieth of ``timeout`` each, 0.25-5 s). Ranks joined through
        torch.distributed's own store (no launcher store) have no heartbeats: "line" says so."""
        return self._open().census()

    @property
    def rank(self):
        return self._open().rank

    @property
    def world_size(self):
        return self._open().world_size

    @property
    def is_leader(self):
        return self._open().is_leader

    @property
    def dataset_size(self):
        return self._open().dataset_size

    def close(self):
        """Stops the loader's threads now (batches still held stay valid)."""
        if self._pipe is not None and self._pid == os.getpid():
            self._pipe.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _open(self):
        if self._pipe is None:
            raise ValueError("the loader was not constructed")
        if self._pid != os.getpid():
            raise RuntimeError(
                f"this ddpio.Loader was made in process {self._pid} and is used in process {os.getpid()}, a "
                "forked child (a torch DataLoader worker?). A ddpio.Loader decodes in its own C++ threads "
                "(num_workers of them): iterate it directly in the training process instead of wrapping it "
                "in a torch DataLoader; to use torch's DataLoader, give it ddpio.Dataset and "
                "ddpio.DistributedSampler")
        return self._pipe

    def __reduce__(self):
        raise TypeError(
            "a ddpio.Loader cannot be pickled or sent to another process (a torch DataLoader with "
            "multiprocessing workers does that): it decodes in its own C++ threads (num_workers of them), so "
            "iterate it directly in the training process; to use torch's DataLoader, give it ddpio.Dataset "
            "and ddpio.DistributedSampler")

    def __repr__(self):
        return f"ddpio.Loader({self.path!r}, batch_size={self.batch_size})"


# inspect.signature(ddpio.Loader) is __init__'s (the settings and their defaults), not __new__'s.
Loader.__signature__ = inspect.Signature(list(inspect.signature(Loader.__init__).parameters.values())[1:])


def _check_same_order(state, mine, path):
    """ValueError naming the first thing the state's order depends on that differs from this
    loader's (mine: Loader._order())."""
    kinds = {"dataset": str, "shuffle": bool, "seed": numbers.Integral, "permutation": str, "padding": str}
    if state.get("version") == _STATE_VERSION:
        kinds["order"] = str
    for key, kind in kinds.items():
        if key not in state:
            raise ValueError(f"not a ddpio.Loader state of version {_STATE_VERSION}: {key} missing")
        value = state[key]
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise ValueError(f"the state's {key} must be {kind.__name__}, got {value!r}")
    why = "a position counts samples of the epoch's order, and this one is another: resuming would train " \
          "some samples twice and others never"
    if state["dataset"] != mine["dataset"]:
        raise ValueError(f"the state was taken on another dataset (content digest {state['dataset']}); this "
                         f"loader's {path} has digest {mine['dataset']} — {why}")
    if state["shuffle"] != mine["shuffle"]:
        raise ValueError(f"the state was taken with shuffle={state['shuffle']}; this loader has "
                         f"shuffle={mine['shuffle']} — {why}")
    if mine["shuffle"]:  # unshuffled, every seed and permutation give the same order
        if state["seed"] != mine["seed"]:
            raise ValueError(f"the state was taken with seed {state['seed']}; this loader has seed {mine['seed']} "
                             f"— {why}")
        if order_kind(state["permutation"], mine["dataset_size"]) != mine["permutation"]:
            raise ValueError(f"the state was taken with permutation {state['permutation']!r}; this loader has "
                             f"permutation {mine['permutation']!r} — {why}")
    # Version 2 states were taken before the block order: the exact order. Version 3 records it.
    state_order = state.get("order", "exact") if state.get("version") == 2 else state.get("order")
    if state_order != mine["order"]:
        raise ValueError(f"the state was taken in the {state_order!r} order; this loader has order={mine['order']!r} "
                         f"— {why}")
    if mine["order"] == "block":
        for key in ("block_chunk", "block_window", "block_lanes"):
            value = state.get(key)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ValueError(f"the state's {key} must be int, got {value!r}")
            if value != mine[key]:
                hint = (f"; pass block_lanes={value} to ddpio.Loader to resume it on this world size"
                        if key == "block_lanes" else "")
                raise ValueError(f"the state was taken with {key}={value}; this loader has {key}={mine[key]} — "
                                 f"{why}{hint}")
    if state["padding"] != mine["padding"]:
        raise ValueError(f"the state was taken with padding {state['padding']!r}; this loader has padding "
                         f"{mine['padding']!r}, which gives the epoch other samples — resuming would train "
                         "some samples twice or never")


class _DeviceArray:
    """GPU memory of a batch, for torch.as_tensor (the CUDA array interface); `owner` (the host
    array of the batch, whose base holds the batch's slot and device buffer) lives as long."""

    def __init__(self, address, shape, typestr, owner):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (address, False),
                                         "version": 2, "strides": None}
        self._owner = owner


class _Epoch:
    """One pass over an epoch. Not a generator: it keeps no reference to the batch it handed out
    (a generator's frame would, holding one more batch), and an error leaves it usable: the next
    call continues where it stood."""

    def __init__(self, loader, pipe, generation, epoch, start):
        self._loader = loader
        self._pipe = pipe
        self._generation = generation
        self._epoch = epoch
        self._from_start = start == 0
        self._done = False

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def __next__(self):
        loader = self._loader
        if self._done:
            raise StopIteration
        if loader._generation != self._generation:
            raise RuntimeError(
                "this iterator of a ddpio.Loader was superseded by a later iter(loader): a loader runs one "
                "pass at a time, and a new pass started; finish (or drop) an iterator before starting the next")
        loader._open()
        item = self._pipe.next()
        if item is None:
            self._done = True
            if self._from_start:
                loader._finished = self._epoch
            raise StopIteration
        batch = loader._batch(item, self._epoch)
        loader._note_copies()
        return batch
