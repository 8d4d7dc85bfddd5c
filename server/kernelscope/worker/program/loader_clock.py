# pyright: basic
"""The DataLoader's ``next()`` timed while the calls are timed without the profiler. The
profiler's range around each ``next()`` holds the profiler's cost for each of the dataset's
ops, and its share is of the profiled step: pytorch/examples' VAE on MNIST read 7.68 ms of
13.85 (55 %) profiled, where its program alone took ~3 ms a ``next()`` of an 8.4 ms step."""

import threading
import time


class LoaderClock:
    """Adds up the seconds torch's DataLoader iterators spend in ``__next__`` (the base
    class's, which every iterator runs: the dataset's ``__getitem__`` and collation, or the
    wait for the workers' batches) on one thread while ``on``. Installed with `install`,
    taken out with `remove`; a no-op where torch has no such class."""

    def __init__(self, torch):
        self.seconds = 0.0
        self.calls = 0
        self.sources = []  # the timed iterators' dataset item and collate_fn: sources_of
        self._seen = set()
        self.on = False
        self._thread = threading.get_ident()
        self._cls = None
        self._original = None
        try:
            from torch.utils.data.dataloader import _BaseDataLoaderIter
        except ImportError:
            return
        original = _BaseDataLoaderIter.__dict__.get("__next__")
        if callable(original):
            self._cls, self._original = _BaseDataLoaderIter, original

    def install(self):
        cls, original = self._cls, self._original
        if cls is None or original is None or cls.__dict__.get("__next__") is not original:
            return self
        clock = self

        def __next__(it):
            if not clock.on or threading.get_ident() != clock._thread:
                return original(it)
            t = time.perf_counter()
            try:
                return original(it)
            finally:
                clock.seconds += time.perf_counter() - t
                clock.calls += 1
                if id(it) not in clock._seen:
                    clock._seen.add(id(it))
                    clock.sources += [w for w in sources_of(it) if w not in clock.sources]

        setattr(cls, "__next__", __next__)  # noqa: B010 (pyright rejects assigning to a typed method)
        return self

    def remove(self):
        self.on = False
        cls = self._cls
        if cls is not None and cls.__dict__.get("__next__") is not self._original:
            setattr(cls, "__next__", self._original)  # noqa: B010

    def fields(self, samples_us):
        """The timed calls' DataLoader time as UnprofiledTiming has it: µs per call
        (``loader_us_per_call``) and share of the calls' summed time (``loader_share``),
        both None where no ``next()`` ran in them."""
        total = sum(samples_us)
        if not self.calls or not samples_us or total <= 0:
            return {"loader_us_per_call": None, "loader_share": None, "loader_sources": []}
        us = self.seconds * 1e6
        return {
            "loader_us_per_call": us / len(samples_us),
            "loader_share": min(1.0, us / total),
            "loader_sources": list(self.sources),
        }


def sources_of(it):
    """``PATH::QUALNAME`` of the functions a DataLoader iterator's batches run: its dataset's
    ``__getitem__`` (an IterableDataset's ``__iter__``; through torch's Subset and
    ConcatDataset to the dataset they wrap) and its collate_fn unless torch's own."""
    out = []
    dataset = getattr(it, "_dataset", None)
    for _ in range(8):
        inner = getattr(dataset, "dataset", None)  # Subset, and wrappers like it
        if inner is None and type(dataset).__name__ == "ConcatDataset":
            inner = (getattr(dataset, "datasets", None) or [None])[0]
        if inner is None or not type(dataset).__module__.startswith("torch.utils.data"):
            break
        dataset = inner
    if dataset is not None:
        try:
            from torch.utils.data import IterableDataset

            iterable = isinstance(dataset, IterableDataset)
        except ImportError:
            iterable = False
        out.append(getattr(type(dataset), "__iter__" if iterable else "__getitem__", None))
    out.append(getattr(it, "_collate_fn", None))
    # torch's own (default_collate, a base class's method) are not what a user would profile
    out = [f for f in out if not str(getattr(f, "__module__", "")).startswith("torch.utils.data")]
    return [w for w in (_where(f) for f in out) if w]


def _where(fn):
    """``PATH::QUALNAME`` of a Python function (None for a builtin or one of no file)."""
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is None or code.co_filename.startswith("<"):
        return None
    qualname = getattr(fn, "__qualname__", code.co_name)
    if "<locals>" in qualname or "<lambda>" in qualname:
        return None
    return "%s::%s" % (code.co_filename, qualname)
