"""Label scoring (bench/lab/label_scores.py, the complexity bench's scorer; a lab experiment, run with `pytest bench/lab`) on the real embedded SmolLM2: the scores
are the model's own log-probabilities (checked against llama.cpp computing every position at once)."""

from __future__ import annotations

import numpy as np
import pytest

from mashbill.specs.model import TeacherSpec

SCHEMA = {"type": "object", "properties": {"complexity": {"type": "string",
                                                          "enum": ["trivial", "moderate", "complex", "memory_recall"]}},
          "required": ["complexity"], "additionalProperties": False}
MESSAGES = [{"role": "system", "content": "Label the request's complexity: trivial, moderate, complex or "
                                          "memory_recall. Answer with JSON."},
            {"role": "user", "content": "Request: What is the capital of Canada?"}]


@pytest.fixture(scope="module")
def teacher():
    from mashbill.factory.teachers.llama_cpp import LlamaCppTeacher

    t = LlamaCppTeacher(TeacherSpec(n_ctx=1024), threads=1)
    yield t
    t.close()


def test_scores_are_the_models_log_probabilities(teacher):
    """The KV-cache reusing scorer gives what a fresh model computing all positions' logits gives (a token off by
    one, or a stale cache, moves a score by nats, not hundredths)."""
    import llama_cpp

    from label_scores import _prompt_text, enum_answers, label_scores

    answers = enum_answers(SCHEMA, "complexity")
    got = label_scores(teacher.llm, MESSAGES, answers)
    got_again = label_scores(teacher.llm, MESSAGES, answers)  # now from a warm cache
    ref = llama_cpp.Llama(model_path=str(teacher.path), n_ctx=1024, n_threads=1, logits_all=True, verbose=False)
    try:
        prompt = _prompt_text(teacher.llm, MESSAGES)
        ptoks = ref.tokenize(prompt.encode(), add_bos=True, special=True)
        for name, text in answers.items():
            toks = ref.tokenize((prompt + text).encode(), add_bos=True, special=True)
            ref.reset()
            ref.eval(toks)
            logits = np.asarray(ref.scores[: len(toks)], dtype=np.float64)
            total = 0.0
            for pos in range(len(ptoks), len(toks)):
                row = logits[pos - 1]
                total += row[toks[pos]] - (row.max() + np.log(np.exp(row - row.max()).sum()))
            # single-token and batched quantized matmuls round differently: a few hundredths of a nat per token
            assert got[name] == pytest.approx(total, abs=0.06 * (len(toks) - len(ptoks))), name
            assert got_again[name] == pytest.approx(got[name], abs=1e-3)
    finally:
        ref.close()
    assert len(set(round(v, 3) for v in got.values())) == 4  # four different answers, four different scores
