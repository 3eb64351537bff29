"""A dataset file cut short under a running process: reading it raises ddpio.DataLossError, which a
training script can catch (its `finally` blocks run, it can save a checkpoint), instead of the
process ending with exit status 1 and no Python exception. Each scenario runs in a child
interpreter, so that a regression that ends the process fails the test instead of ending pytest."""
import shutil
import subprocess
import sys

import pytest

CUT_TO = 8192  # bytes: LMDB's two meta pages; every record lies past them


@pytest.fixture
def copy_96px(dataset_96px, tmp_path):
    """A copy of the session's dataset, to be damaged."""
    copy = tmp_path / "train.lmdb"
    shutil.copytree(dataset_96px, copy)
    return copy


def run_child(code):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def test_a_loader_over_a_file_cut_short_raises_data_loss_error(copy_96px):
    data = copy_96px / "data.mdb"
    out = run_child(
        "import os\n"
        "import ddpio\n"
        f"loader = ddpio.Loader({str(copy_96px)!r}, batch_size=4, train=False, image_size=32, workers=1)\n"
        f"ds = ddpio.Dataset({str(copy_96px)!r})\n"
        "it = iter(loader)\n"
        "first = next(it)\n"
        "assert first['images'].shape[0] == 4\n"
        "print('first batch', flush=True)\n"
        f"os.truncate({str(data)!r}, {CUT_TO})\n"
        "batches = 1\n"
        "try:\n"
        "    try:\n"
        "        for batch in it:\n"
        "            batches += 1\n"
        "    finally:\n"
        "        print('finally ran', flush=True)\n"
        "except ddpio.DataLossError as e:\n"
        "    print('loader raised:', e, flush=True)\n"
        "else:\n"
        "    print('loader finished the epoch', flush=True)\n"
        "try:\n"
        "    ds[50]\n"
        "except ddpio.DataLossError as e:\n"
        "    print('dataset raised:', e, flush=True)\n"
        "print('alive after', batches, 'batches', flush=True)\n")
    lines = out.splitlines()
    assert "first batch" in lines and "finally ran" in lines, out
    raised = [line for line in lines if line.startswith("loader raised:")]
    assert raised, out
    assert str(data) in raised[0] and "truncated or replaced under the running process" in raised[0], raised[0]
    assert "`ddpio inspect --verify` checks every record" in raised[0], raised[0]
    # Batches decoded before the cut may still arrive; the 25-batch epoch cannot finish.
    alive = [line for line in lines if line.startswith("alive after")]
    assert alive and int(alive[0].split()[2]) < 25, out
    # The dataset shares the file's map: poisoned too.
    dataset_raised = [line for line in lines if line.startswith("dataset raised:")]
    assert dataset_raised and str(data) in dataset_raised[0], out


def test_a_dataset_over_a_file_cut_short_raises_data_loss_error(copy_96px):
    data = copy_96px / "data.mdb"
    out = run_child(
        "import os\n"
        "import ddpio\n"
        f"ds = ddpio.Dataset({str(copy_96px)!r})\n"
        "image, label = ds[98]\n"
        "assert len(image) > 0\n"
        f"os.truncate({str(data)!r}, {CUT_TO})\n"
        "for i in (98, 98, 0):\n"
        "    try:\n"
        "        ds[i]\n"
        "    except ddpio.DataLossError as e:\n"
        "        print('raised:', i, e, flush=True)\n"
        "    else:\n"
        "        print('read:', i, flush=True)\n"
        "try:\n"
        f"    ddpio.Dataset({str(copy_96px)!r})\n"
        "except ddpio.DataLossError as e:\n"
        "    print('reopen raised:', e, flush=True)\n"
        "print('alive', flush=True)\n")
    lines = out.splitlines()
    raised = [line for line in lines if line.startswith("raised:")]
    # Every read fails once the file is cut, the second read of a record too: its pages were
    # replaced with zeros at the first, and the dataset stays poisoned so they never pass for data.
    assert len(raised) == 3, out
    for line in raised:
        assert str(data) in line and "truncated or replaced under the running process" in line, line
    assert any(line.startswith("reopen raised:") and "truncated" in line for line in lines), out
    assert lines[-1] == "alive", out
