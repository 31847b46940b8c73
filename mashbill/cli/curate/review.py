"""`mashbill review serve|stop|status|push|pull`: human review of stored records in Argilla."""

from __future__ import annotations

from pathlib import Path

import click

from mashbill.cli._common import Group, console, echo_json, json_option, store_option

home_option = click.option(
    "--home", type=click.Path(file_okay=False, path_type=Path), default=None, envvar="MASHBILL_REVIEW_HOME",
    show_envvar=True, help="State folder of the embedded server (database, credentials, log) "
                           "[default: ./mashbill-data/review-server].")
port_option = click.option("--port", type=int, default=None, envvar="MASHBILL_REVIEW_PORT", show_envvar=True,
                           help="Port of the embedded server to start [default: 6900].")
workspace_option = click.option("--workspace", default=None, envvar="ARGILLA_WORKSPACE", show_envvar=True,
                                help="Argilla workspace [default: mashbill].")


def server_options(f):
    """Another Argilla deployment (else the embedded server started from --home)."""
    f = click.option("--api-key", envvar="ARGILLA_API_KEY", show_envvar=True, default=None,
                     help="Its API key (an owner or admin key; prefer the variable: never printed).")(f)
    return click.option("--api-url", envvar="ARGILLA_API_URL", show_envvar=True, default=None,
                        help="Another Argilla deployment's URL (push/pull talk to it, not the embedded server).")(f)


@click.group(cls=Group)
def command() -> None:
    """Human review in Argilla: push records that need eyes, pull decisions back into the store.

    \b
    Examples:
      mashbill review serve                      # embedded argilla-server on 127.0.0.1:6900
      mashbill review push plan-moe --select flagged
      mashbill review pull plan-moe
      mashbill review stop
    \b
    Another Argilla deployment: set ARGILLA_API_URL and ARGILLA_API_KEY (an owner or admin key;
    or --api-url/--api-key) and push/pull talk to it instead.
    """


@command.command()
@port_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--build-only", is_flag=True, help="Only build (or find) the server's virtual environment; start nothing.")
@home_option
@json_option(help='Print {"url", "pid", "home", "log", "credentials", "already_running"} (with --build-only '
                  '{"venv"}) as JSON.')
def serve(port, host, build_only, home, as_json):
    """Start the embedded Argilla server in the background (SQLite, no Docker, no Elasticsearch).

    The first start builds the server's own virtual environment (about a minute, cached in
    ~/.cache/mashbill). Users: an owner (used by push/pull) and an annotator; their passwords and
    API keys are in HOME/credentials.json and are never printed.

    \b
    Example:  mashbill review serve --port 6900
    """
    from mashbill.curation.review import local

    if build_only:
        venv = local.ensure_venv(lambda msg: console.print(f'[dim]{msg}[/dim]'))
        if as_json:
            echo_json({"venv": str(venv)})
        else:
            click.echo(f"argilla-server environment: {venv}")
        return
    info = local.start(home, port=port, host=host, progress=lambda msg: console.print(f"[dim]{msg}[/dim]"))
    if as_json:
        echo_json({"url": info.url, "pid": info.pid, "home": str(info.home), "log": str(info.log),
                   "credentials": str(info.credentials), "already_running": info.already_running})
        return
    creds = local.read_credentials(info.home)
    state = "already running" if info.already_running else "started"
    click.echo(f"argilla-server {state}: {info.url}  (pid {info.pid})")
    click.echo(f"  log:          {info.log}")
    click.echo(f"  credentials:  {info.credentials}  (owner '{creds['owner']['username']}', annotator "
               f"'{creds['annotator']['username']}'; passwords and API keys inside, mode 600)")
    click.echo(f"  stop with:    mashbill review stop{'' if home is None else f' --home {home}'}")


@command.command()
@home_option
@json_option(help='Print {"stopped": PID or null, "home"} as JSON.')
def stop(home, as_json):
    """Stop the server that `review serve` started (only that process, found by its pid file)."""
    from mashbill.curation.review import local

    pid = local.stop(home)
    if as_json:
        echo_json({"stopped": pid, "home": str(Path(home or local.DEFAULT_HOME).resolve())})
        return
    if pid is None:
        click.echo(f"no running server started from {Path(home or local.DEFAULT_HOME).resolve()}")
    else:
        click.echo(f"stopped argilla-server (pid {pid})")


@command.command()
@home_option
@server_options
@json_option(help='Print {"api_url", "embedded"} as JSON (embedded: null when not running).')
def status(home, api_url, api_key, as_json):
    """Show where push/pull would go and whether the embedded server is running."""
    from mashbill.curation.review import local

    state = local.running_server(Path(home or local.DEFAULT_HOME).resolve())
    if as_json:
        echo_json({"api_url": api_url or None, "embedded": state})
        return
    if api_url:
        click.echo(f"ARGILLA_API_URL: {api_url} (push/pull use it)")
    if state is None:
        click.echo("embedded server: not running")
    else:
        click.echo(f"embedded server: {state['url']} (pid {state['pid']}, home {state['home']})")


