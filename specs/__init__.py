"""Versioned, content-hashed dataset specs (the mash bill) and the shared files they reference."""

from mashbill.specs.loader import LIBRARY, ResolvedSpec, find_spec, find_spec_files, load_spec
from mashbill.specs.prompting import RenderedPrompt, render_prompt

__all__ = ["LIBRARY", "ResolvedSpec", "RenderedPrompt", "find_spec", "find_spec_files",
           "load_spec", "render_prompt"]
