"""kill -9 in the middle of repair chains, then a resume: no attempt is lost and none is asked twice.

Every record needs two repairs (the fault server answers against the schema until the second repair turn), one
request is in flight at a time and every answer is committed as it comes (batch_size 1), so a kill loses at most
the one answer in flight. The kills land by progress (answers the server gave), never by the clock.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess

from teacher_helpers import MASHBILL, records, run_cli, sql, tag
from test_generate_resume import wait_until
from test_repair import _repair_turn, _with_repair

N = 24


def _asks(server) -> int:
    return sum(1 for k, _, _ in server.log if tag(k) is not None or _repair_turn(k))


def _attempts(store) -> list[tuple]:
    return sql(store, "SELECT record_id, attempt, repairs, status, raw, feedback, CAST(verdicts AS VARCHAR) "
                      "FROM record_attempts ORDER BY record_id, attempt")


def test_kill_9_mid_chain_then_resume_loses_no_attempt_and_asks_none_twice(write_spec, fault_server, tmp_path):
    def schedule(key, attempt):  # first answers and first repairs break the schema; second repairs do not
        turn = _repair_turn(key)
        return "schema" if (turn is None and tag(key) is not None) or turn == 1 else None

    server = fault_server(delay_s=0.1, schedule=schedule)
    spec = _with_repair(write_spec(n=N, runtime={"concurrency": 1, "batch_size": 1}),
                        {"max_attempts": 3, "codes": ["SCHEMA001"]})
    args = [str(spec), "--base-url", server.url, "--no-progress"]

    reference = tmp_path / "reference"
    run_cli("generate", *args, "--store", reference, check=True)
    expected, expected_attempts = records(reference), _attempts(reference)
    assert len(expected) == N and len(expected_attempts) == 3 * N
    assert all(status == "accepted" for status, _, _ in expected.values())
    reference_asks = _asks(server)
    assert reference_asks == 3 * N

    seed = int(os.environ.get("MASHBILL_KILL_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    store = tmp_path / "killed"
    start, kills, open_seen = _asks(server), 0, 0
    for _ in range(5):
        stored = len(_attempts(store)) if (store / "mashbill.duckdb").exists() else 0
        remaining = 3 * N - stored
        if remaining <= 1:
            break
        k = max(1, int(rng.uniform(0.05, 0.8) * remaining))
        if (stored + k - 1) % 3 == 0:  # asks go chain by chain (first answer, repair 1, repair 2): kill on a repair
            k += 1
        target = _asks(server) + k
        proc = subprocess.Popen([MASHBILL, "generate", *args, "--store", str(store)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if wait_until(lambda: _asks(server) >= target, proc):
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait()
        # what survived is the uninterrupted run's, attempt for attempt
        partial = _attempts(store)
        print(f"kill at {target} asks: {len(partial)}/{3 * N} attempts stored (seed {seed})")
        assert set(partial) <= set(expected_attempts), f"seed {seed}"
        # a chain left open: a record with stored attempts and no record row yet (the kill landed mid-chain)
        open_seen += sql(store, "SELECT count(DISTINCT record_id) FROM record_attempts "
                                "WHERE record_id NOT IN (SELECT record_id FROM records)")[0][0]
    assert kills >= 3, f"seed {seed}: only {kills} kills hit a running process"
    assert open_seen >= 1, f"seed {seed}: no kill landed inside a repair chain"
    run_cli("generate", *args, "--store", store, check=True)

    assert records(store) == expected, f"seed {seed}"
    assert _attempts(store) == expected_attempts, f"seed {seed}"  # no attempt lost, none stored twice
    # none asked twice: beyond the reference's asks, at most the one answer in flight at each kill
    extra = _asks(server) - start - reference_asks
    assert 0 <= extra <= kills, f"seed {seed}: {extra} extra asks for {kills} kills"
    # each turn's teacher call is stored once per record
    assert sql(store, "SELECT count(*) FROM (SELECT record_id, turn FROM teacher_calls WHERE attempt = 1 "
                      "GROUP BY ALL HAVING count(*) > 1)")[0][0] == 0
