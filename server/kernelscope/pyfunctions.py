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


#: The module input providers are written to, beside the target's file (or at the project
#: root): found by the worker without an edit anywhere.
INPUTS_MODULE = "kernelscope_inputs"
INPUTS_FILE = INPUTS_MODULE + ".py"


@dataclass(frozen=True)
class Stub:
    """A provider's source (`text`, starting at its def) and the imports it needs."""

    name: str
    text: str
    imports: tuple[str, ...]

    def module_text(self) -> str:
        """A whole `kernelscope_inputs.py` holding this provider."""
        head = '"""Input providers for kernelscope (found here without any setting)."""\n\n'
        return head + "\n".join(self.imports) + "\n\n\n" + self.text


def provider_stub(fn: FunctionDef, source: str = "", module_name: str | None = None) -> Stub:
    """An input provider for `fn`, built from its parameters' annotations and names; for a
    method, its instance built from its class's constructor as `source` defines it.
    `module_name` names the module to import the classes from (None: the provider goes into
    that module itself)."""
    builder = _StubBuilder(_classes(source))
    params = [p for p in fn.params if p.kind in ("positional", "keyword")]
    values: list[str] = []
    if fn.is_method and params and params[0].name in ("self", "cls"):
        params = params[1:]
        values.append("instance")
        builder.taken = {p.name for p in params}
        builder.instance(fn.qualname.rsplit(".", 1)[0])
    for p in params:
        if not p.has_default:
            values.append(p.name)
            builder.body.append(f"    {p.name} = {builder.argument(p)}")
    name = provider_name(fn.qualname)
    returned = ", ".join(values) + ("," if len(values) == 1 else "")
    text = (
        f'def {name}(batch_size: int = 1, device: str = "cpu"):\n'
        f'    """Inputs for kernelscope: {fn.qualname}({", ".join(values)})."""\n'
        + "\n".join(builder.body)
        + f"\n    return ({returned})\n"
    )
    imports: list[str] = []
    if "torch." in text:
        imports.append("import torch")
    if module_name is not None and builder.used:
        imports.append(f"from {module_name} import {', '.join(sorted(builder.used))}")
    return Stub(name, text, tuple(imports))


def stub_for(path: str, qualname: str, module_name: str | None = None) -> str | None:
    """The provider stub for `qualname` in the file at `path`, with its imports, as
    `kernelscope_inputs.py` would hold it (`module_name`: the file's module, default its
    stem); None when it cannot be read."""
    try:
        source = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    fn = find(source, qualname)
    if fn is None:
        return None
    stub = provider_stub(fn, source, module_name or Path(path).stem)
    return "\n".join(stub.imports) + "\n\n\n" + stub.text if stub.imports else stub.text


@dataclass(frozen=True)
class _Class:
    """What a stub needs of a class the module defines, read from its source."""

    name: str
    params: tuple[Param, ...]  # the constructor's, without self
    attrs: frozenset[str]  # attributes its instances are known to have
    default_config: tuple[str, ...] | None  # attributes get_default_config() sets, if defined
    none_attrs: tuple[str, ...]  # of those, the ones it sets to None


def _classes(source: str) -> dict[str, _Class]:
    """The module's classes by (dotted) name."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    out: dict[str, _Class] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                out[prefix + node.name] = _read_class(node, prefix + node.name)
                visit(node.body, prefix + node.name + ".")

    visit(tree.body, "")
    return out


def _read_class(node: ast.ClassDef, name: str) -> _Class:
    fields: list[Param] = []
    attrs: set[str] = set()
    params: tuple[Param, ...] | None = None
    default_config: tuple[str, ...] | None = None
    none_attrs: list[str] = []
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            ann = ast.unparse(item.annotation)
            attrs.add(item.target.id)
            if "ClassVar" not in ann:
                fields.append(Param(item.target.id, ann, item.value is not None, "positional"))
        elif isinstance(item, ast.Assign):
            attrs.update(t.id for t in item.targets if isinstance(t, ast.Name))
        elif isinstance(item, ast.FunctionDef) and item.name == "__init__":
            params = _params(item.args, [])[1:]
            attrs.update(_self_attrs(item))
        elif (
            isinstance(item, ast.FunctionDef)
            and item.name == "get_default_config"
            and any(_decorator(d) in ("staticmethod", "classmethod") for d in item.decorator_list)
        ):
            sets = _assigned_attrs(item)
            default_config = tuple(sets)
            none_attrs = [a for a, is_none in sets.items() if is_none]
    if params is None:
        dataclass = any(_decorator(d) == "dataclass" for d in node.decorator_list)
        params = tuple(fields) if dataclass else ()
    return _Class(name, params, frozenset(attrs), default_config, tuple(none_attrs))


def _decorator(node: ast.expr) -> str:
    """A decorator's last name: `dataclass` for `@dataclasses.dataclass(frozen=True)`."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _self_attrs(init: ast.FunctionDef) -> set[str]:
    return {
        t.attr
        for n in ast.walk(init)
        if isinstance(n, ast.Assign | ast.AnnAssign)
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    }


