"""The embedded review server: argilla-server in its own virtual environment, on SQLite, on 127.0.0.1.

argilla-server 2.8.0 pins an older web stack (pydantic 2.9, fastapi 0.115, typer < 0.10) than
Mashbill's, so it gets its own virtual environment, built once and cached outside the repo under
`$MASHBILL_CACHE/argilla-venv-<key>` (default `~/.cache/mashbill`), where the key hashes the pin
set, the Python version and the machine. The build goes into a temporary folder that is renamed
into place when complete, so an interrupted build is simply redone.

A server's state lives in its home folder (`--home`, default `./mashbill-data/review-server`):

    argilla.db         the SQLite database (datasets, records, responses, users)
    credentials.json   owner and annotator usernames, passwords and API keys (mode 600)
    server.json        pid, port and URL of the running server (the pid file `review stop` reads)
    server.log         the server's output
    tmp/               TMPDIR of the server (its UI bundle copy), wiped at every start

API keys are written only to credentials.json; nothing here prints or logs them.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mashbill.curation.review.errors import ReviewError, ServerStartError
from mashbill.files import write_file_atomic
from mashbill.hashing import sha256_text
from mashbill.paths import cache_dir

log = logging.getLogger(__name__)

PINS = (
    "argilla-server==2.8.0",
    "click<8.2",  # argilla-server's typer CLI breaks with click >= 8.2 (we bypass it, but keep `pip check` clean)
    "huggingface-hub<1.0",
    "fakeredis>=2.20,<3",
)
LAUNCHER = Path(__file__).resolve().parent / "server" / "launcher.py"
DEFAULT_HOME = Path("mashbill-data") / "review-server"
DEFAULT_PORT = 6900
WORKSPACE = "mashbill"
OWNER = "mashbill"
ANNOTATOR = "annotator"
START_TIMEOUT_S = 120.0

_children: dict[int, subprocess.Popen] = {}  # servers this process started: reaped by stop(), never left as zombies


def venv_key() -> str:
    ident = json.dumps({"pins": PINS, "python": list(sys.version_info[:2]), "machine": platform.machine(),
                        "system": platform.system()}, sort_keys=True)
    return sha256_text(ident)[:12]


def venv_path() -> Path:
    return cache_dir(f"argilla-venv-{venv_key()}")


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def ensure_venv(progress=None) -> Path:
    """The server's virtual environment, built on first use (about 60-90 s) and reused afterwards."""
    venv = venv_path()
    if (venv / ".mashbill-complete").is_file():
        return venv
    venv.parent.mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(venv.parent / f".argilla-venv-{venv_key()}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second `serve` waits for the first build instead of racing it
        if (venv / ".mashbill-complete").is_file():
            return venv
        if progress:
            progress(f"building the argilla-server environment once (about 60-90 s): {venv}")
        tmp = venv.parent / f"{venv.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        build_log = venv.parent / f"{venv.name}.build.log"
        try:
            with open(build_log, "w") as out:
                subprocess.run([sys.executable, "-m", "venv", str(tmp)], check=True, stdout=out, stderr=out)
                subprocess.run([str(venv_python(tmp)), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                                "--no-input", "--no-compile", *PINS], check=True, stdout=out, stderr=out)
        except subprocess.CalledProcessError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise ServerStartError(f"could not build the argilla-server environment ({' '.join(PINS)}); "
                                   f"see {build_log}") from None
        (tmp / ".mashbill-complete").write_text(json.dumps({"pins": PINS}) + "\n")
        shutil.rmtree(venv, ignore_errors=True)
        tmp.rename(venv)  # only python -m ... is used, so the venv's script shebangs do not matter
    return venv


# ------------------------------------------------------------------ credentials


def credentials_path(home: Path) -> Path:
    return Path(home) / "credentials.json"


def ensure_credentials(home: Path) -> dict:
    """Owner and annotator credentials of this server, created once with random secrets (file mode 600)."""
    path = credentials_path(home)
    if path.is_file():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ReviewError(f"{path} is not valid JSON ({exc.msg}); delete it to create new credentials") from None
    creds = {
        "workspace": WORKSPACE,
        "owner": {"username": OWNER, "password": secrets.token_urlsafe(12), "api_key": "mb.owner." +
                  secrets.token_urlsafe(24)},
        "annotator": {"username": ANNOTATOR, "password": secrets.token_urlsafe(12), "api_key": "mb.annotator." +
                      secrets.token_urlsafe(24)},
    }
    Path(home).mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(creds, f, indent=2)
    return creds


def read_credentials(home: Path) -> dict:
    path = credentials_path(home)
    if not path.is_file():
        raise ReviewError(f"no review server credentials at {path}; start one with `mashbill review serve`")
    return json.loads(path.read_text(encoding="utf-8"))


# ------------------------------------------------------------------ start / stop


@dataclass(frozen=True)
class ServerInfo:
    url: str
    pid: int
    home: Path
    credentials: Path
    log: Path
    already_running: bool = False


def _state_path(home: Path) -> Path:
    return Path(home) / "server.json"


def _read_state(home: Path) -> dict | None:
    try:
        return json.loads(_state_path(home).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _is_ours(state: dict) -> bool:
    """The pid is alive and is the launcher we started for this home (not a recycled pid)."""
    cmd = _cmdline(int(state.get("pid", 0)))
    return str(LAUNCHER) in cmd and state.get("home") in cmd


def _answers(url: str, timeout: float = 2.0) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/api/v1/version", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def running_server(home: Path) -> dict | None:
    """The state of the server started from this home, if it is still running."""
    state = _read_state(home)
    if state and _is_ours(state):
        return state
    return None


def start(home: Path | None = None, port: int | None = None, host: str = "127.0.0.1", progress=None,
          timeout_s: float = START_TIMEOUT_S) -> ServerInfo:
    """Start the embedded server for `home` (or report the one already running) and wait until it answers."""
    home = Path(home or DEFAULT_HOME).resolve()
    port = port or DEFAULT_PORT
    home.mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(home / ".serve.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two `serve`s of one home: the second finds the first one running
        return _start_locked(home, port, host, progress, timeout_s)


def _start_locked(home: Path, port: int, host: str, progress, timeout_s: float) -> ServerInfo:
    creds_file = credentials_path(home)
    logfile = home / "server.log"
    state = running_server(home)
    if state is not None:
        return ServerInfo(state["url"], state["pid"], home, creds_file, logfile, already_running=True)
    if not _port_free(host, port):
        raise ServerStartError(f"port {port} on {host} is in use by another program; choose another with --port")
    venv = ensure_venv(progress)
    ensure_credentials(home)
    url = f"http://{host}:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARGILLA_")}
    env.update({"TMPDIR": str(home / "tmp"), "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
                "PYTHONUNBUFFERED": "1"})
    if progress:
        progress(f"starting argilla-server on {url} (log: {logfile})")
    with open(logfile, "ab") as out:
        proc = subprocess.Popen([str(venv_python(venv)), str(LAUNCHER), "--home", str(home), "--host", host,
                                 "--port", str(port), "--credentials", str(creds_file)],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                cwd=str(home), start_new_session=True)
    _children[proc.pid] = proc
    write_file_atomic(_state_path(home), (json.dumps({"pid": proc.pid, "url": url, "host": host, "port": port,
                                                      "home": str(home), "venv": str(venv),
                                                      "started_at": time.time()}) + "\n").encode("utf-8"))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _children.pop(proc.pid, None)
            _state_path(home).unlink(missing_ok=True)
            raise ServerStartError(f"argilla-server exited with code {proc.returncode} during start-up; "
                                   f"last lines of {logfile}:\n{_tail(logfile)}")
        if _answers(url, timeout=1.0):
            return ServerInfo(url, proc.pid, home, creds_file, logfile)
        time.sleep(0.3)
    _terminate(proc.pid)
    _state_path(home).unlink(missing_ok=True)
    raise ServerStartError(f"argilla-server did not answer on {url} within {timeout_s:.0f} s; "
                           f"last lines of {logfile}:\n{_tail(logfile)}")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _terminate(pid: int, grace_s: float = 10.0) -> None:
    child = _children.pop(pid, None)
    if child is not None:
        child.terminate()
        try:
            child.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            waited, _ = os.waitpid(pid, os.WNOHANG)  # reap it when it is our child
            if waited == pid:
                return
        except ChildProcessError:
            pass
        if not Path(f"/proc/{pid}").exists() or _zombie(pid):
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def stop(home: Path | None = None) -> int | None:
    """Stop the server that `start` started for this home; returns its pid, or None if none was running."""
    home = Path(home or DEFAULT_HOME).resolve()
    state = _read_state(home)
    if state is None:
        return None
    pid = int(state.get("pid", 0))
    if not _is_ours(state):
        _state_path(home).unlink(missing_ok=True)  # stale: the process is gone (or the pid now belongs to another)
        return None
    _terminate(pid)
    _state_path(home).unlink(missing_ok=True)
    return pid
