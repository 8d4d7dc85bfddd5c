"""Remote definitions, the worker's command line, ssh's failures explained, and shipping."""

from __future__ import annotations

import gzip
import shlex
import subprocess
from pathlib import Path

import msgspec
import pytest

from kernelscope.app.settings import parse_settings
from kernelscope.engine.remotes import (
    SSH_BASE,
    Remote,
    RemoteError,
    explain_exit,
    find_remote,
    parse_remote,
)
from kernelscope.engine.shipping import ShipError, import_closure, keep_traces, remote_request
from kernelscope.protocol import ColdCall, ProfileFinished, RunProfile, Sidecar, UnprofiledTiming
from kernelscope.worker import BOOTSTRAP

WHERE = "[tool.kernelscope.remotes.gpu]"


# --- definitions ----------------------------------------------------------------------------


def test_ssh_remote_with_every_field() -> None:
    r = parse_remote(
        "gpu",
        {
            "kind": "ssh",
            "host": "gpu-box",
            "python": "~/venv/bin/python",
            "workdir": "~/proj",
            "env": {"CUDA_VISIBLE_DEVICES": "1"},
            "ssh_options": ["-F", "cfg"],
        },
        WHERE,
    )
    assert (r.kind, r.host, r.python, r.workdir) == (
        "ssh",
        "gpu-box",
        "~/venv/bin/python",
        "~/proj",
    )
    assert r.env == {"CUDA_VISIBLE_DEVICES": "1"}
    assert r.ssh_options == ("-F", "cfg")
    assert r.label == "remote gpu (ssh gpu-box)"


def test_kind_defaults_to_ssh_and_python_to_python3() -> None:
    r = parse_remote("gpu", {"host": "h"}, WHERE)
    assert (r.kind, r.python, r.workdir, r.env) == ("ssh", "python3", None, {})


def test_ray_fields_are_parsed_and_checked() -> None:
    r = parse_remote("c", {"kind": "ray", "address": "http://head:8265", "token_file": "t"}, WHERE)
    assert (r.address, r.token_file) == ("http://head:8265", "t")
    with pytest.raises(RemoteError, match="needs address"):
        parse_remote("c", {"kind": "ray"}, WHERE)
    with pytest.raises(RemoteError, match="cannot start a worker"):
        r.worker_argv(BOOTSTRAP)
    big = {"kind": "ray", "address": "http://head:8265", "env": {"X": "v" * 70_000}}
    with pytest.raises(RemoteError, match="env is 68 KB; a Ray job's environment must stay under"):
        parse_remote("c", big, WHERE)
    parse_remote("c", {"kind": "ssh", "host": "h", "env": {"X": "v" * 70_000}}, WHERE)
    accents = {"kind": "ray", "address": "http://head:8265", "env": {"X": "é" * 20_000}}
    with pytest.raises(RemoteError, match="env is 117 KB"):  # as Ray's JSON escapes it
        parse_remote("c", accents, WHERE)


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"kind": "sssh", "host": "h"}, 'kind must be "ssh", "command" or "ray"'),
        ({"host": "h", "hots": "x"}, "unknown key 'hots'"),
        ({"kind": "ssh"}, "needs host"),
        ({"host": "-oProxyCommand=x"}, "must not start with '-'"),
        ({"kind": "command"}, "needs prefix"),
        ({"kind": "command", "prefix": "srun"}, "prefix must be a list of strings"),
        ({"host": "h", "ssh_options": ["-F", 3]}, "ssh_options must be a list of strings"),
        ({"host": "h", "env": {"A B": "1"}}, "env entry 'A B'"),
        ({"host": "h", "env": {"A": 1}}, "env entry 'A'"),
        ({"host": "h", "python": ""}, "python must be a non-empty string"),
        ({"kind": "ssh", "host": "h", "prefix": ["x"]}, "unknown key 'prefix'"),
        ("gpu-box", "must be a table"),
    ],
)
def test_bad_definitions_name_the_field(table: object, words: str) -> None:
    with pytest.raises(RemoteError) as e:
        parse_remote("gpu", table, WHERE)
    assert str(e.value).startswith(WHERE)
    assert words in str(e.value)


