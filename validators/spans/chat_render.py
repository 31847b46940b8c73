"""Rendering a conversation exactly as the trainer does, and finding the assistant turns in the rendered text.

This is the only module that touches transformers' chat-template internals: ``render`` makes the same call
``apply_chat_template`` makes; ``render_fast`` does what that call does for a plain conversation without the generic
copying (the span audit compares both on every run).

Assistant turns: a template with ``{% generation %}`` markers says where they are (transformers' assistant mask,
what TRL's ``assistant_only_loss`` trains). A template without markers is refused by TRL; here each assistant turn is
then located by rendering the conversation again with that turn's content replaced by a sentinel: the text before
and after the sentinel must be exactly the text before and after the turn in the real rendering, so the turn lies
between them, wherever the same words occur elsewhere (a role header, an earlier message, a special-token string).
The end-of-turn token right after it is trained too. A turn that cannot be located that way is ``SPAN006``. An
assistant turn whose content is empty or whitespace-only is ``SPAN008`` under every template, with generation markers
or without (the markers would otherwise train its end token alone).
"""

from __future__ import annotations

from typing import Sequence

from mashbill.validators.errors import ValidationInputError
from mashbill.validators.spans.span_rules import RecordProblem
from mashbill.validators.tokenizers.tokenizer import END_OF_TURN, LoadedTokenizer, has_generation_markers

_SENTINEL = "MashbillSpanSentinel7f3a9c"


class ChatRenderer:
    def __init__(self, loaded: LoadedTokenizer, template: str | None):
        self.loaded = loaded
        self.tok = loaded.tok
        self.template = template
        self.markers = bool(template) and has_generation_markers(template)
        self._template_kwargs = dict(self.tok.special_tokens_map)
        self._compiled = None
        self._plain_kwargs: dict = {}
        backend = self.tok.backend_tokenizer
        eot = [t for t in END_OF_TURN if backend.token_to_id(t) is not None]
        if self.tok.eos_token and self.tok.eos_token not in eot:
            eot.insert(0, self.tok.eos_token)
        self._eot = tuple(eot)

    def render(self, messages: Sequence[dict], add_generation_prompt: bool = False) -> tuple[str, list]:
        """(text, generation spans) exactly as apply_chat_template renders it."""
        from transformers.utils.chat_template_utils import _normalize_chat_messages, render_jinja_template

        if self.template is None:
            raise ValidationInputError(f"tokenizer {self.loaded.ref} has no chat template; pass --chat-template "
                                       "(chatml, a .jinja file or template text)")
        conv = _normalize_chat_messages(list(messages))
        try:
            texts, gen = render_jinja_template(conversations=[conv], tools=None, documents=None,
                                               chat_template=self.template,
                                               return_assistant_tokens_mask=self.markers and not add_generation_prompt,
                                               continue_final_message=False,
                                               add_generation_prompt=add_generation_prompt, **self._template_kwargs)
        except Exception as exc:  # jinja raise_exception(), TypeError on odd contents...
            raise _refused(exc) from None
        return texts[0], (gen[0] if gen else [])

    def render_fast(self, messages: Sequence[dict], add_generation_prompt: bool = False) -> tuple[str, list]:
        """What render_jinja_template does for a plain conversation (no tools, no documents), minus the generic
        copying: messages whose values are all strings are copied shallowly, anything else goes through
        transformers' own sanitising copy."""
        from transformers.utils.chat_template_utils import (_alias_reasoning_fields, _compile_jinja_template,
                                                            _plain_template_data, _render_with_assistant_indices)

        if self.template is None:
            return self.render(messages, add_generation_prompt)
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = _compile_jinja_template(self.template)
            self._plain_kwargs = _plain_template_data(self._template_kwargs)
        chat = []
        for m in messages:
            if not isinstance(m, dict):
                return self.render(messages, add_generation_prompt)
            d = {k: v for k, v in m.items() if v is not None}
            if not all(type(v) is str and type(k) is str for k, v in d.items()):
                return self.render(messages, add_generation_prompt)
            chat.append(d)
        chat = _alias_reasoning_fields(chat)
        try:
            if self.markers and not add_generation_prompt:
                return _render_with_assistant_indices(compiled, chat, None, None, add_generation_prompt,
                                                      **self._plain_kwargs)
            return compiled.render(messages=chat, tools=None, documents=None,
                                   add_generation_prompt=add_generation_prompt, **self._plain_kwargs), []
        except Exception as exc:
            raise _refused(exc) from None

    def assistant_spans(self, messages: Sequence[dict], *, fast: bool = False) -> tuple[str, list[tuple[int, int]]]:
        """The rendered text and the character span of every assistant turn (with its end-of-turn token)."""
        render = self.render_fast if fast else self.render
        full, gen = render(messages)
        for i, m in enumerate(messages):  # one SPAN008 rule, whatever the template (markers or not)
            content = m.get("content")
            if m.get("role") == "assistant" and isinstance(content, str) and not content.strip():
                raise RecordProblem("SPAN008", f"assistant turn {i + 1} is empty or whitespace-only: there is nothing "
                                    "to train on but its end token")
        if self.markers:
            return full, [tuple(s) for s in gen]
        spans = []
        for i, m in enumerate(messages):
            if m.get("role") != "assistant":
                continue
            sentinel = _SENTINEL
            while sentinel in full:
                sentinel += "x"
            probe = [dict(x) for x in messages]
            probe[i]["content"] = sentinel
            text, _ = render(probe)
            at = text.find(sentinel)
            before, after = text[:at], text[at + len(sentinel):]
            if at < 0 or sentinel in after or not (full.startswith(before) and full.endswith(after)
                                                   and len(before) + len(after) <= len(full)):
                raise RecordProblem("SPAN006", f"assistant turn {i + 1} cannot be located in the rendered chat (the "
                                    "template does not render its content in one place), so its tokens cannot be "
                                    "found; use a template with generation markers")
            start, end = len(before), len(full) - len(after)
            if not full[start:end].strip():
                raise RecordProblem("SPAN008", f"assistant turn {i + 1} renders empty or whitespace-only: there is "
                                    "nothing to train on but its end token")
            for t in self._eot:
                if full.startswith(t, end):
                    end += len(t)
                    break
            spans.append((start, end))
        return full, spans


def _refused(exc: Exception) -> RecordProblem:
    return RecordProblem("SPAN007", f"the chat template refused this conversation: "
                         f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
