"""Reading datasets Mashbill did not make: TRL conversational JSONL, prompt/completion JSONL, Alpaca JSON(L) and
preference files. A bad row never stops the run: it becomes a ``FMT`` verdict naming the file and row, and every
valid row is still checked.

- ``FMT001`` the row is not UTF-8, not JSON, or not a JSON object, or holds a lone surrogate;
- ``FMT002`` a required field is missing or has the wrong type;
- ``FMT003`` the row belongs to another format (a mixed file).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from mashbill import jsontext
from mashbill.factory.records import Verdict
from mashbill.validators.errors import ValidationInputError
from mashbill.validators.spans.spans import TrainingExample

FORMATS = ("messages", "prompt-completion", "alpaca", "preference")
DEFAULT_LOSS = {"messages": "assistant-only", "prompt-completion": "completion-only", "alpaca": "completion-only",
                "preference": "completion-only"}
ROLES = {"system", "user", "assistant", "tool", "developer", "function"}
_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system",
                   "tool": "tool", "function_call": "assistant", "observation": "tool"}
_SIGNATURE = {"messages": {"messages", "conversations"}, "prompt-completion": {"prompt", "completion"},
              "alpaca": {"instruction", "output"}, "preference": {"chosen", "rejected"}}

_GERMAN = re.compile(r"(?i)(?<!\w)(?:der|die|das|und|ist|nicht|ich|wie|was|ein|eine|für|mit|bitte|welche[rsn]?|"
                     r"berechne|erkläre|schreibe|zwischen|über|auf|den|dem|des|von|zu|wir|sie|es)(?!\w)|[äöüß]")
_ENGLISH = re.compile(r"(?i)(?<!\w)(?:the|and|is|not|what|how|a|an|for|with|please|which|calculate|explain|write|"
                      r"between|about|on|of|to|we|you|it|my|i)(?!\w)")


def guess_lang(text: str | None) -> str | None:
    if not text:
        return None
    de = len(_GERMAN.findall(text))
    en = len(_ENGLISH.findall(text))
    if de == en == 0:
        return None
    return "de" if de > en else "en"


@dataclass
class Row:
    key: str  # "file:line" (or the record id for stored records)
    examples: list[TrainingExample] = field(default_factory=list)
    query: str | None = None
    target: str | None = None
    n_messages: int = 0
    problems: list[Verdict] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def _bad(code: str, msg: str) -> Verdict:
    return Verdict(code, "reject", msg, "validate")


def _messages(value, what: str) -> tuple[list[dict] | None, str | None]:
    """A validated message list, or an error message."""
    if not isinstance(value, list) or not value:
        return None, f"'{what}' must be a non-empty list of messages"
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, dict):
            return None, f"'{what}[{i}]' is {type(m).__name__}, not a message object"
        if "role" not in m and "from" in m:  # ShareGPT
            role = _SHAREGPT_ROLES.get(str(m.get("from")))
            if role is None:
                return None, f"'{what}[{i}]' has unknown speaker {m.get('from')!r}"
            m = {"role": role, "content": m.get("value")}
        role, content = m.get("role"), m.get("content")
        if role not in ROLES:
            return None, f"'{what}[{i}]' has role {role!r} (expected one of {', '.join(sorted(ROLES))})"
        if content is None and not m.get("tool_calls"):
            return None, f"'{what}[{i}]' ({role}) has no content"
        if content is not None and not isinstance(content, str):
            if isinstance(content, list) and all(isinstance(p, dict) and isinstance(p.get("text"), str)
                                                 for p in content):
                m = {**m, "content": "".join(p["text"] for p in content)}
            else:
                return None, f"'{what}[{i}]' content is {type(content).__name__}, expected a string"
        out.append(dict(m))
    return out, None


def _first(messages: list[dict], role: str) -> str | None:
    return next((m["content"] for m in messages if m.get("role") == role and isinstance(m.get("content"), str)), None)


def _last(messages: list[dict], role: str) -> str | None:
    return next((m["content"] for m in reversed(messages) if m.get("role") == role
                 and isinstance(m.get("content"), str)), None)


def parse_row(obj, fmt: str, key: str) -> Row:
    row = Row(key)
    if not isinstance(obj, dict):
        row.problems.append(_bad("FMT001", f"{key}: row is {type(obj).__name__}, expected a JSON object"))
        return row
    # a JSON escape of a lone surrogate ("\\ud800") decodes to a string no tokenizer can take
    if (cp := jsontext.lone_surrogate_in(obj)) is not None:
        row.problems.append(_bad("FMT001", f"{key}: holds a lone surrogate (\\u{cp:04x}), "
                                           "which is not text: no UTF-8 encoding exists for it"))
        return row
    keys = set(obj)
    if not keys & _SIGNATURE[fmt]:
        other = [f for f, sig in _SIGNATURE.items() if f != fmt and (sig <= keys or (f == "messages" and keys & sig))]
        if other:
            row.problems.append(_bad("FMT003", f"{key}: row has {other[0]} fields ({', '.join(sorted(keys))}), "
                                               f"not {fmt} fields (mixed file?)"))
            return row
    if fmt == "messages":
        msgs, err = _messages(obj.get("messages", obj.get("conversations")), "messages")
        if err:
            row.problems.append(_bad("FMT002", f"{key}: {err}"))
            return row
        if not any(m["role"] == "assistant" for m in msgs):
            row.problems.append(_bad("FMT002", f"{key}: no assistant message to train on"))
            return row
        row.examples.append(TrainingExample(key, tuple(msgs)))
        row.query, row.target, row.n_messages = _first(msgs, "user"), _last(msgs, "assistant"), len(msgs)
    elif fmt == "prompt-completion":
        p, c = obj.get("prompt"), obj.get("completion")
        if p is None or c is None:
            missing = [k for k in ("prompt", "completion") if obj.get(k) is None]
            row.problems.append(_bad("FMT002", f"{key}: missing {' and '.join(missing)}"))
            return row
        if isinstance(p, str) and isinstance(c, str):
            row.examples.append(TrainingExample(key, text_prompt=p, text_completion=c))
            row.query, row.target, row.n_messages = p, c, 2
        else:
            pm, err = _messages(p, "prompt")
            cm, err2 = _messages(c, "completion") if not err else (None, None)
            if err or err2:
                row.problems.append(_bad("FMT002", f"{key}: {err or err2} (prompt and completion must both be "
                                                   "strings or both message lists)"))
                return row
            row.examples.append(TrainingExample(key, tuple(pm + cm), prompt_len=len(pm)))
            row.query, row.target, row.n_messages = _last(pm, "user"), _last(cm, "assistant"), len(pm) + len(cm)
    elif fmt == "alpaca":
        ins, inp, out = obj.get("instruction"), obj.get("input", ""), obj.get("output")
        bad = [k for k, v in (("instruction", ins), ("output", out)) if not isinstance(v, str)]
        if bad or not isinstance(inp, (str, type(None))):
            row.problems.append(_bad("FMT002", f"{key}: {', '.join(bad) or 'input'} missing or not a string"))
            return row
        user = ins + (f"\n\n{inp}" if inp else "")
        msgs = ([{"role": "system", "content": obj["system"]}] if isinstance(obj.get("system"), str) else [])
        msgs += [{"role": "user", "content": user}, {"role": "assistant", "content": out}]
        row.examples.append(TrainingExample(key, tuple(msgs), prompt_len=len(msgs) - 1))
        row.query, row.target, row.n_messages = (inp or ins), out, len(msgs)
    elif fmt == "preference":
        p, ch, rj = obj.get("prompt"), obj.get("chosen"), obj.get("rejected")
        if ch is None or rj is None:
            missing = [k for k in ("chosen", "rejected") if obj.get(k) is None]
            row.problems.append(_bad("FMT002", f"{key}: missing {' and '.join(missing)}"))
            return row
        if isinstance(ch, str) and isinstance(rj, str):
            if not isinstance(p, str):
                row.problems.append(_bad("FMT002", f"{key}: string chosen/rejected need a string prompt"))
                return row
            row.examples += [TrainingExample(key, text_prompt=p, text_completion=ch, part="chosen"),
                             TrainingExample(key, text_prompt=p, text_completion=rj, part="rejected")]
            row.query, row.target, row.n_messages = p, ch, 2
        else:
            cm, err = _messages(ch, "chosen")
            rm, err2 = _messages(rj, "rejected") if not err else (None, None)
            pm, err3 = _messages(p, "prompt") if p is not None and not (err or err2) else ([], None)
            if err or err2 or err3:
                row.problems.append(_bad("FMT002", f"{key}: {err or err2 or err3}"))
                return row
            if not pm:  # implicit prompt: the shared beginning of chosen and rejected
                n = 0
                while n < min(len(cm), len(rm)) - 1 and cm[n] == rm[n]:
                    n += 1
                pm, cm, rm = cm[:n], cm[n:], rm[n:]
            if not pm:
                row.problems.append(_bad("FMT002", f"{key}: no prompt (and chosen/rejected share no first turns)"))
                return row
            row.examples += [TrainingExample(key, tuple(pm + cm), prompt_len=len(pm), part="chosen"),
                             TrainingExample(key, tuple(pm + rm), prompt_len=len(pm), part="rejected")]
            row.query, row.target, row.n_messages = _last(pm, "user"), _last(cm, "assistant"), len(pm) + len(cm)
    else:
        raise ValidationInputError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
    row.meta["lang"] = guess_lang(row.query)
    return row


def read_rows(path: str | Path, fmt: str) -> list[Row]:
    """All rows of a JSONL file (or a JSON array file), valid or not."""
    if fmt not in FORMATS:
        raise ValidationInputError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
    p = Path(path)
    if p.is_dir():
        raise ValidationInputError(f"{p}: is a directory, expected a JSONL or JSON file")
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise ValidationInputError(f"{p}: file not found") from None
    except OSError as exc:
        raise ValidationInputError(f"{p}: cannot read ({exc.strerror})") from None
    name = p.name
    if not data.strip():
        raise ValidationInputError(f"{p}: the file is empty (no rows)")
    rows: list[Row] = []
    stripped = data.lstrip()
    if stripped[:1] == b"[":  # a JSON array (Alpaca .json files)
        try:
            items = jsontext.loads(data.decode("utf-8"), keep_lone_surrogates=True)  # parse_row names the row
        except UnicodeDecodeError as exc:
            raise ValidationInputError(f"{p}: not UTF-8 (invalid byte 0x{data[exc.start]:02x} at offset "
                                       f"{exc.start})") from None
        except json.JSONDecodeError as exc:
            raise ValidationInputError(f"{p}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
        for n, obj in enumerate(items, 1):
            rows.append(parse_row(obj, fmt, f"{name}:{n}"))
        if not rows:
            raise ValidationInputError(f"{p}: the JSON array is empty (no rows)")
        return rows
    for n, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        key = f"{name}:{n}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            rows.append(Row(key, problems=[_bad("FMT001", f"{key}: not UTF-8 (invalid byte 0x{raw[exc.start]:02x} "
                                                          f"at column {exc.start + 1})")]))
            continue
        try:
            obj = jsontext.loads(line)
        except json.JSONDecodeError as exc:
            rows.append(Row(key, problems=[_bad("FMT001", f"{key}: not valid JSON ({exc.msg} at column "
                                                          f"{exc.colno})")]))
            continue
        rows.append(parse_row(obj, fmt, key))
    return rows
