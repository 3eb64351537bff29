"""ddpio.convert: a folder converted from Python is what `ddpio convert` makes of it, with progress,
cancellation that leaves a resumable dataset, paths of any bytes, and clear errors."""
import logging
import os
import shutil

import pytest

import ddpio
import ddpio._logging


def _records(path):
    ds = ddpio.Dataset(path)
    return ds.classes, [(ds[i], ds.source(i)) for i in range(len(ds))]


class Recorder:
    """A progress callable keeping what it was given; `stop` is returned (or raised) from the
    `after`-th call on."""

    def __init__(self, stop=None, after=1):
        self.calls = []
        self.stop = stop
        self.after = after

    def __call__(self, p):
        assert isinstance(p, ddpio.ConvertProgress)
        self.calls.append((p.entries_done, p.entries_total, p.records, p.skipped, p.source_bytes_read, p.final))
        if self.stop is not None and len(self.calls) >= self.after:
            if isinstance(self.stop, BaseException):
                raise self.stop
            return self.stop
        return None


def _check_monotone_to_the_end(calls, total):
    assert calls, "progress was never called"
    done = [c[0] for c in calls]
    assert done == sorted(done)
    assert all(c[1] == total for c in calls)
    assert [c[5] for c in calls] == [False] * (len(calls) - 1) + [True]  # final once, at the end
    last = calls[-1]
    assert last[0] == total and last[2] == total and last[3] == 0
    assert last[4] > 0


def test_converts_a_folder_as_the_program_does(imagefolder, dataset, tmp_path):
    progress = Recorder()
    summary = ddpio.convert(imagefolder, tmp_path / "py.lmdb", threads=2, progress=progress)
    assert summary["records"] == 21 and summary["classes"] == 3 and summary["entries"] == 21
    assert summary["out"] == str(tmp_path / "py.lmdb") and not summary["already_complete"]
    assert summary["skipped"] == [] and sum(summary["stored_as"].values()) == 21
    _check_monotone_to_the_end(progress.calls, 21)
    assert _records(tmp_path / "py.lmdb") == _records(dataset)


def test_sharded_conversion_reads_as_the_unsharded_one(imagefolder, dataset, tmp_path):
    progress = Recorder()
    summary = ddpio.convert(str(imagefolder), str(tmp_path / "sharded"), shards=3, progress=progress)
    assert summary["records"] == 21
    _check_monotone_to_the_end(progress.calls, 21)
    assert _records(tmp_path / "sharded") == _records(dataset)


@pytest.mark.parametrize("shards", [1, 2])
def test_a_cancelling_callback_leaves_a_resumable_dataset(imagefolder, dataset, tmp_path, shards):
    out = tmp_path / "cancelled"
    with pytest.raises(ddpio.CancelledError, match="resume"):
        ddpio.convert(imagefolder, out, shards=shards, batch_records=4, progress=Recorder(stop=False))
    assert out.exists()
    with pytest.raises(ddpio.Error):
        ddpio.Dataset(out)  # incomplete: never presented as a dataset
    with pytest.raises(ddpio.AlreadyExistsError) as refused:
        ddpio.convert(imagefolder, out, shards=shards, batch_records=4)  # not without resume
    # Said in ddpio.convert's terms, never the program's flags.
    assert "resume=True" in str(refused.value) and "--" not in str(refused.value), refused.value
    progress = Recorder()
    summary = ddpio.convert(imagefolder, out, shards=shards, batch_records=4, resume=True, progress=progress)
    assert summary["records"] == 21
    _check_monotone_to_the_end(progress.calls, 21)
    assert _records(out) == _records(dataset)
    again = ddpio.convert(imagefolder, out, shards=shards, batch_records=4, resume=True)
    assert again["already_complete"]


