"""Token datasets: conversions that give exactly the ids of SentencePiece's own encode (real text:
Debian's copyright files, a model trained on them here), of a Megatron-LM indexed dataset (written
byte for byte as megatron/core/datasets/indexed_dataset.py writes one, read back as its reader
does) and of nanoGPT's flat train.bin; the program and ddpio.convert agree; the image loader refuses
a token dataset up front."""
import glob
import json
import struct

import numpy as np
import pytest

import ddpio
from conftest import run

sentencepiece = pytest.importorskip("sentencepiece")


@pytest.fixture(scope="module")
def texts():
    files = sorted(glob.glob("/usr/share/doc/*/copyright"))[:150]
    assert len(files) >= 50, "Debian's copyright files are the test's real text"
    out = []
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            out.append(fh.read())
    return out


@pytest.fixture(scope="module")
def spm_model(texts, tmp_path_factory):
    """A unigram model of 700 pieces trained with SentencePiece's Python package."""
    d = tmp_path_factory.mktemp("spm")
    (d / "train.txt").write_text("\n".join(texts), encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(input=str(d / "train.txt"), model_prefix=str(d / "m"),
                                             vocab_size=700, minloglevel=2, num_threads=2)
    return d / "m.model"


@pytest.fixture(scope="module")
def jsonl(texts, tmp_path_factory):
    path = tmp_path_factory.mktemp("jsonl") / "docs.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t, "meta": {"n": len(t)}}) + "\n")
    return path


def documents(path):
    ds = ddpio.Dataset(path)
    assert ds.is_tokens
    return [list(ds[i]) for i in range(len(ds))]


def test_jsonl_gives_sentencepieces_own_ids_then_eos(jsonl, spm_model, texts, tmp_path):
    summary = ddpio.convert(jsonl, tmp_path / "a", source="jsonl", tokenizer=spm_model)
    sp = sentencepiece.SentencePieceProcessor(model_file=str(spm_model))
    expected = [sp.encode(t) + [sp.eos_id()] for t in texts]
    got = documents(tmp_path / "a")
    assert got == expected
    assert summary["records"] == len(texts)
    assert summary["tokens"] == sum(len(e) for e in expected)
    info = ddpio.Dataset(tmp_path / "a").info()
    assert (info["vocab_size"], info["eos_id"], info["dtype"]) == (700, sp.eos_id(), "uint16")
    assert ddpio.Dataset(tmp_path / "a").source(4) == "docs.jsonl:5"


def test_the_program_and_ddpio_convert_make_the_same_dataset(program, jsonl, spm_model, tmp_path):
    ddpio.convert(jsonl, tmp_path / "py", source="jsonl", tokenizer=spm_model, eos=-1)
    out = run(program, "convert", "--from", "jsonl", "--src", str(jsonl), "--tokenizer", str(spm_model),
              "--eos", "-1", "--out", str(tmp_path / "cli"), "--json", "--quiet")
    summary = json.loads(out.stdout)
    assert documents(tmp_path / "py") == documents(tmp_path / "cli")
    inspected = json.loads(run(program, "inspect", str(tmp_path / "cli"), "--verify", "--json", "--quiet").stdout)
    assert inspected["documents"] == summary["records"]
    assert inspected["tokens"] == summary["tokens"] == sum(len(d) for d in documents(tmp_path / "cli"))
    assert inspected["bad"] == []


# megatron/core/datasets/indexed_dataset.py: _INDEX_HEADER, DType codes, _IndexWriter.write.
_INDEX_HEADER = b"MMIDIDX\x00\x00"
_DTYPE_CODES = {np.uint8: 1, np.int8: 2, np.int16: 3, np.int32: 4, np.int64: 5, np.float64: 6,
                np.float32: 7, np.uint16: 8}


def write_megatron(prefix, sequences, document_indices, dtype):
    """What IndexedDatasetBuilder.add_item / end_document / finalize write."""
    with open(f"{prefix}.bin", "wb") as f:
        for s in sequences:
            f.write(np.array(s, dtype=dtype).tobytes(order="C"))
    sizes = [len(s) for s in sequences]
    itemsize = np.dtype(dtype).itemsize
    pointers, at = [], 0
    for size in sizes:  # _IndexWriter._sequence_pointers
        pointers.append(at)
        at += size * itemsize
    with open(f"{prefix}.idx", "wb") as idx:
        idx.write(_INDEX_HEADER)
        idx.write(struct.pack("<Q", 1))
        idx.write(struct.pack("<B", _DTYPE_CODES[dtype]))
        idx.write(struct.pack("<Q", len(sizes)))
        idx.write(struct.pack("<Q", len(document_indices)))
        idx.write(np.array(sizes, dtype=np.int32).tobytes(order="C"))
        idx.write(np.array(pointers, dtype=np.int64).tobytes(order="C"))
        idx.write(np.array(document_indices, dtype=np.int64).tobytes(order="C"))


def read_megatron(prefix):
    """IndexedDataset's reader: the index parsed, each sequence a view of the memory-mapped .bin."""
    buf = open(f"{prefix}.idx", "rb").read()
    assert buf[:9] == _INDEX_HEADER
    (code,) = struct.unpack("<B", buf[17:18])
    dtype = {v: k for k, v in _DTYPE_CODES.items()}[code]
    (count,) = struct.unpack("<Q", buf[18:26])
    offset = 34
    sizes = np.frombuffer(buf, dtype=np.int32, count=count, offset=offset)
    pointers = np.frombuffer(buf, dtype=np.int64, count=count, offset=offset + sizes.nbytes)
    data = np.memmap(f"{prefix}.bin", mode="r", order="C")
    return [np.frombuffer(data, dtype=dtype, count=int(n), offset=int(p)).tolist()
            for n, p in zip(sizes, pointers)]


@pytest.mark.parametrize("dtype", [np.uint16, np.int32])
def test_megatron_sequences_are_taken_as_they_are(program, jsonl, spm_model, tmp_path, dtype):
    # Real tokenized text, as Megatron's preprocess_data.py would have stored it (EOD appended).
    sp = sentencepiece.SentencePieceProcessor(model_file=str(spm_model))
    texts = [json.loads(line)["text"] for line in open(jsonl, encoding="utf-8")][:60]
    sequences = [sp.encode(t) + [sp.eos_id()] for t in texts]
    prefix = str(tmp_path / "corpus_text_document")
    write_megatron(prefix, sequences, list(range(len(sequences) + 1)), dtype)
    assert read_megatron(prefix) == sequences  # the fixture writes what Megatron reads
    run(program, "convert", "--from", "megatron", "--src", prefix, "--eos", str(sp.eos_id()),
        "--out", str(tmp_path / "m"), "--quiet")
    assert documents(tmp_path / "m") == read_megatron(prefix)
    info = ddpio.Dataset(tmp_path / "m").info()
    assert info["dtype"] == ("uint16" if dtype == np.uint16 else "uint32")
    assert info["eos_id"] == sp.eos_id()


def test_a_nanogpt_train_bin_is_split_after_every_eot(tmp_path):
    # nanoGPT's data/openwebtext/prepare.py: each document's ids, then enc.eot_token, as uint16.
    eot = 50256
    rng = np.random.default_rng(7)
    docs = [rng.integers(0, eot, size=int(rng.integers(1, 400))).tolist() for _ in range(40)]
    flat = np.array([i for d in docs for i in d + [eot]], dtype=np.uint16)
    flat.tofile(tmp_path / "train.bin")
    ddpio.convert(tmp_path / "train.bin", tmp_path / "owt", source="tokens", dtype="uint16", eos=eot)
    assert documents(tmp_path / "owt") == [d + [eot] for d in docs]
    # The same ids in a .npy of int32: the file says its dtype.
    np.save(tmp_path / "train.npy", flat.astype(np.int32))
    ddpio.convert(tmp_path / "train.npy", tmp_path / "npy", source="tokens", eos=eot)
    assert documents(tmp_path / "npy") == [d + [eot] for d in docs]
    with pytest.raises(ValueError, match="dtype"):
        ddpio.convert(tmp_path / "train.bin", tmp_path / "x", source="tokens", eos=eot)


def test_the_image_loader_refuses_a_token_dataset_up_front(tmp_path):
    flat = np.array([1, 2, 0, 3, 0], dtype=np.uint16)
    flat.tofile(tmp_path / "t.bin")
    ddpio.convert(tmp_path / "t.bin", tmp_path / "t", source="tokens", dtype="uint16", eos=0)
    with pytest.raises(ValueError, match="is a token dataset"):
        ddpio.Loader(tmp_path / "t", batch_size=2, image_size=32)
