"""The worker program as it is sent: the package in ``program/`` packed into one zip, inside
the loader's text, which the bootstrap reads from stdin and runs.

Nothing here imports torch: the server only reads the package's files as bytes.
"""

from __future__ import annotations

import base64
import io
import zipfile
from functools import cache
from importlib import resources

# Reads exactly one length-prefixed source text from fd 0, unbuffered, then runs it.
BOOTSTRAP = (
    "import os,sys\n"
    "def _ks_read(n):\n"
    "    b=b''\n"
    "    while len(b)<n:\n"
    "        c=os.read(0,n-len(b))\n"
    "        if not c: sys.exit(3)\n"
    "        b+=c\n"
    "    return b\n"
    "_ks_src=_ks_read(int.from_bytes(_ks_read(4),'big'))\n"
    "exec(compile(_ks_src,'kernelscope_worker.py','exec'),{'__name__':'kernelscope_worker'})\n"
)
#: The loader's placeholder for the zip, replaced as the program is built.
_BUNDLE_SLOT = 'BUNDLE = ""'
#: Every zip entry gets this time, so the same sources make the same bytes.
_EPOCH = (2020, 1, 1, 0, 0, 0)


@cache
def worker_sources() -> dict[str, str]:
    """The package's modules as shipped: file name in the zip -> source text."""
    package = resources.files(__name__).joinpath("program")
    return {
        entry.name: entry.read_text(encoding="utf-8")
        for entry in sorted(package.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".py")
    }


@cache
def worker_bundle() -> bytes:
    """The package as one deterministic zip (sorted names, fixed times)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in worker_sources().items():
            info = zipfile.ZipInfo(name, _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text.encode("utf-8"))
    return out.getvalue()


@cache
def worker_source() -> bytes:
    """The worker program, as sent to every interpreter that runs it: the loader with the
    package's zip in it."""
    loader = resources.files(__name__).joinpath("loader.py").read_text(encoding="utf-8")
    if loader.count(_BUNDLE_SLOT) != 1:
        raise RuntimeError("kernelscope/worker/loader.py lost its bundle slot")
    bundle = base64.b64encode(worker_bundle()).decode("ascii")
    return loader.replace(_BUNDLE_SLOT, f'BUNDLE = "{bundle}"', 1).encode("utf-8")


def bootstrap_payload() -> bytes:
    """The bytes to write to a fresh worker's stdin: 4-byte length, then the program."""
    src = worker_source()
    return len(src).to_bytes(4, "big") + src
