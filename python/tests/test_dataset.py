"""ddpio.Dataset against the ImageFolder it was converted from, as torchvision reads it."""
import os
import re
import shutil
import subprocess
import sys

import pytest

import ddpio


def _pixels(source):
    import io
    from PIL import Image

    with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as im:
        return im.convert("RGB").tobytes()


def test_records_are_the_imagefolder_files_with_torchvisions_labels(dataset, imagefolder):
    from torchvision.datasets import ImageFolder

    folder = ImageFolder(str(imagefolder))
    ds = ddpio.Dataset(dataset)
    assert len(ds) == len(folder.samples) == 21
    assert ds.classes == folder.classes
    for i, (path, label) in enumerate(folder.samples):
        payload, got_label = ds[i]
        # The default conversion re-writes each JPEG with restart markers, losslessly: the bytes
        # differ, the pixels Pillow decodes do not.
        with open(path, "rb") as f:
            assert payload != f.read()
        assert _pixels(payload) == _pixels(path), f"record {i} is not {path}"
        assert got_label == label
    assert ds[-1] == ds[20]
    info = ds.info()
    assert info["size"] == 21 and info["classes"] == 3 and info["source_kind"] == "imagefolder"


def test_out_of_range_index_and_missing_path(dataset, tmp_path):
    ds = ddpio.Dataset(dataset)
    with pytest.raises(IndexError, match="outside the dataset's 21 records"):
        ds[21]
    with pytest.raises(IndexError, match="index -22 is outside"):
        ds[-22]
    with pytest.raises(IndexError):
        ds[2**63]
    with pytest.raises(TypeError):
        ds["0"]
    with pytest.raises(FileNotFoundError) as e:
        ddpio.Dataset(tmp_path / "nowhere")
    assert isinstance(e.value, ddpio.Error)
    assert "nowhere" in str(e.value)


def test_torch_dataloader_workers_read_the_same_records(dataset):
    """Forked DataLoader workers reopen the dataset (LMDB forbids using a parent's environment)."""
    import torch.utils.data

    ds = ddpio.Dataset(dataset)
    expected = [ds[i] for i in range(len(ds))]  # the parent has the dataset open before forking
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, collate_fn=lambda b: b)
    got = [sample for batch in loader for sample in batch]
    assert got == expected


def test_a_damaged_record_is_data_loss_naming_it(dataset, tmp_path):
    copy = tmp_path / "damaged.lmdb"
    shutil.copytree(dataset, copy) if os.path.isdir(dataset) else shutil.copy(dataset, copy)
    data_file = copy / "data.mdb" if os.path.isdir(copy) else copy
    payload, _ = ddpio.Dataset(dataset)[5]
    raw = bytearray(data_file.read_bytes())
    at = raw.find(payload)
    assert at > 0, "record 5's bytes not found in the file"
    raw[at + len(payload) // 2] ^= 0xFF
    data_file.write_bytes(bytes(raw))
    ds = ddpio.Dataset(copy)
    with pytest.raises(ddpio.DataLossError, match="5"):
        ds[5]
    assert ds[4][0]  # the others still read


def test_python_m_ddpio_runs_the_program(dataset, program):
    result = subprocess.run([sys.executable, "-m", "ddpio", "inspect", str(dataset)], capture_output=True,
                            text=True, timeout=60, env={**os.environ, "DDPIO_PROGRAM": program})
    assert result.returncode == 0, result.stderr
    assert re.search(r"records\s+21 ", result.stdout), result.stdout
    bad = subprocess.run([sys.executable, "-m", "ddpio", "convert", "--no-such-flag"], capture_output=True,
                         text=True, timeout=60, env={**os.environ, "DDPIO_PROGRAM": program})
    assert bad.returncode == 2  # the program's own usage error, passed through


def test_a_forked_child_opens_its_own_environment(dataset):
    """LMDB forbids using an environment opened before fork: the child maps the file anew."""
    ds = ddpio.Dataset(dataset)
    expected = ds[1]
    data_file = os.path.realpath(os.path.join(dataset, "data.mdb") if os.path.isdir(dataset) else dataset)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        ok = ds[1] == expected
        with open("/proc/self/maps") as maps:
            mappings = {line.split()[0] for line in maps if line.rstrip().endswith(data_file)}
        os.write(write, f"{int(ok)} {len(mappings)}".encode())
        os._exit(0)
    os.close(write)
    answer = os.read(read, 100).decode().split()
    os.waitpid(pid, 0)
    assert answer == ["1", "2"], "the child read through the environment it inherited"


def test_relative_paths_survive_a_change_of_directory(dataset, monkeypatch):
    import pickle

    monkeypatch.chdir(os.path.dirname(dataset))
    ds = ddpio.Dataset(os.path.basename(dataset))
    monkeypatch.chdir("/")
    assert pickle.loads(pickle.dumps(ds))[0] == ds[0]


def test_messages_with_non_utf8_bytes_are_kept(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nowhere-\\xff"):
        ddpio.Dataset(os.fsdecode(bytes(tmp_path) + b"/nowhere-\xff"))


def test_python_m_ddpio_finds_the_program_of_the_build_tree(dataset):
    env = {k: v for k, v in os.environ.items() if k != "DDPIO_PROGRAM"}
    env["PATH"] = "/usr/bin:/bin"
    result = subprocess.run([sys.executable, "-m", "ddpio", "info"], capture_output=True, text=True,
                            timeout=60, env=env)
    assert result.returncode == 0, result.stderr


def test_names_that_are_not_utf8_come_back_as_the_os_gives_them(program, tmp_path):
    # A class folder and a file whose names are Latin-1 bytes: the program stores names as bytes;
    # Python gets str decoded the way os.listdir decodes them (surrogateescape), never a
    # UnicodeDecodeError, and os.fsencode gives back the exact bytes.
    src = tmp_path / "src"
    subprocess.run([program, "synth", "--out", str(src), "--classes", "2", "--per-class", "2", "--size", "32",
                    "--quiet"], check=True, capture_output=True)
    first_class = sorted(os.listdir(src))[0]
    old_dir = os.path.join(bytes(src), os.fsencode(first_class))
    new_dir = os.path.join(bytes(src), b"caf\xe9")
    os.rename(old_dir, new_dir)
    name = sorted(os.listdir(new_dir))[0]
    os.rename(os.path.join(new_dir, name), os.path.join(new_dir, b"\xff\xfe photo.jpg"))
    db = tmp_path / "db"
    subprocess.run([program, "convert", "--src", str(src), "--out", str(db), "--quiet"], check=True,
                   capture_output=True)
    ds = ddpio.Dataset(db)
    sources = [ds.source(i) for i in range(len(ds))]
    assert all(isinstance(s, str) for s in sources)
    assert b"caf\xe9/\xff\xfe photo.jpg" in [os.fsencode(s) for s in sources]
    # Class names live in the JSON header, which holds UTF-8 only: a byte that is not UTF-8 was
    # replaced (U+FFFD) at conversion, as the program prints it; no exception either way.
    assert "caf\ufffd" in ds.classes
