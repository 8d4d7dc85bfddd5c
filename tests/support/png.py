"""A reader of the 8-bit RGB PNGs `kernelscope scale` draws, checking every chunk's CRC."""

from __future__ import annotations

import struct
import zlib

from kernelscope.render.plot import PNG_SIGNATURE


def decode_png(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and the RGB rows (filter bytes removed) of an 8-bit RGB PNG."""
    assert data[:8] == PNG_SIGNATURE
    pos, idat, size, kind = 8, b"", (0, 0), b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + body)
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert (depth, color) == (8, 2)
            size = (width, height)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert kind == b"IEND"
    width, height = size
    raw = zlib.decompress(idat)
    stride = 1 + 3 * width
    assert len(raw) == stride * height
    assert all(raw[y * stride] == 0 for y in range(height))
    return width, height, b"".join(raw[y * stride + 1 : (y + 1) * stride] for y in range(height))