def test_settings_win_over_pyproject_and_unknown_names_list_the_known() -> None:
    project = {"gpu": {"host": "from-pyproject"}, "slurm": {"kind": "command", "prefix": ["x"]}}
    settings = {"gpu": {"host": "from-settings"}}
    assert find_remote("gpu", project, settings, "p/pyproject.toml").host == "from-settings"
    assert find_remote("slurm", project, settings, "p/pyproject.toml").kind == "command"
    with pytest.raises(RemoteError, match="no remote named 'tpu'; defined: gpu, slurm"):
        find_remote("tpu", project, settings, "p/pyproject.toml")
    with pytest.raises(RemoteError, match=r"define one in \[tool.kernelscope.remotes.NAME\]"):
        find_remote("tpu", {}, {}, "p/pyproject.toml")


def test_bad_remotes_in_settings_are_reported_and_dropped() -> None:
    settings, problems = parse_settings(
        {"remotes": {"good": {"host": "h"}, "bad": {"kind": "ssh"}}}
    )
    assert set(settings.remotes) == {"good"}
    assert len(problems) == 1
    assert "kernelscope.remotes.bad" in problems[0] and "needs host" in problems[0]


# --- the worker's command line ----------------------------------------------------------------


def test_ssh_argv_is_one_shell_quoted_command_after_the_options() -> None:
    r = Remote("gpu", "ssh", host="gpu-box", python="/opt/py/bin/python3", ssh_options=("-F", "c"))
    argv = r.worker_argv(BOOTSTRAP)
    assert argv[: len(SSH_BASE)] == list(SSH_BASE)
    assert argv[len(SSH_BASE) :][:3] == ["-F", "c", "gpu-box"]
    command = argv[-1]
    assert command.startswith("exec ")
    assert shlex.split(command) == ["exec", "/opt/py/bin/python3", "-u", "-c", BOOTSTRAP]


def test_env_and_home_relative_python_on_the_remote_shell() -> None:
    r = Remote("gpu", "ssh", host="h", python="~/venv/bin/python", env={"A": "x y"})
    command = r.worker_argv(BOOTSTRAP)[-1]
    assert command.startswith("exec env 'A=x y' \"$HOME\"/venv/bin/python -u -c ")
    done = subprocess.run(
        ["sh", "-c", command.replace("exec ", "printf '%s\\n' ", 1)],
        capture_output=True,
        text=True,
        check=True,
        env={"HOME": "/home/u"},
    )
    assert done.stdout.split("\n")[:5] == ["env", "A=x y", "/home/u/venv/bin/python", "-u", "-c"]


def test_command_prefix_without_ssh_passes_argv_as_is() -> None:
    r = Remote("k8s", "command", prefix=("kubectl", "exec", "-i", "pod", "--"), python="python3")
    assert r.worker_argv(BOOTSTRAP) == [
        "kubectl",
        "exec",
        "-i",
        "pod",
        "--",
        "python3",
        "-u",
        "-c",
        BOOTSTRAP,
    ]


def test_command_prefix_through_ssh_shell_quotes_the_tail() -> None:
    prefix = ("/usr/bin/ssh", "login", "srun", "--gres=gpu:1", "--")
    r = Remote("slurm", "command", prefix=prefix, python="python3", env={"K": "v"})
    argv = r.worker_argv(BOOTSTRAP)
    assert argv[:-1] == list(prefix)
    assert shlex.split(argv[-1]) == ["env", "K=v", "python3", "-u", "-c", BOOTSTRAP]
    assert r.label == "remote slurm (/usr/bin/ssh login srun --gres=gpu:1 --)"


# --- how a remote worker ended ------------------------------------------------------------------

SSH = Remote("gpu", "ssh", host="gpu-box", python="/opt/py")


