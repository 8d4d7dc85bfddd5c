"""Remotes by name: ``[tool.kernelscope.remotes.NAME]`` and the ``kernelscope.remotes`` setting.

A remote is where a worker runs other than here: over OpenSSH (``kind = "ssh"``), behind any
argv prefix that yields the worker's stdio on a GPU node (``kind = "command"``: srun, kubectl
exec), or on a Ray cluster (``kind = "ray"``: one Ray job per job, see ray_jobs.py). This module
parses the definitions, builds the worker's command line, and explains how a remote worker
ended from ssh's stderr and exit status.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, cast

KINDS = ("ssh", "command", "ray")
_COMMON = {"kind", "python", "workdir", "env"}
FIELDS: dict[str, frozenset[str]] = {
    "ssh": frozenset(_COMMON | {"host", "ssh_options"}),
    "command": frozenset(_COMMON | {"prefix", "host"}),
    "ray": frozenset(_COMMON | {"address", "token_file"}),
}
SSH_BASE = ("ssh", "-T", "-e", "none", "-o", "BatchMode=yes")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RAY_ENV_BYTES = 64 * 1024


class RemoteError(Exception):
    """A remote cannot be used as defined; the message names it and says why."""


@dataclass(frozen=True)
class Remote:
    """One remote's definition, checked."""

    name: str
    kind: str
    host: str = ""
    python: str = "python3"
    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict[str, str])
    ssh_options: tuple[str, ...] = ()
    prefix: tuple[str, ...] = ()
    address: str | None = None
    token_file: str | None = None

    @property
    def label(self) -> str:
        """How messages name it: `remote gpu (ssh gpu-box)`."""
        if self.kind == "ssh":
            return f"remote {self.name} (ssh {self.host})"
        if self.kind == "command":
            return f"remote {self.name} ({shlex.join(self.prefix)})"
        return f"remote {self.name} (ray {self.address})"

    @property
    def through_ssh(self) -> bool:
        """Whether the worker's command line reaches a remote shell through ssh."""
        return self.kind == "ssh" or any(PurePosixPath(a).name == "ssh" for a in self.prefix)

    def worker_argv(self, bootstrap: str, env: Mapping[str, str] | None = None) -> list[str]:
        """The local command line that starts the worker there (python -u -c bootstrap), with
        `env` there besides the remote's own."""
        both = {**self.env, **(env or {})}
        tail = [*(["env", *(f"{k}={v}" for k, v in both.items())] if both else [])]
        tail += [self.python, "-u", "-c", bootstrap]
        if self.kind == "ssh":
            return [*SSH_BASE, *self.ssh_options, self.host, "exec " + shell_join(tail)]
        if self.kind == "command":
            return [*self.prefix, shell_join(tail)] if self.through_ssh else [*self.prefix, *tail]
        raise RemoteError(
            f"{self.label}: cannot start a worker from a command line (Ray runs it as a job)"
        )


def shell_join(argv: Sequence[str]) -> str:
    """argv as one shell command line; a leading `~/` in a word still expands to $HOME."""
    return " ".join(
        '"$HOME"/' + shlex.quote(a[2:]) if a.startswith("~/") else shlex.quote(a) for a in argv
    )


# --- parsing ---------------------------------------------------------------------------------


def parse_remote(name: str, table: object, where: str) -> Remote:
    """Check one definition; RemoteError names `where` and the bad field."""
    if not isinstance(table, dict):
        raise RemoteError(f"{where}: must be a table of settings, got {type(table).__name__}")
    data = cast(dict[str, Any], table)
    kind = data.get("kind", "ssh")
    if kind not in KINDS:
        raise RemoteError(f'{where}: kind must be "ssh", "command" or "ray", got {kind!r}')
    unknown = sorted(set(data) - FIELDS[kind])
    if unknown:
        raise RemoteError(
            f"{where}: unknown key {unknown[0]!r} for kind {kind!r}; "
            f"expected {', '.join(sorted(FIELDS[kind]))}"
        )
    remote = Remote(
        name=name,
        kind=kind,
        host=_text(data, "host", where) or "",
        python=_text(data, "python", where) or "python3",
        workdir=_text(data, "workdir", where),
        env=_env(data, where),
        ssh_options=_words(data, "ssh_options", where),
        prefix=_words(data, "prefix", where),
        address=_text(data, "address", where),
        token_file=_text(data, "token_file", where),
    )
    _check_required(remote, where)
    return remote


def _check_required(remote: Remote, where: str) -> None:
    if remote.kind == "ssh" and not remote.host:
        raise RemoteError(f'{where}: an ssh remote needs host = "name" (as for `ssh name`)')
    if remote.host.startswith("-"):
        raise RemoteError(f"{where}: host {remote.host!r} must not start with '-'")
    if remote.kind == "command" and not remote.prefix:
        raise RemoteError(
            f'{where}: a command remote needs prefix = [...], e.g. ["ssh", "login", "srun", '
            f'"--gres=gpu:1", "--"]'
        )
    if remote.kind == "ray" and not remote.address:
        raise RemoteError(f'{where}: a ray remote needs address = "http://head:8265"')
    size = len(json.dumps(remote.env))  # as Ray encodes it
    if remote.kind == "ray" and size > RAY_ENV_BYTES:
        # Ray starts the job with its runtime_env, env_vars included, as one argument.
        raise RemoteError(
            f"{where}: env is {size / 1024:.0f} KB; a Ray job's environment must stay under "
            f"{RAY_ENV_BYTES // 1024} KB (Linux's bound on one argument is 128 KB)"
        )


