"""What travels to and from a remote worker: the project's files out, the traces back.

Out: the target's module and the project's own modules it imports (followed with ``ast``,
recursively, bounded, skipping what git ignores), as text in ``RunProfile.files``; or
nothing, when the remote has a ``workdir`` holding the project. Back: the gzip'd traces
inline in ``ProfileFinished.traces``, written here to the local trace folder.
"""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import msgspec

from kernelscope.engine.remotes import Remote
from kernelscope.protocol import ProfileFinished, RunProfile
from kernelscope.pyfunctions import INPUTS_FILE

MAX_FILES = 500
MAX_BYTES = 20 * 1024 * 1024


class ShipError(Exception):
    """The project cannot be shipped as it is; `kind` names the cause."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


R = TypeVar("R", bound=RunProfile)


def remote_request(request: R, remote: Remote) -> R:
    """The request as a remote worker needs it: files shipped (or the workdir named), and
    the traces asked back."""
    root = Path(request.project_root)
    if not Path(request.path).resolve().is_relative_to(root.resolve()):
        raise ShipError(
            "outside_project",
            f"{request.path} is not in the project ({root}): a file of an installed package "
            "runs from the remote's own installation, at its own path there; profile it on "
            "this machine, or through a function of the project that calls it",
        )
    if remote.workdir:
        return msgspec.structs.replace(request, remote_root=remote.workdir, return_traces=True)
    extra = [request.provider.partition(":")[0]] if request.provider else []
    extra += [request.inputs_module] if request.inputs_module else []
    files = import_closure(Path(request.path), root, request.source, extra)
    # the kernelscope_inputs.py files the worker looks for providers in, and what they import
    for inputs in dict.fromkeys([Path(request.path).parent / INPUTS_FILE, root / INPUTS_FILE]):
        if inputs.is_file():
            files = {**import_closure(inputs, root), **files}
    entry = request.entry
    if entry is not None and Path(entry.cwd).resolve().is_relative_to(root.resolve()):
        files = {**program_files(Path(entry.cwd), root), **files}
    return msgspec.structs.replace(request, files=files, return_traces=True)


#: Folders a program's own files are never in.
SKIP_DIRS = frozenset({".git", ".kernelscope", "__pycache__", ".venv", "venv", "node_modules"})


def program_files(
    folder: Path, root: Path, max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES
) -> dict[str, str]:
    """The text files under a program's folder (what it runs, imports, exec's and reads:
    scripts, configs, small data), less what git ignores: relative path -> text. Binary
    files stay behind (a remote with a workdir runs a program that reads them)."""
    root, folder = root.resolve(), folder.resolve()
    found: list[Path] = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not SKIP_DIRS.intersection(path.relative_to(folder).parts):
            found.append(path)
        if len(found) > max_files:
            _check_bounds(len(found), 0, folder, root, max_files, max_bytes)
    texts: dict[str, str] = {}
    size = 0
    for path in _not_ignored(found, root, keep=folder):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        size += len(text.encode("utf-8"))
        _check_bounds(len(texts), size, folder, root, max_files, max_bytes)
        texts[path.relative_to(root).as_posix()] = text
    return texts


def import_closure(
    target: Path,
    root: Path,
    source: str | None = None,
    extra_modules: Iterable[str] = (),
    max_files: int = MAX_FILES,
    max_bytes: int = MAX_BYTES,
) -> dict[str, str]:
    """The target and every project module it imports, transitively: relative path -> text.

    Only files under `root` are followed (the standard library and site-packages are the
    remote's own); files git ignores are skipped, except the target itself."""
    root, target = root.resolve(), target.resolve()
    bases = list(dict.fromkeys([root, target.parent]))
    texts: dict[Path, str] = {}
    size = 0
    wave = [target, *(p for m in extra_modules for p in _module_files(m, bases, root))]
    while wave:
        wave = [p for p in dict.fromkeys(wave) if p not in texts]
        for path in _not_ignored(wave, root, keep=target):
            text = source if path == target and source is not None else _read(path)
            texts[path] = text
            size += len(text.encode("utf-8"))
            _check_bounds(len(texts), size, target, root, max_files, max_bytes)
        wave = [dep for p in wave if p in texts for dep in _dependencies(p, texts[p], bases, root)]
    return {p.relative_to(root).as_posix(): t for p, t in sorted(texts.items())}


def _check_bounds(
    count: int, size: int, target: Path, root: Path, max_files: int, max_bytes: int
) -> None:
    if count > max_files or size > max_bytes:
        raise ShipError(
            "project_too_large",
            f"the files {target.name} needs from {root} are over the shipping bound "
            f"(> {max_files} files or > {max_bytes / 2**20:.0f} MB); set workdir in the remote's "
            "definition to a copy of the project on the remote",
        )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ShipError("file_not_found", f"cannot ship {path}: {e}") from None


def _dependencies(path: Path, text: str, bases: list[Path], root: Path) -> Iterator[Path]:
    """Project files that importing `path` runs: its imports and its packages' __init__s."""
    yield from _package_inits(path, root)
    try:
        tree = ast.parse(text, str(path))
    except SyntaxError:
        return  # the worker reports it, with the line
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _module_files(alias.name, bases, root)
        elif isinstance(node, ast.ImportFrom):
            yield from _from_import_files(node, path, bases, root)


def _from_import_files(
    node: ast.ImportFrom, path: Path, bases: list[Path], root: Path
) -> Iterator[Path]:
    module = node.module or ""
    if node.level:
        base = path.parent
        for _ in range(node.level - 1):
            base = base.parent
        search = [base]
    else:
        search = bases
    names = [module] if module else []
    names += [f"{module}.{a.name}" if module else a.name for a in node.names if a.name != "*"]
    for name in names:
        yield from _module_files(name, search, root)


def _module_files(dotted: str, bases: list[Path], root: Path) -> Iterator[Path]:
    """The files of `dotted` and of each package above it, under the first base that has it."""
    parts = dotted.split(".")
    for base in bases:
        found: list[Path] = []
        for i in range(1, len(parts) + 1):
            stem = base.joinpath(*parts[:i])
            hit = next(
                (p for p in (stem / "__init__.py", stem.with_suffix(".py")) if p.is_file()), None
            )
            if hit is not None:
                found.append(hit.resolve())
            elif not stem.is_dir():  # a folder without __init__.py is a namespace package
                break
        if found:
            yield from (p for p in found if p.is_relative_to(root))
            return


def _package_inits(path: Path, root: Path) -> Iterator[Path]:
    folder = path.parent
    while folder != root and folder.is_relative_to(root):
        init = folder / "__init__.py"
        if not init.is_file():
            return
        yield init
        folder = folder.parent


def _not_ignored(paths: list[Path], root: Path, keep: Path) -> list[Path]:
    """`paths` less those `git check-ignore` names (none when root is not in a git repo)."""
    ask = [p for p in paths if p != keep]
    if not ask:
        return paths
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "check-ignore", "-z", "--stdin"],
            input=b"\0".join(str(p).encode() for p in ask),
            capture_output=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return paths
    if proc.returncode != 0:  # 1: nothing ignored; 128: not a git repo
        return paths
    ignored = {Path(p.decode()) for p in proc.stdout.split(b"\0") if p}
    ignored = {p if p.is_absolute() else root / p for p in ignored}
    return [p for p in paths if p not in ignored]


def keep_traces(finished: ProfileFinished, trace_dir: Path) -> ProfileFinished:
    """Write the traces a remote worker sent back into `trace_dir`; point the result at them."""
    trace_dir.mkdir(parents=True, exist_ok=True)
    names = {Path(n).name: data for n, data in finished.traces.items()}
    for name, data in names.items():
        (trace_dir / name).write_bytes(data)

    def local(remote_path: str | None) -> str | None:
        if remote_path is None:
            return None
        name = Path(remote_path).name
        if name not in names:
            raise ShipError("internal", f"the remote worker did not send back {name}")
        return str(trace_dir / name)

    side = finished.sidecar
    cold = msgspec.structs.replace(side.cold, trace_path=local(side.cold.trace_path))
    return msgspec.structs.replace(
        finished,
        trace_path=local(finished.trace_path) or "",
        traces={},
        sidecar=msgspec.structs.replace(side, cold=cold),
    )