@pytest.mark.parametrize(
    ("code", "stderr", "started", "kind", "words"),
    [
        (
            255,
            ["ssh: Could not resolve hostname gpu-box: Name or service not known"],
            False,
            "remote_unreachable",
            "unknown host (ssh: Could not resolve hostname",
        ),
        (
            255,
            ["ssh: connect to host gpu-box port 22: Connection refused"],
            False,
            "remote_unreachable",
            "cannot connect",
        ),
        (
            255,
            ["root@gpu-box: Permission denied (publickey)."],
            False,
            "remote_auth",
            "authentication failed (root@gpu-box: Permission denied (publickey))",
        ),
        (
            255,
            [
                "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@",
                "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @",
                "  remove with:",
                '  ssh-keygen -f "/home/me/.ssh/known_hosts" -R "gpu-box"',
                "Host key verification failed.",
            ],
            False,
            "remote_host_key",
            "(WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!). If the host was reinstalled, "
            'remove its old key with `ssh-keygen -f "/home/me/.ssh/known_hosts" -R "gpu-box"`',
        ),
        (
            127,
            ["bash: line 1: /opt/py: No such file or directory"],
            False,
            "remote_no_python",
            "cannot run python '/opt/py' there (bash: line 1: /opt/py: No such file",
        ),
        (126, ["bash: /opt/py: Permission denied"], False, "remote_no_python", "Permission denied"),
        (
            255,
            ["Connection to 10.0.0.2 closed by remote host."],
            True,
            "remote_lost",
            "ended mid-job (Connection to 10.0.0.2 closed by remote host)",
        ),
        (255, [], True, "remote_lost", "ssh exited with status 255 and no message"),
        (137, ["srun: error: gpu7: task 0: Killed"], True, "crash", "killed there by SIGKILL"),
        (255, [], False, "remote_lost", "before the worker was ready"),
        (
            1,
            ['Error from server (NotFound): pods "trainer-0" not found'],
            False,
            "worker_start",
            'did not start (exit status 1: Error from server (NotFound): pods "trainer-0" not',
        ),
        (
            1,
            ['OCI runtime exec failed: exec: "/opt/py": executable file not found in $PATH'],
            False,
            "remote_no_python",
            "executable file not found",
        ),
    ],
)
def test_ssh_failures_are_explained(
    code: int, stderr: list[str], started: bool, kind: str, words: str
) -> None:
    explained = explain_exit(SSH, code, stderr, started)
    assert explained is not None
    assert explained[0] == kind
    assert explained[1].startswith("remote gpu (ssh gpu-box): ")
    assert words in explained[1], explained[1]


def test_a_worker_crash_is_left_to_faulthandler() -> None:
    stderr = ["Fatal Python error: Segmentation fault", 'File "/x/m.py", line 3 in f']
    assert explain_exit(SSH, 255, stderr, True) is None
    assert explain_exit(SSH, 3, ["kernelscope-worker: ready in 1.2s"], True) is None


# --- shipping the project -----------------------------------------------------------------------


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_import_closure_follows_the_projects_own_imports(tmp_path: Path) -> None:
    root = _tree(
        tmp_path / "proj",
        {
            "pyproject.toml": "",
            "app/__init__.py": "",
            "app/model.py": (
                "import os, torch\n"
                "import app.layers.attn\n"
                "from . import utils\n"
                "from .layers import mlp as m\n"
                "from lib import tools\n"
                "def f():\n"
                "    from app.late import thing\n"
            ),
            "app/utils.py": "from ..top import x\n",
            "app/layers/__init__.py": "from .norm import rms\n",
            "app/layers/attn.py": "",
            "app/layers/mlp.py": "",
            "app/layers/norm.py": "",
            "app/late.py": "",
            "app/unused.py": "",
            "lib/tools.py": "import numpy\n",
            "top.py": "",
        },
    )
    files = import_closure(root / "app" / "model.py", root)
    assert set(files) == {
        "app/__init__.py",
        "app/model.py",
        "app/utils.py",
        "app/layers/__init__.py",
        "app/layers/attn.py",
        "app/layers/mlp.py",
        "app/layers/norm.py",
        "app/late.py",
        "lib/tools.py",
        "top.py",  # `from ..top` in app/utils.py: followed, even if Python would refuse it
    }
    assert files["lib/tools.py"] == "import numpy\n"


def test_unsaved_source_and_the_provider_module_are_shipped(tmp_path: Path) -> None:
    root = _tree(
        tmp_path / "p", {"m.py": "x = 1\n", "inputs/__init__.py": "", "inputs/make.py": ""}
    )
    files = import_closure(root / "m.py", root, "import helper\n", ["inputs.make"])
    assert files == {"m.py": "import helper\n", "inputs/__init__.py": "", "inputs/make.py": ""}


def test_git_ignored_modules_are_not_shipped_but_the_target_is(tmp_path: Path) -> None:
    root = _tree(
        tmp_path / "repo",
        {
            ".gitignore": "secret.py\nscratch.py\nbuild/\n",
            "scratch.py": "import secret, kept\nimport build.gen\n",
            "secret.py": "",
            "kept.py": "",
            "build/gen.py": "",
        },
    )
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    assert set(import_closure(root / "scratch.py", root)) == {"scratch.py", "kept.py"}