def _assigned_attrs(fn: ast.FunctionDef) -> dict[str, bool]:
    """`C.x = value` in a get_default_config(): attribute -> whether the value is None."""
    out: dict[str, bool] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                    none = isinstance(n.value, ast.Constant) and n.value.value is None
                    out[t.attr] = none
    return out


#: Sizes for a get_default_config() attribute left None ("to be filled in externally"):
#: small, so the provider builds a model that runs anywhere.
_SIZES = {
    "vocab_size": "1024",
    "block_size": "64",
    "n_layer": "2",
    "n_head": "4",
    "n_embd": "128",
    "num_layers": "2",
    "num_heads": "4",
    "hidden_size": "128",
    "max_seq_len": "64",
}
_WIDTHS = ("n_embd", "n_embed", "hidden_size", "d_model", "embed_dim", "dim", "width")
_LENGTHS = ("block_size", "max_seq_len", "seq_len", "max_position_embeddings", "n_ctx")
_TOKENS = ("idx", "input_ids", "ids", "tokens", "token_ids")
_TENSORS = (*_TOKENS, "x", "input", "inputs", "hidden_states", "h", "a", "b", "q", "k", "v")
_CONFIGS = ("config", "cfg", "conf")


class _StubBuilder:
    """The body lines of one provider: the instance (config first), then the arguments."""

    def __init__(self, classes: dict[str, _Class]) -> None:
        self.classes = classes
        self.body: list[str] = []
        self.used: set[str] = set()  # the module's names the body uses
        self.taken: set[str] = set()  # the function's own parameter names
        self.config: tuple[str, frozenset[str]] | None = None  # its variable and attributes
        self.width: str | None = None  # an int constructor argument, for a tensor's last dim
        self.after: list[str] = []  # lines that finish the value just built

    def instance(self, owner: str) -> None:
        cls = self.classes.get(owner)
        if cls is None:
            self.body.append(f"    instance = {owner}()  # build it as your code does")
            self.used.add(owner.split(".", maxsplit=1)[0])
            return
        self.body.append(f"    instance = {self.construct(cls, 0)}")

    def construct(self, cls: _Class, depth: int) -> str:
        """`Klass(a, b)`, each required argument a variable assigned above."""
        self.used.add(cls.name.split(".", maxsplit=1)[0])
        args: list[str] = []
        for p in cls.params:
            if p.has_default or p.kind not in ("positional", "keyword"):
                continue
            var = p.name if p.name not in self.taken else f"init_{p.name}"
            self.taken.add(var)
            value = self.constructor_value(p, cls, depth)
            self.body.append(f"    {var} = {value}")
            self.body += self.after
            self.after = []
            args.append(var if p.kind == "positional" else f"{p.name}={var}")
        return f"{cls.name}({', '.join(args)})"

    def constructor_value(self, p: Param, owner: _Class, depth: int) -> str:
        ann = (p.annotation or "").strip("'\"")
        known = self.classes.get(ann)
        if known is not None and depth < 3:
            return self.config_value(p.name, known, depth)
        if ann:
            if ann != "int":
                return _example(p)
            self.width = self.width or p.name
            return _SIZES.get(p.name, "64")
        if p.name in _CONFIGS or p.name.endswith("_config"):
            source = self.config_source(owner)
            if source is not None:
                return self.config_value(p.name, source, depth)
            return f"...  # TODO: the config {owner.name}() takes"
        return f"...  # TODO: {p.name} for {owner.name}()"

    def config_source(self, owner: _Class) -> _Class | None:
        """The class a config comes from: the owner's get_default_config(), else the one
        class the module names `...Config`, else the one class with get_default_config()."""
        if owner.default_config is not None:
            return owner
        named = [c for c in self.classes.values() if c.name.endswith("Config")]
        if len(named) == 1:
            return named[0]
        makers = [c for c in self.classes.values() if c.default_config is not None]
        return makers[0] if len(makers) == 1 else None

    def config_value(self, var: str, cls: _Class, depth: int) -> str:
        """A config built by `cls` (its get_default_config(), its None fields sized after,
        or its constructor), remembered for the tensors' shapes."""
        if cls.default_config is None or (cls.name.endswith("Config") and self._all_default(cls)):
            self.config = (var, cls.attrs)
            return self.construct(cls, depth + 1)
        self.used.add(cls.name.split(".", maxsplit=1)[0])
        attrs = set(cls.default_config)
        after: list[str] = []
        filled = [a for a in cls.none_attrs if a in _SIZES]
        for a in cls.none_attrs:
            if a in _SIZES:
                after.append(f"    {var}.{a} = {_SIZES[a]}  # None by default")
            else:
                after.append(f"    # {var}.{a} is None by default: set it if the model needs it")
        if "model_type" in attrs and {"n_layer", "n_head", "n_embd"} <= set(filled):
            after.append(f"    {var}.model_type = None  # the sizes above are given instead")
        self.after = after
        self.config = (var, frozenset(attrs))
        return f"{cls.name}.get_default_config()"

    def _all_default(self, cls: _Class) -> bool:
        return all(p.has_default or p.kind.startswith("var") for p in cls.params)

    def argument(self, p: Param) -> str:
        """The value of one of the function's own parameters."""
        ann = (p.annotation or "").replace(" ", "")
        tensor = "Tensor" in ann or (not ann and p.name in _TENSORS)
        if not tensor:
            return _example(p)
        cfg = self.config
        if cfg is not None:
            var, attrs = cfg
            length = next((f"{var}.{a}" for a in _LENGTHS if a in attrs), "64")
            if p.name in _TOKENS and "vocab_size" in attrs:
                return f"torch.randint(0, {var}.vocab_size, (batch_size, {length}), device=device)"
            width = next((a for a in _WIDTHS if a in attrs), None)
            if width is not None:
                return f"torch.randn(batch_size, {length}, {var}.{width}, device=device)"
        if self.width is not None:
            return f"torch.randn(32 * batch_size, {self.width}, device=device)"
        return "torch.randn(32 * batch_size, 1024, device=device)"


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


def loop_around(source: str, fn: FunctionDef, line: int) -> int | None:
    """The line of the innermost ``for``/``while`` of `fn` whose body holds `line`; None
    where none does (or the source does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    best: int | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.For | ast.AsyncFor | ast.While):
            continue
        first, last = node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno
        inside = fn.def_line < node.lineno <= fn.end_line and first <= line <= last
        if inside and (best is None or node.lineno > best):
            best = node.lineno
    return best


def first_loop(source: str, fn: FunctionDef) -> int | None:
    """The line of `fn`'s first outermost ``for``/``while`` (an epoch function's loop over
    its batches); None where it has none (or the source does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    target = next(
        (n for n in ast.walk(tree) if isinstance(n, defs) and n.lineno == fn.def_line), None
    )
    if target is None:
        return None
    # the function's own statements in source order (the first loop met is an outermost
    # one), not into a nested def or class: a helper's loop is not the call's
    todo: list[ast.stmt] = list(reversed(target.body))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.For | ast.AsyncFor | ast.While):
            return node.lineno
        if not isinstance(node, (*defs, ast.ClassDef)):
            todo += reversed([c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)])
    return None
