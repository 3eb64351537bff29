"""ddpio.Loader as a PyTorch user expects it: torch's argument names and attributes, seeds and
epochs as torch takes them (negatives; overflow raises as torch does), the default permutation
of the installed torch, one pass per iterator, explicit normalisation, non-square outputs,
torchvision transform objects, logging through Python's logging and warnings, and clear refusals
inside torch DataLoader workers."""
import logging
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import torch.utils.data
import torchvision.transforms as T
from PIL import Image

import ddpio
import ddpio.sampler


def torch_order(n, epoch, seed, num_replicas=1, rank=0):
    sampler = torch.utils.data.DistributedSampler(range(n), num_replicas=num_replicas, rank=rank, shuffle=True,
                                                  seed=seed)
    sampler.set_epoch(epoch)
    return list(sampler)


def indices_of(loader):
    return [i for batch in loader for i in batch["indices"].tolist()]


# --- seeds and epochs, as torch takes them --------------------------------------------------------
@pytest.mark.parametrize("seed, epoch", [(-1, 0), (0, -1), (-7, 3), ((1 << 64) - 1, 0), (-(1 << 63), 5)])
def test_negative_and_extreme_seeds_and_epochs_give_torchs_order(dataset, seed, epoch):
    n = len(ddpio.Dataset(dataset))
    loader = ddpio.Loader(dataset, batch_size=4, image_size=32, seed=seed)
    loader.set_epoch(epoch)
    assert indices_of(loader) == torch_order(n, epoch, seed)
    sampler = ddpio.DistributedSampler(n, num_replicas=1, rank=0, seed=seed)
    sampler.set_epoch(epoch)
    assert list(sampler) == torch_order(n, epoch, seed)


@pytest.mark.parametrize("seed, epoch", [((1 << 64) - 1, 1), (-(1 << 63), -1)])
def test_seed_plus_epoch_overflow_raises_as_torch_does(dataset, seed, epoch):
    n = len(ddpio.Dataset(dataset))
    torch_sampler = torch.utils.data.DistributedSampler(range(n), num_replicas=1, rank=0, seed=seed)
    torch_sampler.set_epoch(epoch)
    with pytest.raises(RuntimeError, match="Overflow when unpacking long"):
        list(torch_sampler)
    sampler = ddpio.DistributedSampler(n, num_replicas=1, rank=0, seed=seed)
    sampler.set_epoch(epoch)
    with pytest.raises(RuntimeError, match="Overflow when unpacking long"):
        list(sampler)
    loader = ddpio.Loader(dataset, batch_size=4, image_size=32, seed=seed)
    loader.set_epoch(epoch)
    with pytest.raises(RuntimeError, match="Overflow when unpacking long"):
        iter(loader)


# --- the default permutation is the installed torch's ---------------------------------------------
def test_the_default_permutation_follows_the_installed_torch(monkeypatch):
    large = ddpio.sampler.LARGE_RANDPERM
    assert ddpio.sampler.default_permutation(large - 1) == "torch"  # every torch agrees below
    # Debian's torch 1.13 draws the legacy order at this size (docs/SAMPLER.md).
    assert ddpio.DistributedSampler(large, num_replicas=1, rank=0).permutation == "torch-legacy"
    monkeypatch.setattr(ddpio.sampler, "_torch_version", lambda: (2, 6))
    assert ddpio.sampler.default_permutation(large) == "torch"
    monkeypatch.setattr(ddpio.sampler, "_torch_version", lambda: None)
    with pytest.raises(ValueError, match="torch is not installed"):
        ddpio.DistributedSampler(large, num_replicas=1, rank=0)
    assert ddpio.sampler.default_permutation(large - 1) == "torch"


def test_the_default_order_at_the_large_size_is_torch_1_13s():
    # torch 1.13 at n = 2^32/20 and seed 3 starts 3426982, 89012686, 34994671 (docs/SAMPLER.md);
    # current torch's algorithm does not.
    sampler = ddpio.DistributedSampler(ddpio.sampler.LARGE_RANDPERM, num_replicas=1, rank=0, seed=3)
    first = list(zip(range(3), iter(sampler)))
    assert [i for _, i in first] == [3426982, 89012686, 34994671]


