"""Every colour space a PNG, TIFF, BMP, WebP, PPM/PGM/PBM or JPEG can carry, through `ddpio convert`
and back, against Pillow's `Image.open(f).convert("RGB")` — what torchvision's default loader
hands a transform. One test per case, every pixel, no tolerance (Pillow and ddpio decode JPEGs
with the same libjpeg-turbo and WebPs with the same libwebp).

Images are made with Pillow where Pillow can write them, otherwise byte by byte here (16-bit TIFF
and PNG layouts, premultiplied alpha, BMP bit fields, PNM maxvals, a YCCK JPEG through TurboJPEG).
What ddpio cannot convert as Pillow does is refused, naming the file and the colour space: those
cases are checked too. Also here: decompression bombs within the pixel limit are refused by the
decoding budget, with bounded memory (peak RSS of the converting process, measured by getrusage).
"""
import ctypes
import ctypes.util
import io
import json
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

PIL = pytest.importorskip("PIL.Image")
Image = PIL

from ddpio import Dataset  # noqa: E402

from conftest import run  # noqa: E402

W, H = 37, 23  # odd sizes: row padding, partial bytes of packed samples


def _rng(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def _pil(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def _noise(rng, channels, top=256, h=H, w=W):
    shape = (h, w) if channels == 1 else (h, w, channels)
    return rng.integers(0, top, shape)


# ------------------------------------------------------------------------------------------
# Writers for what Pillow cannot write


def _png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _png_rows(a, depth):
    rows = []
    for row in a:
        flat = np.asarray(row).reshape(-1)
        if depth == 16:
            rows.append(flat.astype(">u2").tobytes())
        elif depth == 8:
            rows.append(flat.astype("u1").tobytes())
        else:
            bits = "".join(format(int(v), f"0{depth}b") for v in flat)
            bits += "0" * (-len(bits) % 8)
            rows.append(bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8)))
    return rows


def _png(a, depth, color_type, extra=b"", interlace=False):
    a = np.asarray(a)
    h, w = a.shape[:2]
    raw = b""
    if interlace:  # Adam7: seven passes, each a small image of its own rows
        for x0, y0, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
                               (0, 1, 1, 2)):
            sub = a[y0::dy, x0::dx]
            if sub.size:
                raw += b"".join(b"\0" + r for r in _png_rows(sub, depth))
    else:
        raw = b"".join(b"\0" + r for r in _png_rows(a, depth))
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 1 if interlace else 0)
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr) + extra + _png_chunk(b"IDAT", zlib.compress(raw, 9))
            + _png_chunk(b"IEND", b""))