def _text(data: Mapping[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise RemoteError(f"{where}: {key} must be a non-empty string, got {value!r}")
    return value.strip()


def _words(data: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value: object = data.get(key, [])
    words = cast(list[object], value) if isinstance(value, list) else None
    if words is None or not all(isinstance(w, str) and w for w in words):
        raise RemoteError(f"{where}: {key} must be a list of strings, got {value!r}")
    return tuple(cast(list[str], words))


def _env(data: Mapping[str, Any], where: str) -> dict[str, str]:
    value = data.get("env", {})
    if not isinstance(value, dict):
        raise RemoteError(f"{where}: env must be a table of strings, got {value!r}")
    env = cast(dict[object, object], value)
    for k, v in env.items():
        if not isinstance(k, str) or not _ENV_NAME.match(k) or not isinstance(v, str):
            raise RemoteError(f'{where}: env entry {k!r} = {v!r} is not NAME = "text"')
    return cast(dict[str, str], env)


def find_remote(
    name: str,
    project_remotes: Mapping[str, object],
    setting_remotes: Mapping[str, object],
    pyproject: str,
) -> Remote:
    """The remote called `name`: the editor's setting wins over pyproject.toml's table."""
    if name in setting_remotes:
        where = f"kernelscope.remotes.{name} (editor settings)"
        return parse_remote(name, setting_remotes[name], where)
    if name in project_remotes:
        where = f"[tool.kernelscope.remotes.{name}] in {pyproject}"
        return parse_remote(name, project_remotes[name], where)
    known = sorted({*project_remotes, *setting_remotes})
    raise RemoteError(
        f"no remote named {name!r}; "
        + (
            f"defined: {', '.join(known)}"
            if known
            else "define one in [tool.kernelscope.remotes.NAME] (pyproject.toml) or in the "
            "kernelscope.remotes setting"
        )
    )


# --- how a remote worker ended ------------------------------------------------------------------

_HOST_KEY = re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key verification failed")
_NO_HOST = re.compile(
    r"Could not resolve hostname|Name or service not known|Temporary failure in name resolution"
)
_NO_ROUTE = re.compile(
    r"Connection refused|Connection timed out|No route to host|Network is unreachable"
    r"|Operation timed out"
)
_AUTH = re.compile(r"Permission denied \(|Too many authentication failures")
_NO_EXE = re.compile(r"not found|No such file or directory|Permission denied")
_LOST = re.compile(
    r"closed by remote host|Connection closed|Broken pipe|Connection reset|client_loop"
)


def explain_exit(
    remote: Remote, code: int | None, stderr: Sequence[str], started: bool
) -> tuple[str, str] | None:
    """(kind, message) when ssh's stderr or the exit status say why the remote worker ended;
    None for a crash of the worker itself (faulthandler's dump explains that one)."""
    lines = [ln.strip().strip("@").strip() for ln in stderr]
    lines = [ln for ln in lines if ln]
    if any(ln.startswith("Fatal Python error") for ln in lines):
        return None

    def first(pattern: re.Pattern[str]) -> str | None:
        return next((ln.rstrip(".") for ln in lines if pattern.search(ln)), None)

    label, host = remote.label, remote.host or "the host"
    if line := first(_HOST_KEY):
        fix = first(re.compile(r"^ssh-keygen .*-R ")) or f"ssh-keygen -R {host}"
        return "remote_host_key", (
            f"{label}: the host key does not match known_hosts ({line}). If the host was "
            f"reinstalled, remove its old key with `{fix}`; otherwise the connection may be "
            "intercepted"
        )
    if line := first(_NO_HOST):
        return "remote_unreachable", f"{label}: unknown host ({line})"
    if not started and (line := first(_NO_ROUTE)):
        return "remote_unreachable", f"{label}: cannot connect ({line})"
    if code == 255 and (line := first(_AUTH)):
        return "remote_auth", (
            f"{label}: authentication failed ({line}). kernelscope runs ssh with BatchMode=yes: "
            f"`ssh {host} true` must work without a prompt (a key or an agent)"
        )
    exe = PurePosixPath(remote.python).name
    no_exe = next((ln for ln in lines if _NO_EXE.search(ln) and exe in ln), None)
    if code in (126, 127) or (not started and no_exe and code not in (None, 0, 255)):
        why = no_exe or first(_NO_EXE) or f"exit status {code}"
        return "remote_no_python", (
            f"{label}: cannot run python {remote.python!r} there ({why}); set python in the "
            "remote's definition to an interpreter that has torch"
        )
    if code is not None and 128 < code < 160 and (name := _signal_name(code - 128)):
        return "crash", (
            f"{label}: the worker was killed there by {name} (exit status {code}): out of "
            "memory, or a time limit?; the next job starts a new one"
        )
    if code == 255 or first(_LOST):
        why = first(_LOST) or "ssh exited with status 255 and no message"
        when = "mid-job" if started else "before the worker was ready"
        return "remote_lost", (
            f"{label}: the connection or the remote worker ended {when} ({why}): the "
            "network dropped, or the worker was killed there (out of memory?); the next "
            "job starts a new one"
        )
    if not started and code not in (None, 0) and lines:
        return (
            "worker_start",
            f"{label}: the worker did not start (exit status {code}: {lines[-1]})",
        )
    return None


def _signal_name(number: int) -> str | None:
    try:
        return signal.Signals(number).name
    except ValueError:
        return None
