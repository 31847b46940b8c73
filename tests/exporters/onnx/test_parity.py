"""Parity's batch-1 pass over the eval split, in worker processes (issue 29: at a million records it was most of
`export onnx`)."""

from __future__ import annotations

import numpy as np
import pytest

from mashbill.exporters.onnx.parity import candidate_logits, labelled_texts
from mashbill.exporters.runs import ExportError, Snapshot


def test_parity_logits_are_the_same_in_worker_processes_as_in_one(onnx_export, plan_snapshot):
    """Blocks of texts go to worker processes; every row must be exactly what one process gives that text (the
    same graph, session options and input), in the texts' order, for the fp32 and the INT8 graph."""
    path, _ = onnx_export
    texts, _ = labelled_texts(Snapshot(plan_snapshot.path, plan_snapshot.manifest))
    texts = [*texts, *(f"{t} Answer in German, please." for t in texts), "", "x"]
    for graph in ("model.onnx", "model.int8.onnx"):
        one = candidate_logits(path / graph, texts, workers=1)
        assert one.shape[0] == len(texts) and len({row.tobytes() for row in one}) > len(texts) // 2
        assert np.array_equal(candidate_logits(path / graph, texts, workers=3), one), graph
        assert np.array_equal(candidate_logits(path / graph, texts), one), graph  # the default: one process here


def test_a_worker_that_cannot_load_the_graph_fails_the_call_with_its_reason(tmp_path):
    missing = tmp_path / "model.onnx"
    missing.write_bytes(b"not an onnx graph")
    with pytest.raises(ExportError, match="onnxruntime cannot load it"):
        candidate_logits(missing, ["a", "b", "c", "d"], workers=2)


def test_a_callers_unguarded_script_is_not_run_again_by_the_workers(onnx_export, tmp_path):
    """A user's script that exports from Python without an `if __name__ == "__main__"` guard: multiprocessing's
    spawn would run it again in every worker (and fail). The workers are fresh interpreters: the script runs once
    and gets every logit."""
    import subprocess
    import sys

    path, _ = onnx_export
    runs, out = tmp_path / "runs.txt", tmp_path / "logits.npy"
    script = tmp_path / "export_now.py"
    script.write_text(
        "import numpy as np\n"
        "from pathlib import Path\n"
        "from mashbill.exporters.onnx.parity import candidate_logits\n"
        f"with open({str(runs)!r}, 'a') as f:\n"
        "    f.write('ran\\n')\n"
        f"np.save({str(out)!r}, candidate_logits(Path({str(path / 'model.int8.onnx')!r}), "
        "[f'text {i}' for i in range(12)], workers=3))\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert runs.read_text() == "ran\n"
    one = candidate_logits(path / "model.int8.onnx", [f"text {i}" for i in range(12)], workers=1)
    assert np.array_equal(np.load(out), one)


def _workers_of(pid: int) -> list[int]:
    """The parity workers among a process's children (Linux /proc)."""
    from pathlib import Path

    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmd = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        if ppid == pid and "parity import _worker" in cmd:
            found.append(int(stat.parent.name))
    return found


def test_a_worker_killed_mid_run_fails_the_call_in_one_line(onnx_export):
    """A worker killed from outside (the OOM killer, an operator): the call raises ExportError naming the graph
    and the status instead of returning partial logits, and no worker is left running."""
    import os
    import signal
    import threading

    path, _ = onnx_export
    texts = [f"request number {i} about nothing in particular" for i in range(8000)]
    outcome: dict = {}

    def run():
        try:
            candidate_logits(path / "model.int8.onnx", texts, workers=2)
        except ExportError as exc:
            outcome["error"] = str(exc)
        else:
            outcome["error"] = None

    caller = threading.Thread(target=run)
    caller.start()
    victims: list[int] = []
    while not victims and caller.is_alive():  # the first worker to appear (progress, not a timer)
        victims = _workers_of(os.getpid())
    assert victims, "no worker process appeared"
    os.kill(victims[0], signal.SIGKILL)
    caller.join(timeout=600)
    assert outcome.get("error") and "model.int8.onnx" in outcome["error"] and "status -9" in outcome["error"]
    assert not _workers_of(os.getpid())
