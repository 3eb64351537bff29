"""`ddpio convert` ingests what torchvision's ImageFolder reads, and the loader reads it back as
torchvision would: same samples, labels and order as torchvision.datasets.ImageFolder on a folder
mixing every format and mode, pixels equal to Pillow's convert("RGB")."""
import io
import json
import os
import subprocess

import numpy as np
import pytest

PIL = pytest.importorskip("PIL.Image")
torchvision = pytest.importorskip("torchvision")

from ddpio import Dataset  # noqa: E402

from conftest import run  # noqa: E402


def _noise(rng, w, h):
    # Smooth content plus noise, so lossy encoders and chroma subsampling have real work.
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)), ((x + y) * 3) % 256], -1)
    return np.clip(base + rng.integers(-40, 40, (h, w, 3)), 0, 255).astype(np.uint8)


def _write_mixed_folder(root):
    """The formats and modes an ImageFolder meets — JPEG (baseline, progressive, gray, CMYK, a PNG
    named .JPEG), PNG (RGB, RGBA, palette, transparency, gray, gray + alpha, 16-bit), PPM/PGM, WebP,
    BMP, TIFF — and files that are not samples, in three classes; returns nothing (torchvision
    lists it)."""
    rng = np.random.default_rng(7)
    Image = PIL
    def img(w=37, h=29):
        return Image.fromarray(_noise(rng, w, h))
    def translucent(mode="RGBA"):  # alpha that varies, so dropping it (not compositing) is tested
        rgba = np.concatenate([_noise(rng, 37, 29), rng.integers(0, 256, (29, 37, 1), dtype=np.uint8)], -1)
        return Image.fromarray(rgba, "RGBA").convert(mode)
    (root / "cats").mkdir(parents=True)
    (root / "dogs").mkdir()
    (root / "Zebras").mkdir()
    (root / "empty_is_not_a_class.txt").write_text("top-level files are not samples")
    img().save(root / "cats" / "baseline.jpg", quality=90)
    img().save(root / "cats" / "progressive.jpeg", quality=85, progressive=True)
    img().convert("L").save(root / "cats" / "gray.JPG", quality=90)
    img().convert("CMYK").save(root / "cats" / "cmyk.jpg", quality=92)
    img().save(root / "cats" / "png_saved_as.JPEG", format="PNG")  # ImageNet has one of these
    img().save(root / "dogs" / "rgb.png")
    translucent().save(root / "dogs" / "rgba.PNG")
    img().convert("P", palette=Image.ADAPTIVE, colors=64).save(root / "dogs" / "palette.png")
    pal = img().convert("P", palette=Image.ADAPTIVE, colors=16)
    pal.info["transparency"] = 3
    pal.save(root / "dogs" / "palette_trns.png", transparency=3)
    img().convert("L").save(root / "dogs" / "gray.png")
    translucent("LA").save(root / "dogs" / "gray_alpha.png")
    Image.fromarray((rng.integers(0, 65536, (21, 17)) // 300).astype(np.uint16)).save(root / "dogs" / "gray16.png")
    Image.fromarray(_noise(rng, 17, 13)).save(root / "dogs" / "one.Ppm")
    img().convert("L").save(root / "dogs" / "two.pgm")
    (root / "dogs" / ".DS_Store").write_bytes(b"\0\0\0\1Bud1\0")
    (root / "dogs" / "notes.txt").write_text("not an image")
    img().save(root / "Zebras" / "lossless.webp", lossless=True)
    img().save(root / "Zebras" / "lossy.webp", quality=80)
    translucent().save(root / "Zebras" / "alpha.webp", lossless=True)
    img().save(root / "Zebras" / "plain.bmp")
    img().convert("P").save(root / "Zebras" / "palette.bmp")
    img().save(root / "Zebras" / "plain.tif")
    img().save(root / "Zebras" / "lzw.TIFF", compression="tiff_lzw")
    img().convert("L").save(root / "Zebras" / "gray.tiff")


@pytest.fixture(scope="module")
def mixed(program, tmp_path_factory):
    root = tmp_path_factory.mktemp("mixed") / "images"
    _write_mixed_folder(root)
    out = root.parent / "mixed.lmdb"
    result = run(program, "convert", "--src", str(root), "--out", str(out), "--json", "--quiet")
    return root, out, json.loads(result.stdout.strip().splitlines()[-1])


def test_convert_stores_exactly_imagefolders_samples_labels_and_order(mixed):
    root, out, summary = mixed
    tv = torchvision.datasets.ImageFolder(str(root))
    ds = Dataset(out)
    assert ds.classes == tv.classes == ["Zebras", "cats", "dogs"]
    assert len(ds) == len(tv.samples) == summary["records"] == 22
    for i, (path, label) in enumerate(tv.samples):
        assert ds.source(i) == os.path.relpath(path, root), i
        assert ds[i][1] == label, i
    stored = summary["stored_as"]
    assert stored["JPEG (coefficients), restart markers added"] == 3  # the default: lossless, see below
    assert stored["JPEG, CMYK (coefficients), restart markers added"] == 1


def test_every_record_decodes_to_pillows_rgb(mixed):
    """Lossless formats exactly; the CMYK JPEG within 1 level; through the record's image file and
    through the loader's own decode (eval geometry at the image's own size is not a resize)."""
    root, out, _ = mixed
    tv = torchvision.datasets.ImageFolder(str(root))
    ds = Dataset(out)
    for i, (path, _) in enumerate(tv.samples):
        want = np.asarray(PIL.open(path).convert("RGB")).astype(np.int16)
        got = np.asarray(PIL.open(io.BytesIO(ds[i][0])).convert("RGB")).astype(np.int16)
        assert got.shape == want.shape, path
        lossless = not path.lower().endswith((".jpg", ".jpeg")) or PIL.open(path).format != "JPEG"
        if lossless and "lossy" not in path:
            assert np.array_equal(got, want), f"{path}: max diff {np.abs(got - want).max()}"
        elif "cmyk" in path:
            assert np.abs(got - want).max() <= 1, path
        elif "lossy" in path:  # lossy WebP: both sides are libwebp
            assert np.abs(got - want).max() <= 1, f"{path}: max diff {np.abs(got - want).max()}"


def test_cmyk_jpeg_loads_as_pillows_rgb_through_the_loader(program, tmp_path):
    """The loader's CMYK conversion (not just the stored bytes) against Pillow, pixel for pixel
    on a full-size eval decode of a CMYK JPEG."""
    import ddpio
    src = tmp_path / "src" / "only"
    src.mkdir(parents=True)
    rng = np.random.default_rng(3)
    PIL.fromarray(_noise(rng, 64, 64)).convert("CMYK").save(src / "c.jpg", quality=95)
    run(program, "convert", "--src", str(tmp_path / "src"), "--out", str(tmp_path / "db"), "--quiet")
    loader = ddpio.Loader(str(tmp_path / "db"), batch_size=1, image_size=64, train=False, decode="exact",
                          resize_size=64, arrays="numpy", workers=1)
    batch = next(iter(loader))
    got = np.asarray(batch["images"])[0].astype(np.int16)
    if got.shape[0] == 3:
        got = got.transpose(1, 2, 0)
    want = np.asarray(PIL.open(src / "c.jpg").convert("RGB")).astype(np.int16)
    assert np.abs(got - want).max() <= 1


def test_verified_means_loadable_for_every_format(program, mixed):
    _, out, _ = mixed
    verify = subprocess.run([program, "inspect", str(out), "--verify", "--decode"], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    bench = subprocess.run([program, "bench", "loader", "--data", str(out), "--workers", "1", "--batch-size", "4",
                            "--image-size", "16", "--epochs", "1", "--json"], capture_output=True, text=True)
    assert bench.returncode == 0, bench.stderr
    j = json.loads(bench.stdout.strip().splitlines()[-1])
    assert j["records"] == 22 and j["bad_samples"] == 0


def test_restart_marker_transcode_is_lossless_for_pillow(program, mixed, tmp_path):
    """The default conversion (--restart-interval 4) rewrites every JPEG (new bytes: restart
    markers, optimised tables) and Pillow decodes each to exactly the original's pixels, also
    after `inspect --get`; non-JPEGs are unaffected. --restart-interval 0 keeps the bytes."""
    root, out, _ = mixed
    tv = torchvision.datasets.ImageFolder(str(root))
    ds = Dataset(out)
    rewritten = 0
    for i, (path, _) in enumerate(tv.samples):
        stored = ds[i][0]
        if PIL.open(path).format == "JPEG":
            rewritten += stored != open(path, "rb").read()
            assert b"\xff\xdd" in stored, path  # a DRI marker: restart markers are on
        want = np.asarray(PIL.open(path).convert("RGB"))
        got = np.asarray(PIL.open(io.BytesIO(stored)).convert("RGB"))
        assert np.array_equal(got, want), path
    assert rewritten == 4  # baseline, progressive, gray, CMYK (png_saved_as.JPEG is a PNG)
    inspect = subprocess.run([program, "inspect", str(out), "--json"], capture_output=True, text=True)
    j = json.loads(inspect.stdout.strip().splitlines()[-1])
    assert j["segment_decodable"] == j["jpeg_records"] == 4
    cmyk = next(i for i, (path, _) in enumerate(tv.samples) if "cmyk" in path)
    run(program, "inspect", str(out), "--get", str(cmyk), "--out", str(tmp_path / "got.jpg"))
    got = np.asarray(PIL.open(tmp_path / "got.jpg").convert("RGB"))
    assert np.array_equal(got, np.asarray(PIL.open(tv.samples[cmyk][0]).convert("RGB")))
    plain = tmp_path / "plain.lmdb"
    run(program, "convert", "--src", str(root), "--out", str(plain), "--restart-interval", "0", "--quiet")
    kept = Dataset(plain)
    for i, (path, _) in enumerate(tv.samples):
        if PIL.open(path).format == "JPEG":
            assert kept[i][0] == open(path, "rb").read(), path
