"""Functions in Python source, found with `ast` (no imports run): names, lines, parameters."""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Sequence, Set
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class Param:
    """One parameter as written: name, annotation text, whether it has a default."""

    name: str
    annotation: str | None
    has_default: bool
    kind: str  # positional | keyword | var_positional | var_keyword


@dataclass(frozen=True)
class FunctionDef:
    """A function or method: 1-based lines, and the 0-based column of its name."""

    qualname: str
    name: str
    def_line: int
    name_col: int
    end_line: int
    params: tuple[Param, ...]
    is_method: bool
    text_hash: str  # of the function's source lines: changes when the body is edited
    first_line: int = 0
    """Its first decorator's line (the def line when it has none): code objects start there."""

    def contains(self, line: int) -> bool:
        """Whether 1-based `line` lies in the function (decorators excluded)."""
        return self.def_line <= line <= self.end_line


@lru_cache(maxsize=16)
def functions(source: str) -> tuple[FunctionDef, ...]:
    """Every function and method with a qualified name (nested functions excluded).

    Cached by text: hovers, lenses and hints on an unchanged document parse it once."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    lines = source.splitlines()
    found: list[FunctionDef] = []
    _walk(tree.body, "", False, lines, found)
    return tuple(found)


def function_at(source: str, line: int) -> FunctionDef | None:
    """The innermost function or method around 1-based `line`."""
    best: FunctionDef | None = None
    for fn in functions(source):
        if fn.contains(line) and (best is None or fn.def_line >= best.def_line):
            best = fn
    return best


def find(source: str, qualname: str) -> FunctionDef | None:
    """The function named `qualname`, if the source defines it: its last definition, the one
    the module binds (a notebook often redefines a function in a later cell)."""
    return next((f for f in reversed(functions(source)) if f.qualname == qualname), None)


def _walk(
    body: list[ast.stmt], prefix: str, in_class: bool, lines: list[str], out: list[FunctionDef]
) -> None:
    for node in body:
        if isinstance(node, ast.ClassDef):
            _walk(node.body, f"{prefix}{node.name}.", True, lines, out)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            end = node.end_lineno or node.lineno
            text = "\n".join(lines[node.lineno - 1 : end])
            header = lines[node.lineno - 1] if node.lineno <= len(lines) else ""
            col = header.find(node.name, header.find("def") + 3)
            out.append(
                FunctionDef(
                    qualname=prefix + node.name,
                    name=node.name,
                    def_line=node.lineno,
                    name_col=max(col, 0),
                    end_line=end,
                    params=_params(node.args, lines),
                    is_method=in_class,
                    text_hash=hashlib.blake2b(text.encode(), digest_size=8).hexdigest(),
                    first_line=min((d.lineno for d in node.decorator_list), default=node.lineno),
                )
            )


def _params(args: ast.arguments, lines: list[str]) -> tuple[Param, ...]:
    del lines
    out: list[Param] = []
    positional = [*args.posonlyargs, *args.args]
    first_default = len(positional) - len(args.defaults)
    for i, a in enumerate(positional):
        out.append(Param(a.arg, _annotation(a), i >= first_default, "positional"))
    if args.vararg:
        out.append(Param(args.vararg.arg, _annotation(args.vararg), True, "var_positional"))
    for a, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append(Param(a.arg, _annotation(a), default is not None, "keyword"))
    if args.kwarg:
        out.append(Param(args.kwarg.arg, _annotation(args.kwarg), True, "var_keyword"))
    return tuple(out)


def _annotation(arg: ast.arg) -> str | None:
    return ast.unparse(arg.annotation) if arg.annotation is not None else None


def provider_name(qualname: str) -> str:
    """The input provider a function's inputs are looked for under: `MLP.forward` ->
    `MLP_forward_inputs`."""
    return qualname.replace(".", "_") + "_inputs"


def worth_a_lens(fn: FunctionDef, module: Sequence[FunctionDef], providers: Set[str]) -> bool:
    """Whether `fn` is one a user profiles: not an input provider (named after a function of
    its `module`, or one of `providers`, those mapped in pyproject or the settings), not a
    dunder (`__init__`, `__repr__`) except `__call__`."""
    if fn.qualname in providers:
        return False
    if fn.name.startswith("__") and fn.name.endswith("__") and fn.name != "__call__":
        return False
    return not any(provider_name(other.qualname) == fn.qualname for other in module)


def provider_stub(fn: FunctionDef) -> str:
    """Source of an input provider for `fn`, built from its parameters' annotations."""
    params = [p for p in fn.params if p.kind in ("positional", "keyword")]
    if fn.is_method and params and params[0].name in ("self", "cls"):
        params = params[1:]
        owner = fn.qualname.rsplit(".", 1)[0]
        values = ["instance"]
        body = [f"    instance = {owner}()  # build it as your code does"]
    else:
        values, body = [], []
    for p in params:
        values.append(p.name)
        body.append(f"    {p.name} = {_example(p)}")
    name = provider_name(fn.qualname)
    returned = ", ".join(values) + ("," if len(values) == 1 else "")
    return (
        f'\n\ndef {name}(batch_size: int = 1, device: str = "cpu"):\n'
        f'    """Inputs for kernelscope: {fn.qualname}({", ".join(values)})."""\n'
        + "\n".join(body)
        + f"\n    return ({returned})\n"
    )


def stub_for(path: str, qualname: str) -> str | None:
    """The provider stub for `qualname` in the file at `path`; None when it cannot be read."""
    try:
        fn = find(Path(path).read_text(encoding="utf-8"), qualname)
    except (OSError, UnicodeDecodeError):
        return None
    return provider_stub(fn).lstrip("\n") if fn is not None else None


def def_line(path: Path, qualname: str) -> int | None:
    """The def line of `qualname` in the file at `path`, found without running it."""
    try:
        fn = find(path.read_text(encoding="utf-8"), qualname)
    except (OSError, UnicodeDecodeError):
        return None
    return fn.def_line if fn is not None else None


def _example(p: Param) -> str:
    ann = (p.annotation or "").replace(" ", "")
    if "Tensor" in ann:
        return "torch.randn(32 * batch_size, 1024, device=device)"
    if "Module" in ann:
        return "...  # an nn.Module, .to(device)"
    return {
        "int": "1",
        "float": "1.0",
        "bool": "False",
        "str": '""',
    }.get(ann, f"...  # {p.annotation or 'a value'}")
