"""Fixtures: the ddpio program under test and a small converted dataset made with it."""
import os
import subprocess

import pytest


@pytest.fixture(scope="session")
def program():
    path = os.environ.get("DDPIO_PROGRAM")
    if not path:
        pytest.fail("DDPIO_PROGRAM must name the ddpio program under test (ctest sets it)")
    return path


def run(program, *args):
    result = subprocess.run([program, *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"ddpio {' '.join(args)}: {result.stderr}"
    return result


@pytest.fixture(scope="session")
def imagefolder(program, tmp_path_factory):
    """A synthetic ImageFolder: 3 classes x 7 JPEGs."""
    src = tmp_path_factory.mktemp("src") / "images"
    run(program, "synth", "--out", str(src), "--classes", "3", "--per-class", "7", "--size", "32", "--quiet")
    return src


@pytest.fixture(scope="session")
def dataset(program, imagefolder, tmp_path_factory):
    """The ImageFolder converted: the path of the dataset."""
    out = tmp_path_factory.mktemp("db") / "train.lmdb"
    run(program, "convert", "--src", str(imagefolder), "--out", str(out), "--quiet")
    return out


@pytest.fixture(scope="session")
def dataset_96px(program, tmp_path_factory):
    """A larger dataset for runs that must last: 3 classes x 33 JPEGs of about 96 px (99 records,
    not a multiple of 4 ranks, so the sampler pads)."""
    root = tmp_path_factory.mktemp("db96")
    run(program, "synth", "--out", str(root / "images"), "--classes", "3", "--per-class", "33", "--size", "96",
        "--quiet")
    run(program, "convert", "--src", str(root / "images"), "--out", str(root / "train.lmdb"), "--quiet")
    return root / "train.lmdb"


@pytest.fixture(scope="session")
def dataset_352px(program, tmp_path_factory):
    """Images larger than torchvision's eval Resize(256): 2 classes x 3 JPEGs of about 352 px
    (each side 0.8-1.25x, so at least 281 px)."""
    root = tmp_path_factory.mktemp("db352")
    run(program, "synth", "--out", str(root / "images"), "--classes", "2", "--per-class", "3", "--size", "352",
        "--quiet")
    run(program, "convert", "--src", str(root / "images"), "--out", str(root / "train.lmdb"), "--quiet")
    return root / "train.lmdb"