@pytest.mark.parametrize("exception", [RuntimeError("from the callback"), KeyboardInterrupt()])
def test_an_exception_in_the_callback_stops_and_is_raised(imagefolder, dataset, tmp_path, exception):
    out = tmp_path / "raised"
    with pytest.raises(type(exception)) as raised:
        ddpio.convert(imagefolder, out, progress=Recorder(stop=exception))
    assert raised.value is exception
    with pytest.raises(ddpio.Error):
        ddpio.Dataset(out)
    ddpio.convert(imagefolder, out, resume=True)
    assert _records(out) == _records(dataset)


def test_a_list_file_source(imagefolder, tmp_path):
    ds_folder = sorted(p for p in imagefolder.rglob("*.jpg"))[:5]
    listing = tmp_path / "train.txt"
    listing.write_text("".join(f"{p.relative_to(imagefolder)} {i % 2}\n" for i, p in enumerate(ds_folder)))
    summary = ddpio.convert(listing, tmp_path / "list.lmdb", source="list", list_root=imagefolder)
    assert summary["records"] == 5 and summary["classes"] == 2
    ds = ddpio.Dataset(tmp_path / "list.lmdb")
    assert [ds[i][1] for i in range(5)] == [0, 1, 0, 1, 0]


def test_bad_arguments_are_clear_errors(imagefolder, dataset, tmp_path):
    with pytest.raises(ValueError, match="imagefolder, list, caffe-lmdb, dataset"):
        ddpio.convert(imagefolder, tmp_path / "a", source="tfrecord")
    with pytest.raises(ddpio.InvalidArgumentError, match="shards"):
        ddpio.convert(imagefolder, tmp_path / "a", shards=0)
    with pytest.raises(ValueError, match="quality"):
        ddpio.convert(imagefolder, tmp_path / "a", max_side=64, quality=101)
    with pytest.raises(ValueError, match="out is empty"):
        ddpio.convert(imagefolder)
    with pytest.raises(ValueError, match="list_root"):
        ddpio.convert(imagefolder, tmp_path / "a", list_root=tmp_path)
    with pytest.raises(TypeError, match="progress"):
        ddpio.convert(imagefolder, tmp_path / "a", progress=42)
    with pytest.raises(FileNotFoundError):
        ddpio.convert(tmp_path / "missing", tmp_path / "a")
    with pytest.raises(FileExistsError, match="resume"):
        ddpio.convert(imagefolder, dataset)
    assert not (tmp_path / "a").exists()


def test_paths_that_are_not_utf8_convert_and_come_back_as_their_bytes(imagefolder, dataset, tmp_path, caplog):
    # Linux names are bytes: a source folder, a skipped file and the output named in Latin-1.
    root = os.fsencode(tmp_path)
    src, out = root + b"/images-\xe9t\xe9", root + b"/caf\xe9.lmdb"
    shutil.copytree(os.fsencode(imagefolder), src)
    first_class = sorted(os.listdir(src))[0]
    bad = src + b"/" + first_class + b"/broken-\xff.jpg"
    with open(bad, "wb") as f:
        f.write(b"not a JPEG")
    summary = ddpio.convert(src, out, threads=2, skip_invalid=True)
    # Each name a str that os.fsencode turns back into its exact bytes (surrogateescape).
    assert os.fsencode(summary["out"]) == out and os.fsencode(summary["source"]) == src
    assert summary["records"] == 21 and len(summary["skipped"]) == 1
    assert os.fsencode(summary["skipped"][0]["source"]) == first_class + b"/broken-\xff.jpg"
    assert isinstance(summary["skipped"][0]["reason"], str) and summary["skipped"][0]["reason"]
    assert _records(out) == _records(dataset)
    # The core's warning about the skipped file quotes its path: logged with the bytes escaped, and
    # the thread forwarding the core's lines to logging lives on.
    with caplog.at_level(logging.WARNING, logger="ddpio"):
        ddpio._logging.flush()
        ddpio.convert(src, root + b"/again-\xe9.lmdb", skip_invalid=True)
        ddpio._logging.flush()
    assert ddpio._logging._thread.is_alive()
    assert any("broken-\\xff.jpg" in r.getMessage() for r in caplog.records), caplog.records
