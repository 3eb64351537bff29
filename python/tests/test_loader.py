"""ddpio.Loader in one process: its order and labels against torch's DistributedSampler and the
dataset, its eval pixels against torchvision's, the lifetime of the batches it hands out (held,
zero-copy, after close), float output, resume, argument checking, numpy arrays without torch, and
Ctrl-C. The multi-rank runs are in test_loader_torchrun.py."""
import gc
import io
import itertools
import inspect
import json
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.utils.data

import ddpio

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def torch_order(n, epoch, seed, num_replicas=1, rank=0):
    sampler = torch.utils.data.DistributedSampler(range(n), num_replicas=num_replicas, rank=rank, shuffle=True,
                                                  seed=seed)
    sampler.set_epoch(epoch)
    return list(sampler)


def epoch_indices(loader, epoch):
    loader.set_epoch(epoch)
    return [batch["indices"].tolist() for batch in loader]


# --- order and labels ----------------------------------------------------------------------------
def test_an_epoch_is_torchs_distributed_sampler_order_with_the_datasets_labels(dataset):
    ds = ddpio.Dataset(dataset)
    n = len(ds)
    labels = [ds[i][1] for i in range(n)]
    loader = ddpio.Loader(dataset, batch_size=4, image_size=32, seed=17, workers=2)
    assert loader.counters()["decode_threads"] == 2
    orders, first_batch = [], None
    for epoch in (0, 1):
        loader.set_epoch(epoch)
        assert len(loader) == 6  # ceil(21 / 4): the short last batch is kept (drop_last=False)
        got, steps, sizes = [], [], []
        for batch in loader:
            indices = batch["indices"].tolist()
            assert batch["labels"].dtype == torch.int64 and batch["indices"].dtype == torch.int64
            assert batch["labels"].tolist() == [labels[i] for i in indices], f"epoch {epoch} step {batch['step']}"
            assert batch["valid"].dtype == torch.bool and batch["valid"].all()
            assert batch["epoch"] == epoch
            images = batch["images"]
            assert images.dtype == torch.uint8 and tuple(images.shape) == (len(indices), 3, 32, 32)
            assert images.is_contiguous(memory_format=torch.channels_last)
            steps.append(batch["step"])
            sizes.append(len(indices))
            got += indices
            # Time to first batch: set by the loader's first batch, then kept.
            first_batch = first_batch or loader.counters()["time_to_first_batch_s"]
            assert 0 < first_batch == loader.counters()["time_to_first_batch_s"]
        # One replica: torch's total_size is n, so there is no padding to strip; the batches
        # concatenated are the sampler's whole epoch, in order.
        assert got == torch_order(n, epoch, seed=17), f"epoch {epoch}"
        assert steps == list(range(6)) and sizes == [4, 4, 4, 4, 4, 1]
        orders.append(got)
    assert orders[0] != orders[1]  # set_epoch reshuffles


def test_the_loops_wait_for_its_batches_is_counted(dataset_352px):
    # A loop that does nothing with its batches spends most of its epoch waiting for them (one
    # worker decoding ~352 px photos is the bound). The loader waits for a batch in slices (so
    # that Ctrl-C interrupts it) before taking it: loader_wait_s counts that wait too.
    import time
    loader = ddpio.Loader(dataset_352px, batch_size=2, image_size=224, workers=1, seed=5)
    seconds = 0.0
    for epoch in range(3):
        loader.set_epoch(epoch)
        start = time.perf_counter()
        assert sum(len(batch["indices"]) for batch in loader) == 6
        seconds += time.perf_counter() - start
    waited = loader.counters()["loader_wait_s"]
    assert 0.3 * seconds < waited <= seconds, (waited, seconds)


# --- pixels --------------------------------------------------------------------------------------
def test_eval_exact_decode_agrees_with_torchvision_resize_and_center_crop(dataset_352px):
    from PIL import Image
    from torchvision import transforms

    ds = ddpio.Dataset(dataset_352px)
    reference = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224)])
    loader = ddpio.Loader(dataset_352px, batch_size=4, image_size=224, train=False, decode="exact", shuffle=False)
    seen, within_one, equal = [], 0, 0
    total = 0
    for batch in loader:
        for image, i in zip(batch["images"], batch["indices"].tolist()):
            pil = Image.open(io.BytesIO(ds[i][0])).convert("RGB")
            assert min(pil.size) > 256, f"record {i} is {pil.size}: the fixture must be larger than Resize(256)"
            expected = torch.from_numpy(np.array(reference(pil))).permute(2, 0, 1)
            assert image.shape == expected.shape
            diff = (image.int() - expected.int()).abs()
            within_one += int((diff <= 1).sum())
            equal += int((diff == 0).sum())
            total += diff.numel()
            seen.append(i)
    assert seen == list(range(len(ds)))  # shuffle=False: the dataset's order
    fraction = within_one / total
    print(f"\nexact decode vs torchvision Resize(256)+CenterCrop(224): {fraction:.6f} of {total} values within 1 "
          f"level, {equal / total:.6f} equal")
    # Measured on these images: 1.000000 within 1 level (0.756 exactly equal; the rest differ by
    # one level, from rounding in the resampling's arithmetic, never more). The same comparison
    # against a crop shifted by one pixel gives 0.13, Resize(255) 0.18, bicubic 0.53 and nearest
    # 0.15, so 0.999 leaves room only for rare rounding ties, not for a wrong filter, size or crop.
    assert fraction >= 0.999


