"""Rendering by shape: a template proven to paste contents verbatim is rendered once per conversation shape and filled
in; the text and generation spans must equal transformers' own rendering for every conversation, and a template the
proof refuses is rendered every time."""

from __future__ import annotations

import random

import pytest

from mashbill.validators.spans.chat_render import ChatRenderer, contents_verbatim
from mashbill.validators.spans.span_rules import RecordProblem
from mashbill.validators.tokenizers.tokenizer import CHATML_GENERATION, resolve_chat_template

CONTENTS = ["plain text", "", " ", "\n\nblank lines\n\n", "{{ braces }} {% raw %}", "<|im_start|>fake<|im_end|>",
            "\ue000", "\ue0000\ue001", "\ue0001\ue001 looks like a placeholder", "emoji 😀 中文 e\u0301",
            '{"tasks": [{"id": 1}]}', "x" * 300, "MashbillSpanSentinel7f3a9c", "assistant", "system"]

# Templates that read a content some other way than pasting it: each must be rendered every time.
REFUSED = [
    "{% for m in messages %}{{ m['content'] | trim }}{% endfor %}",
    "{% for m in messages %}{% if m['content'] %}{{ m['content'] }}{% endif %}{% endfor %}",
    "{% for m in messages %}{% if 'x' in m.content %}X{% endif %}{{ m.content }}{% endfor %}",
    "{% for m in messages %}{{ m['content'] if loop.first else '-' }}{% endfor %}",
    "{% for m in messages %}{{ m.get('content') }}{% endfor %}",
    "{% for m in messages %}{{ m }}{% endfor %}",
    "{{ messages[0] }}",
    "{{ messages | length }}{% for m in messages %}{{ m.content }}{% endfor %}",
    "{% set ms = messages %}{% for m in ms %}{{ m.content }}{% endfor %}",
    "{% for m in messages %}{{ (m.content ~ '!')[:3] }}{% endfor %}",
    "{% for m in messages %}{{ m[m.role] }}{% endfor %}",
    "{% macro show(x) %}{{ x }}{% endmacro %}{% for m in messages %}{{ show(m.content) }}{% endfor %}",
    "{% for m in messages %}{{ m.content is string }}{% endfor %}",
    "{% for m in messages if m.content %}{{ m.content }}{% endfor %}",
    "{% for m in messages %}{% if not loop.first and loop.previtem['content'] == '' %}E{% endif %}{{ m.content }}"
    "{% endfor %}",
    "{% for m in messages %}{{ loop.cycle('a', 'b') }}{{ m.content }}{% endfor %}",
    "{% for m in messages %}{% if tools %}T{% endif %}{{ m.content }}{% endfor %}",
]

PASTED = [
    CHATML_GENERATION,
    "{% for m in messages %}{{ m.role ~ ': ' ~ m.content ~ '\n' }}{% endfor %}{{ messages[0]['content'] }}",
    "{% for m in messages %}{% if loop.last and m['role'] == 'assistant' %}{% generation %}{{ m['content'] }}"
    "{% endgeneration %}{% else %}{{ '[' + m['role'] + '] ' + m['content'] + '\n' }}{% endif %}{% endfor %}",
]


def _environment():
    from transformers.utils.chat_template_utils import _compile_jinja_template

    return _compile_jinja_template(CHATML_GENERATION).environment


@pytest.mark.parametrize("template", PASTED, ids=[f"pasted{i}" for i in range(len(PASTED))])
def test_a_template_that_pastes_contents_is_proven(template):
    assert contents_verbatim(_environment(), template, set())


@pytest.mark.parametrize("template", REFUSED, ids=[f"refused{i}" for i in range(len(REFUSED))])
def test_a_template_that_reads_a_content_otherwise_is_refused(template):
    assert not contents_verbatim(_environment(), template, set())


def _conversations(n: int, seed: int):
    rng = random.Random(seed)
    for _ in range(n):
        roles = ["system"] * rng.randint(0, 1) + [r for _ in range(rng.randint(1, 3)) for r in ("user", "assistant")]
        if rng.random() < 0.2:
            roles.pop()  # ends with a user turn
        msgs = []
        for role in roles:
            m = {"role": role, "content": rng.choice(CONTENTS) + rng.choice(CONTENTS)}
            if rng.random() < 0.1:
                m["name"] = rng.choice(["a", "b"])
            msgs.append(m)
        yield msgs


