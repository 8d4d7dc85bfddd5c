"""Truth for a function as its real program calls it: runs the program's script as
``__main__`` in a fresh process that never profiled, and times each call of one function the
script defines (``Class.method`` or ``function``), without editing the script: the script's
code is compiled here and that function's code object watched through sys.monitoring
(Python 3.12; sys.setprofile before). Under torchrun it runs on each rank.

    [torchrun --nproc-per-node 1] python inprog_truth.py SCRIPT QUALNAME [--skip N]
        [--cuda] -- [the script's arguments]

--cuda times each call between two CUDA events (its span on the current stream), else
time.perf_counter. Calls before the (N+1)th are warm-up, left out. --by-line also gives the
median of the calls from each line of the script that made them (the stack walked before
the call's span begins).
"""

import argparse
import os
import statistics
import sys
import time


def find_code(code, qualname):
    """The code object of `qualname` among those nested in a module's code."""
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            if getattr(const, "co_qualname", const.co_name) == qualname:
                return const
            found = find_code(const, qualname)
            if found is not None:
                return found
    return None


def main():
    cut = sys.argv.index("--") if "--" in sys.argv else len(sys.argv)
    parser = argparse.ArgumentParser()
    parser.add_argument("script")
    parser.add_argument("qualname")
    parser.add_argument("--skip", type=int, default=20)
    parser.add_argument("--cuda", action="store_true")
    parser.add_argument("--by-line", action="store_true")
    parser.add_argument("--upto", type=int, default=0, help="only calls up to this one")
    opts = parser.parse_args(sys.argv[1:cut])
    path = os.path.abspath(opts.script)
    with open(path, encoding="utf-8") as f:
        code = compile(f.read(), path, "exec")
    target = find_code(code, opts.qualname)
    if target is None:
        sys.exit(f"no {opts.qualname} in {path}")
    torch = None
    if opts.cuda:
        import torch
    open_calls, spans, lines = [], [], []

    def calling_line():
        f = sys._getframe(2)
        while f is not None:
            if f.f_code.co_filename == path and f.f_code is not target:
                return f.f_lineno
            f = f.f_back
        return 0

    def started(*_):
        if opts.by_line:
            lines.append(calling_line())
        if torch is not None:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            open_calls.append(event)
        else:
            open_calls.append(time.perf_counter())

    def ended(*_):
        if not open_calls:
            return
        begin = open_calls.pop()
        if torch is not None:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            spans.append((begin, event))
        else:
            spans.append((begin, time.perf_counter()))

    mon = getattr(sys, "monitoring", None)
    if mon is not None:
        tool = mon.PROFILER_ID
        mon.use_tool_id(tool, "inprog_truth")
        events = mon.events
        mon.register_callback(tool, events.PY_START, started)
        mon.register_callback(tool, events.PY_RETURN, ended)
        # PY_UNWIND cannot be a local event: a call that raises stays open and is not timed.
        mon.set_local_events(tool, target, events.PY_START | events.PY_RETURN)
    else:

        def hook(frame, event, _arg):
            if frame.f_code is target:
                if event == "call":
                    started()
                elif event == "return":
                    ended()

        sys.setprofile(hook)
    sys.argv = [path, *sys.argv[cut + 1 :]]
    sys.path.insert(0, os.path.dirname(path))
    exec(code, {"__name__": "__main__", "__file__": path, "__builtins__": __builtins__})
    sys.setprofile(None)
    if opts.upto:
        spans, lines = spans[: opts.upto], lines[: opts.upto]
    if torch is not None:
        torch.cuda.synchronize()
        us = sorted(b.elapsed_time(e) * 1e3 for b, e in spans[opts.skip :])
    else:
        us = sorted((e - b) * 1e6 for b, e in spans[opts.skip :])
    if not us:
        sys.exit(f"{opts.qualname} made {len(spans)} calls, none past --skip {opts.skip}")
    if opts.by_line:
        by = {}
        for (b, e), line in zip(spans[opts.skip :], lines[opts.skip :], strict=True):
            t = b.elapsed_time(e) * 1e3 if torch is not None else (e - b) * 1e6
            by.setdefault(line, []).append(t)
        for line, ts in sorted(by.items()):
            print(f"line {line}: {statistics.median(ts):.1f} us median of {len(ts)} calls")
    p10, p90 = us[len(us) // 10], us[9 * len(us) // 10]
    how = "cuda events" if torch is not None else "perf_counter"
    print(
        f"rank {os.environ.get('RANK', '-')}: {opts.qualname} {statistics.median(us):.1f} us "
        f"median of {len(us)} calls past {opts.skip} (p10 {p10:.1f}, p90 {p90:.1f}), {how}, fresh"
    )


if __name__ == "__main__":
    main()