def _tiff(a, photometric, bits, extra=(), sample_format=None, big_endian=False, planar=1, colormap=None,
          fill_order=None, tags=()):
    """An uncompressed single-strip TIFF of `a` (h x w or h x w x samples)."""
    o = ">" if big_endian else "<"
    a = np.asarray(a)
    h, w = a.shape[:2]
    spp = 1 if a.ndim == 2 else a.shape[2]
    if bits >= 8:
        kind = {1: "u", 2: "i", 3: "f"}[sample_format or 1]
        arr = a.reshape(h, w, spp).astype(f"{o}{kind}{bits // 8}")
        data = np.ascontiguousarray(arr.transpose(2, 0, 1) if planar == 2 else arr).tobytes()
    else:
        data = b"".join(_png_rows(a, bits))
    entries = {256: (4, [w]), 257: (4, [h]), 258: (3, [bits] * spp), 259: (3, [1]), 262: (3, [photometric]),
               273: (4, [0] * (spp if planar == 2 else 1)), 277: (3, [spp]), 278: (4, [h]),
               279: (4, [len(data) // spp] * spp if planar == 2 else [len(data)]), 284: (3, [planar])}
    if extra:
        entries[338] = (3, list(extra))
    if sample_format:
        entries[339] = (3, [sample_format] * spp)
    if colormap is not None:
        entries[320] = (3, [int(v) for v in colormap])
    if fill_order:
        entries[266] = (3, [fill_order])
    for tag, value in tags:
        entries[tag] = value
    tags_sorted = sorted(entries.items())
    ifd_size = 2 + 12 * len(tags_sorted) + 4
    blobs, ifd, strip_slots = b"", b"", []
    for tag, (typ, values) in tags_sorted:
        payload = struct.pack(o + {3: "H", 4: "I"}[typ] * len(values), *values)
        head = struct.pack(o + "HHI", tag, typ, len(values))
        if len(payload) <= 4:
            if tag == 273:
                strip_slots.append(("inline", 8 + len(ifd) + 2 + 8))
            ifd += head + payload.ljust(4, b"\0")
        else:
            if tag == 273:
                strip_slots.append(("table", 8 + ifd_size + len(blobs)))
            ifd += head + struct.pack(o + "I", 8 + ifd_size + len(blobs))
            blobs += payload + b"\0" * (len(payload) % 2)
    out = bytearray((b"MM\0*" if big_endian else b"II*\0") + struct.pack(o + "I", 8))
    out += struct.pack(o + "H", len(tags_sorted)) + ifd + struct.pack(o + "I", 0) + blobs
    data_at = len(out)
    kind, at = strip_slots[0]
    if kind == "inline":
        struct.pack_into(o + "I", out, at, data_at)
    else:
        for k in range(spp):
            struct.pack_into(o + "I", out, at + 4 * k, data_at + k * (len(data) // spp))
    return bytes(out) + data


def _bmp(w, h, bits, rows=None, data=None, compression=0, masks=None, palette=None, header_size=40,
         top_down=False, colors=0):
    """A BMP of already-encoded `rows` (bottom-up, unpadded) or of raw `data` (RLE)."""
    if data is None:
        stride = (w * bits + 31) // 32 * 4
        data = b"".join(r.ljust(stride, b"\0") for r in rows)
    entry = 3 if header_size == 12 else 4
    pal = b"".join(bytes([b, g, r, 0][:entry]) for r, g, b in (palette or []))
    trailing_masks = b""
    if header_size == 12:
        info = struct.pack("<IHHHH", 12, w, h, 1, bits)
    else:
        info = struct.pack("<IiiHHIIiiII", header_size, w, -h if top_down else h, 1, bits, compression, len(data),
                           2835, 2835, colors, 0)
        if masks is not None and header_size >= 52:
            info += struct.pack("<IIII", *(list(masks) + [0])[:4])
        elif masks is not None:
            trailing_masks = struct.pack("<III", *masks[:3])
        info = info.ljust(header_size, b"\0")
    offset = 14 + len(info) + len(trailing_masks) + len(pal)
    return b"BM" + struct.pack("<IHHI", offset + len(data), 0, 0, offset) + info + trailing_masks + pal + data


def _pnm(magic, w, h, maxval, samples, comment=b""):
    head = b"%s\n%s%d %d\n" % (magic, comment, w, h) + (b"%d\n" % maxval if maxval else b"")
    samples = np.asarray(samples)
    if magic in (b"P1", b"P2", b"P3"):
        return head + b"\n".join(b" ".join(b"%d" % v for v in row.reshape(-1)) for row in samples) + b"\n"
    if magic == b"P4":
        return head + b"".join(_png_rows(samples, 1))  # 1 = black
    return head + samples.astype(">u2" if maxval > 255 else "u1").tobytes()


def _turbojpeg_ycck(cmyk):
    """A 4-channel JPEG as libjpeg-turbo writes CMYK: YCCK (Adobe transform 2), 4:4:4."""
    lib = ctypes.CDLL(ctypes.util.find_library("turbojpeg") or "libturbojpeg.so.0")
    lib.tjInitCompress.restype = ctypes.c_void_p
    handle = lib.tjInitCompress()
    h, w = cmyk.shape[:2]
    src = np.ascontiguousarray(cmyk, dtype=np.uint8)
    buf, size = ctypes.POINTER(ctypes.c_ubyte)(), ctypes.c_ulong(0)
    tjpf_cmyk, tjsamp_444 = 11, 0
    rc = lib.tjCompress2(ctypes.c_void_p(handle), src.ctypes.data_as(ctypes.c_void_p), w, 0, h, tjpf_cmyk,
                         ctypes.byref(buf), ctypes.byref(size), tjsamp_444, 95, 0)
    assert rc == 0
    data = ctypes.string_at(buf, size.value)
    lib.tjFree(buf)
    lib.tjDestroy(ctypes.c_void_p(handle))
    return data


def _strip_adobe_marker(jpeg):
    """The JPEG without its APP14 "Adobe" segment: libjpeg then takes 4 components for CMYK."""
    out, at = bytearray(jpeg[:2]), 2
    while at < len(jpeg) and jpeg[at] == 0xFF and jpeg[at + 1] != 0xDA:
        length = struct.unpack(">H", jpeg[at + 2:at + 4])[0]
        if not (jpeg[at + 1] == 0xEE and jpeg[at + 4:at + 9] == b"Adobe"):
            out += jpeg[at:at + 2 + length]
        at += 2 + length
    return bytes(out + jpeg[at:])


# ------------------------------------------------------------------------------------------
# The cases: name -> (file name, bytes). Every one must be stored as Pillow's RGB.

ACCEPTED = {}


def case(filename):
    def register(build):
        ACCEPTED[build.__name__] = (filename, build)
        return build
    return register


def _alpha_rgba(rng, top=256, channels=4):
    a = _noise(rng, channels, top)
    a[:3, :, -1] = 0  # fully transparent rows: alpha is dropped, not composited
    a[3:6, :, -1] = top - 1
    return a


# PNG: every bit depth and colour type; Pillow reads 16-bit gray as mode "I" (clipped at 255)
# and 16-bit gray + alpha as "LA;16B" (its high byte).
for _depth in (1, 2, 4, 8, 16):
    def _gray(depth=_depth):
        return _png(_noise(_rng(f"g{depth}"), 1, 2 ** depth), depth, 0)
    _gray.__name__ = f"png_gray{_depth}"
    case(f"png_gray{_depth}.png")(_gray)
for _depth in (1, 2, 4, 8):
    def _palette(depth=_depth, trns=False):
        rng = _rng(f"p{depth}{trns}")
        pal = _png_chunk(b"PLTE", _noise(rng, 3, h=1, w=2 ** depth).astype(np.uint8).tobytes())
        if trns:
            pal += _png_chunk(b"tRNS", bytes(range(0, 256, 256 // 2 ** depth))[:2 ** depth])
        return _png(_noise(rng, 1, 2 ** depth), depth, 3, pal)
    _palette.__name__ = f"png_palette{_depth}"
    case(f"png_palette{_depth}.png")(_palette)
    _trns = (lambda depth=_depth: _palette(depth, True))
    _trns.__name__ = f"png_palette{_depth}_trns"
    case(f"png_palette{_depth}_trns.png")(_trns)


@case("png_gray16_small_values.png")
def png_gray16_small_values():  # values below 256 survive exactly, the rest clip
    v = np.arange(W * H).reshape(H, W) * 37 % 700
    return _png(v, 16, 0)


@case("png_gray8_trns.png")
def png_gray8_trns():
    return _png(_noise(_rng("g8t"), 1), 8, 0, _png_chunk(b"tRNS", b"\0\7"))


@case("png_gray16_trns.png")
def png_gray16_trns():
    return _png(_noise(_rng("g16t"), 1, 65536), 16, 0, _png_chunk(b"tRNS", b"\1\7"))


@case("png_rgb8.png")
def png_rgb8():
    return _png(_noise(_rng("rgb8"), 3), 8, 2)


@case("png_rgb8_trns.png")
def png_rgb8_trns():
    return _png(_noise(_rng("rgb8t"), 3), 8, 2, _png_chunk(b"tRNS", b"\0\7\0\10\0\11"))


@case("png_rgb16.png")
def png_rgb16():
    return _png(_noise(_rng("rgb16"), 3, 65536), 16, 2)


@case("png_rgb16_trns.png")
def png_rgb16_trns():
    return _png(_noise(_rng("rgb16t"), 3, 65536), 16, 2, _png_chunk(b"tRNS", b"\1\7\2\10\3\11"))


@case("png_rgba8.png")
def png_rgba8():
    return _png(_alpha_rgba(_rng("rgba8")), 8, 6)


@case("png_rgba16.png")
def png_rgba16():
    return _png(_alpha_rgba(_rng("rgba16"), 65536), 16, 6)


@case("png_gray_alpha8.png")
def png_gray_alpha8():
    return _png(_alpha_rgba(_rng("la8"), 256, 2), 8, 4)


@case("png_gray_alpha16.png")
def png_gray_alpha16():
    return _png(_alpha_rgba(_rng("la16"), 65536, 2), 16, 4)


@case("png_interlaced_rgb8.png")
def png_interlaced_rgb8():
    return _png(_noise(_rng("adam7"), 3), 8, 2, interlace=True)


@case("png_interlaced_gray16.png")
def png_interlaced_gray16():
    return _png(_noise(_rng("adam7g"), 1, 600), 16, 0, interlace=True)


@case("png_gamma_srgb_sbit_chunks.png")
def png_gamma_srgb_sbit_chunks():  # colour metadata Pillow ignores: so must ddpio
    chunks = (_png_chunk(b"gAMA", (100000).to_bytes(4, "big")) + _png_chunk(b"sBIT", b"\5\6\5")
              + _png_chunk(b"cHRM", struct.pack(">8I", 31270, 32900, 64000, 33000, 30000, 60000, 15000, 6000)))
    return _png(_noise(_rng("gama"), 3), 8, 2, chunks)


@case("png_pillow_1bit.png")
def png_pillow_1bit():
    return _pil(Image.fromarray(_noise(_rng("p1"), 3).astype(np.uint8)).convert("1"), "PNG")


@case("png_pillow_mode_I.png")
def png_pillow_mode_I():
    return _pil(Image.fromarray(_noise(_rng("pI"), 1, 2000).astype(np.int32)), "PNG")


# TIFF: Pillow-written in every mode and compression it writes.
def _tiff_modes():
    rng = _rng("tiff")
    rgb = Image.fromarray(_noise(rng, 3).astype(np.uint8))
    modes = {
        "RGB": rgb, "L": rgb.convert("L"), "1": rgb.convert("1"),
        "P": rgb.convert("P", palette=Image.ADAPTIVE, colors=50),
        "RGBA": Image.fromarray(_alpha_rgba(rng).astype(np.uint8), "RGBA"),
        "LA": Image.fromarray(_alpha_rgba(rng, 256, 2).astype(np.uint8), "LA"),
        "PA": Image.fromarray(_alpha_rgba(rng, 256, 2).astype(np.uint8), "LA").convert("PA"),
        "I16": Image.fromarray(_noise(rng, 1, 65536).astype(np.uint16)),
        "CMYK": Image.fromarray(_noise(rng, 4).astype(np.uint8), "CMYK"),
        "YCbCr": rgb.convert("YCbCr"),
    }
    return modes


for _mode in ("RGB", "L", "1", "P", "RGBA", "LA", "PA", "I16", "CMYK", "YCbCr"):
    for _compression in ("raw", "tiff_lzw", "tiff_adobe_deflate", "packbits", "jpeg"):
        if _compression == "jpeg" and _mode not in ("RGB", "L", "CMYK"):
            continue
        if _mode == "YCbCr" and _compression == "raw":
            continue  # Pillow cannot read it back: refused, below
        def _pillow_tiff(mode=_mode, compression=_compression):
            kw = {} if compression == "raw" else {"compression": compression}
            return _pil(_tiff_modes()[mode], "TIFF", **kw)
        _pillow_tiff.__name__ = f"tiff_pillow_{_mode}_{_compression}"
        case(f"tiff_pillow_{_mode}_{_compression}.tif")(_pillow_tiff)


@case("tiff_cmyk_reported.tif")
def tiff_cmyk_reported():  # the tester's case: Pillow gives (55, 255, 255), not (200, 0, 0)
    return _pil(Image.new("CMYK", (8, 8), (200, 0, 0, 0)), "TIFF")


@case("tiff_cmyk_every_ink_and_black.tif")
def tiff_cmyk_every_ink_and_black():  # every (ink, black) pair: Pillow's cmyk2rgb rounding
    c, k = np.meshgrid(np.arange(256), np.arange(256))
    return _tiff(np.stack([c, 255 - c, c // 2, k], -1), 5, 8)


@case("tiff_cmyk16_le.tif")
def tiff_cmyk16_le():
    return _tiff(_noise(_rng("cmyk16"), 4, 65536), 5, 16)


@case("tiff_cmyk_extra_sample.tif")
def tiff_cmyk_extra_sample():
    return _tiff(_noise(_rng("cmykx"), 5), 5, 8, extra=(0,))


@case("tiff_cmyk_two_extra_samples.tif")
def tiff_cmyk_two_extra_samples():
    return _tiff(_noise(_rng("cmykxx"), 6), 5, 8, extra=(0, 0))


for _big in (False, True):
    _o = "be" if _big else "le"
    for _name, _args in {
        "rgb16": (lambda r: _noise(r, 3, 65536), 2, 16, ()),
        "rgba16": (lambda r: _alpha_rgba(r, 65536), 2, 16, (2,)),
        "rgba16_no_extra_samples": (lambda r: _alpha_rgba(r, 65536), 2, 16, ()),
        "rgbx16": (lambda r: _noise(r, 4, 65536), 2, 16, (0,)),
        "rgba16_premultiplied": (lambda r: _alpha_rgba(r, 65536), 2, 16, (1,)),
        "rgba8_premultiplied": (lambda r: _alpha_rgba(r), 2, 8, (1,)),
        "rgba8_premultiplied_extra": (lambda r: _noise(r, 5), 2, 8, (1, 0)),
        "rgba8_extra": (lambda r: _noise(r, 5), 2, 8, (2, 0)),
        "rgbxx8": (lambda r: _noise(r, 5), 2, 8, (0, 0)),
        "rgba8_no_extra_samples": (lambda r: _alpha_rgba(r), 2, 8, ()),
        "rgba8_corel_999": (lambda r: _alpha_rgba(r), 2, 8, (999,)),
        "gray16": (lambda r: _noise(r, 1, 65536), 1, 16, ()),
        "gray2": (lambda r: _noise(r, 1, 4), 1, 2, ()),
        "gray4": (lambda r: _noise(r, 1, 16), 1, 4, ()),
        "gray2_min_is_white": (lambda r: _noise(r, 1, 4), 0, 2, ()),
        "gray8_min_is_white": (lambda r: _noise(r, 1), 0, 8, ()),
        "bilevel_min_is_white": (lambda r: _noise(r, 1, 2), 0, 1, ()),
        "gray_alpha8": (lambda r: _alpha_rgba(r, 256, 2), 1, 8, (2,)),
    }.items():
        def _hand_tiff(name=_name, args=_args, big=_big):
            make, photometric, bits, extra = args
            return _tiff(make(_rng(name)), photometric, bits, extra=extra, big_endian=big)
        _hand_tiff.__name__ = f"tiff_{_name}_{_o}"
        case(f"tiff_{_name}_{_o}.tif")(_hand_tiff)


@case("tiff_rgba8_premultiplied_every_pair.tif")
def tiff_rgba8_premultiplied_every_pair():  # every (colour, alpha): Pillow's c * 255 / a
    c, a = np.meshgrid(np.arange(256), np.arange(256))
    return _tiff(np.stack([c, 255 - c, c, a], -1), 2, 8, extra=(1,))


@case("tiff_gray16_min_is_white_le.tif")
def tiff_gray16_min_is_white_le():  # Pillow ignores min-is-white at 16 bits ("I;16")
    return _tiff(_noise(_rng("g16w"), 1, 700), 0, 16)


@case("tiff_gray12_le.tif")
def tiff_gray12_le():  # "I;12": values up to 4095, clipped at 255
    v = np.arange(64 * 64).reshape(64, 64)
    packed = bytearray()
    for row in v:
        for i in range(0, 64, 2):
            a, b = int(row[i]), int(row[i + 1])
            packed += bytes([a >> 4, (a & 15) << 4 | b >> 8, b & 255])
    t = bytearray(_tiff(np.zeros((64, 64)), 1, 8))
    count = struct.unpack_from("<H", t, 8)[0]
    for k in range(count):
        tag = struct.unpack_from("<H", t, 10 + 12 * k)[0]
        if tag == 258:
            struct.pack_into("<H", t, 10 + 12 * k + 8, 12)
        if tag == 279:
            struct.pack_into("<I", t, 10 + 12 * k + 8, len(packed))
        if tag == 273:
            data_at = struct.unpack_from("<I", t, 10 + 12 * k + 8)[0]
    return bytes(t[:data_at]) + bytes(packed)


@case("tiff_gray16_signed.tif")
def tiff_gray16_signed():  # "I;16S": negative values clip to 0
    return _tiff(_rng("s16").integers(-32768, 32768, (H, W)), 1, 16, sample_format=2)


@case("tiff_gray16_fill_order_2.tif")
def tiff_gray16_fill_order_2():
    return _tiff(_noise(_rng("g16f"), 1, 65536), 1, 16, fill_order=2)


@case("tiff_rgb8_fill_order_2.tif")
def tiff_rgb8_fill_order_2():
    return _tiff(_noise(_rng("rgbf"), 3), 2, 8, fill_order=2)


@case("tiff_palette4.tif")
def tiff_palette4():
    return _tiff(_noise(_rng("p4"), 1, 16), 3, 4, colormap=_rng("p4m").integers(256, 65536, 48))


@case("tiff_palette8_fill_order_2.tif")
def tiff_palette8_fill_order_2():
    return _tiff(_noise(_rng("p8f"), 1), 3, 8, colormap=_rng("p8m").integers(0, 65536, 768), fill_order=2)


@case("tiff_rgb8_planes.tif")
def tiff_rgb8_planes():
    return _tiff(_noise(_rng("planar"), 3), 2, 8, planar=2)


@case("tiff_rgba8_planes.tif")
def tiff_rgba8_planes():
    return _tiff(_alpha_rgba(_rng("planara")), 2, 8, extra=(2,), planar=2)


@case("tiff_cmyk_planes.tif")
def tiff_cmyk_planes():
    return _tiff(_noise(_rng("planarc"), 4), 5, 8, planar=2)


for _orientation in range(1, 9):
    def _oriented(orientation=_orientation):  # Pillow transposes by the tag when loading
        return _tiff(_noise(_rng(f"o{orientation}"), 3), 2, 8, tags=[(274, (3, [orientation]))])
    _oriented.__name__ = f"tiff_orientation{_orientation}"
    case(f"tiff_orientation{_orientation}.tif")(_oriented)


@case("tiff_cmyk16_orientation6.tif")
def tiff_cmyk16_orientation6():
    return _tiff(_noise(_rng("cmyk16o"), 4, 65536), 5, 16, tags=[(274, (3, [6]))])


@case("tiff_multipage_first_frame.tif")
def tiff_multipage_first_frame():
    rng = _rng("pages")
    frames = [Image.fromarray(_noise(rng, 3).astype(np.uint8)) for _ in range(3)]
    return _pil(frames[0], "TIFF", save_all=True, append_images=frames[1:])


# BMP: Pillow's raw modes and bit-field layouts; 16-bit channels are widened as Pillow does.
@case("bmp_pillow_rgb.bmp")
def bmp_pillow_rgb():
    return _pil(Image.fromarray(_noise(_rng("bmp"), 3).astype(np.uint8)), "BMP")


@case("bmp_pillow_gray.bmp")
def bmp_pillow_gray():
    return _pil(Image.fromarray(_noise(_rng("bmpl"), 1).astype(np.uint8)), "BMP")


@case("bmp_pillow_1bit.bmp")
def bmp_pillow_1bit():
    return _pil(Image.fromarray(_noise(_rng("bmp1"), 3).astype(np.uint8)).convert("1"), "BMP")


@case("bmp_pillow_palette.bmp")
def bmp_pillow_palette():
    return _pil(Image.fromarray(_noise(_rng("bmpp"), 3).astype(np.uint8)).convert("P", palette=Image.ADAPTIVE,
                                                                                   colors=77), "BMP")


def _every_16bit_value(w=256, h=256):
    v = np.arange(w * h).reshape(h, w) % 65536
    return [v[y].astype("<u2").tobytes() for y in range(h)]


@case("bmp_16bit_555.bmp")
def bmp_16bit_555():
    return _bmp(256, 128, 16, _every_16bit_value(256, 128))


@case("bmp_16bit_565_bitfields.bmp")
def bmp_16bit_565_bitfields():
    return _bmp(256, 256, 16, _every_16bit_value(), compression=3, masks=(0xF800, 0x7E0, 0x1F))


@case("bmp_16bit_555_bitfields_v4.bmp")
def bmp_16bit_555_bitfields_v4():
    return _bmp(256, 256, 16, _every_16bit_value(), compression=3, masks=(0x7C00, 0x3E0, 0x1F, 0), header_size=108)


def _bmp32_rows(name):
    px = _noise(_rng(name), 4).astype(np.uint8)
    return [px[y].tobytes() for y in range(H)]


@case("bmp_32bit.bmp")
def bmp_32bit():
    return _bmp(W, H, 32, _bmp32_rows("b32"))


for _i, _masks in enumerate([(0xFF0000, 0xFF00, 0xFF, 0), (0xFF000000, 0xFF0000, 0xFF00, 0),
                             (0xFF000000, 0xFF0000, 0xFF00, 0xFF), (0xFF, 0xFF00, 0xFF0000, 0xFF000000),
                             (0xFF0000, 0xFF00, 0xFF, 0xFF000000), (0, 0, 0, 0)]):
    def _bitfields32(masks=_masks, i=_i):
        return _bmp(W, H, 32, _bmp32_rows(f"b32m{i}"), compression=3, masks=masks, header_size=108)
    _bitfields32.__name__ = f"bmp_32bit_bitfields{_i}"
    case(f"bmp_32bit_bitfields{_i}.bmp")(_bitfields32)


def _bmp24_rows(name):
    px = _noise(_rng(name), 3).astype(np.uint8)
    return [px[y].tobytes() for y in range(H)]


@case("bmp_24bit_bitfields.bmp")
def bmp_24bit_bitfields():
    return _bmp(W, H, 24, _bmp24_rows("b24bf"), compression=3, masks=(0xFF0000, 0xFF00, 0xFF))


@case("bmp_24bit_top_down.bmp")
def bmp_24bit_top_down():
    return _bmp(W, H, 24, _bmp24_rows("td"), top_down=True)


@case("bmp_24bit_os2_header.bmp")
def bmp_24bit_os2_header():
    return _bmp(W, H, 24, _bmp24_rows("os2"), header_size=12)


@case("bmp_24bit_v5_header.bmp")
def bmp_24bit_v5_header():
    return _bmp(W, H, 24, _bmp24_rows("v5"), header_size=124)


def _packed_rows(idx, bits):
    return _png_rows(idx, bits)


@case("bmp_4bit_palette.bmp")
def bmp_4bit_palette():
    rng = _rng("b4")
    return _bmp(W, H, 4, _packed_rows(_noise(rng, 1, 16), 4), palette=[tuple(c) for c in _noise(rng, 3, h=1, w=16)[0]])


@case("bmp_1bit_colour_palette.bmp")
def bmp_1bit_colour_palette():
    return _bmp(W, H, 1, _packed_rows(_noise(_rng("b1"), 1, 2), 1), palette=[(255, 0, 0), (0, 0, 255)])


@case("bmp_1bit_inverted_palette.bmp")
def bmp_1bit_inverted_palette():
    return _bmp(W, H, 1, _packed_rows(_noise(_rng("b1i"), 1, 2), 1), palette=[(255, 255, 255), (0, 0, 0)])


def _rle(idx, four_bits):
    out = bytearray()
    rng = _rng("rle")
    for row in idx:
        x = 0
        while x < len(row):
            n = int(min(len(row) - x, rng.integers(1, 6)))
            v = int(row[x])
            out += bytes([n, (v << 4 | v) if four_bits else v])
            x += n
        out += b"\0\0"
    return bytes(out + b"\0\1")


@case("bmp_rle8.bmp")
def bmp_rle8():
    rng = _rng("rle8")
    return _bmp(W, H, 8, data=_rle(_noise(rng, 1), False), compression=1,
                palette=[tuple(c) for c in _noise(rng, 3, h=1, w=256)[0]])


@case("bmp_rle4.bmp")
def bmp_rle4():
    rng = _rng("rle4")
    return _bmp(W, H, 4, data=_rle(_noise(rng, 1, 16), True), compression=2,
                palette=[tuple(c) for c in _noise(rng, 3, h=1, w=16)[0]])


@case("bmp_rle8_literals_and_short_rows.bmp")
def bmp_rle8_literals_and_short_rows():  # literal runs (odd ones padded), rows ended early
    rng = _rng("rle8l")
    rows = [bytes([3, 5, 0, 3, 1, 2, 3, 0, 0, 0]), bytes([0, 4, 9, 8, 7, 6, 4, 2, 0, 0]), bytes([12, 7, 0, 0])]
    return _bmp(8, 3, 8, data=b"".join(rows) + b"\0\1", compression=1,
                palette=[tuple(c) for c in _noise(rng, 3, h=1, w=256)[0]])


# WebP: both decoders are libwebp.
def _webp_source(alpha):
    rng = _rng("webp")
    y, x = np.mgrid[0:61, 0:83]
    rgb = np.clip(np.stack([x * 3, y * 4, (x + y) * 2], -1) % 256 + rng.integers(-30, 30, (61, 83, 3)), 0, 255)
    if not alpha:
        return Image.fromarray(rgb.astype(np.uint8))
    a = rng.integers(0, 256, (61, 83, 1))
    a[:10] = 0
    return Image.fromarray(np.concatenate([rgb, a], -1).astype(np.uint8), "RGBA")


for _name, _alpha, _kw in [("lossless", False, {"lossless": True}), ("lossy", False, {"quality": 80}),
                           ("alpha_lossless", True, {"lossless": True}), ("alpha_lossy", True, {"quality": 80}),
                           ("alpha_lossless_exact", True, {"lossless": True, "exact": True})]:
    def _webp(alpha=_alpha, kw=_kw):
        return _pil(_webp_source(alpha), "WEBP", **kw)
    _webp.__name__ = f"webp_{_name}"
    case(f"webp_{_name}.webp")(_webp)


@case("webp_gray_lossy.webp")
def webp_gray_lossy():
    return _pil(_webp_source(False).convert("L"), "WEBP", quality=70)


# PPM, PGM, PBM: every maxval rule of Pillow's PpmImagePlugin (raw 255, raw 16-bit gray,
# scaled others, plain formats, mode "I" for gray above 255).
for _maxval in (1, 2, 3, 15, 100, 254, 255, 256, 1000, 4095, 65534, 65535):
    for _magic in (b"P5", b"P6", b"P2", b"P3"):
        if _magic in (b"P2", b"P3") and _maxval > 4095:
            continue
        def _pnm_case(maxval=_maxval, magic=_magic):
            n = maxval + 1
            w = min(n, 256)
            h = max(1, -(-n // w))
            v = np.resize(np.arange(n), w * h).reshape(h, w)
            samples = np.stack([v, v[:, ::-1], maxval - v], -1) if magic in (b"P3", b"P6") else v
            return _pnm(magic, w, h, maxval, samples)
        _ext = "ppm" if _magic in (b"P3", b"P6") else "pgm"
        _pnm_case.__name__ = f"pnm_{_magic.decode()}_maxval{_maxval}"
        case(f"pnm_{_magic.decode()}_maxval{_maxval}.{_ext}")(_pnm_case)


@case("pnm_P4_bitmap.pgm")
def pnm_P4_bitmap():
    return _pnm(b"P4", W, H, 0, _noise(_rng("p4"), 1, 2))


@case("pnm_P1_bitmap.pgm")
def pnm_P1_bitmap():
    return _pnm(b"P1", W, H, 0, _noise(_rng("p1b"), 1, 2))


@case("pnm_header_comments.ppm")
def pnm_header_comments():
    return _pnm(b"P6", W, H, 255, _noise(_rng("pc"), 3), comment=b"# a comment\n#another\r")


@case("pnm_P3_comments_in_data.ppm")
def pnm_P3_comments_in_data():
    v = _noise(_rng("p3c"), 3, 100)
    body = b"\n".join(b" ".join(b"%d" % x for x in row.reshape(-1)) + b" # row\n" for row in v)
    return b"P3\n%d %d\n99\n" % (W, H) + body


# ------------------------------------------------------------------------------------------
# Conversion and comparison


@pytest.fixture(scope="module")
def converted(program, tmp_path_factory):
    root = tmp_path_factory.mktemp("colours")
    for name, (filename, build) in ACCEPTED.items():
        (root / "src" / "cases").mkdir(parents=True, exist_ok=True)
        (root / "src" / "cases" / filename).write_bytes(build())
    result = run(program, "convert", "--src", str(root / "src"), "--out", str(root / "db"), "--json", "--quiet",
                 "--threads", "2")
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    ds = Dataset(str(root / "db"))
    index = {ds.source(i).split("/", 1)[1]: i for i in range(len(ds))}
    return root / "src" / "cases", ds, index, summary


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_stored_pixels_equal_pillows_rgb(converted, name):
    folder, ds, index, _ = converted
    filename = ACCEPTED[name][0]
    want = np.asarray(Image.open(folder / filename).convert("RGB")).astype(np.int32)
    got = np.asarray(Image.open(io.BytesIO(ds[index[filename]][0])).convert("RGB")).astype(np.int32)
    assert got.shape == want.shape, filename
    diff = np.abs(got - want)
    bad = np.argwhere(diff.max(-1) > 0)
    assert bad.size == 0, (f"{filename}: {len(bad)} pixels differ, max {diff.max()}; first at (y, x) = "
                           f"{tuple(bad[0])}: stored {tuple(got[tuple(bad[0])])}, Pillow {tuple(want[tuple(bad[0])])}")


def test_the_summary_names_what_was_converted(converted):
    *_, summary = converted
    stored = summary["stored_as"]
    assert summary["records"] == len(ACCEPTED) and summary["skipped"] == 0
    assert any("CMYK" in k for k in stored), stored
    assert any("premultiplied alpha" in k for k in stored), stored
    assert any("16-bit grayscale, clipped" in k for k in stored), stored


# Refused: what Pillow reads in a way ddpio does not reproduce (or cannot open at all). Each is
# skipped with a reason naming the file and what in it is refused.
REFUSED = {
    "tiff_lab.tif": (lambda: _tiff(_noise(_rng("lab"), 3), 8, 8), "CIE L*a*b*"),
    "tiff_lab_pillow.tif": (lambda: _pil(Image.new("LAB", (W, H), (100, 20, 200)), "TIFF"), "CIE L*a*b*"),
    "tiff_float32.tif": (lambda: _tiff(_rng("f").random((H, W)) * 300, 1, 32, sample_format=3),
                         "32-bit floating-point samples"),
    "tiff_uint32.tif": (lambda: _tiff(_noise(_rng("u32"), 1, 300), 1, 32), "32-bit samples"),
    "tiff_cmyk_alpha.tif": (lambda: _tiff(_noise(_rng("cmyka"), 5), 5, 8, extra=(2,)), "extra samples 2"),
    "tiff_gray_premultiplied_alpha.tif": (lambda: _tiff(_noise(_rng("lapre"), 2), 1, 8, extra=(1,)),
                                          "sample layout Pillow does not open"),
    "tiff_cmyk16_big_endian.tif": (lambda: _tiff(_noise(_rng("cmyk16be"), 4, 65536), 5, 16, big_endian=True),
                                   "photometric 5, 16,16,16,16 bits"),
    "tiff_ycbcr_uncompressed.tif": (lambda: _pil(Image.new("YCbCr", (W, H), (10, 20, 30)), "TIFF"),
                                    "YCbCr, uncompressed"),
    "tiff_rgb16_uncompressed_planes.tif": (lambda: _tiff(_noise(_rng("pl16"), 3, 65536), 2, 16, planar=2),
                                           "separate uncompressed planes"),
    "tiff_gray_alpha_uncompressed_planes.tif": (lambda: _tiff(_noise(_rng("lapl"), 2), 1, 8, extra=(2,), planar=2),
                                                "separate uncompressed planes"),
    "tiff_palette_8bit_colour_map.tif": (lambda: _tiff(_noise(_rng("p8c"), 1), 3, 8,
                                                       colormap=_rng("c8").integers(0, 256, 768)),
                                         "8-bit values in its 16-bit colour map"),
    "bmp_16bit_444_bitfields.bmp": (lambda: _bmp(256, 256, 16, _every_16bit_value(), compression=3,
                                                 masks=(0xF00, 0xF0, 0xF)), "16-bit colour masks"),
    "bmp_4bit_grey_ramp.bmp": (lambda: _bmp(W, H, 4, _packed_rows(_noise(_rng("b4g"), 1, 16), 4),
                                            palette=[(i, i, i) for i in range(16)]), "16-entry grey palette"),
    "bmp_rle8_delta.bmp": (lambda: _bmp(8, 3, 8, data=bytes([3, 5, 0, 2, 2, 1, 2, 7, 0, 0, 8, 9, 0, 0, 8, 1, 0, 1]),
                                        compression=1, palette=[(i, 0, 0) for i in range(256)]), "delta escape"),
    "bmp_rle8_rows_without_end_of_line.bmp": (lambda: _bmp(8, 3, 8, data=bytes([8, 5, 8, 6, 8, 7, 0, 1]),
                                                           compression=1, palette=[(i, 0, 0) for i in range(256)]),
                                              "for 8 of its 24 pixels"),
    "bmp_rle4_odd_literal.bmp": (lambda: _bmp(8, 1, 4, data=bytes([0, 3, 0x12, 0x30, 5, 0x44, 0, 0, 0, 1]),
                                              compression=2, palette=[(i, 0, 0) for i in range(16)]),
                                 "literal run of odd length"),
    "bmp_jpeg_compression.bmp": (lambda: _bmp(W, H, 24, _bmp24_rows("bj"), compression=4), "compression 4"),
}


@pytest.fixture(scope="module")
def refused(program, tmp_path_factory):
    root = tmp_path_factory.mktemp("refused")
    (root / "src" / "bad").mkdir(parents=True)
    for filename, (build, _) in REFUSED.items():
        (root / "src" / "bad" / filename).write_bytes(build())
    result = run(program, "convert", "--src", str(root / "src"), "--out", str(root / "db"), "--json", "--quiet",
                 "--skip-invalid")
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    return {s["source"].split("/", 1)[1]: s["reason"] for s in summary["skipped_files"]}, summary


@pytest.mark.parametrize("filename", sorted(REFUSED))
def test_what_ddpio_cannot_match_is_refused_by_name(refused, filename):
    reasons, summary = refused
    assert summary["records"] == 0
    assert filename in reasons, f"{filename} was stored; skipped: {sorted(reasons)}"
    assert filename in reasons[filename] and REFUSED[filename][1] in reasons[filename], reasons[filename]


# ------------------------------------------------------------------------------------------
# JPEG: libjpeg-turbo in the loader. CMYK and YCCK must load as Pillow's convert("RGB"), which
# reads every 4-channel JPEG as Adobe-inverted CMYK.

JPEGS = {
    "cmyk_pillow": lambda a: _pil(Image.fromarray(a[..., :4].astype(np.uint8), "CMYK"), "JPEG", quality=95),
    "cmyk_without_adobe_marker": lambda a: _strip_adobe_marker(
        _pil(Image.fromarray(a[..., :4].astype(np.uint8), "CMYK"), "JPEG", quality=95)),
    "ycck_turbojpeg": lambda a: _turbojpeg_ycck(a[..., :4]),
    "gray": lambda a: _pil(Image.fromarray(a[..., 0].astype(np.uint8)), "JPEG", quality=90),
    "rgb_420": lambda a: _pil(Image.fromarray(a[..., :3].astype(np.uint8)), "JPEG", quality=90),
}


@pytest.mark.parametrize("name", sorted(JPEGS))
def test_jpegs_load_as_pillows_rgb(program, tmp_path, name):
    import ddpio
    rng = _rng(name)
    y, x = np.mgrid[0:64, 0:64]
    smooth = np.stack([x * 4, y * 4, (x + y) * 2, 255 - x * 2], -1)
    a = np.clip(smooth + rng.integers(-20, 20, (64, 64, 4)), 0, 255)
    jpeg = JPEGS[name](a)
    if name == "ycck_turbojpeg":
        assert b"Adobe" in jpeg and jpeg[jpeg.index(b"Adobe") + 11] == 2  # transform 2: YCCK
    if name == "cmyk_without_adobe_marker":
        assert b"Adobe" not in jpeg
    (tmp_path / "src" / "c").mkdir(parents=True)
    (tmp_path / "src" / "c" / "x.jpg").write_bytes(jpeg)
    run(program, "convert", "--src", str(tmp_path / "src"), "--out", str(tmp_path / "db"), "--quiet")
    loader = ddpio.Loader(str(tmp_path / "db"), batch_size=1, image_size=64, train=False, decode="exact",
                          resize_size=64, arrays="numpy", workers=1)
    got = np.asarray(next(iter(loader))["images"])[0].astype(np.int32)
    if got.shape[0] == 3:
        got = got.transpose(1, 2, 0)
    want = np.asarray(Image.open(tmp_path / "src" / "c" / "x.jpg").convert("RGB")).astype(np.int32)
    assert np.abs(got - want).max() == 0, f"{name}: max diff {np.abs(got - want).max()}"
    stored = Dataset(str(tmp_path / "db"))[0][0]  # the stored JPEG, as Pillow reads it
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(stored)).convert("RGB")), want.astype(np.uint8))


# ------------------------------------------------------------------------------------------
# Decompression bombs within the 100-megapixel limit: bounded by the decoding budget.

def _zero_png(side):
    """A grey PNG of side x side zeros, zlib level 9: 97 KB for 10,000 x 10,000."""
    z = zlib.compressobj(9)
    row = b"\0" * (side + 1)
    data = b"".join(z.compress(row) for _ in range(side)) + z.flush()
    ihdr = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", data) + _png_chunk(b"IEND", b"")


def _peak_rss_mb(args):
    """Runs `args` in a child of a fresh Python, returning (result, the child's peak RSS in MB)."""
    probe = ("import resource, subprocess, sys, json;"
             "r = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
             "print(json.dumps([r.returncode, r.stdout, r.stderr,"
             " resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))")
    out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=600)
    code, stdout, stderr, rss_kb = json.loads(out.stdout)
    return code, stdout, stderr, rss_kb / 1024


def test_a_png_bomb_within_the_pixel_limit_is_refused_with_bounded_memory(program, tmp_path):
    bomb = _zero_png(10000)
    assert len(bomb) < 100_000
    for k in range(2):
        (tmp_path / "src" / "bombs").mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / "bombs" / f"bomb{k}.png").write_bytes(bomb)
    code, _, err, rss = _peak_rss_mb([program, "convert", "--src", str(tmp_path / "src"), "--out",
                                      str(tmp_path / "stop"), "--threads", "2", "--quiet"])
    assert code == 1, err
    assert "bomb0.png" in err and "10000x10000 PNG" in err and "1024 MiB" in err and "max_decode_bytes" in err, err
    assert rss < 600, f"peak RSS {rss:.0f} MB (the program alone takes ~240; a bomb took 2,000 before the budget)"
    code, out, err, rss = _peak_rss_mb([program, "convert", "--src", str(tmp_path / "src"), "--out",
                                        str(tmp_path / "skip"), "--threads", "2", "--skip-invalid", "--json",
                                        "--quiet"])
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["records"] == 0 and summary["skipped"] == 2
    assert rss < 600, f"peak RSS {rss:.0f} MB with --threads 2"


def test_a_legitimate_large_image_is_stored_as_pillow_reads_it(program, tmp_path):
    """24 megapixels (about 310 MB to decode, within the budget): stored exactly."""
    y, x = np.mgrid[0:4000, 0:6000]
    rgb = np.stack([x % 256, y % 256, (x // 7 + y // 5) % 256], -1).astype(np.uint8)
    (tmp_path / "src" / "big").mkdir(parents=True)
    Image.fromarray(rgb).save(tmp_path / "src" / "big" / "large.png", compress_level=1)
    run(program, "convert", "--src", str(tmp_path / "src"), "--out", str(tmp_path / "db"), "--quiet")
    got = np.asarray(Image.open(io.BytesIO(Dataset(str(tmp_path / "db"))[0][0])))
    assert np.array_equal(got, rgb)
