"""`review serve` and `review stop`: a reusable server, secrets kept in one file, and stop touches only its own."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import httpx

from mashbill.curation.review import local
from tests.conftest import free_port, run_cli
from tests.curation.review.conftest import fill_store, spec_copy


def test_serve_status_stop_cycle(argilla, tmp_path):
    # the session's server: a second start reuses it, credentials are private, keys never reach the log
    again = local.start(argilla.home)
    assert again.already_running and again.url == argilla.url
    creds_file = argilla.home / "credentials.json"
    assert stat.S_IMODE(creds_file.stat().st_mode) == 0o600
    log = (argilla.home / "server.log").read_text()
    for role in ("owner", "annotator"):
        assert argilla.creds[role]["api_key"] not in log and argilla.creds[role]["password"] not in log
    assert httpx.get(f"{argilla.url}/api/v1/me", headers={"X-Argilla-Api-Key": argilla.annotator_key}
                     ).json()["role"] == "annotator"
    info = httpx.get(f"{argilla.url}/api/v1/status", headers={"X-Argilla-Api-Key": argilla.owner_key}).json()
    assert info["search_engine"]["distribution"] == "mashbill-sql"

    # the command line, on a home of its own: the quick start's one command starts a server and pushes
    home, port = tmp_path / "home", free_port()
    spec = spec_copy(tmp_path, "review-serve")
    fill_store(tmp_path / "store", spec)
    pushed = run_cli("review", "push", str(spec), "--select", "all", "--serve", "--home", str(home), "--store",
                     str(tmp_path / "store"), env={"MASHBILL_REVIEW_PORT": str(port)}, check=True)
    url = f"http://127.0.0.1:{port}"
    assert f"argilla-server started: {url}" in pushed.stdout and "pushed 5 record(s)" in pushed.stdout
    served = run_cli("review", "serve", "--home", str(home), "--port", str(port), check=True)
    assert f"argilla-server already running: {url}" in served.stdout
    assert str(home / "credentials.json") in served.stdout
    keys = json.loads((home / "credentials.json").read_text())
    assert keys["owner"]["api_key"] not in pushed.stdout + pushed.stderr + served.stdout + served.stderr
    assert httpx.get(f"{url}/api/v1/me", headers={"X-Argilla-Api-Key": keys["annotator"]["api_key"]}
                     ).json()["username"] == "annotator"
    pid = json.loads((home / "server.json").read_text())["pid"]

    stopped = run_cli("review", "stop", "--home", str(home), check=True)
    assert f"stopped argilla-server (pid {pid})" in stopped.stdout
    assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(")")[-1].split()[0] == "Z"
    assert not (home / "server.json").exists() and local.stop(home) is None
    assert "not running" in run_cli("review", "status", "--home", str(home)).stdout
    # what a later `serve` reuses stays: the database and the same credentials
    assert (home / "argilla.db").is_file() and json.loads((home / "credentials.json").read_text()) == keys


def test_stop_never_kills_a_process_it_did_not_start(tmp_path):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        home = tmp_path / "home"
        home.mkdir()
        # a pid file pointing at someone else's process (a stale file whose pid was reused)
        (home / "server.json").write_text(json.dumps({"pid": bystander.pid, "url": "http://127.0.0.1:1",
                                                      "home": str(home)}))
        out = run_cli("review", "stop", "--home", str(home), check=True)
        assert "no running server" in out.stdout
        assert bystander.poll() is None
        assert not (home / "server.json").exists()
    finally:
        bystander.kill()
        bystander.wait()


def test_port_in_use_is_refused_clearly(argilla, tmp_path):
    port = int(argilla.url.rsplit(":", 1)[1])
    out = run_cli("review", "serve", "--home", str(tmp_path / "other"), "--port", str(port))
    assert out.returncode == 2 and f"port {port} on 127.0.0.1 is in use" in out.stderr