# --- lifetimes -----------------------------------------------------------------------------------
def test_kept_batches_never_change_while_later_batches_arrive(dataset):
    loader = ddpio.Loader(dataset, batch_size=4, image_size=32, seed=2, workers=2)
    batches_per_epoch = len(loader)
    assert batches_per_epoch == 6
    kept, clones = [], []
    for batch in loader:
        kept.append(batch)
        clones.append({k: batch[k].clone() for k in ("images", "labels", "indices", "valid")})
    assert len(kept) == batches_per_epoch
    kept_slots = [b["images"].data_ptr() for b in kept]
    assert len(set(kept_slots)) == len(kept), f"kept batches share memory: {kept_slots}"
    # A whole further epoch arrives while the first one's batches are all still held (within
    # held_memory, so zero-copy); none of them lands in a kept batch's memory.
    loader.set_epoch(1)
    later_slots = set()
    for batch in loader:
        later_slots.add(batch["images"].data_ptr())
    assert not later_slots & set(kept_slots)
    for step, (batch, clone) in enumerate(zip(kept, clones)):
        for key, value in clone.items():
            assert torch.equal(batch[key], value), f"kept batch {step}: {key} changed"
    assert len({tuple(c["indices"].tolist()) for c in clones}) == len(clones)  # six different batches


def test_keeping_more_than_held_memory_hands_out_copies_and_never_stalls(dataset):
    expected = epoch_indices(ddpio.Loader(dataset, batch_size=2, image_size=32, seed=4), 0)
    assert len(expected) == 11
    # held_memory of one byte: only the loop's own two zero-copy holds; every batch kept beyond
    # them is a copy in memory of its own, handed out at once (no held_timeout wait), one warning.
    loader = ddpio.Loader(dataset, batch_size=2, image_size=32, seed=4, held_memory=1, held_timeout=60)
    with pytest.warns(UserWarning, match="held_memory"):
        kept = list(loader)
    assert [b["indices"].tolist() for b in kept] == expected
    assert loader.counters()["batches_copied"] == len(expected) - 2
    slots = {b["images"].data_ptr() for b in kept}
    assert len(slots) == len(kept), "a copy shares memory with a kept batch"
    clones = [b["images"].clone() for b in kept]
    loader.set_epoch(1)
    for _ in loader:  # a whole further epoch while every batch of the first is kept
        pass
    for step, (batch, clone) in enumerate(zip(kept, clones)):
        assert torch.equal(batch["images"], clone), f"kept batch {step} changed"


def test_after_a_kept_batch_is_released_batches_are_zero_copy_again(dataset):
    expected = epoch_indices(ddpio.Loader(dataset, batch_size=2, image_size=32, seed=4), 0)
    one_batch = 2 * 32 * 32 * 3
    # held_memory of one batch: three zero-copy holds (the loop's own two, and one kept).
    loader = ddpio.Loader(dataset, batch_size=2, image_size=32, seed=4, held_memory=one_batch)
    it = iter(loader)
    kept = [next(it), next(it), next(it)]
    assert loader.counters()["batches_copied"] == 0
    with pytest.warns(UserWarning, match="held_memory"):
        fourth = next(it)  # every hold taken: a copy
    assert loader.counters()["batches_copied"] == 1
    assert fourth["images"].data_ptr() not in {b["images"].data_ptr() for b in kept}
    del kept[:2], fourth
    gc.collect()
    rest = [b["indices"].tolist() for b in it]  # one batch kept, the loop's two: no further copies
    assert loader.counters()["batches_copied"] == 1
    assert [kept[0]["indices"].tolist()] + rest == expected[2:3] + expected[4:]


