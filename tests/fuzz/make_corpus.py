#!/usr/bin/python3
"""Writes the fuzz targets' seed corpus (tests/fuzz/corpus/<target>/) from real artefacts: a
tiny dataset made by `ddpio synth` + `ddpio convert` (records and metadata read back with
mdb_dump), a checkpoint written by `ddpio train`, and hand-built messages that follow the
documented wire formats. Small on purpose: seeds, not a collection. Inputs a fuzzer once crashed
on are kept beside them as regression-* files.

Usage: tests/fuzz/make_corpus.py [--ddpio build/release/tools/ddpio]
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def dump(db, sub):
    """{key: value} of one LMDB sub-database, via mdb_dump."""
    out = subprocess.run(["mdb_dump", "-s", sub, db], check=True, capture_output=True, text=True).stdout
    lines = out.split("HEADER=END\n", 1)[1].split("DATA=END", 1)[0].split()
    return {bytes.fromhex(lines[i]): bytes.fromhex(lines[i + 1]) for i in range(0, len(lines) - 1, 2)}


def feed_header(kind, dtype, flags, epoch, step, shape, indices, labels, valid, sizes, payload_bytes):
    h = struct.pack("<HBBBBH", 1, kind, dtype, flags, len(shape), 0)
    h += struct.pack("<QQII", epoch, step, len(indices), 0)
    h += b"".join(struct.pack("<Q", d) for d in shape)
    h += b"".join(struct.pack("<Q", i) for i in indices)
    h += b"".join(struct.pack("<i", l) for l in labels)
    h += bytes(valid)
    h += b"".join(struct.pack("<Q", s) for s in sizes)
    h += struct.pack("<Q", payload_bytes)
    return h


def frame(body):
    return struct.pack("<I", len(body)) + body


def sstr(s):
    s = s.encode() if isinstance(s, str) else s
    return struct.pack("<I", len(s)) + s


def varint(v):
    """A protobuf varint; a negative value as its 64-bit two's complement (10 bytes)."""
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def pb_int(field, v):
    return varint(field << 3) + varint(v)


def pb_bytes(field, b):
    return varint(field << 3 | 2) + varint(len(b)) + b


