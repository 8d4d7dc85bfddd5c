"""Which part of the memory pass breaks a checkpointed step's backward on CUDA (SystemError
from run_backward on the H200): the step under each of the pass's pieces alone and together."""

import contextlib
import sys
import traceback

import torch

sys.path.insert(0, "docs/h200-run/memory")
import workload

model, opt, tokens = workload.train_step_ckpt_inputs(4, "cuda")
for _ in range(2):
    workload.train_step_ckpt(model, opt, tokens)
torch.cuda.synchronize()


def hooks():
    return torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)


@contextlib.contextmanager
def history():
    torch.cuda.memory._record_memory_history(max_entries=100000, stacks="python")
    try:
        yield
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)


@contextlib.contextmanager
def cpu_profiler():
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]):
        yield


@contextlib.contextmanager
def tracer():
    from torch.autograd.profiler import record_function

    open_ranges = {}

    def local(frame, event, arg):
        if event in ("line", "return"):
            rf = open_ranges.pop(frame, None)
            if rf is not None:
                rf.__exit__(None, None, None)
        if event == "line":
            rf = record_function("ks:line")
            rf.__enter__()
            open_ranges[frame] = rf
        return local

    def trace(frame, event, arg):
        return local if "workload" in frame.f_code.co_filename else None

    sys.settrace(trace)
    try:
        yield
    finally:
        sys.settrace(None)
        for rf in open_ranges.values():
            rf.__exit__(None, None, None)


PIECES = {"hooks": hooks, "history": history, "profiler": cpu_profiler, "tracer": tracer}
CASES = [["hooks"], ["history"], ["profiler"], ["tracer"], ["profiler", "tracer"],
         ["hooks", "tracer"], ["hooks", "profiler", "tracer"], ["history", "profiler", "tracer"],
         ["history", "hooks", "profiler", "tracer"]]  # fmt: skip
for case in CASES:
    try:
        with contextlib.ExitStack() as stack:
            for name in case:
                stack.enter_context(PIECES[name]())
            workload.train_step_ckpt(model, opt, tokens)
            torch.cuda.synchronize()
        print(f"{'+'.join(case):36} ok")
    except BaseException as e:
        print(f"{'+'.join(case):36} FAILED {type(e).__name__}: {str(e)[:160]}")
        traceback.print_exc(limit=-6)