def test_keeping_every_batchs_indices_labels_and_valid_never_pins_a_slot(dataset):
    # The loop of a script that logs what it trained on: the small arrays are copies, so keeping
    # them for the whole run costs no slot (no copies of images either, no stall).
    ds = ddpio.Dataset(dataset)
    loader = ddpio.Loader(dataset, batch_size=2, image_size=32, seed=8, held_memory=1, held_timeout=60)
    indices, labels, valid = [], [], []
    for epoch in range(3):
        loader.set_epoch(epoch)
        for batch in loader:
            indices.append(batch["indices"])
            labels.append(batch["labels"])
            valid.append(batch["valid"])
        order = torch.cat(indices[-11:]).tolist()
        assert sorted(order) == sorted(torch_order(len(ds), epoch, 8))
    assert loader.counters()["batches_copied"] == 0
    assert [ds[i][1] for i in torch.cat(indices).tolist()] == torch.cat(labels).tolist()
    assert bool(torch.cat(valid).all())


def test_unheld_batches_reuse_the_slot_pool(dataset):
    loader = ddpio.Loader(dataset, batch_size=2, image_size=32, seed=6, workers=1, prefetch=1, held_memory=1)
    slots = [batch["images"].data_ptr() for batch in loader]
    assert len(slots) == 11
    # Zero-copy from a bounded pool: at most max(prefetch, 1) + 2 slots with one worker (the fewest holds).
    assert len(set(slots)) <= 1 + 2, slots
    assert loader.counters()["batches_copied"] == 0


def test_a_batch_stays_valid_after_close_and_after_the_loader_is_gone(dataset):
    loader = ddpio.Loader(dataset, batch_size=4, image_size=32, seed=9, workers=2)
    it = iter(loader)
    first = next(it)
    second = next(it)
    clone = {k: first[k].clone() for k in ("images", "indices", "valid")}
    slot = first["images"].data_ptr()
    loader.close()
    with pytest.raises(ddpio.FailedPreconditionError):
        next(it)  # the pipeline is closed
    for key, value in clone.items():
        assert torch.equal(first[key], value), key
    del it, second, loader
    gc.collect()
    # Another loader allocates and fills slots of its own; none may be the held batch's memory.
    other = ddpio.Loader(dataset, batch_size=4, image_size=32, seed=10, workers=2)
    assert slot not in {batch["images"].data_ptr() for batch in other}
    del other
    gc.collect()
    for key, value in clone.items():
        assert torch.equal(first[key], value), key


def test_a_view_of_the_images_alone_keeps_its_slot(dataset):
    loader = ddpio.Loader(dataset, batch_size=4, image_size=32, seed=12, workers=2)
    it = iter(loader)
    batch = next(it)
    slot = batch["images"].data_ptr()
    view = batch["images"][1:3].permute(0, 2, 3, 1)  # a view: the HWC memory of samples 1 and 2
    assert view.data_ptr() != slot and view.storage().data_ptr() == slot
    clone = view.clone()
    del batch  # only the view is kept
    later = {b["images"].data_ptr() for b in it}  # the rest of the epoch, then another one
    loader.set_epoch(1)
    later |= {b["images"].data_ptr() for b in loader}
    assert slot not in later
    assert torch.equal(view, clone)


# --- output --------------------------------------------------------------------------------------
def test_float_output_is_the_uint8_output_normalised(dataset):
    options = dict(batch_size=4, image_size=32, seed=21, workers=2)  # train: random crops and flips
    as_uint8 = ddpio.Loader(dataset, **options)
    as_float = ddpio.Loader(dataset, output="float", normalize="imagenet", **options)
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    for epoch in (0, 1):
        as_uint8.set_epoch(epoch)
        as_float.set_epoch(epoch)
        pairs = 0
        # Compared as they come.
        for u, f in itertools.zip_longest(as_uint8, as_float):
            assert u is not None and f is not None, f"epoch {epoch}: the loaders' lengths differ"
            pairs += 1
            assert f["indices"].tolist() == u["indices"].tolist()
            assert f["labels"].tolist() == u["labels"].tolist()
            images = f["images"]
            assert images.dtype == torch.float32 and tuple(images.shape) == tuple(u["images"].shape)
            assert images.is_contiguous()
            expected = (u["images"].float() / 255 - mean) / std
            assert torch.allclose(images, expected, rtol=0, atol=1e-5), (images - expected).abs().max()
        assert pairs == 6


