"""dcgan's own objects in a fresh process that never profiled: ``main.py``'s source run up to
its training loop with the argv given (for the truth scripts beside this one; run from
dcgan/)."""

import sys
from pathlib import Path
from typing import Any


def program_before_loop(argv: list[str]) -> dict[str, Any]:
    """main.py's globals (torch, netG, netD, opt, nz, ...) just before its first epoch."""
    source = Path("main.py").read_text()
    head = source[: source.index("for epoch in range(opt.niter):")]
    sys.argv = ["main.py", *argv]
    program: dict[str, Any] = {"__name__": "__main__", "__file__": "main.py"}
    exec(compile(head, "main.py", "exec"), program)
    return program
