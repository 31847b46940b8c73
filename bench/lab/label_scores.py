"""Score fixed answers by a llama.cpp model's log-probability instead of sampling one.

A 135M teacher samples `complex` for almost any request, yet the probability it gives each class's answer can still
rank them (a class label is a closed set: nothing to generate). The prompt is evaluated once, its KV cache reused for
every answer; each answer's score is the sum of its tokens' log-probabilities after the chat template's assistant
opener. `calibrated_scores` subtracts the scores the same system prompt gives a content-free request ("N/A":
contextual calibration, Zhao et al. 2021), which cancels the model's prior for a class whatever the request.

bench/complexity_labels.py measures it against the sampled JSON the factory stores. On the complexity yardstick's
report half (SmolLM2-135M, complexity@1 prompt) sampling was right on 24.3% of requests, scoring on 20.6%, calibrated
scoring on 20.6%: it lost, so no teacher uses it; it stays as the bench's measuring tool for the next teacher.
"""

from __future__ import annotations

import numpy as np


def _prompt_text(llm, messages: list[dict]) -> str:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    template = llm.metadata["tokenizer.chat_template"]
    vocab = llm._model  # the token texts the template may need
    eos = vocab.token_get_text(vocab.token_eos())
    bos = vocab.token_get_text(vocab.token_bos())
    return Jinja2ChatFormatter(template, eos_token=eos, bos_token=bos, add_generation_prompt=True)(
        messages=messages).prompt


def _last_logprobs(llm) -> np.ndarray:
    logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float64)
    m = logits.max()
    return logits - (m + np.log(np.exp(logits - m).sum()))


def _eval_from(llm, tokens: list[int], keep: int) -> None:
    """Evaluate `tokens` from position `keep` on (what is before it is already in the KV cache)."""
    llm.n_tokens = keep
    llm.eval(tokens[keep:])


def label_scores(llm, messages: list[dict], answers: dict[str, str]) -> dict[str, float]:
    """{name: sum of log p(answer tokens | chat prompt)} for each answer text."""
    prompt = _prompt_text(llm, messages)
    ptoks = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
    cached = llm.input_ids[: llm.n_tokens]
    keep = 0
    for a, b in zip(cached, ptoks[:-1]):  # the last prompt token is always evaluated: its logits are needed
        if a != b:
            break
        keep += 1
    _eval_from(llm, ptoks, keep)
    first = _last_logprobs(llm)
    out = {}
    for name, text in answers.items():
        full = llm.tokenize((prompt + text).encode("utf-8"), add_bos=True, special=True)
        if full[: len(ptoks)] != ptoks:
            raise ValueError(f"the answer {text!r} merges with the prompt's last token")
        atoks = full[len(ptoks):]
        total = float(first[atoks[0]])
        llm.n_tokens = len(ptoks)
        for i, tok in enumerate(atoks[:-1]):
            llm.eval([tok])
            total += float(_last_logprobs(llm)[atoks[i + 1]])
        out[name] = total
    llm.n_tokens = len(ptoks)
    return out


def content_free(messages: list[dict], text: str) -> list[dict]:
    """The same messages with the last user turn replaced by a content-free request."""
    out = [dict(m) for m in messages]
    for m in reversed(out):
        if m.get("role") == "user":
            m["content"] = text
            break
    return out


def calibrated_scores(llm, messages: list[dict], answers: dict[str, str], prior: dict[str, float] | None
                      ) -> dict[str, float]:
    s = label_scores(llm, messages, answers)
    return s if prior is None else {k: v - prior[k] for k, v in s.items()}


def enum_answers(schema: dict, field: str) -> dict[str, str]:
    """{value: compact JSON answer} for an output schema's enum field, e.g. {"complexity": "trivial"}."""
    import json

    values = schema.get("properties", {}).get(field, {}).get("enum")
    if not values:
        raise ValueError(f"label scoring needs an enum field '{field}' in the output schema")
    return {v: json.dumps({field: v}, ensure_ascii=False, separators=(",", ":")) for v in values}