# --- resume --------------------------------------------------------------------------------------
def test_a_new_loader_resumes_the_epoch_from_state_dict(dataset):
    options = dict(batch_size=4, image_size=32, seed=5, workers=2)
    ds = ddpio.Dataset(dataset)
    uninterrupted = epoch_indices(ddpio.Loader(dataset, **options), 3)
    assert len(uninterrupted) == 6
    first = ddpio.Loader(dataset, **options)
    first.set_epoch(3)
    it = iter(first)
    taken = [next(it)["indices"].tolist() for _ in range(2)]
    assert taken == uninterrupted[:2]
    state = first.state_dict()
    # Two batches handed out: 8 samples, whatever the loader prefetched behind them.
    assert {key: state[key] for key in ("epoch", "position", "dataset_size")} == \
        {"epoch": 3, "position": 8, "dataset_size": len(ds)}
    # With what the order depends on (test_loader_resume.py refuses a state of another order).
    assert {key: state[key] for key in ("version", "shuffle", "seed", "padding", "permutation")} == \
        {"version": 3, "shuffle": True, "seed": 5, "padding": "pad", "permutation": "torch"}
    assert len(state["dataset"]) == 16
    first.close()
    second = ddpio.Loader(dataset, **options)
    second.load_state_dict(state)
    rest = []
    for batch in second:
        assert batch["epoch"] == 3
        assert batch["labels"].tolist() == [ds[i][1] for i in batch["indices"].tolist()]
        rest.append(batch["indices"].tolist())
    assert rest == uninterrupted[2:]
    # A resumed position serves one pass: the next iteration is the whole epoch again.
    assert [b["indices"].tolist() for b in second] == uninterrupted


# --- arguments -----------------------------------------------------------------------------------
@pytest.mark.parametrize("argument, value, says", [
    ("batch_size", 0, "batch_size must be an integer in \\[1, 65536\\], got 0"),
    ("batch_size", -3, "batch_size must be an integer in \\[1, 65536\\], got -3"),
    ("batch_size", 2.5, "batch_size must be an integer, got 2.5"),
    ("batch_size", True, "batch_size must be an integer, got True"),
    ("decode", "slow", "decode must be one of fast, exact, got \"slow\""),
    ("mode", "broadcast", "mode must be one of shard, replicate, got \"broadcast\""),
    ("image_size", -1, "image_size must be an integer in \\[1, 8192\\], got -1"),
    ("image_size", 9000, "image_size must be an integer in \\[1, 8192\\], got 9000"),
    ("workers", -1, "num_workers: workers must be an integer in \\[0, 1024\\], got -1"),
    ("num_workers", -1, "num_workers: workers must be an integer in \\[0, 1024\\], got -1"),
    ("prefetch", 0, "prefetch must be an integer in \\[1, 1024\\], got 0"),
    ("group_size", 0, "group_size must be an integer in \\[1, 1048576\\], got 0"),
    ("timeout", 0, "timeout must be a number of seconds in \\(0, 604800\\], got 0"),
    ("timeout", float("nan"), "timeout must be a number of seconds in"),
    ("held_timeout", -1, "held_timeout must be a number of seconds in \\[0, 604800\\], got -1"),
    ("read_ahead", -1, "read_ahead must be an integer in \\[0, 1048576\\], got -1"),
    ("depth", 0, "depth must be an integer in \\[1, 1024\\], got 0"),
    ("cache_gb", 0, "cache_gb must be a number in \\(0, 1000000\\], got 0"),
    ("cache_dir", 3, "cache_dir must be a str, got 3"),
    ("held_memory", -1, "held_memory must be at least 0, got -1"),
    ("normalize", (0.5, 0.5), "normalize mean must be three numbers"),
    ("normalize", ((0, 0, 0), (1, 0, 1)), "normalize: stddev must be three finite numbers, none 0"),
    ("permutation", "random", "permutation must be one of torch, torch-legacy, feistel"),
    ("arrays", "list", "arrays must be one of"),
])
def test_an_invalid_argument_is_a_value_error_naming_it(dataset, argument, value, says):
    # One rule per setting: the library's check (Pipeline::CheckOptions) runs for Python too, with
    # the Loader's keyword in front where the setting's own name differs.
    options = dict(batch_size=4, output="float")
    options[argument] = value
    with pytest.raises(ValueError, match=says):
        ddpio.Loader(dataset, **options)