def _connect(home, workspace, api_url, api_key, serve: bool = False, port: int | None = None):
    from mashbill.curation.review import local
    from mashbill.curation.review.client import ArgillaReview, resolve_connection

    if serve and not api_url and local.running_server(Path(home or local.DEFAULT_HOME).resolve()) is None:
        info = local.start(home, port=port, progress=lambda msg: console.print(f"[dim]{msg}[/dim]"))
        click.echo(f"argilla-server started: {info.url} (credentials: {info.credentials}; stop with "
                   f"`mashbill review stop{'' if home is None else f' --home {home}'}`)")
    return ArgillaReview.connect(resolve_connection(home, workspace, url=api_url, api_key=api_key))


@command.command()
@click.argument("spec")
@click.option("--select", "selection", default="flagged", show_default=True,
              help="flagged | label-issues | low-confidence[:T] | random:N | all")
@click.option("--min-submitted", type=int, default=1, show_default=True,
              help="Reviewers per record before Argilla counts it complete (for a new dataset).")
@click.option("--serve", is_flag=True,
              help="Start the embedded server first when none is running (and ARGILLA_API_URL is not set).")
@port_option
@store_option
@home_option
@workspace_option
@server_options
@json_option(help="Print the push summary as JSON.")
def push(spec, selection, min_submitted, serve, port, store_path, home, workspace, api_url, api_key, as_json):
    """Send SPEC's stored records to its Argilla dataset (NAME@VERSION) for review.

    Records are upserted by their Mashbill id, so pushing again adds nothing twice and an
    interrupted push completes when re-run. The store is only read.

    \b
    Examples:
      mashbill review push plan-moe --select random:50 --store ./mashbill-data
      mashbill review push quickstart-plan --select all --serve   # quick start: server + push in one go
    """
    from mashbill.curation.review.push import push as do_push
    from mashbill.curation.review.select import parse_selection
    from mashbill.factory.store import Store
    from mashbill.specs import find_spec, load_spec

    rs = load_spec(find_spec(spec))
    mode, arg = parse_selection(selection)
    client = _connect(home, workspace, api_url, api_key, serve=serve, port=port)
    with Store.open(store_path, read_only=True) as store:
        summary = do_push(rs, store, client, selection=mode, arg=arg, min_submitted=min_submitted,
                          on_batch=lambda done, total: console.print(f"[dim]pushed {done}/{total}[/dim]"))
    if as_json:
        echo_json(summary.as_dict())
        return
    if not summary.selected:
        click.echo(f"nothing to push: {summary.candidates} record(s) of {rs.spec.ref} in {store_path}, none selected "
                   f"by --select {selection}")
        return
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(summary.by_status.items()))
    holds = f"; it holds {summary.total_in_dataset} record(s)" if summary.total_in_dataset is not None else ""
    click.echo(f"pushed {summary.pushed} record(s) ({statuses}) to dataset '{summary.dataset}'"
               f"{' (created)' if summary.created else ''} on {summary.url}{holds}")
    click.echo(f"annotate at {summary.url}/dataset/{summary.dataset_id}/annotation-mode")


@command.command()
@click.argument("spec")
@store_option
@home_option
@workspace_option
@server_options
@json_option(help="Print the pull summary as JSON.")
def pull(spec, store_path, home, workspace, api_url, api_key, as_json):
    """Store every reviewer response of SPEC's dataset as decisions (table review_decisions).

    Corrections are re-validated (JSON, output schema, routing rules); invalid ones are stored
    flagged (correction_valid false) and not used by `snapshot freeze`. Pulling again replaces each
    reviewer's earlier row, so it is idempotent.

    \b
    Example:  mashbill review pull plan-moe --store ./mashbill-data
    """
    from mashbill.curation.review.pull import pull as do_pull
    from mashbill.factory.store import Store
    from mashbill.specs import find_spec, load_spec

    rs = load_spec(find_spec(spec))
    client = _connect(home, workspace, api_url, api_key)
    with Store.open(store_path, create=False) as store:
        summary = do_pull(rs, store, client)
    if as_json:
        echo_json(summary.as_dict())
        return
    click.echo(f"pulled {summary.responses} response(s) from '{summary.dataset}' on {summary.url}: stored "
               f"{summary.stored} ({summary.replaced} replaced earlier pulls); "
               f"{summary.records_in_dataset - summary.unanswered} of {summary.records_in_dataset} record(s) answered")
    click.echo("  status:    " + (", ".join(f"{k} {v}" for k, v in sorted(summary.by_status.items())) or "none"))
    click.echo("  decisions: " + (", ".join(f"{k} {v}" for k, v in sorted(summary.decisions.items())) or "none"))
    click.echo(f"  corrections: {summary.corrections_valid} valid, {len(summary.corrections_invalid)} invalid "
               "(flagged, not used)")
    for bad in summary.corrections_invalid[:20]:
        click.echo(f"    invalid correction {bad['record_id'][:16]} by {bad['reviewer']}: {', '.join(bad['codes'])}")
    if summary.orphans:
        click.echo(f"  skipped {len(summary.orphans)} response(s) to record(s) no longer in the store "
                   f"{store_path} (they stay in Argilla): " +
                   ", ".join(o["record_id"][:16] for o in summary.orphans[:10]))
    if summary.disagreements:
        click.echo(f"  reviewers disagree on {len(summary.disagreements)} record(s):")
        for d in summary.disagreements[:20]:
            votes = ", ".join(f"{r}: {v or '-'}" for r, v in d["decisions"].items())
            extra = " (different corrections)" if d["corrections_differ"] else ""
            click.echo(f"    {d['record_id'][:16]}  {votes}{extra}")