def caffe_datums():
    """Caffe Datums (caffe.proto: channels 1, height 2, width 3, data 4, label 5, float_data 6,
    encoded 7), written by hand from the protobuf wire format."""
    put("caffe_datum_fuzz", "raw", pb_int(1, 3) + pb_int(2, 1) + pb_int(3, 2) + pb_bytes(4, b"abcdef") + pb_int(5, 7))
    put("caffe_datum_fuzz", "encoded", pb_bytes(4, b"\xff\xd8\xff\xe0") + pb_int(5, 2) + pb_int(7, 1))
    # float_data packed (wire type 2) and not (wire type 5), and a negative label.
    put("caffe_datum_fuzz", "floats", pb_int(1, 1) + pb_int(2, 1) + pb_int(3, 1) + pb_bytes(6, b"abcd") +
        varint(6 << 3 | 5) + b"wxyz" + pb_int(5, -1))
    # A gray image as Caffe's convert_imageset writes it: encoded = false set explicitly.
    put("caffe_datum_fuzz", "gray-caffe", pb_int(1, 1) + pb_int(2, 2) + pb_int(3, 2) +
        pb_bytes(4, b"\x00\x7f\x80\xff") + pb_int(5, 0) + pb_int(7, 0))
    # Unknown fields of every wire type around the known ones, and a label given twice.
    put("caffe_datum_fuzz", "unknown-fields", pb_int(9, 150) + varint(10 << 3 | 1) + b"12345678" + pb_int(5, 4) +
        pb_int(1, 3) + pb_int(2, 1) + pb_int(3, 1) + pb_bytes(4, b"bgr") + varint(12 << 3 | 5) + b"abcd" +
        pb_bytes(100, pb_int(1, 1)) + pb_int(5, -3))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ddpio", default=os.path.join(REPO, "build", "release", "tools", "ddpio"))
    args = ap.parse_args()
    # Files are overwritten, never removed: regression-* inputs (what fuzzing once found) stay.
    work = tempfile.mkdtemp()
    try:
        run = lambda *a: subprocess.run([args.ddpio, *a], check=True, capture_output=True)
        run("synth", "--out", f"{work}/src", "--classes", "2", "--per-class", "2", "--size", "16", "--quiet")
        run("convert", "--src", f"{work}/src", "--out", f"{work}/db", "--quiet")
        for i, (k, v) in enumerate(sorted(dump(f"{work}/db", "samples").items())[:3]):
            put("record_fuzz", f"record{i}", v)
        # A record in layout 2 (convert --max-side records the original geometry).
        run("convert", "--src", f"{work}/src", "--out", f"{work}/small", "--max-side", "16", "--quiet")
        shrunk = [v for _, v in sorted(dump(f"{work}/small", "samples").items()) if v[4] == 2]
        put("record_fuzz", "record-layout2", shrunk[0])
        put("shard_manifest_fuzz", "two-shards",
            b'{"format":"ddpio-lmdb-shards","format_version":1,"shards":[{"path":"shard-00000-of-00002","records":2},'
            b'{"path":"shard-00001-of-00002","records":2}],"source_fingerprint":"c6b0c7341846e874-2-4"}')
        meta = dump(f"{work}/db", "meta")
        put("dataset_meta_fuzz", "header", meta[b"dataset"])
        put("dataset_meta_fuzz", "complete", meta[b"complete"])
        put("convert_progress_fuzz", "progress", meta[b"convert_progress"])
        put("convert_progress_fuzz", "skipped", json.dumps(
            {"next_source": 9, "skipped": [{"index": 3, "source": "a/b.jpg", "reason": "PNG image"}]}))
        with open(f"{work}/db/data.mdb", "rb") as f:
            head = f.read(8192)
        size = os.path.getsize(f"{work}/db/data.mdb")
        put("lmdb_header_fuzz", "good", struct.pack("<Q", size) + head)
        put("lmdb_header_fuzz", "short", struct.pack("<Q", 8192) + head)
        # JPEGs with a crop prefix (x0, y0, w, h as fractions of 1024, see jpeg_fuzz.cc).
        for i, name in enumerate(sorted(os.listdir(f"{work}/src/class_000"))):
            with open(f"{work}/src/class_000/{name}", "rb") as f:
                put("jpeg_fuzz", f"jpeg{i}", bytes([0, 0, 4, 4]) + f.read())
        # A checkpoint of a tiny model.
        run("train", "--data", f"{work}/db", "--epochs", "1", "--batch-size", "2", "--image-size", "4", "--hidden", "2",
            "--workers", "1", "--checkpoint-dir", f"{work}/ckpt")
        ckpt = [p for p in os.listdir(f"{work}/ckpt") if not p.endswith(".tmp")][0]
        with open(f"{work}/ckpt/{ckpt}", "rb") as f:
            put("checkpoint_fuzz", "tiny", f.read())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # Feed headers: encoded (2 samples), decoded (uint8 2x2x3), end of epoch, error.
    put("feed_header_fuzz", "encoded", feed_header(0, 0, 0, 1, 2, [], [5, 9], [0, 1], [1, 1], [100, 200], 300))
    put("feed_header_fuzz", "decoded", feed_header(1, 1, 0, 0, 0, [2, 2, 3], [7], [3], [1], [], 12))
    put("feed_header_fuzz", "end", feed_header(0, 0, 1, 4, 0, [], [], [], [], [], 0))
    put("feed_header_fuzz", "error", feed_header(0, 0, 2, 4, 0, [], [], [], [], [], 20))
    # Slurm node lists.
    for i, s in enumerate(["gpu[03-05,09],cpu1", "node7", "a[12,15]-ib", "n[001-128]", "x[1-3"]):
        put("slurm_nodelist_fuzz", f"list{i}", s)
    # Store sessions: first byte odd = the target sends a valid hello first.
    ops = frame(b"\x01" + sstr("k") + sstr("v")) + frame(b"\x02" + sstr("k")) + \
        frame(b"\x04" + sstr("n") + struct.pack("<q", 3)) + frame(b"\x05" + sstr("k") + sstr("x")) + \
        frame(b"\x03" + struct.pack("<I", 5) + sstr("k"))
    put("store_server_fuzz", "ops", b"\x01" + ops)
    put("store_server_fuzz", "hello", b"\x00" + frame(b"DDPS1wrong-token"))
    put("store_server_fuzz", "announce", b"\x00" + struct.pack("<I", 1 << 26))
    # torchrun store replies (legacy protocol: get = u64 size + value; add = i64; check = u8).
    put("torch_store_reply_fuzz", "values", b"\x00" + b"\x00" + struct.pack("<Q", 3) + b"abc" +
        struct.pack("<q", 7) + b"\x00" + b"\x00")
    put("torch_store_reply_fuzz", "huge", b"\x00" + b"\x00" + struct.pack("<Q", 1 << 40))
    # List files.
    put("list_file_fuzz", "list", "a/b.jpg 0\nc d.jpg 1\n# comment\n\ne.jpg 2\r\n")
    put("list_file_fuzz", "bad", "a.jpg\nb.jpg -1\nc.jpg 99999999999\n")
    caffe_datums()
    megatron_indexes()
    npy_headers()
    token_files()
    remote_token_index()
    print(f"corpus written to {os.path.join(HERE, 'corpus')}")