def test_the_signature_shows_the_librarys_defaults(dataset):
    # Every setting of the library's table is a keyword of its own name whose default is the
    # table's (None where the Loader derives it: shuffle from train, permutation from the installed
    # torch, image_size and train from augment), or is set through another argument the Loader
    # names. A setting added to the table and forgotten here fails this test.
    from ddpio.loader import _DERIVED
    defaults = ddpio._ddpio.pipeline_defaults()
    table = ddpio._ddpio.pipeline_settings()
    assert [row["name"] for row in table] == list(defaults)
    signature = inspect.signature(ddpio.Loader).parameters
    for row in table:
        name = row["name"]
        if name in _DERIVED:
            assert name not in signature or name == "workers", name
            continue
        assert name in signature, f"the setting {name} is no keyword of ddpio.Loader"
        if name == "batch_size":  # torch's DataLoader's default, as a drop-in replacement's
            assert signature[name].default == 1
            continue
        assert signature[name].default in (defaults[name], None), name
        if signature[name].default is None:
            assert name in ("shuffle", "permutation", "image_size", "train", "cache_dir", "cache_gb",
                            "whole_chunks", "seq_len"), name
    for setting, keyword in _DERIVED.items():  # each derived setting names a real argument
        assert keyword in signature or not keyword.isidentifier(), (setting, keyword)
    loader = ddpio.Loader(dataset, arrays="numpy")  # image_size, train and workers by default
    assert loader.num_workers == defaults["workers"]
    size = defaults["image_size"]
    assert next(iter(loader))["images"].shape[1:] == (3, size, size)


def test_a_missing_dataset_is_file_not_found_naming_it(tmp_path):
    missing = tmp_path / "nowhere.lmdb"
    with pytest.raises(FileNotFoundError) as raised:
        ddpio.Loader(missing, batch_size=4)
    assert isinstance(raised.value, ddpio.Error)
    assert str(missing) in str(raised.value)


# --- numpy ---------------------------------------------------------------------------------------
def test_numpy_arrays_without_importing_torch(dataset):
    code = (
        "import json, sys\n"
        "import ddpio\n"
        "import numpy as np\n"
        f"l = ddpio.Loader({str(dataset)!r}, batch_size=4, image_size=32, arrays='numpy')\n"
        "b = next(iter(l))\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'type': type(b['images']).__name__,\n"
        "                  'shape': list(b['images'].shape), 'dtype': str(b['images'].dtype),\n"
        "                  'labels': type(b['labels']).__name__, 'indices': b['indices'].tolist()}))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["torch"] is False, "ddpio.Loader(arrays='numpy') imported torch"
    assert got["type"] == "ndarray" and got["labels"] == "ndarray"
    assert got["shape"] == [4, 3, 32, 32] and got["dtype"] == "uint8"
    assert got["indices"] == torch_order(21, 0, seed=0)[:4]


# --- signals -------------------------------------------------------------------------------------
def test_ctrl_c_mid_epoch_ends_the_process_with_keyboard_interrupt(dataset_96px):
    code = (
        "import ddpio\n"
        f"loader = ddpio.Loader({str(dataset_96px)!r}, batch_size=8, image_size=64, workers=2)\n"
        "started = False\n"
        "for epoch in range(1000000):\n"
        "    loader.set_epoch(epoch)\n"
        "    for batch in loader:\n"
        "        if not started:\n"
        "            print('started', flush=True)\n"
        "            started = True\n"
        "print('finished', flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # blocks until the first batch arrived (or the process died)
        assert line == "started\n", f"{line!r}: {proc.communicate(timeout=30)[1]}"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0, (out, err)
    assert "KeyboardInterrupt" in err, err
    assert "finished" not in out


def test_a_cuda_device_without_a_usable_gpu_is_a_clear_error(dataset):
    # This machine has no GPU: the loader says so, with CUDA's reason, before joining any job.
    with pytest.raises(ddpio.FailedPreconditionError, match=r"device cuda:0 asked for, but ddpio cannot use it: .+"):
        ddpio.Loader(dataset, batch_size=4, image_size=32, device="cuda")
    with pytest.raises(ValueError, match="device must be None, 'cpu' or a CUDA device"):
        ddpio.Loader(dataset, batch_size=4, image_size=32, device="meta")
    batch = next(iter(ddpio.Loader(dataset, batch_size=4, image_size=32, device="cpu")))
    assert batch["images"].device.type == "cpu"


def test_threads_sharing_one_epoch_get_every_batch_once(dataset_96px):
    # Python threads may share a loader's epoch (e.g. a prefetching thread): calls into the C++
    # pipeline are serialised, so each batch goes to exactly one thread and none is lost.
    import collections
    import threading
    loader = ddpio.Loader(dataset_96px, batch_size=4, image_size=32, workers=2)
    want = len(loader)
    for epoch in range(3):
        loader.set_epoch(epoch)
        batches = iter(loader)
        steps, errors = collections.Counter(), []

        def take():
            try:
                for batch in batches:
                    steps[batch["step"]] += 1
            except Exception as e:  # reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=take) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert sorted(steps) == list(range(want)) and set(steps.values()) == {1}