# --- iterators ---------------------------------------------------------------------------------------
def test_a_second_iter_starts_its_own_pass_and_the_first_refuses(dataset):
    loader = ddpio.Loader(dataset, batch_size=4, image_size=32, seed=1)
    loader.set_epoch(2)
    whole = indices_of(loader)
    loader = ddpio.Loader(dataset, batch_size=4, image_size=32, seed=1)
    loader.set_epoch(2)
    first = iter(loader)
    next(first)
    second = iter(loader)
    assert [i for b in second for i in b["indices"].tolist()] == whole  # from the start
    with pytest.raises(RuntimeError, match="superseded by a later iter"):
        next(first)


def test_iterating_an_epoch_again_warns_naming_set_epoch(dataset):
    loader = ddpio.Loader(dataset, batch_size=8, image_size=32)
    indices_of(loader)
    with pytest.warns(UserWarning, match=r"loader\.set_epoch\(epoch\)"):
        indices_of(loader)
    loader.set_epoch(1)
    with warnings_as_errors():
        indices_of(loader)


class warnings_as_errors:
    def __enter__(self):
        import warnings
        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)


# --- torch's names and attributes ------------------------------------------------------------------
def test_torchs_argument_names_and_attributes(dataset):
    n = len(ddpio.Dataset(dataset))
    loader = ddpio.Loader(dataset, 4, True, num_workers=2, pin_memory=True, persistent_workers=True,
                          drop_last=True, image_size=32, seed=5)
    assert (loader.batch_size, loader.num_workers, loader.drop_last, loader.shuffle) == (4, 2, True, True)
    assert len(loader.dataset) == n and isinstance(loader.dataset, ddpio.Dataset)
    torch_loader = torch.utils.data.DataLoader(range(n), batch_size=4, drop_last=True,
                                               sampler=torch.utils.data.DistributedSampler(range(n), 1, 0))
    assert len(loader) == len(torch_loader)
    loader.set_epoch(3)
    assert list(loader.sampler) == torch_order(n, 3, 5)
    assert indices_of(loader) == torch_order(n, 3, 5)[:len(loader) * 4]
    with pytest.raises(ValueError, match="give one of them"):
        ddpio.Loader(dataset, batch_size=4, num_workers=1, workers=2)


def test_a_loader_refuses_dataloader_workers_at_once_saying_what_to_do(dataset, tmp_path):
    script = tmp_path / "workers.py"
    script.write_text(textwrap.dedent(f'''
        import sys, torch.utils.data as data, ddpio
        class Wrapped(data.IterableDataset):
            def __init__(self, loader):
                self.loader = loader
            def __iter__(self):
                return iter(self.loader)
        if __name__ == "__main__":
            loader = ddpio.Loader({str(dataset)!r}, batch_size=4, image_size=32)
            for context in ("fork", "spawn"):
                try:
                    for _ in data.DataLoader(Wrapped(loader), batch_size=None, num_workers=2,
                                             multiprocessing_context=context):
                        pass
                    print(context, "ran")
                except Exception as e:
                    print(context, type(e).__name__, " ".join(str(e).split()))
            print("parent still iterates", len(list(loader)))
        '''))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    fork = next(line for line in lines if line.startswith("fork"))
    spawn = next(line for line in lines if line.startswith("spawn"))
    assert "forked child" in fork and "iterate it directly" in fork, fork
    assert "TypeError" in spawn and "cannot be pickled" in spawn and "iterate it directly" in spawn, spawn
    assert "parent still iterates" in result.stdout
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(ddpio.Loader(dataset, batch_size=4, image_size=32))


