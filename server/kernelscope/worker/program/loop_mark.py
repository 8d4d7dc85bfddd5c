# pyright: basic
"""Before Python 3.12, a loop in the program's own script marks its iterations itself.

Found by ``sys.settrace``, a loop's iterations cost the whole interpreter its slow path: a
script's loop of 20,000 Python additions a step timed 1.6-2.1 ms a step under the tracer,
0.59-0.61 ms with the mark, 0.6 ms in the program alone (Python 3.11, this 2-vCPU machine; a
C++-heavy step, makemore's, showed no difference above the host's noise). Where the loop is
in the script the worker compiles (its ``__main__``), the worker compiles it with one call
added as the first statement of the loop's body, on the body's first line, and sets no
tracer. The loop is also wrapped in ``try: ... finally: MARK.exit()``: its exit ends the
step in progress (a loop run again, in a function called again, would otherwise count all
that ran between its runs as one iteration). A loop in a module the program imports
(Lightning's epoch loop, the model's file) is marked as that import compiles it
(MarkingImport); the tracer stands in until then, and wherever the import is not seen (a
module imported already, or not through a source file on the path). Lightning's example
classifier's epoch loop: 5.33 ms an iteration under the tracer, 3.25-3.32 ms marked, and
3.14-3.43 ms in the program alone. Inside a frame torch.compile traces, the mark does
nothing: those iterations run in the graph.
"""

import ast
import builtins
import os
import sys
from importlib.machinery import PathFinder, SourceFileLoader

from .target import modules_of

#: The name the added call looks up in the script's globals.
MARK = "__kernelscope_iteration__"


def marked_code(source, path, loop_line, body_line):
    """The script compiled with ``MARK()`` first in the body of the loop at ``loop_line``
    (its body starting at ``body_line``) and ``MARK.exit()`` as the loop ends, however it
    ends; None where no such loop is found."""
    try:
        tree = ast.parse(source, path)
    except (SyntaxError, ValueError):
        return None  # compiled as it is, the error is the program's
    for parent in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if not isinstance(block, list):
                continue
            for i, node in enumerate(block):
                if (
                    isinstance(node, (ast.For, ast.AsyncFor, ast.While))
                    and node.lineno == loop_line
                ):
                    if node.body[0].lineno != body_line:
                        return None
                    node.body.insert(0, _call("", node.body[0]))
                    exit_call = _call("exit", node)
                    wrapped = ast.Try(body=[node], handlers=[], orelse=[], finalbody=[exit_call])
                    block[i] = ast.copy_location(wrapped, node)
                    ast.fix_missing_locations(tree)
                    return compile(tree, path, "exec", dont_inherit=True)
    return None


def _call(attribute, where):
    """``MARK()`` (or ``MARK.attribute()``) as a statement on ``where``'s first line
    (tracebacks keep their lines)."""
    name = ast.Name(MARK, ast.Load())
    func = ast.Attribute(name, attribute, ast.Load()) if attribute else name
    value = ast.Call(func, [], [])
    call = ast.Expr(value)
    for part in (call, value, func, name):
        ast.copy_location(part, where)
        part.end_lineno, part.end_col_offset = where.lineno, where.col_offset
    return call


class LoopMark:
    """What the marked loop calls as each iteration starts (``on_iteration``) and as the loop
    ends (``on_exit(once)``), in the process that ran the script (a forked child's iterations are
    not the steps)."""

    def __init__(self, loop_line, body_line, on_iteration, on_exit=None, compiling=None):
        self.loop_line = loop_line
        self.body_line = body_line
        self.on_iteration = on_iteration
        self.on_exit = on_exit
        # torch.compiler.is_compiling: Dynamo, tracing the loop, reads it as True and leaves
        # the mark out of the graph (os.getpid() there stopped Dynamo from compiling the frame)
        self.compiling = compiling or _never
        self.pid = os.getpid()
        self.code = None  # the script compiled with the call in (None: the tracer finds them)

    def prepare(self, path):
        """Compile the script at ``path`` with the call in; whether that worked (else the
        tracer finds the iterations)."""
        try:
            with open(path, "rb") as f:
                source = f.read()
        except OSError:
            return False
        self.code = marked_code(source, path, self.loop_line, self.body_line)
        return self.code is not None

    def __call__(self):
        if self.compiling():
            return
        if os.getpid() == self.pid:
            self.on_iteration()

    def exit(self):
        """The loop ended; ``on_exit`` is told whether it was a module's top-level loop
        (which never runs again)."""
        if self.compiling():
            return
        if os.getpid() == self.pid and self.on_exit is not None:
            self.on_exit(sys._getframe(1).f_code.co_name == "<module>")


def _never():
    return False


class MarkingImport:
    """A finder first on ``sys.meta_path`` (``install``) that imports the loop's file,
    each time the program imports it (under any name, again after a failed import or a
    reload), compiled with ``mark``'s call in (``mark.prepare`` done); ``on_marked()`` runs
    as that module starts, before any of its code."""

    def __init__(self, path, mark, on_marked):
        self.path = os.path.realpath(path)
        stem = os.path.splitext(os.path.basename(self.path))[0]
        folder = os.path.basename(os.path.dirname(self.path))
        self.name = folder if stem == "__init__" else stem  # the module name's last part
        self.mark = mark
        self.on_marked = on_marked

    def imported(self):
        """Whether a module of the file is imported already (then the tracer finds it)."""
        return any(True for _ in modules_of(self.path))

    def find_spec(self, fullname, path=None, target=None):
        if fullname.rpartition(".")[2] != self.name:
            return None
        spec = PathFinder.find_spec(fullname, path, target)
        if spec is None or type(spec.loader) is not SourceFileLoader or not spec.origin:
            return None
        if os.path.realpath(spec.origin) != self.path:
            return None
        spec.loader = _MarkedLoader(fullname, spec.origin, self)
        return spec

    def install(self):
        sys.meta_path.insert(0, self)

    def remove(self):
        if self in sys.meta_path:
            sys.meta_path.remove(self)


class _MarkedLoader(SourceFileLoader):
    """The loop's file as its module, from the marked code: no bytecode cache is read or
    written (an import once the finder is gone gets the file as it is). The mark is a
    builtin, as runpy (``-m``) runs the code in a namespace of its own, not the module's."""

    def __init__(self, fullname, path, importer):
        super().__init__(fullname, path)
        self.importer = importer

    def get_code(self, fullname):
        importer = self.importer
        setattr(builtins, MARK, importer.mark)
        importer.on_marked()
        return importer.mark.code