def test_over_the_bound_says_set_workdir(tmp_path: Path) -> None:
    root = _tree(tmp_path / "p", {"m.py": "import a, b, c\n", "a.py": "", "b.py": "", "c.py": ""})
    with pytest.raises(ShipError, match="set workdir") as e:
        import_closure(root / "m.py", root, max_files=3)
    assert e.value.kind == "project_too_large"
    with pytest.raises(ShipError, match="set workdir"):
        import_closure(root / "m.py", root, "x" * 100, max_bytes=50)


def test_remote_request_ships_files_or_names_the_workdir(tmp_path: Path) -> None:
    root = _tree(tmp_path / "p", {"m.py": "import h\n", "h.py": ""})
    request = RunProfile(
        job_id="j",
        path=str(root / "m.py"),
        qualname="f",
        module_name="m",
        project_root=str(root),
        trace_dir=str(tmp_path / "t"),
    )
    shipped = remote_request(request, Remote("gpu", "ssh", host="h"))
    assert shipped.files == {"h.py": "", "m.py": "import h\n"}
    assert shipped.return_traces and shipped.remote_root is None
    assert (shipped.path, shipped.project_root) == (request.path, request.project_root)
    in_workdir = remote_request(request, Remote("gpu", "ssh", host="h", workdir="~/p"))
    assert in_workdir.files == {} and in_workdir.remote_root == "~/p"
    assert in_workdir.return_traces
    # an installed package's file belongs to the project it is profiled from, not in it
    library = _tree(tmp_path / "site", {"pkg/__init__.py": "", "pkg/loops.py": ""})
    outside = msgspec.structs.replace(request, path=str(library / "pkg" / "loops.py"))
    for remote in (Remote("gpu", "ssh", host="h"), Remote("gpu", "ssh", host="h", workdir="~/p")):
        with pytest.raises(ShipError, match="is not in the project") as e:
            remote_request(outside, remote)
        assert e.value.kind == "outside_project"


def test_traces_sent_back_are_written_locally(tmp_path: Path) -> None:
    trace, cold = gzip.compress(b'{"traceEvents": []}'), gzip.compress(b"{}")
    side = Sidecar(
        function_line=1,
        device_type="cpu",
        device_name="cpu",
        device_index=None,
        device_properties={},
        wait=0,
        warmup=1,
        active=1,
        cold=ColdCall(first_call_us=1.0, trace_path="/tmp/kernelscope-0/traces-x/f-j.cold.json.gz"),
        timing=UnprofiledTiming(us_per_call=1.0, method="perf_counter", reps=1),
        wall_us_per_step=1.0,
    )
    finished = ProfileFinished(
        job_id="j",
        trace_path="/tmp/kernelscope-0/traces-x/f-j.pt.trace.json.gz",
        sidecar=side,
        traces={"f-j.pt.trace.json.gz": trace, "f-j.cold.json.gz": cold},
    )
    kept = keep_traces(finished, tmp_path / "traces")
    assert kept.trace_path == str(tmp_path / "traces" / "f-j.pt.trace.json.gz")
    assert Path(kept.trace_path).read_bytes() == trace
    assert kept.sidecar.cold.trace_path == str(tmp_path / "traces" / "f-j.cold.json.gz")
    assert kept.traces == {}
    missing = ProfileFinished(
        job_id="j", trace_path="/r/other.json.gz", sidecar=side, traces={"f-j.cold.json.gz": cold}
    )
    with pytest.raises(ShipError, match=r"did not send back other\.json\.gz"):
        keep_traces(missing, tmp_path / "traces")


def test_kernelscope_inputs_and_the_inputs_module_are_shipped(tmp_path: Path) -> None:
    root = _tree(
        tmp_path / "p",
        {
            "src/m.py": "x = 1\n",
            "src/kernelscope_inputs.py": "import helper\n",
            "helper.py": "",
            "kernelscope_inputs.py": "",
            "tools/__init__.py": "",
            "tools/inputs.py": "",
            "unrelated.py": "",
        },
    )
    request = RunProfile(
        job_id="j",
        path=str(root / "src" / "m.py"),
        qualname="f",
        module_name="m",
        project_root=str(root),
        trace_dir=str(tmp_path / "t"),
        inputs_module="tools.inputs",
    )
    shipped = remote_request(request, Remote("gpu", "ssh", host="h"))
    assert set(shipped.files) == {
        "src/m.py",
        "src/kernelscope_inputs.py",
        "helper.py",
        "kernelscope_inputs.py",
        "tools/__init__.py",
        "tools/inputs.py",
    }
