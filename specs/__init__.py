"""Versioned, content-hashed dataset specs (the mash bill) and the shared files they reference.

- ``catalog``: Rendering the precision-tool catalog into prompt text.
- ``examples``: Example banks: verified examples a spec shows its teacher in place of one fixed worked ...
- ``holdout``: A spec's holdout set and what "the same query" means (dedup, leakage, retrieved examples).
- ``loader``: Load a spec, resolve every file it references, validate them, and compute its content hash.
- ``lock``: specs.lock: name@version -> content hash.
- ``model``: Typed models of specs and the shared files they reference.
- ``prompting``: Render the teacher's prompt and the stored training example for one seed input.
- ``router``: Router dataset recipes: how outcome, transition and triplet snapshots are made ...
- ``taxonomy``: The expert taxonomy, and the per-record variation the student must learn to cope with.
- ``yamlio``: Safe YAML loading that remembers the line of every key, so errors can name it.
"""

from mashbill.specs.loader import LIBRARY, ResolvedSpec, find_spec, find_spec_files, load_spec
from mashbill.specs.prompting import RenderedPrompt, render_prompt

__all__ = ["LIBRARY", "ResolvedSpec", "RenderedPrompt", "find_spec", "find_spec_files",
           "load_spec", "render_prompt"]
