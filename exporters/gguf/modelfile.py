"""An Ollama Modelfile for an exported GGUF: its chat template in Ollama's Go-template form and its stop tokens.

The family is read from the GGUF's own `tokenizer.chat_template` (ChatML for SmolLM2 and Qwen, Llama 3's
header tokens), and the stop tokens are the template's end-of-turn token plus the file's EOS token, so Ollama
stops where llama.cpp does. The training system prompt, when the export stored one, becomes SYSTEM.
Ollama takes the output schema per request (`"format": <schema>`), not in the Modelfile.
"""

from __future__ import annotations

from pathlib import Path

from mashbill.exporters.runs import ExportError

FAMILIES = {
    # name: (marker in the HF chat template, Ollama TEMPLATE, end-of-turn stop token)
    "chatml": ("<|im_start|>",
               "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"
               "<|im_start|>assistant\n",
               "<|im_end|>"),
    "llama3": ("<|start_header_id|>",
               "<|begin_of_text|>{{- range .Messages }}<|start_header_id|>{{ .Role }}<|end_header_id|>\n\n"
               "{{ .Content }}<|eot_id|>{{ end }}<|start_header_id|>assistant<|end_header_id|>\n\n",
               "<|eot_id|>"),
}


def family_of(chat_template: str | None) -> str:
    for name, (marker, _, _) in FAMILIES.items():
        if chat_template and marker in chat_template:
            return name
    raise ExportError("no Ollama template for this model's chat template (known families: "
                      f"{', '.join(FAMILIES)}); the GGUF's tokenizer.chat_template is "
                      f"{'missing' if not chat_template else repr(chat_template[:60])}")


def _quote(text: str) -> str:
    if '"""' in text:
        raise ExportError('the system prompt contains """, which a Modelfile cannot quote')
    return f'"""{text}"""'


def modelfile(gguf_path: Path, *, system: str | None = None, temperature: float = 0.0) -> str:
    from mashbill.exporters.gguf.gguf_meta import read_kv

    kv = read_kv(gguf_path, arrays=True)
    fam = family_of(kv.get("tokenizer.chat_template"))
    _, template, eot = FAMILIES[fam]
    stops = [eot]
    tokens = kv.get("tokenizer.ggml.tokens") or []
    eos_id = kv.get("tokenizer.ggml.eos_token_id")
    if eos_id is not None and eos_id < len(tokens) and tokens[eos_id] not in stops:
        stops.append(tokens[eos_id])
    system = system if system is not None else kv.get("mashbill.system_prompt")
    lines = [f"# Ollama Modelfile written by mashbill ({fam} chat format). Usage:",
             f"#   ollama create NAME -f Modelfile && ollama run NAME",
             f"FROM ./{gguf_path.name}", f"TEMPLATE {_quote(template)}"]
    if system:
        lines.append(f"SYSTEM {_quote(system)}")
    lines += [f'PARAMETER stop "{s}"' for s in stops]
    lines.append(f"PARAMETER temperature {temperature:g}")
    return "\n".join(lines) + "\n"
