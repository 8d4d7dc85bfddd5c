"""Truth for one function or method a program calls, in a fresh process that never
profiled: the function is wrapped to stamp `perf_counter()` around each call, then the
program runs as its `__main__` with its own argv. After TRUTH_N calls it prints the calls'
times (ms) to stderr and exits. Run from the program's folder:

    TRUTH_N=21 python method_truth.py transformers.trainer:Trainer.training_step \\
        run_clm.py --model_type gpt2 ...
"""

import importlib
import json
import os
import sys
import time


def main() -> None:
    spec, path, *argv = sys.argv[1:]
    module_name, _, qualname = spec.partition(":")
    owner = importlib.import_module(module_name)
    *outer, name = qualname.split(".")
    for part in outer:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    n, times = int(os.environ.get("TRUTH_N", "21")), []

    def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            times.append((time.perf_counter() - start) * 1e3)
            if len(times) >= n:
                print("TRUTH", json.dumps({"calls_ms": times}), file=sys.stderr, flush=True)
                os._exit(0)

    setattr(owner, name, timed)
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    with open(path) as f:
        source = f.read()
    exec(compile(source, path, "exec"), {"__name__": "__main__", "__file__": path})


if __name__ == "__main__":
    main()