# --- output --------------------------------------------------------------------------------------
def test_float_is_to_tensor_unless_normalize_says_otherwise(dataset):
    options = dict(batch_size=4, image_size=32, seed=21, train=False)
    as_uint8 = next(iter(ddpio.Loader(dataset, **options)))["images"]
    plain = next(iter(ddpio.Loader(dataset, output="float", **options)))["images"]
    assert torch.allclose(plain, as_uint8.float() / 255, rtol=0, atol=1e-6)  # ToTensor: [0, 1]
    mean, std = (0.5, 0.25, 0.75), (0.5, 0.5, 0.25)
    custom = next(iter(ddpio.Loader(dataset, output="float", normalize=(mean, std), **options)))["images"]
    want = (as_uint8.float() / 255 - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    assert torch.allclose(custom, want, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="normalize applies to output='float'"):
        ddpio.Loader(dataset, batch_size=4, normalize="imagenet")
    # uint8 batches are NCHW views of channels-last memory.
    assert as_uint8.is_contiguous(memory_format=torch.channels_last)


def test_non_square_eval_output_is_torchvisions_resize_and_center_crop(dataset_352px):
    h, w = 200, 256
    ds = ddpio.Dataset(dataset_352px)
    loader = ddpio.Loader(dataset_352px, batch_size=2, train=False, decode="exact", image_size=(h, w),
                          resize_size=280)
    reference = T.Compose([T.Resize(280), T.CenterCrop((h, w)), T.PILToTensor()])
    compared = 0
    for batch in loader:
        assert tuple(batch["images"].shape[1:]) == (3, h, w)
        for image, index in zip(batch["images"], batch["indices"].tolist()):
            import io
            want = reference(Image.open(io.BytesIO(ds[index][0])).convert("RGB"))
            diff = (image.int() - want.int()).abs()
            assert diff.max().item() <= 1 or (diff <= 1).float().mean().item() >= 0.999
            compared += 1
    assert compared == len(ds)


def test_torchvision_transform_objects_set_the_geometry(dataset):
    fixed = T.Compose([T.RandomResizedCrop((24, 40), scale=(1.0, 1.0), ratio=(1.0, 1.0)),
                       T.RandomHorizontalFlip(p=0.0)])
    loader = ddpio.Loader(dataset, batch_size=4, augment=fixed, seed=3)
    first = next(iter(loader))
    assert tuple(first["images"].shape[1:]) == (3, 24, 40)
    # Scale and ratio fixed at 1 and no flip: nothing random is left, so another epoch and
    # another seed give the same pixels for a sample (with torchvision's defaults they differ).
    other = ddpio.Loader(dataset, batch_size=4, augment=fixed, seed=99, shuffle=False)
    by_index = {i: img for b in other for i, img in zip(b["indices"].tolist(), b["images"])}
    for i, image in zip(first["indices"].tolist(), first["images"]):
        assert torch.equal(image, by_index[i])
    default = ddpio.Loader(dataset, batch_size=4, image_size=(24, 40), seed=99, shuffle=False)
    differ = sum(not torch.equal(img, by_index[i]) for b in default
                 for i, img in zip(b["indices"].tolist(), b["images"]))
    assert differ > 0
    evaluation = ddpio.Loader(dataset, batch_size=4, augment=[T.Resize(40), T.CenterCrop(32)], shuffle=False)
    explicit = ddpio.Loader(dataset, batch_size=4, train=False, resize_size=40, image_size=32, shuffle=False)
    for a, b in zip(evaluation, explicit):
        assert torch.equal(a["images"], b["images"])
    with pytest.raises(ValueError, match="ColorJitter is not applied by ddpio.Loader"):
        ddpio.Loader(dataset, batch_size=4, augment=T.Compose([T.RandomResizedCrop(32), T.ColorJitter(0.4)]))


# --- logging ---------------------------------------------------------------------------------------
def test_no_info_lines_on_stderr_by_default_and_logging_gets_them(dataset):
    quiet = ("import ddpio\n"
             f"loader = ddpio.Loader({str(dataset)!r}, batch_size=4, image_size=32)\n"
             "print(len(list(loader)))\n")
    result = subprocess.run([sys.executable, "-c", quiet], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    loud = ("import logging; logging.basicConfig(level=logging.INFO, format='%(levelname)s %(name)s %(message)s')\n"
            + quiet)
    result = subprocess.run([sys.executable, "-c", loud], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "INFO ddpio rank 0: joined job" in result.stderr, result.stderr
    assert "rendezvous.cc" not in result.stderr  # the place is an attribute, not the message
