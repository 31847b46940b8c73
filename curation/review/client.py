"""Which Argilla server to talk to, and the adapter around the argilla SDK.

A connection comes from a URL and API key (any deployment; the CLI takes them from --api-url/--api-key or
`ARGILLA_API_URL`/`ARGILLA_API_KEY`), or else from
the embedded server started by `mashbill review serve` for a home folder (its URL from
server.json, the owner's API key from credentials.json). The API key is kept out of every repr,
message and log line.

`ArgillaReview.connect` first checks the server with one short request, so an unreachable
server or a wrong key fails in about a second with a clear message (the SDK itself connects at
construction and retries for about 7 s before failing with a bare connection error). Only then
is the SDK client constructed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from mashbill.curation.review import local
from mashbill.curation.review.errors import ReviewError

log = logging.getLogger(__name__)

PAGE = 1000  # records per page when listing (the server's maximum)


@dataclass(frozen=True)
class Connection:
    url: str
    api_key: str = field(repr=False)
    workspace: str
    source: str  # where url and key came from, for messages

    def __str__(self) -> str:
        return f"{self.url} ({self.source})"


def resolve_connection(home: Path | None = None, workspace: str | None = None, *, url: str | None = None,
                       api_key: str | None = None) -> Connection:
    if url:
        if not api_key:
            raise ReviewError(f"ARGILLA_API_URL is set ({url}) but ARGILLA_API_KEY is not (nor --api-key); set "
                              "both, or unset ARGILLA_API_URL to use the server from `mashbill review serve`")
        return Connection(url.rstrip("/"), api_key, workspace or local.WORKSPACE, "ARGILLA_API_URL")
    home = Path(home or local.DEFAULT_HOME).resolve()
    state = local.running_server(home)
    if state is None:
        raise ReviewError(f"no review server: nothing started from {home} is running and ARGILLA_API_URL is not "
                          "set; start one with `mashbill review serve` (or pass its --home), or set "
                          "ARGILLA_API_URL and ARGILLA_API_KEY for another deployment")
    creds = local.read_credentials(home)
    return Connection(state["url"], creds["owner"]["api_key"], workspace or creds.get("workspace", local.WORKSPACE),
                      f"server from {home}")


class ArgillaReview:
    """The one place that talks to Argilla: a checked connection, the SDK client and a few REST calls."""

    def __init__(self, conn: Connection, sdk_client: Any, me: dict):
        self.conn = conn
        self.sdk = sdk_client
        self.me = me

    # -------------------------------------------------------------- connecting

    @classmethod
    def connect(cls, conn: Connection, timeout_s: float = 10.0) -> "ArgillaReview":
        import httpx

        try:
            resp = httpx.get(f"{conn.url}/api/v1/me", headers={"X-Argilla-Api-Key": conn.api_key},
                             timeout=timeout_s)
        except httpx.HTTPError as exc:
            raise ReviewError(f"cannot reach the Argilla server at {conn}: {type(exc).__name__}: {exc}; "
                              "is it running? (`mashbill review serve` starts the embedded one)") from None
        if resp.status_code == 401:
            raise ReviewError(f"the Argilla server at {conn} rejected the API key (401); check ARGILLA_API_KEY "
                              "or the server's credentials.json")
        if resp.status_code != 200:
            raise ReviewError(f"the Argilla server at {conn} answered GET /api/v1/me with {resp.status_code}: "
                              f"{resp.text[:200]}")
        me = resp.json()
        import argilla as rg
        import argilla.records._dataset_records as sdk_records

        # The SDK draws a tqdm bar per log() call on stderr; the CLI reports progress itself.
        sdk_records.tqdm = _quiet_tqdm
        logging.getLogger("argilla.sdk").setLevel(logging.WARNING)
        try:
            client = rg.Argilla(api_url=conn.url, api_key=conn.api_key, timeout=60)
        except Exception as exc:  # the SDK re-checks the connection with its own error classes
            raise ReviewError(f"the argilla SDK could not connect to {conn}: {type(exc).__name__}: {exc}") from None
        return cls(conn, client, me)

    @property
    def http(self):
        return self.sdk.http_client

    def _request(self, method: str, path: str, **kwargs):
        import httpx

        try:
            resp = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ReviewError(f"lost the Argilla server at {self.conn} during {method} {path}: "
                              f"{type(exc).__name__}: {exc}") from None
        if resp.status_code == 401:
            raise ReviewError(f"the Argilla server at {self.conn} rejected the API key (401)")
        return resp

    # -------------------------------------------------------------- workspaces and datasets

    def ensure_workspace(self) -> None:
        resp = self._request("GET", "/api/v1/me/workspaces")
        names = [w["name"] for w in resp.json().get("items", [])] if resp.status_code == 200 else []
        if self.conn.workspace in names:
            return
        if self.me.get("role") != "owner":
            raise ReviewError(f"workspace {self.conn.workspace!r} does not exist on {self.conn} or this user "
                              f"({self.me.get('username')}) is not in it; workspaces: {names or 'none'}")
        created = self._request("POST", "/api/v1/workspaces", json={"name": self.conn.workspace})
        if created.status_code not in (200, 201):
            raise ReviewError(f"cannot create workspace {self.conn.workspace!r} on {self.conn}: "
                              f"{created.status_code} {created.text[:200]}")

    def find_dataset(self, name: str) -> dict | None:
        """The dataset's JSON (id, name, status...) in our workspace, or None."""
        resp = self._request("GET", "/api/v1/me/datasets")
        if resp.status_code != 200:
            raise ReviewError(f"cannot list datasets on {self.conn}: {resp.status_code} {resp.text[:200]}")
        ws = self._workspace_id()
        for d in resp.json().get("items", []):
            if d["name"] == name and d["workspace_id"] == ws:
                return d
        return None

    def _workspace_id(self) -> str | None:
        resp = self._request("GET", "/api/v1/me/workspaces")
        for w in resp.json().get("items", []):
            if w["name"] == self.conn.workspace:
                return w["id"]
        return None

    def dataset_settings(self, dataset_id: str) -> dict:
        """Names of the dataset's fields, questions and metadata properties."""
        out = {}
        for kind, path in (("fields", "fields"), ("questions", "questions"),
                           ("metadata", "metadata-properties")):
            prefix = "/api/v1/me" if kind == "metadata" else "/api/v1"
            resp = self._request("GET", f"{prefix}/datasets/{dataset_id}/{path}")
            if resp.status_code != 200:
                raise ReviewError(f"cannot read the {kind} of dataset {dataset_id} on {self.conn}: "
                                  f"{resp.status_code}")
            out[kind] = {item["name"]: item for item in resp.json()["items"]}
        return out

    def delete_dataset(self, dataset_id: str) -> None:
        resp = self._request("DELETE", f"/api/v1/datasets/{dataset_id}")
        if resp.status_code not in (200, 204, 404):
            raise ReviewError(f"cannot delete dataset {dataset_id} on {self.conn}: {resp.status_code}")

    def create_dataset(self, name: str, settings) -> dict:
        import argilla as rg

        ds = rg.Dataset(name=name, workspace=self.conn.workspace, settings=settings, client=self.sdk)
        try:
            ds.create()
        except Exception as exc:  # the SDK raises its own error classes; keep the server's message
            raise ReviewError(f"cannot create dataset {name!r} on {self.conn}: {exc}") from None
        found = self.find_dataset(name)
        if found is None:
            raise ReviewError(f"dataset {name!r} was created on {self.conn} but cannot be found again")
        return found

    def upsert_records(self, dataset_name: str, records: list) -> None:
        """Add or update records by their id (Argilla's external_id): re-sending a record never duplicates it."""
        try:
            ds = self.sdk.datasets(name=dataset_name, workspace=self.conn.workspace)
            if ds is None:
                raise ReviewError(f"dataset {dataset_name!r} disappeared from {self.conn} during the push; re-run it")
            ds.records.log(records, batch_size=min(len(records), 500))
        except ReviewError:
            raise
        except Exception as exc:
            raise ReviewError(f"pushing records to {dataset_name!r} on {self.conn} failed: {exc}; records already "
                              "sent are kept and re-running the push completes it without duplicates") from None

    def progress(self, dataset_id: str) -> dict:
        resp = self._request("GET", f"/api/v1/datasets/{dataset_id}/progress")
        return resp.json() if resp.status_code == 200 else {}

    # -------------------------------------------------------------- reading back

    def iter_records(self, dataset_id: str, include: str = "responses") -> Iterator[dict]:
        """Every record of the dataset with its responses (needs an owner or admin key)."""
        offset = 0
        while True:
            resp = self._request("GET", f"/api/v1/datasets/{dataset_id}/records",
                                 params={"include": include, "offset": offset, "limit": PAGE})
            if resp.status_code == 404:
                raise ReviewError(f"dataset {dataset_id} was deleted from {self.conn} while reading it")
            if resp.status_code == 403:
                raise ReviewError(f"user {self.me.get('username')!r} may not read all responses on {self.conn}; "
                                  "use an owner or admin API key")
            if resp.status_code != 200:
                raise ReviewError(f"cannot list records of dataset {dataset_id} on {self.conn}: "
                                  f"{resp.status_code} {resp.text[:200]}")
            items = resp.json()["items"]
            yield from items
            if len(items) < PAGE:
                return
            offset += len(items)

    def usernames(self) -> dict[str, str]:
        """user id -> username; empty when this key may not list users (then ids stand in for names)."""
        resp = self._request("GET", "/api/v1/users")
        if resp.status_code != 200:
            return {}
        return {u["id"]: u["username"] for u in resp.json().get("items", [])}


def _quiet_tqdm(iterable=None, *args, **kwargs):
    return iterable
