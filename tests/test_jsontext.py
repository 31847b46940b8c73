"""Reading JSON that a model or a person wrote: what Python's reader would crash on, or read though it is not JSON,
is a JSONDecodeError naming what and where; everything else reads as json.loads reads it."""

from __future__ import annotations

import json
import random

import pytest

from mashbill.jsontext import MAX_DEPTH, NotJSON, TooDeep, loads, too_deep_at


def _nested(depth: int, opener: str) -> str:
    """A value `depth` levels deep: arrays or objects."""
    head, tail = ("[", "]") if opener == "[" else ('{"k": ', "}")
    return head * depth + "1" + tail * depth


@pytest.mark.parametrize("opener", ["[", "{"])
def test_depth_up_to_the_limit_reads_and_one_more_is_refused(opener):
    ok = _nested(MAX_DEPTH, opener)
    assert loads(ok) == json.loads(ok)
    with pytest.raises(TooDeep) as exc:
        loads(_nested(MAX_DEPTH + 1, opener))
    assert exc.value.msg == f"nested deeper than {MAX_DEPTH} levels"


def test_the_offset_is_the_bracket_that_went_too_deep():
    text = '{"a": [' + "[" * 80
    with pytest.raises(TooDeep) as exc:
        loads(text)
    assert exc.value.pos == text.index("[") + MAX_DEPTH - 1 and text[exc.value.pos] == "["
    assert isinstance(exc.value, json.JSONDecodeError) and exc.value.lineno == 1


@pytest.mark.parametrize("text", [
    json.dumps(["[" * 200]),  # brackets in a string do not nest
    json.dumps({"a": "\\\"" + "{" * 200 + "\\", "b": [1]}),  # nor after escaped quotes and a trailing backslash
    "[" + ",".join(["[]"] * 300) + "]",  # many brackets, shallow
], ids=["in-a-string", "after-escapes", "shallow"])
def test_brackets_that_do_not_nest_are_not_counted(text):
    assert too_deep_at(text) is None and loads(text) == json.loads(text)


@pytest.mark.parametrize("text,token", [
    ('{"a": NaN}', "NaN"), ("[Infinity]", "Infinity"), ('{"s": "NaN", "b": -Infinity}', "-Infinity"),
    ("[1e400]", "1e400"), ('["1e400", -1E+999]', "-1E+999"),
])
def test_values_that_are_not_json_numbers_are_refused_where_they_stand(text, token):
    with pytest.raises(NotJSON) as exc:
        loads(text)
    assert text[exc.value.pos:].startswith(token) and token in exc.value.msg


def test_an_integer_python_cannot_read_is_refused():
    text = '["' + "1" * 5000 + '", ' + "2" * 5000 + "]"
    with pytest.raises(NotJSON) as exc:
        loads(text)
    assert exc.value.pos == text.index("2") and "4,300 digits" in exc.value.msg
    assert loads("[" + "9" * 4300 + "]") == [int("9" * 4300)]


def _value(rng: random.Random, depth: int):
    kind = rng.randrange(7 if depth < 6 else 4)
    if kind == 0:
        return rng.choice([0, -1, 17, 10 ** 30, 2.5, -0.0, 1e-300, 1.7976931348623157e308])
    if kind == 1:
        return "".join(rng.choice('ab"\\/[]{}\n\u2028é😀 ') for _ in range(rng.randrange(12)))
    if kind == 2:
        return rng.choice([True, False, None])
    if kind == 3:
        return "NaN" if rng.random() < 0.5 else "[[["
    if kind in (4, 5):
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {f"k{i}": _value(rng, depth + 1) for i in range(rng.randrange(4))}


def test_ordinary_json_reads_as_json_loads_reads_it():
    rng = random.Random(7)
    for _ in range(2000):
        text = json.dumps(_value(rng, 0), ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 2]))
        assert loads(text) == json.loads(text)
    for bad in ["", "[1,", "{'a': 1}", "[1] x", '"\\x"']:  # json.loads's own errors stay its own
        with pytest.raises(json.JSONDecodeError) as exc:
            loads(bad)
        assert type(exc.value) is json.JSONDecodeError


def _walk_depth_at(text: str, limit: int):
    """The reference: a character walk that skips strings (escapes included) and ignores a closer with nothing open."""
    depth, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if j < n:  # a closed string is skipped whole; an unclosed quote is one character
                i = j + 1
                continue
        elif c in "[{":
            depth += 1
            if depth > limit:
                return i
        elif c in "]}":
            depth = max(depth - 1, 0)
        i += 1
    return None


def test_the_deep_text_check_finds_what_a_character_walk_finds():
    rng = random.Random(64)
    for _ in range(3000):
        text = "".join(rng.choice(['[', '[', '{', ']', '}', '"', '\\', 'a', ',', '"x"', '"[["', ']]', '\n']) for _ in
                       range(rng.randrange(1, 80)))
        limit = rng.randrange(1, 8)
        assert too_deep_at(text, limit) == _walk_depth_at(text, limit), (text, limit)


@pytest.mark.parametrize("text,at", [
    ('["\\ud800"]', 2), ('{"a": "\\uD83D x"}', 7), ('["\\ude00\\ud83d"]', 2),  # a low before a high is no pair
    ('["ok", "\ud800"]', 8),  # the code point itself, as an HTTP client decodes an escape in a reply
])
def test_a_lone_surrogate_is_refused_where_it_stands(text, at):
    with pytest.raises(NotJSON) as exc:
        loads(text)
    assert exc.value.pos == at and "lone surrogate" in exc.value.msg
    assert loads(text.replace("\ud800", "\\ud800"), keep_lone_surrogates=True) is not None


@pytest.mark.parametrize("text", ['["\\ud83d\\ude00"]', '["\\\\ud800"]', '["\\\\\\\\ud800"]', '["\\u00e9"]'])
def test_pairs_and_escaped_backslashes_are_not_lone_surrogates(text):
    assert loads(text) == json.loads(text)


def test_storable_text_replaces_surrogates_only():
    from mashbill.jsontext import storable

    assert storable("a\ud800b\udfff") == "a\ufffdb\ufffd"
    assert storable("😀 é") == "😀 é" and storable(None) is None
    storable("x\ud83d").encode("utf-8")


def test_the_first_surrogate_of_a_value_in_document_order_keys_and_any_types_included():
    import datetime

    from mashbill.jsontext import lone_surrogate_in

    assert lone_surrogate_in({datetime.date(2024, 1, 1): ["a", {"b": "x\ud800"}], "z": "\udc01"}) == 0xD800
    assert lone_surrogate_in({"k\udfff": 1, "v": "\ud800"}) == 0xDFFF
    assert lone_surrogate_in({"a": ["ok", 1, None, (2.5, {"s"})], b"bytes": "😀"}) is None
