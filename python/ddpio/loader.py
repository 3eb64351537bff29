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
import numbers
import os
import sys
import threading
import weakref

from ddpio import _ddpio

_CHOICES = {
    "decode": ("fast", "exact"),
    "output": ("uint8", "float"),
    "mode": ("shard", "replicate"),
    "payload": ("encoded", "decoded"),
    "readers": ("leader", "all"),
    "relay": ("chain", "star"),
    "layout": ("contiguous", "strided"),
    "padding": ("pad", "drop", "none", "mask"),
    "bad_samples": ("fail", "skip"),
    "arrays": ("torch", "numpy"),
}

_live = weakref.WeakSet()
_live_lock = threading.Lock()
# The torch store the job was joined through: referenced until ddpio has left the job, so that
# rank 0's store server (torch's, in this process) does not go with destroy_process_group()
# while the other ranks still count themselves out through it.
_joined_through = []


def _close_all():
    with _live_lock:
        loaders = list(_live)
    for loader in loaders:
        loader.close()
    _ddpio.leave_job()
    _joined_through.clear()


atexit.register(_close_all)


def _torch_group():
    """The rank, world size and store of torch.distributed's process group, when one is
    initialised (never imports torch), so the loader joins the job through torch's own store —
    under torchrun's c10d rendezvous (--standalone) the launcher serves no store of its own."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return {}
        store = dist.distributed_c10d._get_default_store()
        while hasattr(store, "underlying_store"):  # PrefixStore
            store = store.underlying_store
        host, port = getattr(store, "host", None), getattr(store, "port", None)
        if not host or not port:
            return {}
        if not _joined_through:
            _joined_through.append(store)
        return dict(torch_rank=dist.get_rank(), torch_world_size=dist.get_world_size(),
                    torch_store_host=str(host), torch_store_port=int(port))
    except (AttributeError, RuntimeError):
        return {}


def _check_launcher(group):
    """torchrun with a c10d rendezvous (--standalone, --rdzv-backend c10d) serves no store the
    loader could join through: say what to do instead of failing on a missing token."""
    env = os.environ
    if (group or "TORCHELASTIC_RUN_ID" not in env or env.get("DDPIO_STORE_TOKEN")
            or env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"):
        return
    from ddpio.errors import FailedPreconditionError
    raise FailedPreconditionError(
        "under torchrun's c10d rendezvous (--standalone or --rdzv-backend c10d) there is no launcher "
        "store to join: call torch.distributed.init_process_group() before creating the ddpio.Loader "
        "(it then joins through torch's store), or start torchrun with --master-addr/--master-port "
        "and no --rdzv-backend (its agent store), or set DDPIO_STORE_TOKEN")


def _positive_int(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def _seconds(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0 or value > 1e7:
        raise ValueError(f"{name} must be a number of seconds above 0, got {value!r}")
    return float(value)


def _triple(name, value):
    try:
        t = tuple(float(v) for v in value)
    except TypeError:
        raise ValueError(f"{name} must be three numbers (one per channel), got {value!r}") from None
    if len(t) != 3:
        raise ValueError(f"{name} must be three numbers (one per channel), got {len(t)}")
    return t


class Loader:
    """Iterates this rank's batches of a converted dataset, epoch by epoch.

    Each batch is a dict: ``images`` (N, 3, H, W) — uint8 as stored (channels-last in memory: the
    view of the loader's buffer) or float32 normalised with ``mean``/``std`` —, ``labels``
    (int64), ``indices`` (int64, the dataset indices), ``valid`` (bool: False for the sampler's
    padding with ``padding="mask"`` and for skipped bad samples), ``epoch`` and ``step``.

    Arguments (docs/PYTHON.md has the whole table):
      path: the dataset (``ddpio convert``). batch_size: samples per batch (per rank).
      image_size: output side. train: RandomResizedCrop + flip (True) or Resize + CenterCrop.
      workers: decoding threads (0: every core). decode: "fast" (DCT-scaled, crop region only)
        or "exact" (the pixels of a full decode, then crop + resize: torchvision's within 1 level).
      output: "uint8" or "float".
      seed: the sampler's and the augmentation's seed (as DistributedSampler's ``seed``).
      shuffle: default ``train``. drop_last: drop a short last batch. padding: the sampler's
        "pad" (torch's default), "drop" (torch's drop_last=True), "none" or "mask".
      group_size: ranks per group; only each group's leader reads the dataset and sends its
        peers their data (mode "shard": each rank's DistributedSampler share; "replicate":
        the group's batches to every member; payload "encoded" or "decoded").
      device: None or "cpu" (host tensors), or a CUDA device: the loader copies each batch's
        images to its own buffer on that GPU on its own stream, and hands the batch out once the
        copy is done; the tensors are on the device (images view the loader's device buffer).
      held_batches: batches the loop may keep at once (default 4, at least 2: a for loop keeps the
        previous batch bound to its variable while the next is fetched); one more waits
        ``held_timeout`` seconds for a release, then raises ResourceExhaustedError.
      arrays: "torch" (default) or "numpy" (torch is then never imported).
    Under torchrun (or Slurm, Open MPI) the loader joins the job through the launcher's store;
    every rank must create its loaders in the same order.
    """

    def __init__(self, path, batch_size, image_size=224, train=True, workers=0, decode="fast",
                 output="uint8", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), seed=0,
                 group_size=1, mode="shard", payload="encoded", device=None, shuffle=None,
                 drop_last=False, padding="pad", prefetch=2, held_batches=4, held_timeout=10.0,
                 layout="contiguous", readers="leader", relay="chain", timeout=120.0,
                 bad_samples="fail", resize_size=0, arrays="torch"):
        self._pipe = None
        choices = dict(decode=decode, output=output, mode=mode, payload=payload, readers=readers,
                       relay=relay, layout=layout, padding=padding, bad_samples=bad_samples,
                       arrays=arrays)
        for name, value in choices.items():
            if value not in _CHOICES[name]:
                raise ValueError(f"{name} must be one of {', '.join(map(repr, _CHOICES[name]))}, got {value!r}")
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**64:
            raise ValueError(f"seed must be an integer in [0, 2**64), got {seed!r}")
        std = _triple("std", std)
        if any(s == 0 for s in std):
            raise ValueError(f"std must not contain 0, got {std}")
        options = dict(
            batch_size=_positive_int("batch_size", batch_size),
            image_size=_positive_int("image_size", image_size),
            resize_size=_positive_int("resize_size", resize_size, 0),
            workers=_positive_int("workers", workers, 0),
            prefetch=_positive_int("prefetch", prefetch),
            held_batches=_positive_int("held_batches", held_batches, 2),
            held_timeout=_seconds("held_timeout", held_timeout),
            group_size=_positive_int("group_size", group_size),
            timeout=_seconds("timeout", timeout),
            train=bool(train), shuffle=bool(train if shuffle is None else shuffle),
            drop_last=bool(drop_last), seed=int(seed), mean=_triple("mean", mean), std=std,
            **{k: v for k, v in choices.items() if k != "arrays"})
        if options["image_size"] > 8192:
            raise ValueError(f"image_size must be at most 8192, got {image_size}")
        self._torch = None
        if arrays == "torch":
            try:
                import torch
            except ImportError as e:
                raise ImportError("ddpio.Loader(arrays='torch') needs PyTorch (python3-torch); "
                                  "pass arrays='numpy' for numpy arrays") from e
            self._torch = torch
            self._device = None
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
        elif device is not None:
            raise ValueError("device needs arrays='torch'")
        self.path = os.path.abspath(os.fsdecode(path))
        self.batch_size = options["batch_size"]
        self._float = output == "float"
        self._epoch = 0
        self._start = 0
        group = _torch_group()
        _check_launcher(group)
        options.update(group)
        self._pipe = _ddpio.Pipeline(self.path, options)
        with _live_lock:
            _live.add(self)

    # --- the epoch -----------------------------------------------------------------------------
    def set_epoch(self, epoch):
        """The epoch the next iteration runs (shuffling and augmentation are seeded by it)."""
        if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral) or not 0 <= epoch < 2**64:
            raise ValueError(f"epoch must be an integer in [0, 2**64), got {epoch!r}")
        self._epoch = int(epoch)
        self._start = 0

    def __len__(self):
        """Batches this rank gets in the whole current epoch."""
        return self._open().batches_in_epoch(self._epoch)

    def __iter__(self):
        pipe = self._open()
        start, self._start = self._start, 0
        pipe.start_epoch(self._epoch, start)
        return _Epoch(self, pipe)

    def _batch(self, item):
        host_images, labels, indices, valid, epoch, step, device = item
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
        the small arrays are copied (blocking: they view the slot, which must not be released
        under an asynchronous copy)."""
        torch = self._torch
        typestr = "<f4" if self._float else "|u1"  # float n,3,H,W or uint8 n,H,W,3: as the host array
        images = torch.as_tensor(_DeviceArray(address, host_images.shape, typestr, host_images), device=self._device)
        batch["images"] = images if self._float else images.permute(0, 3, 1, 2)
        for key in ("labels", "indices", "valid"):
            batch[key] = batch[key].to(self._device)

    # --- resume ----------------------------------------------------------------------------------
    def state_dict(self):
        """Where this loader stands: the epoch and the samples of its order consumed by the
        batches handed out so far, on every rank together — the same on every rank, and valid
        for another world size (elastic resume)."""
        pipe = self._open()
        return {"epoch": self._epoch, "position": int(pipe.resume_position),
                "dataset_size": int(pipe.dataset_size)}

    def load_state_dict(self, state):
        """The next iteration continues where ``state`` (from ``state_dict()``) stood."""
        try:
            epoch, position, size = int(state["epoch"]), int(state["position"]), int(state["dataset_size"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a ddpio.Loader state: {state!r} ({e})") from None
        pipe = self._open()
        if size != pipe.dataset_size:
            raise ValueError(f"the state is of a dataset of {size} samples; {self.path} has {pipe.dataset_size}")
        if position < 0:
            raise ValueError(f"position must not be negative, got {position}")
        self.set_epoch(epoch)
        self._start = position

    # --- what it did -----------------------------------------------------------------------------
    def counters(self):
        """This rank's counters since the loader was made: records_read and bytes_read (0 on a
        group's peers), bytes_sent, bytes_received, messages_sent/received, network_wait_s,
        loader_wait_s (the loop waiting for a batch), batches, images."""
        return self._open().counters()

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
        if self._pipe is not None:
            self._pipe.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _open(self):
        if self._pipe is None:
            raise ValueError("the loader was not constructed")
        return self._pipe

    def __repr__(self):
        return f"ddpio.Loader({self.path!r}, batch_size={self.batch_size})"


class _DeviceArray:
    """GPU memory of a batch, for torch.as_tensor (the CUDA array interface); `owner` (the host
    array of the batch, whose base holds the batch's slot and device buffer) lives as long."""

    def __init__(self, address, shape, typestr, owner):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (address, False),
                                         "version": 2, "strides": None}
        self._owner = owner


class _Epoch:
    """One pass over an epoch. Not a generator: it keeps no reference to the batch it handed out
    (a generator's frame would, holding one more batch), and an error — e.g. too many batches
    held — leaves it usable: the next call continues where it stood."""

    def __init__(self, loader, pipe):
        self._loader = loader
        self._pipe = pipe

    def __iter__(self):
        return self

    def __next__(self):
        loader = self._loader
        item = self._pipe.next()
        if item is None:
            raise StopIteration
        return loader._batch(item)
