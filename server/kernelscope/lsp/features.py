"""What the editor asks about a document: code actions, hover, code lenses, inlay hints."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import attrs
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from kernelscope.app.anchors import relocated
from kernelscope.engine.project import ProjectError, load_project
from kernelscope.findings import Code
from kernelscope.lsp import views as editor_views
from kernelscope.lsp.documents import Document
from kernelscope.lsp.server import OPEN_TRACE, PROFILE, TRY, KernelscopeServer
from kernelscope.protocol import VARIANT_LABELS
from kernelscope.pyfunctions import (
    FunctionDef,
    Stub,
    find,
    function_at,
    functions,
    provider_name,
    provider_stub,
    worth_a_lens,
)

if TYPE_CHECKING:
    from kernelscope.app.store import RunRecord


def code_actions(
    ls: KernelscopeServer, params: lsp.CodeActionParams
) -> list[lsp.CodeAction] | None:
    """ "Profile `fn`" (and "Profile `fn` on NAME" per remote, "Profile `fn` as called by
    train.py" per program of the project that may call it) inside any function; after a
    run, "Try X on `fn`" for each variant its verdict suggests and "Try all suggested";
    "Create `fn_inputs()` in kernelscope_inputs.py" on missing inputs (in the notebook's
    cells, for a notebook); "Apply torch.compile to `fn`" on a KS801 that
    measured it faster with equal results."""
    uri = params.text_document.uri
    try:
        doc = ls.document(uri)
    except JsonRpcInvalidParams:
        return None
    path, source = doc.path, doc.source
    fn = function_at(source, doc.module_line(params.range.start))
    actions: list[lsp.CodeAction] = []
    only = params.context.only
    if fn is not None:
        targets: list[tuple[str, list[Any]]] = [(f"Profile `{fn.qualname}`", [uri, fn.qualname])]
        targets += [
            (f"Profile `{fn.qualname}` on {name}", [uri, fn.qualname, {"remote": name}])
            for name in ls.service.remote_names(path)
        ]
        targets += [
            (f"Profile `{fn.qualname}` as called by {e.via}", [uri, fn.qualname, {"via": e.via}])
            for e in ls.service.entry_points(path, fn.qualname)
        ]
        tries = _try_targets(ls, doc, fn)
        kind = _offered_kind(only)
        if kind is not None:
            actions += [
                lsp.CodeAction(title, kind=kind, command=lsp.Command(title, name, arguments=args))
                for title, name, args in [(t, PROFILE, a) for t, a in targets] + tries
            ]
    for diag in params.context.diagnostics:
        data: object = diag.data
        if not isinstance(data, dict):
            continue
        fields = cast(dict[str, object], data)
        target = find(source, str(fields.get("qualname")))
        if target is None:
            continue
        fix = None
        if diag.code == Code.MISSING_INPUTS and doc.span is None:
            fix = _create_inputs_module_action(ls, doc, target, diag)
        elif diag.code == Code.MISSING_INPUTS:
            fix = _create_inputs_action(uri, source, target, diag)
        elif diag.code == Code.WHAT_IF and fields.get("apply") is True:
            fix = _apply_variant_action(uri, source, target, diag, str(fields["variant"]))
        if fix is not None and (fix := _in_document(doc, fix)) is not None:
            actions.append(fix)
    return actions or None


def _in_document(doc: Document, action: lsp.CodeAction) -> lsp.CodeAction | None:
    """The action with its edits in the document's lines; None when one falls outside it (an
    import the notebook's module lacks would go above its first cell)."""
    if doc.span is None or action.edit is None or action.edit.changes is None:
        return action
    edits: list[lsp.TextEdit] = []
    lines = doc.source.splitlines()
    last = doc.span.first + doc.span.count - 1  # the cell's last module line
    for edit in action.edit.changes.get(doc.uri, []):
        r, text = edit.range, edit.new_text
        if r.start == r.end and r.start.line == last:  # the line after the cell: its end
            end = lsp.Position(last - 1, len(lines[last - 1]) if last <= len(lines) else 0)
            r, text = lsp.Range(end, end), "\n" + text.rstrip("\n")
        at = doc.to_editor(r)
        if at is None:
            return None
        edits.append(lsp.TextEdit(at, text))
    return attrs.evolve(action, edit=lsp.WorkspaceEdit(changes={doc.uri: edits}))


def _try_targets(
    ls: KernelscopeServer, doc: Document, fn: FunctionDef
) -> list[tuple[str, str, list[Any]]]:
    """After a fresh run: one "Try X" per suggested variant, and "Try all suggested"."""
    record = _fresh_record(ls, doc, fn)
    if record is None:
        return []
    variants = ls.service.suggested_variants(record)
    chosen = [([v], f"Try {VARIANT_LABELS.get(v, v)} on `{fn.qualname}`") for v in variants]
    if len(variants) > 1:
        chosen.append((variants, f"Try all suggested on `{fn.qualname}`"))
    return [(title, TRY, [doc.uri, fn.qualname, {"variants": vs}]) for vs, title in chosen]


def _apply_variant_action(
    uri: str, source: str, fn: FunctionDef, diag: lsp.Diagnostic, variant: str
) -> lsp.CodeAction:
    """Write the measured variant's decorator above the def (and `import torch` if missing)."""
    lines = source.splitlines()
    text = lines[fn.def_line - 1] if fn.def_line <= len(lines) else ""
    indent = text[: len(text) - len(text.lstrip())]
    at = lsp.Position(fn.def_line - 1, 0)
    edits = [lsp.TextEdit(lsp.Range(at, at), f"{indent}{editor_views.DECORATORS[variant]}\n")]
    if not re.search(r"^\s*(import torch|from torch)", source, re.M):
        top = lsp.Position(0, 0)
        edits.insert(0, lsp.TextEdit(lsp.Range(top, top), "import torch\n"))
    return lsp.CodeAction(
        f"Apply {VARIANT_LABELS.get(variant, variant)} to `{fn.qualname}`",
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[diag],
        edit=lsp.WorkspaceEdit(changes={uri: edits}),
        is_preferred=True,
    )


def _offered_kind(only: Sequence[object] | None) -> lsp.CodeActionKind | None:
    """The one kind the Profile and Try actions take, so each is listed once: a quick fix
    (VS Code's Ctrl+. and Neovim's code_action send no `only`, and VS Code then hides source
    actions), a source action when `only` asks for those alone (VS Code's Source Action
    menu), none when `only` names neither."""
    for kind in (lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.Source):
        if not only or any(kind.value.startswith(_kind_value(o)) for o in only):
            return kind
    return None


def _kind_value(kind: object) -> str:
    """A code action kind as its wire string ("source"), whether it arrived as str or enum."""
    return str(kind.value) if isinstance(kind, lsp.CodeActionKind) else str(kind)


def _create_inputs_action(
    uri: str, source: str, fn: FunctionDef, diag: lsp.Diagnostic
) -> lsp.CodeAction:
    """Insert a provider stub after the function (after its class, for a method): in a
    notebook, whose cells are the user's own module."""
    lines = source.splitlines()
    end = _class_end(source, fn) if fn.is_method else fn.end_line
    stub = "\n\n" + provider_stub(fn, source).text
    if end < len(lines) or source.endswith("\n"):
        at = lsp.Position(end, 0)
    else:  # the function ends the file, with no final newline
        at = lsp.Position(end - 1, len(lines[-1]))
        stub = "\n" + stub
    edits = [lsp.TextEdit(lsp.Range(at, at), stub)]
    if "torch." in stub and not re.search(r"^\s*(import torch|from torch)", source, re.M):
        top = lsp.Position(0, 0)
        edits.insert(0, lsp.TextEdit(lsp.Range(top, top), "import torch\n"))
    return _create_action(fn, diag, lsp.WorkspaceEdit(changes={uri: edits}), "")


def _create_inputs_module_action(
    ls: KernelscopeServer, doc: Document, fn: FunctionDef, diag: lsp.Diagnostic
) -> lsp.CodeAction | None:
    """Write a provider stub to `kernelscope_inputs.py` beside the file (or the project's
    `inputs_module`), importing from the file's module: appended when that module exists;
    created (CreateFile, then its text) when the client can create files, else one text
    edit on the new file's URI (a client that cannot create files opens it as a new buffer)."""
    try:
        project = load_project(doc.path)
    except ProjectError:
        return None
    target = project.inputs_file(doc.path)
    stub = provider_stub(fn, doc.source, project.module_name(doc.path))
    target_uri = target.as_uri()
    try:
        _, existing = ls.source_of(target_uri)
    except JsonRpcInvalidParams:
        existing = None
    if existing is None:
        whole = stub.module_text()
        start = lsp.Position(0, 0)
        insert = lsp.TextEdit(lsp.Range(start, start), whole)
        if _can_create_files(ls):
            edit = lsp.WorkspaceEdit(
                document_changes=[
                    lsp.CreateFile(
                        target_uri, options=lsp.CreateFileOptions(ignore_if_exists=True)
                    ),
                    lsp.TextDocumentEdit(
                        lsp.OptionalVersionedTextDocumentIdentifier(target_uri, None), [insert]
                    ),
                ]
            )
        else:
            edit = lsp.WorkspaceEdit(changes={target_uri: [insert]})
    else:
        edit = lsp.WorkspaceEdit(changes={target_uri: _append_edits(existing, stub)})
    return _create_action(fn, diag, edit, f" in {_shown(target, project.root)}")


def _append_edits(existing: str, stub: Stub) -> list[lsp.TextEdit]:
    """The imports `existing` lacks after its last top-level import; the stub at its end."""
    lines = existing.splitlines()
    missing = [i for i in stub.imports if i not in lines]
    edits: list[lsp.TextEdit] = []
    if missing:
        after = 0
        try:
            body = ast.parse(existing).body
        except SyntaxError:
            body = []
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                after = node.end_lineno or node.lineno
        at = lsp.Position(after, 0)
        edits.append(lsp.TextEdit(lsp.Range(at, at), "".join(i + "\n" for i in missing)))
    if existing.endswith("\n") or not existing:
        end = lsp.Position(len(lines), 0)
        text = ("\n\n" if existing.strip() else "") + stub.text
    else:
        end = lsp.Position(len(lines) - 1, len(lines[-1]))
        text = "\n\n\n" + stub.text
    edits.append(lsp.TextEdit(lsp.Range(end, end), text))
    return edits


def _can_create_files(ls: KernelscopeServer) -> bool:
    """Whether the client applies a CreateFile in a WorkspaceEdit's documentChanges."""
    workspace = ls.client_capabilities.workspace
    edits = workspace.workspace_edit if workspace else None
    ops = (edits.resource_operations or []) if edits and edits.document_changes else []
    return lsp.ResourceOperationKind.Create in ops


def _shown(path: Path, root: Path) -> str:
    """`path` relative to the project's root, else its name."""
    try:
        return path.relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.name


def _create_action(
    fn: FunctionDef, diag: lsp.Diagnostic, edit: lsp.WorkspaceEdit, where: str
) -> lsp.CodeAction:
    return lsp.CodeAction(
        f"Create `{provider_name(fn.qualname)}()`{where}",
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[diag],
        edit=edit,
        is_preferred=True,
    )


def _class_end(source: str, fn: FunctionDef) -> int:
    """The last line of the top-level class that holds method `fn`."""
    owner = fn.qualname.split(".")[0]
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return fn.end_line
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == owner:
            return node.end_lineno or fn.end_line
    return fn.end_line


def _fresh_record(ls: KernelscopeServer, doc: Document, fn: FunctionDef) -> RunRecord | None:
    """The function's last run, unless its text changed since, with its lines where they are
    now (the function may have moved: lines added above it, or to an earlier cell)."""
    record = ls.service.store_for(doc.path).latest(str(doc.path), fn.qualname)
    if record is None or record.text_hash != fn.text_hash:
        return None
    return relocated(record, str(doc.path), doc.source)


def hover(ls: KernelscopeServer, params: lsp.HoverParams) -> lsp.Hover | None:
    """The last run of the function under the cursor, on its def line or attributed lines;
    then what the last runs of other functions (its callers) measured on that line."""
    try:
        doc = ls.document(params.text_document.uri)
    except JsonRpcInvalidParams:
        return None
    path, source = doc.path, doc.source
    line = doc.module_line(params.position)
    fn = function_at(source, line)
    if fn is None:
        return None
    record = _fresh_record(ls, doc, fn)
    parts: list[str] = []
    if record is not None:
        attributed = any(r.line == line and r.path == str(path) for r in record.report.lines)
        if line == fn.def_line or attributed:
            parts.append(editor_views.hover_markdown(record, line, ls.service.delta(record)))
            experiment = ls.experiments.get((str(path), fn.qualname))
            same = experiment is not None and experiment[1].text_hash == fn.text_hash
            if experiment is not None and same and line == fn.def_line:
                parts.append(editor_views.experiment_markdown(experiment[0]).lstrip("\n"))
    mine = record.run_id if record is not None else None
    others = [r for r in ls.shown_runs(path, source) if r.run_id != mine]
    also = editor_views.others_markdown(others, str(path), line)
    if also:
        parts.append(also)
    if not parts:
        return None
    return lsp.Hover(contents=lsp.MarkupContent(lsp.MarkupKind.Markdown, "\n\n".join(parts)))


def code_lens(ls: KernelscopeServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens] | None:
    """ "▶ Profile" on the defs the `lens.profile` setting picks (by default: not input
    providers, not dunders but `__call__`); the last run's headline beside any def."""
    try:
        doc = ls.document(params.text_document.uri)
    except JsonRpcInvalidParams:
        return None
    path, source, uri = doc.path, doc.source, doc.uri
    store = ls.service.store_for(path)
    lenses: list[lsp.CodeLens] = []
    module = functions(source)
    scope = ls.settings.profile_lens
    providers = ls.service.mapped_providers(path) if scope == "default" else set[str]()
    for fn in module:
        here = lsp.Range(lsp.Position(fn.def_line - 1, 0), lsp.Position(fn.def_line - 1, 0))
        at = doc.to_editor(here)
        if at is None:  # in another cell
            continue
        if scope == "all" or (scope == "default" and worth_a_lens(fn, module, providers)):
            command = lsp.Command("▶ Profile", PROFILE, arguments=[uri, fn.qualname])
            lenses.append(lsp.CodeLens(at, command))
        record = store.latest(str(path), fn.qualname)
        if record is None:
            continue
        title = editor_views.lens_title(record, ls.service.delta(record))
        if record.text_hash != fn.text_hash:
            title = f"{title} (stale: edited since)"
        lenses.append(lsp.CodeLens(at, lsp.Command(title, OPEN_TRACE, arguments=[record.run_id])))
    return lenses


def inlay_hint(ls: KernelscopeServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint] | None:
    """Each attributed line's share of the function's CUDA and CPU time, at its end."""
    try:
        doc = ls.document(params.text_document.uri)
    except JsonRpcInvalidParams:
        return None
    path, source = doc.path, doc.source
    lines = source.splitlines()
    hints: list[lsp.InlayHint] = []
    first, last = doc.module_line(params.range.start), doc.module_line(params.range.end)
    for fn in functions(source):
        if fn.end_line < first or fn.def_line > last or not doc.holds(fn.def_line):
            continue
        record = _fresh_record(ls, doc, fn)
        if record is not None:
            for hint in editor_views.inlay_hints(record, fn, str(path), lines):
                at = hint.position
                moved = doc.to_editor(lsp.Range(at, at))
                if moved is not None:
                    hints.append(attrs.evolve(hint, position=moved.start))
    return hints


def register(server: KernelscopeServer) -> None:
    """Register this module's handlers on `server`."""
    server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(
            code_action_kinds=[lsp.CodeActionKind.Source, lsp.CodeActionKind.QuickFix],
            resolve_provider=False,
        ),
    )(code_actions)
    server.feature(lsp.TEXT_DOCUMENT_HOVER)(hover)
    server.feature(lsp.TEXT_DOCUMENT_CODE_LENS)(code_lens)
    server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT)(inlay_hint)
