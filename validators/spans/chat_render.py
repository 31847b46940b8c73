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

from itertools import accumulate
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
        self._shapes: dict | bool = False  # rendered shapes, set with the compiled template (False: each is rendered)
        self._asked = self._made = 0  # shapes looked up, and made
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
        transformers' own sanitising copy. A template proven to paste contents verbatim (``contents_verbatim``) is
        rendered once per conversation shape and filled in (``_Shape``)."""
        from transformers.utils.chat_template_utils import (_alias_reasoning_fields, _compile_jinja_template,
                                                            _plain_template_data, _render_with_assistant_indices)

        if self.template is None:
            return self.render(messages, add_generation_prompt)
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = _compile_jinja_template(self.template)
            self._plain_kwargs = _plain_template_data(self._template_kwargs)
            proven = contents_verbatim(compiled.environment, self.template, set(self._plain_kwargs))
            self._shapes = {} if proven else False
        chat = []
        for m in messages:
            if not isinstance(m, dict):
                return self.render(messages, add_generation_prompt)
            d = {k: v for k, v in m.items() if v is not None}
            if not all(type(v) is str and type(k) is str for k, v in d.items()):
                return self.render(messages, add_generation_prompt)
            chat.append(d)
        chat = _alias_reasoning_fields(chat)
        markers = self.markers and not add_generation_prompt

        def render(conversation):  # the template's own errors are the record's (SPAN007); ours are not caught
            try:
                if markers:
                    return _render_with_assistant_indices(compiled, conversation, None, None, add_generation_prompt,
                                                          **self._plain_kwargs)
                return compiled.render(messages=conversation, tools=None, documents=None,
                                       add_generation_prompt=add_generation_prompt, **self._plain_kwargs), []
            except Exception as exc:
                raise _refused(exc) from None

        if self._shapes is False:
            return render(chat)
        key = (add_generation_prompt,
               tuple(tuple((k, v) for k, v in m.items() if k != "content") + ("content" in m,) for m in chat))
        shape = self._shapes.get(key)
        self._asked += 1
        if shape is None:
            self._made += 1
            if self._made > SHAPES_TRIED and 2 * self._made > self._asked:
                # a field other than the contents varies from record to record (a name, an id): each shape would be
                # rendered twice to be used once
                self._shapes = False
                return render(chat)
            if len(self._shapes) >= SHAPES:
                self._shapes.clear()
            shape = self._shapes[key] = _Shape.of(chat, render)
        return shape.fill(chat) if shape else render(chat)

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


SHAPES = 4096  # conversation shapes (roles and fields other than the contents) whose rendering is kept
SHAPES_TRIED = 256  # shapes made before rendering by shape stops when most conversations are a shape of their own
_DICT_ATTRS = frozenset(dir(dict))
_LOOP_FIELDS = frozenset({"first", "last", "index", "index0", "revindex", "revindex0", "length"})  # shape-given


def contents_verbatim(env, template: str, kwargs: set[str]) -> bool:
    """Does the template put every message's content into its output verbatim, and nowhere else? Then what it
    renders depends on the contents only by pasting them in: its branches, loops and generation markers see the
    roles and other fields, never a content, so one rendering with placeholders in the contents gives the text of
    every conversation of that shape (``_Shape``). Proven on the template's syntax tree: a content is read only as
    ``message['content']`` (or ``.content``, or ``messages[i]['content']``) inside an output, joined with ``+`` or
    ``~`` alone; a message is read only by key; and nothing but for-loops over ``messages``, ifs, comparisons, tests,
    and the generation markers (whose positions follow from the lengths) is used. Anything else (a filter on a
    content, a test of it, a set, a macro, a call) leaves the template to be rendered every time."""
    from jinja2 import nodes

    try:
        tree = env.parse(template)
    except Exception:
        return False
    allowed = (nodes.Template, nodes.Output, nodes.TemplateData, nodes.Const, nodes.For, nodes.If, nodes.Name,
               nodes.Getitem, nodes.Getattr, nodes.Add, nodes.Concat, nodes.Compare, nodes.Operand, nodes.Not,
               nodes.And, nodes.Or, nodes.CondExpr, nodes.Test, nodes.CallBlock, nodes.Call, nodes.ExtensionAttribute)
    message_names = {n.target.name for n in tree.find_all(nodes.For) if isinstance(n.target, nodes.Name)}
    names = {"messages", "loop", "add_generation_prompt", "raise_exception"} | message_names | kwargs

    def is_message(node) -> bool:
        if isinstance(node, nodes.Name):
            return node.name in message_names
        return (isinstance(node, nodes.Getitem) and isinstance(node.node, nodes.Name) and node.node.name == "messages"
                and isinstance(node.arg, nodes.Const) and type(node.arg.value) is int)

    def field_of(node) -> str | None:  # the key a message is read by (None: not a message read)
        if isinstance(node, nodes.Getitem) and is_message(node.node):
            return node.arg.value if isinstance(node.arg, nodes.Const) and type(node.arg.value) is str else ""
        if isinstance(node, nodes.Getattr) and is_message(node.node):
            return node.attr
        return None

    def walk(node, parents: list) -> bool:
        if not isinstance(node, allowed):
            return False
        parent = parents[-1] if parents else None
        if isinstance(node, nodes.For):
            if not (isinstance(node.iter, nodes.Name) and node.iter.name == "messages" and node.test is None
                    and not node.recursive and isinstance(node.target, nodes.Name)):
                return False
        elif isinstance(node, nodes.CallBlock):
            if not (isinstance(node.call, nodes.Call) and isinstance(node.call.node, nodes.ExtensionAttribute)
                    and node.call.node.name == "_generation_support" and not node.args):
                return False
        elif isinstance(node, nodes.Call):
            generation = isinstance(parent, nodes.CallBlock) and parent.call is node
            raising = (isinstance(node.node, nodes.Name) and node.node.name == "raise_exception"
                       and all(isinstance(a, nodes.Const) for a in node.args) and not node.kwargs)
            if not (generation or raising) or node.dyn_args or node.dyn_kwargs:
                return False
        elif isinstance(node, nodes.Name):
            if node.ctx != "load" and not (isinstance(parent, nodes.For) and parent.target is node):
                return False
            if node.name not in names:
                return False
            if node.name == "messages" and not (isinstance(parent, nodes.For) and parent.iter is node
                                                or is_message(parent)):
                return False
            if node.name in message_names and not (isinstance(parent, nodes.For) and parent.target is node
                                                   or field_of(parent) is not None):
                return False
            if node.name == "loop" and not (isinstance(parent, nodes.Getattr) and parent.attr in _LOOP_FIELDS):
                return False  # loop.previtem['content'] and loop.cycle(...) would read or spread a content
        if isinstance(node, nodes.Getitem) and is_message(node) and field_of(parent) is None:
            return False  # messages[0] itself (its content in it) rather than one of its fields
        key = field_of(node)
        if key == "" or key in _DICT_ATTRS:  # a key not known here; message.get('content'), message.items()
            return False
        if key == "content":  # only pasted into an output
            for above in reversed(parents):
                if isinstance(above, nodes.Output):
                    break
                if not isinstance(above, (nodes.Add, nodes.Concat)):
                    return False
            else:
                return False
        parents.append(node)
        try:
            return all(walk(child, parents) for child in node.iter_child_nodes())
        finally:
            parents.pop()

    return walk(tree, [])


_PLACE = "\ue000{}\ue001"  # a content's placeholder: private-use characters no template writes
_OTHER = "\ue002<{}>\ue003\n"  # the check's placeholders


class _Shape:
    """The rendering of one conversation shape: literal text between the contents' places, which message's content
    goes in each place, and each generation span's ends as (places before it, offset in the placeholder rendering)."""

    __slots__ = ("parts", "slots", "places", "spans")

    def __init__(self, parts, slots, places, spans):
        self.parts, self.slots, self.places, self.spans = parts, slots, places, spans

    @classmethod
    def of(cls, chat: list[dict], render) -> "_Shape | bool":
        """The shape of chat, from one rendering with placeholders, checked by a second with other placeholders;
        False where it cannot be one (a placeholder rendered twice, a generation span ending inside one, the check
        failing): that shape is rendered every time."""
        probe = [{**m, "content": _PLACE.format(i)} if "content" in m else m for i, m in enumerate(chat)]
        text, gen = render(probe)
        found = []
        for i, m in enumerate(probe):
            if "content" in m:
                at = text.find(m["content"])
                if at >= 0:
                    if text.find(m["content"], at + 1) >= 0:
                        return False
                    found.append((at, i))
        found.sort()
        parts, places, at = [], [], 0
        for start, i in found:
            parts.append(text[at:start])
            places.append((start, start + len(probe[i]["content"])))
            at = places[-1][1]
        parts.append(text[at:])
        spans = []
        for span in gen:
            ends = []
            for end in span:
                before = sum(1 for s, e in places if e <= end)
                if any(s < end < e for s, e in places):
                    return False
                ends.append((before, end))
            spans.append(tuple(ends))
        shape = cls(tuple(parts), tuple(i for _, i in found), tuple(e - s for s, e in places), tuple(spans))
        # filled with other placeholders, of other lengths, it must give what the template gives for them (a
        # placeholder found in the template's own text rather than in a content would not)
        other = [{**m, "content": _OTHER.format(i)} if "content" in m else m for i, m in enumerate(chat)]
        text, gen = render(other)
        filled, spans_filled = shape.fill(other)
        return shape if (filled, spans_filled) == (text, [tuple(s) for s in gen]) else False

    def fill(self, chat: list[dict]) -> tuple[str, list]:
        contents = [chat[i]["content"] for i in self.slots]
        pieces = [self.parts[0]]
        for c, part in zip(contents, self.parts[1:]):
            pieces.append(c)
            pieces.append(part)
        if not self.spans:
            return "".join(pieces), []
        grown = list(accumulate((len(c) - n for c, n in zip(contents, self.places)), initial=0))
        return "".join(pieces), [tuple(end + grown[before] for before, end in span) for span in self.spans]


def _refused(exc: Exception) -> RecordProblem:
    return RecordProblem("SPAN007", f"the chat template refused this conversation: "
                         f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
