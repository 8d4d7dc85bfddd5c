# pyright: basic
"""Before Python 3.12, a loop in the program's own script marks its iterations itself.

Found by ``sys.settrace``, a loop's iterations cost the whole interpreter its slow path: a
script's loop of 20,000 Python additions a step timed 1.6-2.1 ms a step under the tracer,
0.59-0.61 ms with the mark, 0.6 ms in the program alone (Python 3.11, this 2-vCPU machine; a
C++-heavy step, makemore's, showed no difference above the host's noise). Where the loop is
in the script the worker compiles (its ``__main__``), the worker compiles it with one call
added as the first statement of the loop's body, on the body's first line, and sets no
tracer. Loops in other files keep the tracer (their modules are imported by the program, not
compiled here).
"""

import ast
import os

#: The name the added call looks up in the script's globals.
MARK = "__kernelscope_iteration__"


def marked_code(source, path, loop_line, body_line):
    """The script compiled with ``MARK()`` first in the body of the loop at ``loop_line``
    (its body starting at ``body_line``); None where no such loop is found."""
    try:
        tree = ast.parse(source, path)
    except (SyntaxError, ValueError):
        return None  # compiled as it is, the error is the program's
    for node in ast.walk(tree):
        if not isinstance(node, (ast.For, ast.AsyncFor, ast.While)) or node.lineno != loop_line:
            continue
        first = node.body[0]
        if first.lineno != body_line:
            return None
        name = ast.Name(MARK, ast.Load())
        value = ast.Call(name, [], [])
        call = ast.Expr(value)
        for part in (call, value, name):
            ast.copy_location(part, first)
            part.end_lineno, part.end_col_offset = first.lineno, first.col_offset
        node.body.insert(0, call)
        return compile(tree, path, "exec", dont_inherit=True)
    return None


class LoopMark:
    """What the marked loop calls as each iteration starts: ``on_iteration``, in the
    process that ran the script (a forked child's iterations are not the steps)."""

    def __init__(self, loop_line, body_line, on_iteration):
        self.loop_line = loop_line
        self.body_line = body_line
        self.on_iteration = on_iteration
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
        if os.getpid() == self.pid:
            self.on_iteration()
