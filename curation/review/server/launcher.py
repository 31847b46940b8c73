"""Start argilla-server on SQLite with the SQL search engine and an in-process fake Redis.

Runs inside the argilla-server virtual environment (`mashbill review serve` builds it and starts
this file with it); it imports nothing from mashbill. Steps: set the environment before
argilla_server is imported, point Redis at fakeredis (Redis only queues rq jobs for Hub
import/export, webhooks and distribution changes, none of which this server runs), register the
SQL search engine, migrate the database, make sure the users in the credentials file exist with
exactly those passwords and API keys, then serve with uvicorn (not the typer CLI).

    <server-venv>/bin/python launcher.py --home DIR --port 6900 --credentials DIR/credentials.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path


def _environment(home: Path, redis_url: str | None) -> None:
    tmp = home / "tmp"
    # The server copies its 14 MB UI bundle into a fresh temp folder at every start and never removes it.
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    os.environ["TMPDIR"] = str(tmp)
    tempfile.tempdir = str(tmp)
    os.environ["ARGILLA_HOME_PATH"] = str(home)
    os.environ.setdefault("ARGILLA_DATABASE_URL", f"sqlite+aiosqlite:///{home / 'argilla.db'}?check_same_thread=False")
    os.environ["ARGILLA_SEARCH_ENGINE"] = "mashbill-sql"
    os.environ["ARGILLA_REDIS_URL"] = redis_url or "redis://fakeredis.invalid:6379/0"
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ.setdefault("ARGILLA_DOCS_ENABLED", "false")
    if not redis_url:
        import fakeredis
        import redis

        server = fakeredis.FakeServer()

        def from_url(url, **kwargs):
            return fakeredis.FakeRedis(server=server)

        redis.from_url = from_url  # argilla_server.jobs.queues calls redis.from_url at import time


def _migrate() -> None:
    from alembic.config import main as alembic_main
    from argilla_server.database import ALEMBIC_CONFIG_FILE

    alembic_main(argv=["-c", ALEMBIC_CONFIG_FILE, "upgrade", "head"])


async def _ensure_users(credentials: dict) -> None:
    """Create the workspace and users, or reset their role, password and API key to the file's values."""
    from sqlalchemy import select

    from argilla_server.contexts import accounts
    from argilla_server.database import AsyncSessionLocal
    from argilla_server.models import User, UserRole, Workspace, WorkspaceUser

    async with AsyncSessionLocal() as db:
        name = credentials["workspace"]
        workspace = (await db.execute(select(Workspace).where(Workspace.name == name))).scalar_one_or_none()
        if workspace is None:
            workspace = Workspace(name=name)
            db.add(workspace)
            await db.flush()
        for role in ("owner", "annotator"):
            entry = credentials[role]
            user = (await db.execute(select(User).where(User.username == entry["username"]))).scalar_one_or_none()
            if user is None:
                user = User(first_name=entry["username"], username=entry["username"], role=UserRole(role),
                            api_key=entry["api_key"], password_hash=accounts.hash_password(entry["password"]))
                db.add(user)
                await db.flush()
            else:
                user.role = UserRole(role)
                user.api_key = entry["api_key"]
                if not accounts.verify_password(entry["password"], user.password_hash):
                    user.password_hash = accounts.hash_password(entry["password"])
            member = (await db.execute(select(WorkspaceUser).where(
                WorkspaceUser.workspace_id == workspace.id, WorkspaceUser.user_id == user.id))).scalar_one_or_none()
            if member is None:
                db.add(WorkspaceUser(workspace_id=workspace.id, user_id=user.id))
        await db.commit()


def _sqlite_pragmas() -> None:
    """WAL lets the search engine read while a request writes; a busy timeout rides out short locks."""
    from sqlalchemy import event

    from argilla_server import database

    def on_connect(dbapi_connection, connection_record):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=15000")
        cursor.close()

    if database.async_engine.dialect.name == "sqlite":
        event.listen(database.async_engine.sync_engine, "connect", on_connect)
        event.listen(database.sync_engine, "connect", on_connect)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True, type=Path)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6900)
    parser.add_argument("--credentials", required=True, type=Path)
    parser.add_argument("--redis-url", default=None, help="a real Redis instead of the in-process fake")
    args = parser.parse_args(argv)

    home = args.home.resolve()
    home.mkdir(parents=True, exist_ok=True)
    _environment(home, args.redis_url)
    credentials = json.loads(args.credentials.read_text(encoding="utf-8"))

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import sqlsearch  # noqa: F401  (registers the engine)

    _sqlite_pragmas()
    _migrate()
    asyncio.run(_ensure_users(credentials))

    import uvicorn
    from argilla_server._app import app  # built at import: mounts the UI copied into TMPDIR

    print(f"argilla-server listening on http://{args.host}:{args.port}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
