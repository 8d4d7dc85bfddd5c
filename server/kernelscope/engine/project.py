"""Where a target lives: project root, module name, and the ``[tool.kernelscope]`` table."""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kernelscope.engine.kernel_choice import DEFAULT_KERNELS, KernelChoice, KernelChoiceError
from kernelscope.notebooks import MODULES_DIR
from kernelscope.pyfunctions import INPUTS_FILE, stub_for

ROOT_MARKERS = ("pyproject.toml", ".git", "setup.py", "setup.cfg")
#: Folders Python installs packages into (Debian's system Python: dist-packages).
INSTALL_FOLDERS = frozenset({"site-packages", "dist-packages"})


#: Captures up to this size (MB) are kept for the next profile unless the project says otherwise.
DEFAULT_KEEP_MB = 1024


class ProjectError(Exception):
    """pyproject.toml exists but cannot be used."""


@dataclass(frozen=True)
class Project:
    """The folder holding the target's project and its kernelscope settings."""

    root: Path
    inputs: dict[str, str] = field(default_factory=dict[str, str])
    remotes: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    nproc: int | None = None
    """Ranks a profile runs on by default (`nproc` under [tool.kernelscope]; None: unset)."""
    via: dict[str, str] = field(default_factory=dict[str, str])
    """[tool.kernelscope.via]: a function (``model.py::Block.forward``, ``pkg.model:Block.
    forward``) or a file (``model.py``) -> the program that calls it (run from the root)."""
    inputs_module: str | None = None
    """[tool.kernelscope] inputs_module: a module (dotted, from the root) the worker looks
    for input providers in after the target's module and the `kernelscope_inputs.py` files."""
    perfetto_ui: Path | None = None
    """Perfetto's UI build (a folder or perfetto-ui.zip) to serve offline (`perfetto_ui` under
    [tool.kernelscope], relative to the root); None: unset, or unusable (see `problems`)."""
    problems: tuple[str, ...] = ()
    """Values of [tool.kernelscope] that were left unset because they are unusable, each saying
    why (those that are not cheap to get wrong raise ProjectError instead)."""
    keep_captures_mb: int = DEFAULT_KEEP_MB
    """[tool.kernelscope] keep_captures_mb: a `--via` capture up to this size is kept without
    --save, so the next profile of the call replays it while the program is unchanged (0:
    never)."""
    counters: bool = False
    """[tool.kernelscope] counters: measure each profile's call with Nsight Compute after it
    (``--counters``)."""
    counter_kernels: KernelChoice = field(default_factory=KernelChoice)
    """[tool.kernelscope] counters_limit and counters_match: which kernels ``--counters``
    measures (``--counters-limit``, ``--counters-match``)."""

    def module_name(self, path: Path) -> str:
        """Dotted name of `path` relative to the root, through packages; else the file's stem."""
        path = path.resolve()
        parts = [path.stem]
        folder = path.parent
        while folder != self.root and (folder / "__init__.py").exists():
            parts.insert(0, folder.name)
            folder = folder.parent
        return ".".join(parts)

    def via_for(self, path: Path, qualname: str) -> str | None:
        """The program mapped to the function (or to its file) in pyproject.toml, if any."""
        try:
            rel = path.resolve().relative_to(self.root).as_posix()
        except ValueError:
            rel = path.name
        for key in (f"{rel}::{qualname}", f"{self.module_name(path)}:{qualname}", rel):
            if key in self.via:
                return self.via[key]
        return None

    def inputs_file(self, path: Path) -> Path:
        """Where "Create inputs" writes a provider for a function of the file at `path`: the
        `inputs_module`'s file when pyproject names one, else `kernelscope_inputs.py` beside
        the file, or at the root for a file outside it (an installed package's)."""
        if self.inputs_module:
            return self.root.joinpath(*self.inputs_module.split(".")).with_suffix(".py")
        if not path.resolve().is_relative_to(self.root):
            return self.root / INPUTS_FILE
        return path.resolve().parent / INPUTS_FILE

    def provider_files(self, path: Path) -> list[Path]:
        """Where the worker looks for a provider of a function of `path` after `path`
        itself, in order: `kernelscope_inputs.py` beside it, at the root, the inputs_module's
        file."""
        files = [path.resolve().parent / INPUTS_FILE, self.root / INPUTS_FILE]
        if self.inputs_module:
            module = self.root.joinpath(*self.inputs_module.split("."))
            files += [module.with_suffix(".py"), module / "__init__.py"]
        return list(dict.fromkeys(files))

    def provider_for(self, module: str, qualname: str) -> str | None:
        """The `module:provider` mapped to `module:qualname` in pyproject.toml, if any."""
        return self.inputs.get(f"{module}:{qualname}")


def provider_hint(path: Path, qualname: str) -> str | None:
    """The provider stub for `qualname` of the file at `path`, headed by where it goes."""
    try:
        project = load_project(path)
    except ProjectError:
        project = Project(path.resolve().parent)
    stub = stub_for(str(path), qualname, project.module_name(path))
    if stub is None:
        return None
    where = project.inputs_file(path)
    try:
        shown = where.relative_to(project.root).as_posix()
    except ValueError:
        shown = where.name
    if where.parent == path.resolve().parent:
        shown = f"{where.name} (beside {path.name})"
    return f"# in {shown}\n{stub}"


