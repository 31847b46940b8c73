"""A planner output seen the way the orchestrator's runtime sees it: tasks, stable ids, canonical categories."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PlanTask:
    index: int
    raw: Any  # the task as written (a dict for a well-formed task)
    id: str  # the planner's id if unique, else "task-<n>" (the runtime's assign_stable_task_ids)
    category: str | None  # as written
    canonical: str | None  # the canonical name behind a renamed category

    @property
    def is_dict(self) -> bool:
        return isinstance(self.raw, dict)

    def get(self, key: str, default=None):
        return self.raw.get(key, default) if isinstance(self.raw, dict) else default

    @property
    def depends_on(self) -> list[str]:
        dep = self.get("depends_on")
        if dep is None:
            return []
        if isinstance(dep, str):
            return [dep] if dep.strip() else []
        if isinstance(dep, list):
            return [d for d in dep if isinstance(d, str)]
        return []


@dataclass(frozen=True)
class Plan:
    tasks: tuple[PlanTask, ...]
    shape: str  # "array" | "wrapper" | "single" | "invalid"
    duplicate_ids: tuple[str, ...] = ()
    problem: str | None = None

    def by_id(self) -> dict[str, PlanTask]:
        return {t.id: t for t in self.tasks}

    def with_category(self, *canonical: str) -> list[PlanTask]:
        return [t for t in self.tasks if t.canonical in canonical]

    def cyclic_ids(self) -> list[str]:
        """The ids a dependency cycle keeps from ever running (Kahn's algorithm over the resolvable edges), sorted."""
        ids = self.by_id()
        indeg = {i: 0 for i in ids}
        edges: dict[str, list[str]] = {i: [] for i in ids}
        for t in self.tasks:
            for d in t.depends_on:
                if d in ids and d != t.id:
                    edges[d].append(t.id)
                    indeg[t.id] += 1
        queue = [i for i, n in indeg.items() if n == 0]
        while queue:
            for j in edges[queue.pop()]:
                indeg[j] -= 1
                if indeg[j] == 0:
                    queue.append(j)
        return sorted(i for i, n in indeg.items() if n > 0)

    def depends_transitively(self, task: PlanTask, target: PlanTask) -> bool:
        """Does task (directly or through others) depend on target?"""
        ids = self.by_id()
        seen, stack = set(), list(task.depends_on)
        while stack:
            d = stack.pop()
            if d == target.id:
                return True
            if d in seen or d not in ids:
                continue
            seen.add(d)
            stack.extend(ids[d].depends_on)
        return False


@dataclass(frozen=True)
class Shown:
    """The category names shown for one record, and the canonical name behind each renamed one."""

    names: frozenset[str] | None  # None: unknown, category checks are skipped
    renamed: dict[str, str] = field(default_factory=dict)

    def canonical(self, name: str | None) -> str | None:
        if name is None:
            return None
        return self.renamed.get(name, name)

    def shows(self, canonical: str) -> bool:
        """Is this canonical category available (under its own or a renamed name)?"""
        if self.names is None:
            return True
        return canonical in self.names or any(c == canonical and n in self.names for n, c in self.renamed.items())


def parse_plan(output: Any, shown: Shown) -> Plan:
    """Accept the shapes the runtime accepts (a bare array, a {"tasks": [...]} wrapper, a single task object).
    Field aliases are not applied: a training target must use the contract's own keys."""
    if isinstance(output, list):
        items, shape = output, "array"
    elif isinstance(output, dict) and isinstance(output.get("tasks"), list):
        items, shape = output["tasks"], "wrapper"
    elif isinstance(output, dict) and ("task" in output or "category" in output):
        items, shape = [output], "single"
    else:
        return Plan((), "invalid", problem=f"expected a JSON array of task objects, found {type(output).__name__}")
    written = [t.get("id") if isinstance(t, dict) else None for t in items]
    counts: dict[str, int] = {}
    for w in written:
        if isinstance(w, str) and w:
            counts[w] = counts.get(w, 0) + 1
    dupes = tuple(sorted(w for w, n in counts.items() if n > 1))
    tasks = []
    for i, t in enumerate(items):
        w = written[i]
        tid = w if isinstance(w, str) and w and counts.get(w) == 1 else f"task-{i + 1}"
        cat = t.get("category") if isinstance(t, dict) and isinstance(t.get("category"), str) else None
        tasks.append(PlanTask(i, t, tid, cat, shown.canonical(cat)))
    return Plan(tuple(tasks), shape, dupes)
