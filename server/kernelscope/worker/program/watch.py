# pyright: basic
"""Calls of one function, found by its code object (file, name, first line or qualified
name) however the program imports it, counted as the program runs.

``sys.monitoring`` on Python >= 3.12 (a tool id of our own, PY_START, every other code
object disabled after its first call); ``sys.settrace`` + ``threading.settrace`` before, a
global tracer that returns None (no line events) for every call. The chosen call's frame
is handed over through ``sys.call_tracing``, so the profiler and the line tracer work inside
it. A forked child (a DataLoader worker) notes that it called the function, and counts its
own calls to hand its chosen one to ``on_child_call`` (child_call.py) where that is set.
"""

import contextlib
import os
import sys
import threading
from typing import Any

TOOL_IDS = (3, 4, 5)  # 0 debuggers, 1 coverage, 2 profilers: take a free one of the rest
TOOL_NAME = "kernelscope"


def claim_tool(monitoring):
    """A free ``sys.monitoring`` tool id, taken; None without sys.monitoring or a free id."""
    if monitoring is None:
        return None
    for tool in TOOL_IDS:
        if monitoring.get_tool(tool) is None:
            monitoring.use_tool_id(tool, TOOL_NAME)
            return tool
    return None


class CallWatch:
    """Counts the calls of one function (those with one user line on their stack, when
    given) and hands the `want`-th call's frame to `on_call(frame, caller)`: the named line,
    else the innermost user line that led to it."""

    def __init__(self, path, qualname, first_line, want, caller, is_user_file):
        self.path = os.path.realpath(path)
        self.qualname = qualname
        self.name = qualname.rpartition(".")[2]
        self.first_line = first_line
        self.want = want
        self.caller = caller  # (realpath, line) or None
        self.is_user_file = is_user_file
        self.on_call: Any = None  # (frame, caller) -> None, set by the job
        self.on_child_call: Any = None  # (frame, caller, call) -> None, in a forked child
        self.calls = 0  # counted calls (from the caller, when one is named)
        self.seen = 0  # all calls
        self.callers = {}  # (path, line) -> calls from there
        self.code = None
        self.pid = os.getpid()
        self.tool = None
        self.armed = False
        self._files = {}
        self.noted_path: Any = None  # where spawned children note their calls (child_call.py)
        self._child_r, self._child_w = os.pipe()
        os.set_blocking(self._child_r, False)

    # which code, which caller ------------------------------------------------------------
    def in_file(self, code):
        """Whether `code` is of the watched file (realpath once per file name: before 3.12
        the tracer asks at every call the program makes)."""
        same = self._files.get(code.co_filename)
        if same is None:
            same = self._files[code.co_filename] = os.path.realpath(code.co_filename) == self.path
        return same

    def matches(self, code):
        if code.co_name != self.name:
            return False
        if self.code is not None:
            return code is self.code
        if not self.in_file(code):
            return False
        qualname = getattr(code, "co_qualname", None)  # Python >= 3.11
        if qualname is not None:
            ok = qualname == self.qualname
        else:
            ok = not self.first_line or code.co_firstlineno == self.first_line
        if ok:
            self.code = code
        return ok

    def callers_of(self, frame):
        """The user lines that led to this call, innermost first (library frames skipped)."""
        out = []
        f = frame.f_back
        while f is not None:
            if self.is_user_file(f.f_code.co_filename):
                out.append((os.path.realpath(f.f_code.co_filename), f.f_lineno))
            f = f.f_back
        return out

    # the hit -------------------------------------------------------------------------------
    def hit(self, frame):
        child = os.getpid() != self.pid
        if child and self.seen == 0:  # a forked child: say so to the parent
            with contextlib.suppress(OSError):
                os.write(self._child_w, b"x")
        if child and self.on_child_call is None:
            self.disarm()
            return
        self.seen += 1
        stack = self.callers_of(frame)
        caller = stack[0] if stack else None
        for site in set(stack):  # --from matches any of them: the hint names them all
            self.callers[site] = self.callers.get(site, 0) + 1
        if self.caller is not None:
            if self.caller not in stack:
                return
            caller = self.caller
        self.calls += 1
        if self.calls != self.want:
            return
        self.disarm()
        if child:
            sys.call_tracing(self.on_child_call, (frame, caller, self.calls))
        elif self.on_call is not None:
            sys.call_tracing(self.on_call, (frame, caller))

    def called_in_children(self):
        """Whether a child process of the program called the function."""
        try:
            if os.read(self._child_r, 64):
                return True
        except OSError:
            pass
        return bool(self.noted_path) and os.path.exists(self.noted_path)

    # arming ------------------------------------------------------------------------------------
    def arm(self):
        monitoring = getattr(sys, "monitoring", None)
        self.tool = claim_tool(monitoring)
        if self.tool is not None:
            self._arm_monitoring(monitoring)
        else:  # before 3.12, or every id taken: the tracer works there too, slower
            sys.settrace(self._trace)
            threading.settrace(self._trace)
        self.armed = True

    def _trace(self, frame, event, arg):
        if event == "call" and frame.f_code.co_name == self.name and self.matches(frame.f_code):
            self.hit(frame)

    def _arm_monitoring(self, monitoring):
        disable = monitoring.DISABLE
        name = self.name

        def on_start(code, offset):
            if code.co_name == name and self.matches(code):
                self.hit(sys._getframe(1))
                return None
            return disable

        monitoring.register_callback(self.tool, monitoring.events.PY_START, on_start)
        monitoring.set_events(self.tool, monitoring.events.PY_START)

    def disarm(self):
        if not self.armed:
            return
        self.armed = False
        sys.settrace(None)
        threading.settrace(None)
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is not None and self.tool is not None:
            monitoring.set_events(self.tool, 0)
            monitoring.register_callback(self.tool, monitoring.events.PY_START, None)
            monitoring.free_tool_id(self.tool)
            monitoring.restart_events()
            self.tool = None

    def forked(self):
        """In a forked child: count its own calls, from none (the at-fork handler cleared
        the tracers; sys.monitoring is inherited as it was)."""
        self.calls = self.seen = 0
        self.callers = {}
        if self.armed and self.tool is None:
            sys.settrace(self._trace)