def find_root(path: Path) -> Path:
    """The nearest folder above `path` with a project marker; else the file's folder. A file
    of an installed package (under site-packages, dist-packages or a folder holding a
    `*.dist-info`: a pip --target folder) belongs to the working folder's project, whatever
    markers the package ships: profiling Lightning's loop or torch's `Linear.forward` keeps
    its traces and history with the user's project, not in the installation."""
    start = path.resolve().parent
    if start.name == MODULES_DIR and start.parent.name == ".kernelscope":
        start = start.parent.parent  # a notebook's module belongs to the notebook's project
    folders = (start, *start.parents)
    if any(_installs_packages(folder) for folder in folders):
        working = Path.cwd().resolve()
        return next((f for f in (working, *working.parents) if _is_project(f)), working)
    return next((f for f in folders if _is_project(f)), start)


def _is_project(folder: Path) -> bool:
    return any((folder / marker).exists() for marker in ROOT_MARKERS)


@functools.lru_cache(maxsize=1024)
def _installs_packages(folder: Path) -> bool:
    """Whether packages are installed into `folder` (pip's `*.dist-info` records are there)."""
    if folder.name in INSTALL_FOLDERS:
        return True
    try:
        return any(folder.glob("*.dist-info"))
    except OSError:
        return False


def load_project(path: Path) -> Project:
    """The project of the file at `path`."""
    root = find_root(path)
    config = root / "pyproject.toml"
    if not config.is_file():
        return Project(root)
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ProjectError(f"{config}: {e}") from None
    tool = cast(dict[str, Any], data.get("tool", {})).get("kernelscope", {})
    if not isinstance(tool, dict):
        raise ProjectError(f"{config}: [tool.kernelscope] must be a table")
    table = cast(dict[str, Any], tool)
    inputs = table.get("inputs", {})
    remotes = table.get("remotes", {})
    if not isinstance(inputs, dict) or not all(
        isinstance(v, str) and ":" in v and ":" in k
        for k, v in cast(dict[str, Any], inputs).items()
    ):
        raise ProjectError(
            f'{config}: [tool.kernelscope.inputs] maps "module:function" = "module:provider"'
        )
    if not isinstance(remotes, dict):
        raise ProjectError(f"{config}: [tool.kernelscope.remotes] must be a table")
    via = table.get("via", {})
    if not isinstance(via, dict) or not all(
        isinstance(v, str) and v.strip() for v in cast(dict[str, Any], via).values()
    ):
        raise ProjectError(
            f'{config}: [tool.kernelscope.via] maps "model.py::Block.forward" (or "model.py") '
            '= "train.py --max_iters 20"'
        )
    nproc = table.get("nproc")
    if nproc is not None and (not isinstance(nproc, int) or isinstance(nproc, bool) or nproc < 1):
        raise ProjectError(f"{config}: [tool.kernelscope] nproc must be an integer >= 1")
    inputs_module = table.get("inputs_module")
    if inputs_module is not None and (
        not isinstance(inputs_module, str)
        or not all(part.isidentifier() for part in inputs_module.split("."))
    ):
        raise ProjectError(
            f'{config}: [tool.kernelscope] inputs_module names a module, like "tools.inputs"'
        )
    keep_mb = table.get("keep_captures_mb", DEFAULT_KEEP_MB)
    if not isinstance(keep_mb, int) or isinstance(keep_mb, bool) or keep_mb < 0:
        raise ProjectError(
            f"{config}: [tool.kernelscope] keep_captures_mb must be an integer >= 0 (MB; 0: "
            "never keep a capture without --save)"
        )
    counters = table.get("counters", False)
    if not isinstance(counters, bool):
        raise ProjectError(f"{config}: [tool.kernelscope] counters must be true or false")
    try:
        counter_kernels = KernelChoice.checked(
            table.get("counters_limit", DEFAULT_KERNELS), table.get("counters_match", "")
        )
    except KernelChoiceError as e:
        raise ProjectError(f"{config}: [tool.kernelscope] {e}") from None
    problems: list[str] = []
    perfetto_ui = table.get("perfetto_ui")
    if perfetto_ui is not None and not (isinstance(perfetto_ui, str) and perfetto_ui.strip()):
        problems.append(
            f"{config}: [tool.kernelscope] perfetto_ui must be the path of Perfetto's UI build "
            f"(a folder or perfetto-ui.zip), got {perfetto_ui!r}; using ui.perfetto.dev"
        )
        perfetto_ui = None
    return Project(
        root,
        cast(dict[str, str], inputs),
        cast(dict[str, dict[str, Any]], remotes),
        nproc,
        cast(dict[str, str], via),
        inputs_module,
        resolve_path(root, perfetto_ui) if perfetto_ui is not None else None,
        tuple(problems),
        keep_mb,
        counters,
        counter_kernels,
    )


def resolve_path(root: Path, value: str) -> Path:
    """A configured path: `~` expanded, relative to `root` unless absolute."""
    return root / Path(value.strip()).expanduser()