def megatron_indexes():
    """Megatron-LM MMIDIDX indexes as its _IndexWriter lays them out (megatron/core/datasets/
    indexed_dataset.py), each after the .bin's size (u64) the fuzz target reads first."""
    def index(code, lengths, documents, element_bytes):
        b = b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, code, len(lengths), len(documents))
        b += struct.pack(f"<{len(lengths)}i", *lengths)
        pointers, at = [], 0
        for n in lengths:
            pointers.append(at)
            at += n * element_bytes
        b += struct.pack(f"<{len(pointers)}q", *pointers) + struct.pack(f"<{len(documents)}q", *documents)
        return struct.pack("<Q", at) + b
    put("megatron_index_fuzz", "uint16-three-documents", index(8, [3, 0, 5], [0, 2, 3], 2))
    put("megatron_index_fuzz", "int32-one-document", index(4, [7], [0, 1], 4))


def npy_headers():
    """.npy files written by numpy itself (numpy.lib.format, versions 1.0, 2.0 and 3.0), each after
    the file's size (u64) the fuzz target reads first; the dtypes and layouts ddpio refuses too."""
    import io
    import numpy as np

    def npy(a, version=None):
        f = io.BytesIO()
        np.lib.format.write_array(f, a, version=version, allow_pickle=True)
        b = f.getvalue()
        return struct.pack("<Q", len(b)) + b[:65536 + 12]
    put("npy_header_fuzz", "uint16-vector", npy(np.arange(5, dtype=np.uint16)))
    put("npy_header_fuzz", "int32-matrix", npy(np.arange(6, dtype=np.int32).reshape(2, 3)))
    put("npy_header_fuzz", "float32-v2", npy(np.array([1.5, -2.0], dtype=np.float32), (2, 0)))
    put("npy_header_fuzz", "uint8-v3", npy(np.arange(3, dtype=np.uint8), (3, 0)))
    put("npy_header_fuzz", "float64-scalar", npy(np.float64(3.0)))
    put("npy_header_fuzz", "int16-empty", npy(np.zeros((0, 4), dtype=np.int16)))
    put("npy_header_fuzz", "big-endian", npy(np.arange(4, dtype=">u2")))
    put("npy_header_fuzz", "fortran", npy(np.asfortranarray(np.arange(6, dtype=np.uint8).reshape(2, 3))))
    put("npy_header_fuzz", "structured", npy(np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")])))
    put("npy_header_fuzz", "object", npy(np.array([None, 1], dtype=object)))



def token_files():
    """Inputs of token_file_fuzz: a choice byte (bit 0: uint32, bit 1: an EOS follows in two bytes),
    then the file: nanoGPT-style uint16 ids ending documents in EOS, uint32 ids, a .npy."""
    import io
    import numpy as np
    ids16 = np.array([5, 6, 0, 7, 0, 8, 9], dtype=np.uint16).tobytes()
    put("token_file_fuzz", "uint16-eos0", bytes([2, 0, 0]) + ids16)
    put("token_file_fuzz", "uint16-no-eos", bytes([0, 0, 0]) + ids16)
    put("token_file_fuzz", "uint32-eos7", bytes([3, 7, 0]) + np.array([1, 7, 2, 7], dtype=np.uint32).tobytes())
    f = io.BytesIO()
    np.save(f, np.array([1, 2, 0, 3, 0], dtype=np.int32))
    put("token_file_fuzz", "npy-int32", bytes([2, 0, 0]) + f.getvalue())
    # A token dataset's header (format version 4) for the header parser.
    put("dataset_meta_fuzz", "token-header",
        b'{"classes":[],"format":"ddpio-lmdb","format_version":4,"id":"00112233445566778899aabbccddeeff",'
        b'"source":{"files":1,"fingerprint":"f","kind":"jsonl","path":"docs.jsonl"},'
        b'"tokens":{"dtype":"uint16","eos_id":2,"tokenizer":"/m.model","vocab_size":32000},"tool_version":"0.2.0"}')

def crc32c(data):
    """CRC-32C (Castagnoli), as ddpio/storage/checksum.h computes it."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def remote_token_index():
    """A token dataset in an object store (docs/FORMAT.md, "In an object store"): its record index
    carrying the documents' lengths ("DDPIDX02"; within the files remote_format_fuzz.cc declares)
    and a version-4 manifest saying so."""
    locations = [(0, 40, 0), (0, 34, 40), (1, 28, 0)]  # file, length, offset
    lengths = [6, 3, 0]  # 2-byte ids: each fits its record less its 28-byte header
    b = b"DDPIDX02" + struct.pack("<Q", len(locations))
    b += b"".join(struct.pack("<IIQ", *r) for r in locations)
    b += struct.pack(f"<{len(lengths)}I", *lengths)
    b += struct.pack("<I", crc32c(b))
    put("remote_format_fuzz", "token-index.bin", b)
    put("remote_format_fuzz", "token-manifest.json", json.dumps({
        "format": "ddpio-remote", "version": 4, "uploaded_by": "0.2.0",
        "header": {"classes": [], "format": "ddpio-lmdb", "format_version": 4,
                   "id": "00112233445566778899aabbccddeeff",
                   "source": {"files": 1, "fingerprint": "f", "kind": "jsonl", "path": "docs.jsonl"},
                   "tokens": {"dtype": "uint16", "eos_id": 2, "tokenizer": "", "vocab_size": 32000},
                   "tool_version": "0.2.0"},
        "completion": {"sample_count": 3, "payload_bytes": 18, "skipped": 0},
        "files": [{"object": "chunks/1a2b3c4d/00/00000000", "bytes": 74, "first": 0, "records": 2,
                   "salt": 5, "bound": True, "key_first": 0},
                  {"object": "chunks/1a2b3c4d/00/00000001", "bytes": 28, "first": 2, "records": 1,
                   "salt": 5, "bound": True, "key_first": 2}],
        "index": {"object": "ddpio-index.bin", "bytes": len(b), "crc32c": crc32c(b[:-4]),
                  "document_lengths": True},
        "records_digest": "0123456789abcdef"}, indent=1))


if __name__ == "__main__":
    main()
