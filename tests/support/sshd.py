"""A throwaway OpenSSH server on 127.0.0.1 for the remote tests.

Adapted from the team's recipes/start-test-sshd.sh: its own host key, client keys,
authorized_keys, sshd_config and client ssh_config under a temp dir; key-only auth,
`UsePAM no`, `StrictModes no`, a free port. Nothing of the system's ssh setup is touched.
The client config names these hosts:

- `ks-test`: the server, `StrictHostKeyChecking accept-new`, known_hosts in the temp dir;
- `ks-jump`: the same server reached through `ks-test` as a ProxyJump;
- `ks-wrong-key`: a key the server does not accept;
- `ks-bad-hostkey`: a known_hosts entry with another host key, `StrictHostKeyChecking yes`;
- `ks-no-host`: a host name that does not resolve.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SSHD = Path("/usr/sbin/sshd")  # sshd insists on an absolute path (it re-executes itself)


def missing() -> str | None:
    """Why the fixture cannot run here (None when it can)."""
    for tool in ("ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install openssh-client)"
    if not SSHD.is_file():
        return f"{SSHD} is not installed (apt-get install openssh-server)"
    return None


@dataclass
class Sshd:
    """The running server and the files a client needs."""

    root: Path
    port: int
    proc: subprocess.Popen[bytes]
    config: Path

    @property
    def ssh_options(self) -> list[str]:
        """What a remote's `ssh_options` needs to reach the fixture's hosts."""
        return ["-F", str(self.config)]

    def sessions(self) -> list[int]:
        """Pids of the per-connection sshd processes (children of the listener)."""
        return children(self.proc.pid)

    def log(self) -> str:
        """The server's log so far."""
        return (self.root / "sshd.log").read_text(errors="replace")


def children(pid: int) -> list[int]:
    """Direct children of `pid`, from /proc."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                found.append(int(entry.name))
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keygen(path: Path, comment: str) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
    )


def _sshd_config(root: Path, port: int, user: str) -> str:
    return f"""Port {port}
ListenAddress 127.0.0.1
HostKey {root}/host_ed25519
PidFile {root}/sshd.pid
AuthorizedKeysFile {root}/authorized_keys
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowUsers {user}
UsePAM no
StrictModes no
PrintMotd no
UseDNS no
LogLevel VERBOSE
"""


def _client_config(root: Path, port: int, user: str) -> str:
    common = f"""  HostName 127.0.0.1
  Port {port}
  User {user}
  IdentitiesOnly yes
  IdentityAgent none
  BatchMode yes
  LogLevel ERROR
"""
    return f"""Host ks-test
{common}  IdentityFile {root}/client_ed25519
  UserKnownHostsFile {root}/known_hosts
  StrictHostKeyChecking accept-new

Host ks-jump
{common}  IdentityFile {root}/client_ed25519
  UserKnownHostsFile {root}/known_hosts
  StrictHostKeyChecking accept-new
  ProxyJump ks-test

Host ks-wrong-key
{common}  IdentityFile {root}/stranger_ed25519
  UserKnownHostsFile {root}/known_hosts
  StrictHostKeyChecking accept-new

Host ks-bad-hostkey
{common}  IdentityFile {root}/client_ed25519
  UserKnownHostsFile {root}/wrong_known_hosts
  StrictHostKeyChecking yes

Host ks-no-host
{common.replace("127.0.0.1", "ks-no-such-host.invalid")}  IdentityFile {root}/client_ed25519
  UserKnownHostsFile {root}/known_hosts
"""


@contextlib.contextmanager
def start_sshd(root: Path) -> Iterator[Sshd]:
    """Run the server until the block ends; its keys and configs live under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)
    if os.geteuid() == 0:  # the privilege-separation dir, normally made by systemd
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    for name in ("host", "client", "stranger", "other_host"):
        _keygen(root / f"{name}_ed25519", f"kernelscope-test-{name}")
    shutil.copy(root / "client_ed25519.pub", root / "authorized_keys")
    port, user = _free_port(), getpass.getuser()
    other = (root / "other_host_ed25519.pub").read_text().split()[:2]
    (root / "wrong_known_hosts").write_text(f"[127.0.0.1]:{port} {' '.join(other)}\n")
    (root / "sshd_config").write_text(_sshd_config(root, port, user))
    config = root / "ssh_config"
    config.write_text(_client_config(root, port, user))
    subprocess.run([str(SSHD), "-t", "-f", str(root / "sshd_config")], check=True)
    with (root / "sshd.log").open("wb") as log:
        proc = subprocess.Popen(
            [str(SSHD), "-f", str(root / "sshd_config"), "-D", "-e"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    server = Sshd(root, port, proc, config)
    try:
        _wait_ready(server)
        yield server
    finally:
        for pid in server.sessions():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _wait_ready(server: Sshd, timeout: float = 15.0) -> None:
    """Until `ssh ks-test true` works (the listener is up and the key is accepted)."""
    deadline = time.monotonic() + timeout
    while True:
        done = subprocess.run(
            ["ssh", *server.ssh_options, "ks-test", "true"],
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        if done.returncode == 0:
            return
        if server.proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(
                f"test sshd did not come up: {done.stderr.strip()}\n{server.log()[-2000:]}"
            )
        time.sleep(0.1)
