"""A notebook's cells as one module: line numbers kept, IPython syntax replaced, cells not in
Python left out, the cut at a cell, and the lines mapped back (the server is
tests/integration/test_lsp_notebook.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from kernelscope.engine.project import find_root
from kernelscope.notebooks import (
    Cell,
    build_module,
    module_path,
)
from kernelscope.pyfunctions import find, functions


def test_cells_join_with_their_lines_kept_and_ipython_replaced() -> None:
    cells = [
        Cell("c0", "import torch\n%matplotlib inline\nfiles = !ls\ntorch.randn?\n"),
        Cell("c1", "# markdown", code=False),
        Cell("c2", "def f(x):\n    !nvidia-smi\n    return x * 2"),
        Cell("c3", "%%bash\necho hi\nls -l"),
        Cell("c4", "%%time\ny = f(3)"),
        Cell("c5", "raise SystemExit"),
    ]
    module = build_module(cells, Path("/nb"), upto="c4")
    ast.parse(module.source)  # it is Python
    lines = module.source.splitlines()
    assert lines[0].startswith("import sys as _ks_sys; _ks_sys.path.insert(0, '/nb')")
    assert [s.uri for s in module.spans] == ["c0", "c2", "c3", "c4"]  # no markdown, cut at c4
    c0, c2, c3, c4 = module.spans
    assert (c0.first, c0.count) == (2, 5)  # the trailing newline is a line of its own
    assert lines[c0.first - 1] == "import torch"
    assert lines[c0.first] == "pass  # kernelscope: stripped"
    assert lines[c0.first + 1] == "files = None  # kernelscope: stripped"
    assert lines[c0.first + 2] == "pass  # kernelscope: stripped"
    assert lines[c2.first] == "    pass  # kernelscope: stripped"  # indentation kept
    assert lines[c2.first + 1] == "    return x * 2"
    assert c3.count == 3 and lines[c3.first - 1].startswith("pass") and lines[c3.first] == "#"
    assert lines[c4.first - 1].startswith("pass") and lines[c4.first] == "y = f(3)"
    assert "SystemExit" not in module.source
    assert c2.contains(c2.first + 2) and not c0.contains(1)  # the prologue is in no cell
    notes = {(n.uri, n.line): n.message for n in module.notes}
    assert set(notes) == {("c0", 2), ("c0", 3), ("c0", 4), ("c2", 2), ("c3", 1), ("c4", 1)}
    assert notes[("c3", 1)] == "a %%bash cell is not Python: left out"


def test_python_that_looks_like_ipython_is_kept() -> None:
    text = "x = 5 % 3\ny = x != 2\nflag = a == !b if False else 1\nprint('100%')\n"
    module = build_module([Cell("c", text)])
    assert module.source.splitlines()[1:5] == text.splitlines()
    assert not module.notes


def test_a_cell_that_parses_is_left_alone_and_time_keeps_its_statement() -> None:
    python = 'x = (1\n % 2)\ns = """\n!not a shell escape\n"""'
    timed = "%time y = f(3)\n!ls\nprint(y)"
    module = build_module([Cell("a", python), Cell("b", timed)])
    lines = module.source.splitlines()
    assert lines[1:6] == python.splitlines()
    b = module.spans[1]
    assert lines[b.first - 1 : b.first + 2] == [
        "y = f(3)",
        "pass  # kernelscope: stripped",
        "print(y)",
    ]
    assert [(n.uri, n.line) for n in module.notes] == [("b", 1), ("b", 2)]


def test_the_last_definition_is_the_one_found() -> None:
    source = "@deco\n@other\ndef f():\n    return 1\n\n\ndef f():\n    return 2\n"
    fn = find(source, "f")
    assert fn is not None and fn.def_line == 7 and fn.first_line == 7
    (first, _) = functions(source)
    assert first.def_line == 3 and first.first_line == 1


def test_the_module_lives_in_the_notebooks_project(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "sub").mkdir()
    a = module_path(tmp_path / "sub" / "main.ipynb", tmp_path)
    b = module_path(tmp_path / "main.ipynb", tmp_path)
    assert a.parent == tmp_path / ".kernelscope" / "notebooks" and a != b
    assert a.name.startswith("main_ipynb_") and a.suffix == ".py"
    assert find_root(a) == tmp_path
    bare = tmp_path / "sub" / "no-project"
    bare.mkdir()
    (bare / ".git").mkdir()  # a root marker of its own
    assert find_root(module_path(bare / "n.ipynb", bare)) == bare
