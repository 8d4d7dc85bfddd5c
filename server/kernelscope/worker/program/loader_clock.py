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
            return {"loader_us_per_call": None, "loader_share": None}
        us = self.seconds * 1e6
        return {"loader_us_per_call": us / len(samples_us), "loader_share": min(1.0, us / total)}
