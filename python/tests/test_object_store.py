"""Datasets in an object store, from Python: `ddpio.Dataset` and `ddpio.Loader` take an
s3://BUCKET/PREFIX URL as they take a path, and give exactly the local dataset's records and
batches. Runs against the S3 server the test command starts (scripts/object-store.sh, Ceph's
gateway: AWS_ENDPOINT_URL and the keys in the environment); skipped without one unless
DDPIO_REQUIRE_S3 is set."""
import os
import subprocess

import pytest

import ddpio
from conftest import uploaded


@pytest.fixture(scope="module")
def remote(program, dataset):
    return uploaded(program, dataset, f"ddpio-py-{os.getpid()}")


def test_a_dataset_by_url_gives_the_local_records(remote, dataset):
    local, there = ddpio.Dataset(dataset), ddpio.Dataset(remote)
    assert len(there) == len(local) == 21
    assert there.classes == local.classes
    for i in range(len(local)):
        assert there[i] == local[i], f"record {i}"
        assert there.source(i) == local.source(i)


def test_a_loader_by_url_gives_the_local_batches(remote, dataset):
    def batches(data):
        loader = ddpio.Loader(data, batch_size=4, image_size=24, shuffle=True, seed=3, arrays="numpy")
        return [(b["indices"].tolist(), b["labels"].tolist(), b["images"].tobytes()) for b in loader]

    assert batches(remote) == batches(dataset)
    loader = ddpio.Loader(remote, batch_size=4, image_size=24)
    assert sum(len(b["labels"]) for b in loader) == 21
    counters = loader.counters()
    assert counters["store_records_fetched"] == 21
    assert 0 < counters["store_requests"] < 21, "records were not fetched coalesced"
    assert "store_requests" not in ddpio.Loader(dataset, batch_size=4, image_size=24).counters()


def test_a_missing_remote_dataset_is_a_clear_error(remote):
    gone = remote.rsplit("/", 1)[0] + "/nothing-here"
    with pytest.raises(Exception) as e:
        ddpio.Dataset(gone)
    assert "no dataset at " + gone in str(e.value)


def test_a_resume_state_by_url_neither_rewinds_nor_resumes_another_dataset(remote, program, imagefolder, tmp_path):
    """Round 3's silent-data findings 1 and 3 against the real gateway: a state taken right after
    load_state_dict is the loaded one and resumes every remaining sample exactly once; a state of
    another dataset of the same size (another conversion of the same images, uploaded beside it)
    is refused."""
    options = dict(batch_size=4, image_size=24, seed=3, arrays="numpy")
    first = ddpio.Loader(remote, **options)
    it = iter(first)
    seen = [i for _ in range(2) for i in next(it)["indices"].tolist()]
    state = first.state_dict()
    first.close()
    resumed = ddpio.Loader(remote, **options)
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state, "a checkpoint here would rewind the epoch"
    seen += [i for b in resumed for i in b["indices"].tolist()]
    assert sorted(seen) == list(range(21)), "a sample trained twice or never"
    other = tmp_path / "other.lmdb"
    run = subprocess.run([program, "convert", "--src", str(imagefolder), "--out", str(other), "--quiet"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    other_url = remote.rsplit("/", 1)[0] + "/other"
    up = subprocess.run([program, "upload", str(other), other_url, "--quiet"], capture_output=True, text=True,
                        timeout=300)
    assert up.returncode == 0, up.stderr
    with pytest.raises(ValueError, match="another dataset"):
        ddpio.Loader(other_url, **options).load_state_dict(state)
