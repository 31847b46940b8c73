"""The expert taxonomy, and the per-record variation the student must learn to cope with."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from mashbill.specs.model import TaxonomyFile


@dataclass(frozen=True)
class ShownTaxonomy:
    """The taxonomy actually shown for one record: validators check categories against `names`."""

    block: str
    llm_categories: tuple[str, ...]
    structural: tuple[str, ...]
    renamed: dict[str, str] = field(default_factory=dict)  # shown name -> canonical name

    @property
    def names(self) -> tuple[str, ...]:
        return self.llm_categories + self.structural


def _render(taxonomy: TaxonomyFile, entries: list[tuple[str, str]]) -> str:
    col = taxonomy.variation.column
    lines = [f"- {name.ljust(col)}{desc}" for name, desc in entries]
    for name, cat in taxonomy.structural.items():
        needs = f" (requires {', '.join(cat.requires)})" if cat.requires else ""
        lines.append(f"- {name.ljust(col)}{cat.description}{needs}")
    return "\n".join(lines)


def fixed_taxonomy(taxonomy: TaxonomyFile) -> ShownTaxonomy:
    entries = list(taxonomy.categories.items())
    return ShownTaxonomy(_render(taxonomy, entries), tuple(n for n, _ in entries), tuple(taxonomy.structural))


def sample_taxonomy(taxonomy: TaxonomyFile, rng: random.Random) -> ShownTaxonomy:
    """Rename, add novel categories, shuffle and keep a random subset; structural ones always stay."""
    v = taxonomy.variation
    pool: list[tuple[str, str]] = []
    renamed: dict[str, str] = {}
    for name, desc in taxonomy.categories.items():
        alternatives = v.renames.get(name)
        if alternatives and name not in v.never_rename and rng.random() < v.rename_probability:
            new = rng.choice(alternatives)
            renamed[new] = name
            pool.append((new, desc))
        else:
            pool.append((name, desc))
    for name, desc in v.novel.items():
        if rng.random() < v.novel_probability:
            pool.append((name, desc))
    rng.shuffle(pool)
    keep = rng.randint(min(v.min_llm_categories, len(pool)), len(pool))
    kept = pool[:keep]
    if "general" in taxonomy.categories and all(n != "general" for n, _ in kept):
        if rng.random() < v.general_keep_probability:
            kept[-1] = ("general", taxonomy.categories["general"])
    kept_renamed = {n: c for n, c in renamed.items() if any(n == k for k, _ in kept)}
    return ShownTaxonomy(_render(taxonomy, kept), tuple(n for n, _ in kept), tuple(taxonomy.structural), kept_renamed)