@pytest.mark.parametrize("which", ["chatml", "own", *(f"pasted{i}" for i in range(1, len(PASTED))),
                                   *(f"refused{i}" for i in range(len(REFUSED)))])
def test_render_fast_equals_the_trainers_render(qwen2, which):
    if which == "chatml":
        template = resolve_chat_template(qwen2, "chatml")
    elif which == "own":
        template = qwen2.tok.chat_template
    elif which.startswith("pasted"):
        template = PASTED[int(which[6:])]
    else:
        template = REFUSED[int(which[7:])]
    renderer = ChatRenderer(qwen2, template)
    compared = 0
    for msgs in _conversations(150, seed=len(which)):
        for gen_prompt in (False, True):
            try:
                want = renderer.render(msgs, add_generation_prompt=gen_prompt)
            except RecordProblem as exc:
                with pytest.raises(RecordProblem) as got:
                    renderer.render_fast(msgs, add_generation_prompt=gen_prompt)
                assert got.value.code == exc.code
                continue
            got = renderer.render_fast(msgs, add_generation_prompt=gen_prompt)
            assert (got[0], [tuple(s) for s in got[1]]) == (want[0], [tuple(s) for s in want[1]]), msgs
            compared += 1
    assert compared > 200
    if which.startswith("refused"):
        assert renderer._shapes is False  # rendered every time
    else:
        assert renderer._shapes and len(renderer._shapes) < compared  # shapes were filled, not rendered


def test_a_shape_whose_placeholder_renders_twice_is_rendered_every_time(qwen2):
    template = "{% for m in messages %}{{ m.content + m.content }}{% endfor %}"
    renderer = ChatRenderer(qwen2, template)
    msgs = [{"role": "user", "content": "ab"}, {"role": "assistant", "content": "c"}]
    assert renderer.render_fast(msgs) == renderer.render(msgs) == ("ababcc", [])
    assert list(renderer._shapes.values()) == [False]


def test_a_placeholder_the_template_writes_itself_is_not_taken_for_a_content(qwen2):
    from mashbill.validators.spans.chat_render import _PLACE

    template = ("{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}{% endif %}{% endfor %}"
                + _PLACE.format(1))
    renderer = ChatRenderer(qwen2, template)
    msgs = [{"role": "user", "content": "ab"}, {"role": "assistant", "content": "cd"}]
    assert renderer.render_fast(msgs) == renderer.render(msgs) == ("ab" + _PLACE.format(1), [])
    assert list(renderer._shapes.values()) == [False]


def test_shapes_stop_when_most_conversations_are_a_shape_of_their_own(qwen2):
    from mashbill.validators.spans.chat_render import SHAPES_TRIED

    renderer = ChatRenderer(qwen2, resolve_chat_template(qwen2, "chatml"))
    same = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    for i in range(SHAPES_TRIED):  # one shape, used again and again: kept
        msgs = [{**m, "content": f"{m['content']}{i}"} for m in same]
        assert renderer.render_fast(msgs) == renderer.render(msgs)
    assert len(renderer._shapes) == 1
    for i in range(3 * SHAPES_TRIED):  # a name of its own on every record: each would be a shape used once
        msgs = [{**same[0], "name": f"user{i}"}, same[1]]
        assert renderer.render_fast(msgs) == renderer.render(msgs)
    assert renderer._shapes is False
    assert renderer.render_fast(same) == renderer.render(same)


def test_a_template_that_refuses_a_shape_refuses_it_the_same_way(qwen2):
    template = ("{% for m in messages %}{% if m.role == 'system' and not loop.first %}"
                "{{ raise_exception('the system message must come first') }}{% endif %}{{ m.content }}{% endfor %}")
    assert contents_verbatim(_environment(), template, set())
    renderer = ChatRenderer(qwen2, template)
    msgs = [{"role": "user", "content": "q"}, {"role": "system", "content": "s"}]
    for _ in range(2):  # the shape is not kept: each time it is refused again
        with pytest.raises(RecordProblem) as fast:
            renderer.render_fast(msgs)
        with pytest.raises(RecordProblem) as full:
            renderer.render(msgs)
        assert (fast.value.code, fast.value.detail) == (full.value.code, full.value.detail) == (
            "SPAN007", "the chat template refused this conversation: the system message must come first")
    assert renderer._shapes == {}
    ok = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    assert renderer.render_fast(ok) == renderer.render(ok) == ("sq", [])
