"""Publish a file or a folder whole: write under a temporary name beside it, fsync, rename into place.

A crash, a converter failure or Ctrl-C leaves at most a `.tmp-*` file or folder (removed on the way out), never
one that looks finished but is not: readers only trust a folder whose manifest exists. Below every layer, so
snapshots, exports and releases publish alike.
"""

from __future__ import annotations

import os
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path

from mashbill.errors import MashbillError


def fsync_tree(root: Path) -> None:
    """fsync every file and every folder under `root` (and `root` itself)."""
    for dirpath, _, files in os.walk(root):
        for f in files:
            fd = os.open(os.path.join(dirpath, f), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(dirpath)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def staged_dir(final: Path, *, replace: bool = False):
    """Yield a temporary sibling of `final`; on success fsync it and rename it to `final`."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists() and not replace:
        raise MashbillError(f"{final} already exists; choose another --out or remove it first")
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        yield tmp
        fsync_tree(tmp)
        if final.exists():
            if not replace:
                raise MashbillError(f"{final} appeared while writing; nothing was replaced")
            old = final.parent / f".old-{final.name}-{uuid.uuid4().hex[:8]}"
            os.rename(final, old)
            os.rename(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, final)
        fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_file_atomic(path: Path, data: bytes) -> None:
    """One file: temp name in the same folder, fsync, rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{path.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
