"""What a document URI stands for: a Python file, or a cell of a notebook, whose notebook's
code cells are one module (kernelscope.notebooks). Features work in the module's lines;
a Document turns the editor's positions into them and back."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.workspace import Workspace

from kernelscope.engine.project import ProjectError, load_project
from kernelscope.notebooks import Cell, NotebookModule, Span, build_module, module_path

#: The notebooks the server syncs (LSP 3.17 notebookDocumentSync): Jupyter's, Python cells.
NOTEBOOK_SYNC = lsp.NotebookDocumentSyncOptions(
    notebook_selector=[
        lsp.NotebookDocumentFilterWithCells(
            cells=[lsp.NotebookCellLanguage("python")], notebook="jupyter-notebook"
        )
    ]
)


@dataclass(frozen=True)
class Notebook:
    """A synced notebook: its URI and path, its module's path, and its cells as one module."""

    uri: str
    path: Path
    module_path: Path
    cells: list[Cell]

    def module(self, upto: str | None = None) -> NotebookModule:
        """The code cells as one module (up to and including the cell ``upto``)."""
        return build_module(self.cells, self.path.parent, upto)


@dataclass(frozen=True)
class Document:
    """A file (``span`` None), or one cell of ``notebook`` (``span``: its lines in the
    module). ``path`` and ``source`` are what runs: the file, or the notebook's module."""

    uri: str
    path: Path
    source: str
    notebook: Notebook | None = None
    span: Span | None = None

    @property
    def offset(self) -> int:
        """Module line = document line + offset (1-based lines)."""
        return self.span.first - 1 if self.span else 0

    def module_line(self, position: lsp.Position) -> int:
        """The 1-based module line of an editor position."""
        return position.line + 1 + self.offset

    def holds(self, line: int) -> bool:
        """Whether 1-based module line ``line`` is in this document."""
        return self.span is None or self.span.contains(line)

    def to_editor(self, r: lsp.Range) -> lsp.Range | None:
        """A range in module lines as this document's, None when it is in another cell."""
        if self.span is None:
            return r
        if not (self.holds(r.start.line + 1) and self.holds(r.end.line + 1)):
            return None
        return lsp.Range(
            lsp.Position(r.start.line - self.offset, r.start.character),
            lsp.Position(r.end.line - self.offset, r.end.character),
        )


def file_path(uri: object) -> Path:
    """A file: URI of a Python file as a path; JsonRpcInvalidParams otherwise."""
    if not isinstance(uri, str) or not uri.startswith("file:"):
        raise JsonRpcInvalidParams(f"expected a file: URI or a notebook cell, got {uri!r}")
    path = Path(unquote(urlparse(uri).path))
    if path.suffix not in (".py", ".pyi"):
        raise JsonRpcInvalidParams(f"{path.name} is not a Python file")
    return path


def notebook_of(workspace: Workspace, uri: str) -> Notebook | None:
    """The synced notebook holding the cell ``uri`` (or with URI ``uri``)."""
    nb = workspace.get_notebook_document(cell_uri=uri) or workspace.get_notebook_document(
        notebook_uri=uri
    )
    if nb is None:
        return None
    path = Path(unquote(urlparse(nb.uri).path))
    cells: list[Cell] = []
    for cell in nb.cells:
        doc = workspace.text_documents.get(unquote(cell.document))
        language = doc.language_id if doc is not None else "python"
        cells.append(
            Cell(
                cell.document,
                doc.source if doc is not None else "",
                cell.kind == lsp.NotebookCellKind.Code and language in (None, "python"),
            )
        )
    return Notebook(nb.uri, path, _module_path(path), cells)


@lru_cache(maxsize=64)
def _module_path(notebook: Path) -> Path:
    """Where the notebook's module goes: looked up once per notebook, not per hover (its
    project's pyproject.toml is read to find the root)."""
    try:
        root = load_project(notebook).root
    except ProjectError:
        root = notebook.parent
    return module_path(notebook, root)


def cell_document(notebook: Notebook, uri: str) -> Document:
    """One cell of a notebook, over the module of every code cell."""
    module = notebook.module()
    span = module.span_of(uri)
    if span is None:
        raise JsonRpcInvalidParams(f"{uri} is not a Python code cell of {notebook.path.name}")
    return Document(uri, notebook.module_path, module.source, notebook, span)
