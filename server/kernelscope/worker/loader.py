# pyright: basic
"""Stage two of a worker's start: the package ``kernelscope_worker`` from a zip in memory.

The bootstrap runs this text (sent with the zip in it, as base64) under the name
``kernelscope_worker``. ``zipimport`` cannot read bytes on Python 3.9-3.13, and a zip written
to a temp folder would make the worker's frames look like user code; so a meta-path finder,
first on ``sys.meta_path``, answers for the package alone: each module's origin is
``<kernelscope_worker>/NAME.py`` and its source is seeded in ``linecache`` (tracebacks and
faulthandler show the worker's lines). Standard library only; Python >= 3.9.
"""

import base64
import importlib.abc
import importlib.util
import io
import linecache
import sys
import zipfile

PACKAGE = "kernelscope_worker"
BUNDLE = ""  # base64 of the package's zip: filled in as the program is sent


class BundleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds and loads the modules of PACKAGE from the zip's bytes."""

    def __init__(self, data):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            self.sources = {name: z.read(name).decode("utf-8") for name in z.namelist()}

    def _entry(self, fullname):
        """(file name in the zip, is a package) or (None, False) for another module."""
        head, _, rest = fullname.partition(".")
        if head != PACKAGE:
            return None, False
        if not rest:
            return "__init__.py", True
        rel = rest.replace(".", "/")
        if rel + "/__init__.py" in self.sources:
            return rel + "/__init__.py", True
        if rel + ".py" in self.sources:
            return rel + ".py", False
        return None, False

    def find_spec(self, fullname, path=None, target=None):
        name, is_package = self._entry(fullname)
        if name is None:
            return None
        origin = "<%s>/%s" % (PACKAGE, name)
        return importlib.util.spec_from_loader(fullname, self, origin=origin, is_package=is_package)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name, _ = self._entry(module.__name__)
        if name is None:
            raise ImportError("%s is not in the worker's bundle" % module.__name__)
        origin = "<%s>/%s" % (PACKAGE, name)
        source = self.sources[name]
        linecache.cache[origin] = (len(source), None, source.splitlines(True), origin)
        module.__file__ = origin
        exec(compile(source, origin, "exec", dont_inherit=True), module.__dict__)

    def get_source(self, fullname):
        name, _ = self._entry(fullname)
        return None if name is None else self.sources[name]


def install(bundle=None):
    """Put the finder first on ``sys.meta_path`` (once); return it."""
    for finder in sys.meta_path:
        if isinstance(finder, BundleFinder) or type(finder).__name__ == "BundleFinder":
            return finder
    finder = BundleFinder(base64.b64decode(bundle if bundle is not None else BUNDLE))
    sys.meta_path.insert(0, finder)
    return finder


if __name__ == PACKAGE:  # the bootstrap's name
    install()
    from kernelscope_worker.process import main  # pyright: ignore[reportMissingImports]

    main()
