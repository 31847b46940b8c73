"""Import existing outcome tables (RouteLLM-style) into the store's `router_outcomes` form.

Two shapes are read:
- **wide** CSV/Parquet, one row per query: a `prompt` (or `query`) column and one True/False column per
  model (RouteLLM's `mmlu_<subject>.csv` and `gsm8k_responses.csv`; `*_response` columns are ignored);
- **long** JSONL/Parquet, one row per (query, model): `query`/`prompt`/`user_prompt` or a known
  `query_id`, `model`, and `correct` and/or a judge `score` (RouteLLM's MT-Bench `judgements.jsonl`,
  scores 1-10 scaled to 0..1; correct = score >= the pass mark), optional cost, latency_s, tokens_in/out.

Bad rows are named by file and row, counted by code and left out; every other row is kept:
OUT001 a correctness or score value that is not one; OUT002 a model outside `models` (when given);
OUT003 a query id that is not in the store and comes without text; OUT004 the same (query, model)
twice in one file (the first is kept).
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path
from typing import Iterable, Iterator

from mashbill.errors import MashbillError
from mashbill.factory.router.outcomes import OutcomeImport, query_id, write_outcomes
from mashbill.factory.store import Store

TRUE = {"true", "1", "yes"}
FALSE = {"false", "0", "no"}
TEXT_COLUMNS = ("query", "prompt", "question", "user_prompt")
SUFFIXES = (".csv", ".jsonl", ".parquet")
_USER_TURN = re.compile(r"### User:\n(.*?)(?=\n\n### Assistant|\Z)", re.S)


def outcome_files(paths: Iterable[str | Path]) -> list[Path]:
    """Files to import: each path, or every outcome-like file under a folder (sorted)."""
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.suffix in SUFFIXES and f.is_file()))
        elif p.is_file():
            out.append(p)
        else:
            raise MashbillError(f"{p}: no such file or folder")
    return out


def _bool(value) -> bool | None:
    if isinstance(value, bool):
        return value
    s = str(value).strip().lower()
    return True if s in TRUE else False if s in FALSE else None


def _float(value) -> float | None:
    if value is None or value == "":
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _text_of(row: dict) -> str | None:
    for col in TEXT_COLUMNS:
        v = row.get(col)
        if isinstance(v, str) and v.strip():
            if col == "user_prompt" and "### User:" in v:  # a judge prompt: keep the user's turns only
                turns = [t.strip() for t in _USER_TURN.findall(v)]
                return "\n\n".join(turns) if turns else v
            return v
    return None


def _rows(path: Path) -> Iterator[tuple[int, dict]]:
    """(row number as a person counts it: CSV data rows from 2, JSONL lines from 1, Parquet rows from 1, row)."""
    if path.suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            for row in reader:
                yield reader.line_num, row
    elif path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield n, {"__error__": f"not JSON: {exc.msg}"}
                    continue
                yield n, row if isinstance(row, dict) else {"__error__": "not a JSON object"}
    else:
        import pyarrow.parquet as pq

        for n, row in enumerate(pq.read_table(path).to_pylist(), 1):
            yield n, row


def _readable(path: Path) -> Iterator[tuple[int, dict]]:
    """`_rows`, with a file that is not text (or not a table) as one line naming it instead of a traceback."""
    rows = _rows(path)
    n = 0
    while True:
        try:
            n, row = next(rows)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            raise MashbillError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}) after row {n}; "
                                "an outcome table is CSV, JSONL or Parquet") from None
        except csv.Error as exc:
            raise MashbillError(f"{path}:{n + 1}: not a readable CSV row ({exc})") from None
        except Exception as exc:  # pyarrow's ArrowInvalid and friends on a damaged Parquet file
            if type(exc).__module__.split(".")[0] != "pyarrow":
                raise
            raise MashbillError(f"{path}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None
        yield n, row


def _is_wide(columns: list[str]) -> bool:
    return "model" not in columns and any(c in columns for c in TEXT_COLUMNS)


def import_outcomes(store: Store, paths: Iterable[str | Path], *, models: Iterable[str] | None = None,
                    pass_mark: float = 0.8, score_scale: float = 10.0) -> list[OutcomeImport]:
    """Import every file; one `OutcomeImport` (counts and named problems) per file, each in one transaction."""
    allowed = set(models) if models else None
    known = {r[0] for r in store.con.execute("SELECT query_id FROM router_queries").fetchall()}
    results = []
    for path in outcome_files(paths):
        imp = OutcomeImport(f"import:{path.name}")
        queries: dict[str, dict] = {}
        outcomes: dict[tuple[str, str], dict] = {}
        meta = {"subject": path.stem.removeprefix("mmlu_")} if path.stem.startswith("mmlu_") else {}

        def bad(n: int, code: str, detail: str) -> None:
            imp.problems.append({"where": f"{path}:{n}", "code": code, "detail": detail})

        def add(n: int, qid: str, model: str, row: dict) -> None:
            if allowed is not None and model not in allowed:
                bad(n, "OUT002", f"unknown model {model!r} (known: {', '.join(sorted(allowed))})")
            elif (qid, model) in outcomes:
                bad(n, "OUT004", f"second outcome for query {qid} and model {model!r} in this file; the first is kept")
            else:
                outcomes[(qid, model)] = {"query_id": qid, "model": model, "source": imp.source, "record_id": None,
                                          **row}

        columns: list[str] | None = None
        for n, row in _readable(path):
            imp.rows_read += 1
            if "__error__" in row:
                bad(n, "OUT001", row["__error__"])
                continue
            if columns is None:
                columns = list(row)
            text = _text_of(row)
            qid = row.get("query_id") if isinstance(row.get("query_id"), str) and not text else None
            if text is not None:
                qid = query_id(text)
                queries.setdefault(qid, {"query_id": qid, "text": text, "source": imp.source, "meta": meta})
            elif qid is None or qid not in known:
                bad(n, "OUT003", f"query id {row.get('query_id')!r} is not in the store and the row has no query text"
                    if row.get("query_id") else "no query text (query/prompt/question/user_prompt) and no query_id")
                continue
            if _is_wide(columns):
                for col, value in row.items():
                    if col in TEXT_COLUMNS or col.endswith("_response") or col in ("query_id", "subject"):
                        continue
                    ok = _bool(value)
                    if ok is None:
                        bad(n, "OUT001", f"column {col!r}: expected True/False, found {str(value)[:40]!r}")
                        continue
                    add(n, qid, col, {"correct": ok, "score": None, "judge": "reference", "cost": None,
                                      "latency_s": None, "tokens_in": None, "tokens_out": None})
                continue
            model = row.get("model")
            if not isinstance(model, str) or not model:
                bad(n, "OUT001", "no 'model'")
                continue
            score = _float(row.get("score"))
            if row.get("score") not in (None, "") and (score is None or score < 0):
                bad(n, "OUT001", f"score {row.get('score')!r} is not a finite number >= 0")
                continue
            correct = _bool(row["correct"]) if row.get("correct") not in (None, "") else None
            if row.get("correct") not in (None, "") and correct is None:
                bad(n, "OUT001", f"correct {row.get('correct')!r} is not true/false")
                continue
            if score is not None and score > 1:
                score = score / score_scale
            if correct is None and score is None:
                bad(n, "OUT001", "neither 'correct' nor 'score'")
                continue
            if correct is None:
                correct = score >= pass_mark
            judge = row.get("judge")
            add(n, qid, model, {"correct": correct, "score": score,
                                "judge": json.dumps(judge) if isinstance(judge, list) else (judge or "reference"),
                                "cost": _float(row.get("cost")), "latency_s": _float(row.get("latency_s")),
                                "tokens_in": _int(row.get("tokens_in")), "tokens_out": _int(row.get("tokens_out"))})
        imp.rows_kept, imp.queries = len(outcomes), len(queries)
        write_outcomes(store, list(queries.values()), list(outcomes.values()), imp)
        known |= set(queries)
        results.append(imp)
    return results


def _int(value) -> int | None:
    x = _float(value)
    return None if x is None else int(x)
