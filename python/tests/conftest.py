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


def uploaded(program, dataset, bucket):
    """`dataset` uploaded to s3://BUCKET/train on the S3 server the test command starts
    (AWS_ENDPOINT_URL and the keys in the environment): its URL. Skips without one, unless
    DDPIO_REQUIRE_S3 is set."""
    if not os.environ.get("AWS_ENDPOINT_URL"):
        if os.environ.get("DDPIO_REQUIRE_S3"):
            pytest.fail("DDPIO_REQUIRE_S3 is set but AWS_ENDPOINT_URL is not: start scripts/object-store.sh up")
        pytest.skip("no S3 endpoint (AWS_ENDPOINT_URL): scripts/object-store.sh up starts one")
    url = f"s3://{bucket}/train"
    result = subprocess.run([program, "upload", str(dataset), url, "--create-bucket", "--quiet"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return url


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
