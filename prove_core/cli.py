"""The ``prove`` command line.

Every listing command takes ``--json``. A user error (bad config, unknown server, malformed
arguments) prints one ``error: ...`` line on stderr and exits 1. Nothing here imports torch:
heavy components are registered lazily and imported only by the stage that runs them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from prove_core import logging as prove_logging
from prove_core.errors import ProveError
from prove_core.plugin.registry import noun


def _plugins() -> Any:
    from prove_core.plugin.manager import get_plugins

    return get_plugins()


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False))


def _fit(text: str, width: int) -> str:
    """``text`` cut at a word boundary to ``width`` characters with an ellipsis (never mid-word)."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    cut = text[: width - 1].rsplit(" ", 1)[0].rstrip(" ,;:(-")
    return cut + "…"


def _last_column(rows: list[list[str]], header: list[str]) -> list[list[str]]:
    """``rows`` whose last (free text) column fits the terminal, cut between words; whole when
    stdout is not a terminal (a pipe or a file gets every word)."""
    import shutil

    if not sys.stdout.isatty():
        return rows
    used = sum(max(len(str(r[i])) for r in [header, *rows]) + 2 for i in range(len(header) - 1))
    width = max(30, shutil.get_terminal_size().columns - used)
    return [[*row[:-1], _fit(row[-1], width)] for row in rows]


def _table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        click.echo("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--log-json", is_flag=True, help="Log one JSON object per line (for log shippers).")
@click.option("--log-level", default="warning", show_default=True, help="debug, info, warning or error.")
@click.version_option(package_name="prove", prog_name="prove")
def cli(log_json: bool, log_level: str) -> None:
    """PROVE: train and evaluate tool-using models on live, stateful MCP servers."""
    try:
        prove_logging.configure(json=log_json, level=log_level)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--log-level") from None


def _set_option(command: Any) -> Any:
    return click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                        help="Override one config setting by its dotted path, e.g. --set synth.examples=50 "
                             "or --set reward.components[0].weight=0.3 (VALUE is read as TOML; repeatable).")(command)


def _checked(config: str | None, overrides: tuple[str, ...], run: list[str], plugins: Any) -> Any:
    """The experiment of CONFIG with the overrides applied, after the validation pass over the
    whole of it (``prove_core.stages.check_experiment``) for a command that runs ``run``."""
    from prove_core.config import load_experiment
    from prove_core.stages import check_experiment

    experiment = load_experiment(config, overrides)
    check_experiment(experiment, plugins, run=run)
    return experiment


@cli.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def plugins_cmd(as_json: bool) -> None:
    """List every registered component: name, kind and providing distribution."""
    plugins = _plugins()
    comps = plugins.registry.components()
    if as_json:
        _echo_json({
            "components": [
                {"name": c.name, "kind": noun(c.kind), "plugin": c.plugin, "distribution": c.distribution, "summary": c.summary}
                for c in comps
            ],
            "failures": [{"plugin": f.plugin, "distribution": f.distribution, "error": f.error} for f in plugins.failures],
        })
        return
    header = ["kind", "name", "distribution", "summary"]
    _table(_last_column([[noun(c.kind), c.name, c.distribution, c.summary] for c in comps], header), header)
    for f in plugins.failures:
        click.echo(f"failed to load plugin {f.plugin} ({f.distribution}): {f.error}", err=True)


@cli.group("servers")
def servers_cmd() -> None:
    """Inspect and call the registered tool servers."""


def _server(name: str) -> Any:
    return _plugins().registry.load("servers", name)


@servers_cmd.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def servers_list(as_json: bool) -> None:
    """Each server: name, domain and number of tools."""
    registry = _plugins().registry
    rows = []
    for comp in registry.components("servers"):
        server = registry.load("servers", comp.name)
        rows.append({"name": server.name, "domain": server.domain, "tools": len(server.tools), "distribution": comp.distribution})
    if as_json:
        _echo_json(rows)
        return
    _table([[r["name"], r["domain"], str(r["tools"]), r["distribution"]] for r in rows],
           ["name", "domain", "tools", "distribution"])
    click.echo(f"{len(rows)} servers, {sum(r['tools'] for r in rows)} tools")


@servers_cmd.command("tools")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the tools in OpenAI function format.")
def servers_tools(name: str, as_json: bool) -> None:
    """The tools of server NAME (OpenAI function format with --json)."""
    server = _server(name)
    if as_json:
        _echo_json([spec.to_openai() for spec in server.specs()])
        return
    rows = []
    for spec in server.specs():
        a = spec.annotations
        flags = "read-only" if a.read_only else ("destructive" if a.destructive else "write")
        rows.append([spec.name, flags, spec.description.split("\n")[0]])
    _table(_last_column(rows, ["tool", "kind", "description"]), ["tool", "kind", "description"])


@servers_cmd.command("catalog")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write to this file instead of stdout.")
def servers_catalog(out: str | None) -> None:
    """Every server, tool, parameter and failure reason as markdown (docs/catalog.md)."""
    from prove_core.env.catalog import render

    registry = _plugins().registry
    text = render([registry.load("servers", name) for name in registry.names("servers")])
    if out:
        with open(out, "w") as fh:
            fh.write(text)
        click.echo(f"wrote {out}", err=True)
    else:
        click.echo(text, nl=False)


@servers_cmd.command("call")
@click.argument("name")
@click.argument("tool")
@click.option("--args", "args_json", default="{}", show_default=True, help="Tool arguments as a JSON object.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the fresh session.")
def servers_call(name: str, tool: str, args_json: str, seed: int) -> None:
    """Call TOOL of server NAME once on a fresh session and print the result as JSON.

    Exits 1 with the typed error ({code, reason, message}) when the call fails.
    """
    from prove_core.env.runtime import build_runtime

    try:
        args = json.loads(args_json)
    except json.JSONDecodeError as exc:
        raise ProveError(f"--args is not valid JSON: {exc}") from None
    runtime = build_runtime(_server(name), seed=seed)
    result = runtime.call(runtime.new_session(), tool, args)
    _echo_json(result.structured)
    if result.is_error:
        sys.exit(1)


@cli.command("serve")
@click.argument("names", nargs=-1, required=True, metavar="SERVER[:TOOL,...]...")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option("--port", default=8000, show_default=True, type=int, help="HTTP port (1-65535).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of every new session.")
@click.option("--token", envvar="PROVE_TOKEN", default=None,
              help="Require this bearer token on HTTP (env PROVE_TOKEN; refused with stdio).")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="HOST[:PORT]",
              help="HTTP: also accept this Host header (loopback names always are; * accepts any). Repeatable.")
@click.option("--allow-origin", "allow_origins", multiple=True, metavar="ORIGIN",
              help="HTTP: also accept browser requests from this Origin, e.g. https://app.example.com. Repeatable.")
@click.option("--ttl", default=3600.0, show_default=True, type=float, help="Idle seconds before a session expires.")
@click.option("--max-sessions", default=100_000, show_default=True, type=int,
              help="Live sessions kept at most; past it a new session gets RESOURCE_EXHAUSTED.")
@click.option("--evict-lru", is_flag=True, help="At --max-sessions evict the least recently used session instead.")
@click.option("--recreate-expired", is_flag=True,
              help="Restart an expired or evicted session id from the seed instead of answering SESSION_EXPIRED "
                   "(its state is lost without a word).")
@click.option("--call-timeout", default=30.0, show_default=True, type=float,
              help="Seconds a tool call may run; past it the call gets DEADLINE_EXCEEDED and changes nothing (0: no limit).")
@click.option("--plain-http", is_flag=True,
              help="HTTP: every request through fastmcp's own pipeline with SSE replies (no JSON replies, no "
                   "tools/call fast lane): the speed baseline, or to rule the fast lane out.")
@click.option("--workers", default=1, show_default=True, type=int,
              help="HTTP: run this many prove serve processes behind nginx (which must be installed); every "
                   "request of a session reaches the process holding it, however the session is named (docs/serving.md).")
@click.option("--header-timeout", default=10.0, show_default=True, type=float,
              help="HTTP: seconds a client may take to send a request's headers (then the connection is closed).")
@click.option("--body-timeout", default=30.0, show_default=True, type=float,
              help="HTTP: seconds a client may pause while sending a request's body (then 408).")
@click.option("--max-connections", default=1024, show_default=True, type=int,
              help="HTTP: open client connections at most (past it a request gets 503).")
@click.pass_context
def serve_cmd(ctx: click.Context, names: tuple[str, ...], transport: str, host: str, port: int, seed: int,
              token: str | None, allow_hosts: tuple[str, ...], allow_origins: tuple[str, ...], ttl: float,
              max_sessions: int, evict_lru: bool, recreate_expired: bool, call_timeout: float, plain_http: bool,
              workers: int, header_timeout: float, body_timeout: float, max_connections: int) -> None:
    """Serve one or more servers over MCP. Several are mounted with <server>_ prefixes;
    SERVER:TOOL,TOOL publishes only those tools of SERVER.

    Send the session id in the request's _meta.session_id (or the X-Prove-Session header over
    HTTP); calls without one share the 'default' session. A new id opens a fresh session; the id of
    a session that expired or was evicted gets SESSION_EXPIRED (unless --recreate-expired), a
    closed one SESSION_CLOSED. SIGTERM, SIGINT and SIGHUP stop the server (with --workers: nginx
    and every worker).
    """
    import math

    from prove_core.config import SessionsConfig
    from prove_core.env.runtime import build_runtime
    from prove_core.errors import ConfigError
    from prove_core.serve.app import HostGuard, HttpLimits, parse_mount, published_tools, serve
    from prove_core.serve.fleet import port_free

    mounts = dict(parse_mount(arg) for arg in names)
    if len(mounts) != len(names):
        raise ProveError("a server is named twice")
    if not 1 <= port <= 65535:
        raise ProveError(f"--port must be in 1..65535, got {port}")
    if not (math.isfinite(ttl) and ttl > 0):
        raise ProveError(f"--ttl must be a number of seconds above 0, got {ttl:g}")
    if max_sessions < 1:
        raise ProveError(f"--max-sessions must be at least 1, got {max_sessions}")
    if workers < 1:
        raise ProveError(f"--workers must be at least 1, got {workers}")
    if not (math.isfinite(call_timeout) and call_timeout >= 0):
        raise ProveError(f"--call-timeout must be a number of seconds above 0 (or 0: no limit), got {call_timeout:g}")
    if transport == "stdio":
        if token and ctx.get_parameter_source("token") != click.core.ParameterSource.ENVIRONMENT:
            raise ProveError("--token applies to --transport http only: stdio is a private pipe to the process that "
                             "started the server, and has no requests to authenticate")
        if token:
            click.echo("warning: PROVE_TOKEN is set but ignored: stdio has no requests to authenticate", err=True)
            token = None
        if allow_hosts or allow_origins or plain_http or workers != 1:
            raise ProveError("--allow-host, --allow-origin, --plain-http and --workers apply to --transport http only")
    try:
        limits = HttpLimits(header_timeout_s=header_timeout, body_timeout_s=body_timeout,
                            max_connections=max_connections)
    except ConfigError as exc:
        raise ProveError(str(exc).replace("header_timeout_s", "--header-timeout").replace(
            "body_timeout_s", "--body-timeout").replace("max_connections", "--max-connections")) from None
    sessions = SessionsConfig(ttl_s=ttl, max_sessions=max_sessions, call_timeout_s=call_timeout or None,
                              evict_lru=evict_lru, recreate_expired=recreate_expired)
    runtimes = [build_runtime(_server(n), seed=seed, sessions=sessions) for n in mounts]
    published_tools(runtimes, mounts)  # unknown tool names, colliding prefixed names: refused before serving
    HostGuard(None, allowed_hosts=allow_hosts, allowed_origins=allow_origins)  # malformed entries: likewise
    busy = port_free(host, port) if transport == "http" else None
    if busy is not None:  # before anything says "serving"
        raise ProveError(busy)
    if transport == "http" and workers > 1:
        from prove_core.serve.fleet import WILDCARD_HOSTS

        _serve_fleet(names, workers=workers, host=host, port=port, token=token, limits=limits, args=[
            "--header-timeout", str(header_timeout), "--body-timeout", str(body_timeout),
            "--max-connections", str(max_connections),
            "--seed", str(seed), "--ttl", str(ttl), "--max-sessions", str(max_sessions), "--call-timeout",
            str(call_timeout), *(["--evict-lru"] if evict_lru else []), *(["--recreate-expired"] if recreate_expired else []),
            *(["--plain-http"] if plain_http else []), *[f"--allow-host={h}" for h in allow_hosts],
            *[f"--allow-origin={o}" for o in allow_origins], *([f"--allow-host={host}"] if host not in WILDCARD_HOSTS else [])])
        return
    if transport == "http":
        click.echo(f"serving {', '.join(mounts)} on http://{host}:{port}/mcp", err=True)
    serve(runtimes, transport=transport, host=host, port=port, token=token, allowed_hosts=allow_hosts,
          allowed_origins=allow_origins, tools=mounts, plain_http=plain_http, limits=limits)


@cli.group("openenv")
def openenv_cmd() -> None:
    """Serve PROVE tasks as OpenEnv environments (needs openenv-core: pip install 'prove[openenv]')."""


@openenv_cmd.command("serve")
@click.argument("names", nargs=-1, required=True, metavar="SERVER...")
@click.option("--corpus", default=None, type=click.Path(dir_okay=False),
              help="Synthesis corpus (corpus.jsonl): reset(task_id=...) plays its tasks; a reset without one samples one.")
@click.option("--config", "config", default=None, type=click.Path(dir_okay=False),
              help="Experiment TOML: its [reward], [sessions] and its servers' seed options (default: the defaults).")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option("--port", default=8000, show_default=True, type=int, help="HTTP port (1-65535).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of free-play episodes (no corpus, no task).")
@click.option("--max-envs", default=64, show_default=True, type=int, help="Concurrent episodes (WebSocket sessions) at most.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="HOST[:PORT]",
              help="Also accept this Host header (loopback names always are; * accepts any). Repeatable.")
def openenv_serve(names: tuple[str, ...], corpus: str | None, config: str | None, host: str, port: int, seed: int,
                  max_envs: int, allow_hosts: tuple[str, ...]) -> None:
    """Serve SERVER... as an OpenEnv environment: reset opens a fresh session on a task (or free
    play at --seed), step takes MCP tool calls, the episode's end carries the PROVE reward.

    OpenEnv's clients connect to http://HOST:PORT (WebSocket /ws; HTTP /reset, /step, /state,
    /schema, /health). A task whose servers no longer match its record fails reset with TASK_DRIFT.
    """
    if not 1 <= port <= 65535:
        raise ProveError(f"--port must be in 1..65535, got {port}")
    if max_envs < 1:
        raise ProveError(f"--max-envs must be at least 1, got {max_envs}")
    try:  # the bundled OpenEnv adapter (the one command the core takes from prove_plugins: test_seams)
        from prove_plugins.integrations.openenv_server import build, serve
    except ImportError as exc:
        raise ProveError(f"OpenEnv is not installed ({exc}): pip install 'prove[openenv]'") from None
    served = build(list(names), corpus=corpus, config=config, seed=seed, plugins=_plugins())
    tasks = f", {len(served.examples)} tasks from {corpus}" if corpus else ", free play"
    click.echo(f"serving {', '.join(names)} as an OpenEnv environment on http://{host}:{port}{tasks}", err=True)
    serve(served, host=host, port=port, max_concurrent_envs=max_envs, allowed_hosts=allow_hosts)


class _Stop(Exception):
    """SIGTERM or SIGHUP reached ``prove serve --workers``: stop the deployment."""


def _serve_fleet(names: tuple[str, ...], *, workers: int, host: str, port: int, token: str | None,
                 limits: Any, args: list[str]) -> None:
    """``prove serve --workers N``: N workers behind nginx until SIGINT, SIGTERM or SIGHUP (each
    stops nginx and every worker) or nginx stops; a worker that dies is restarted empty."""
    import signal

    from prove_core.serve.fleet import Fleet

    def stop(signum: int, _frame: Any) -> None:
        raise _Stop(signal.Signals(signum).name)

    # SIGINT too: a process started in the background (a shell's `&`, a service manager, a caller
    # that ignores SIGINT) inherits it ignored, and Python then never raises KeyboardInterrupt;
    # a caller's thread may also have passed the signals on blocked
    stopping = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    before = {signum: signal.getsignal(signum) for signum in stopping}
    for signum in stopping:
        signal.signal(signum, stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stopping)  # nor may they arrive blocked (an inherited mask)
    fleet = Fleet([*names, *args], workers=workers, host=host, port=port, env={"PROVE_TOKEN": token} if token else None,
                  header_timeout_s=limits.header_timeout_s, body_timeout_s=limits.body_timeout_s,
                  max_connections=limits.max_connections)
    try:
        fleet.start()
        click.echo(f"serving {', '.join(names)} on http://{host}:{port}/mcp: {workers} processes behind nginx", err=True)
        fleet.wait()
    except (KeyboardInterrupt, _Stop):
        pass
    finally:
        for signum in stopping:  # a second signal must not cut the stop short
            signal.signal(signum, signal.SIG_IGN)
        fleet.stop()
        for signum, handler in before.items():  # a caller in this process gets its handlers back
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


@cli.command("audit")
@click.argument("name")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def audit_cmd(name: str, seed: int, as_json: bool) -> None:
    """Run the conformance kit against server NAME and report what holds. Exits 1 on failures."""
    from prove_core.testing.conformance import audit

    report = audit(_server(name), seed=seed)
    if as_json:
        _echo_json(report.to_json())
    else:
        for check in report.checks:
            mark = "ok  " if check.ok else "FAIL"
            click.echo(f"{mark} {check.name}: {check.detail}")
        click.echo(f"{name}: {report.passed}/{len(report.checks)} checks passed")
    if not report.ok:
        sys.exit(1)


@cli.command("synth")
@click.argument("config", required=False, type=click.Path(dir_okay=False))
@click.option("--examples", type=int, default=None, help="Call conversations to keep (overrides [synth].examples).")
@click.option("--name", default=None, help="Run name (output goes to <output_dir>/<name>/synth).")
@click.option("--progress/--no-progress", default=None, help="Show a progress bar (default: when stderr is a terminal).")
@click.option("--fresh", is_flag=True, help="Discard the run's corpus and drop log and start over.")
@_set_option
def synth_cmd(config: str | None, examples: int | None, name: str | None, progress: bool | None, fresh: bool,
              overrides: tuple[str, ...]) -> None:
    """Synthesize a grounded training corpus from CONFIG's servers (the quickstart servers if
    omitted). Resumable: run it again after an interruption and it continues; a corpus made from
    other servers' code, seeds, options or settings is not extended (use --fresh)."""
    import attrs

    from prove_core.config import SynthConfig
    from prove_core.synth.pipeline import synthesize

    if examples is not None and examples <= 0:
        raise ProveError("--examples must be > 0")
    overrides = (*overrides, *([f"synth.examples={examples}"] if examples is not None else []),
                 *([f"name={json.dumps(name)}"] if name else []))
    plugins = _plugins()
    experiment = _checked(config, overrides, ["synth"], plugins)
    synth = experiment.synth or SynthConfig()
    experiment = attrs.evolve(experiment, synth=synth)
    report = synthesize(experiment, plugins, echo=click.echo, progress=progress, fresh=fresh)
    if not report["reached_target"]:
        click.echo(f"warning: kept {report['by_behaviour'].get('call', 0)} of {synth.examples} call conversations "
                   "before the attempt limit (max_attempts_factor); see stats.md for drop reasons", err=True)
        sys.exit(1)


@cli.command("reward")
@click.argument("rollouts", type=click.Path(dir_okay=False))
@click.option("--config", "config", default=None, type=click.Path(dir_okay=False),
              help="Experiment TOML: its [reward] section and its servers' seed options (default: the guarded preset).")
@click.option("--out", default=None, type=click.Path(file_okay=False), help="Report folder [default: runs/reward/<stem>].")
@click.option("--parser", default=None, help="Parser for raw completions without their own 'parser' [default: hermes].")
@click.option("--worst", default=None, type=click.IntRange(min=0), help="How many lowest-scoring rollouts to show [10].")
@click.option("--no-plots", is_flag=True, help="Skip the histograms.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def reward_cmd(rollouts: str, config: str | None, out: str | None, parser: str | None, worst: int | None,
               no_plots: bool, as_json: bool) -> None:
    """Score a JSONL of ROLLOUTS against their tasks: per-component means, histograms and the
    worst rollouts with their explanations (format: docs/reward.md). Exits 1 when a record is
    not a valid rollout."""
    from pathlib import Path

    from prove_core.reward.report import reward_setup, score_rollouts

    registry = _plugins().registry
    reward, settings = reward_setup(config, registry)
    out_dir = Path(out) if out else Path("runs") / "reward" / Path(rollouts).stem
    report = score_rollouts(rollouts, reward=reward, registry=registry, out_dir=out_dir,
                            parser=parser or settings.parser, worst=settings.worst if worst is None else worst,
                            plots=settings.plots and not no_plots, echo=(lambda _: None) if as_json else click.echo)
    if as_json:
        _echo_json(report)
    if report["invalid"]:
        raise ProveError(f"{len(report['invalid'])} record(s) of {rollouts} are not valid rollouts "
                         f"(first: line {report['invalid'][0]['line']}: {report['invalid'][0]['error']})")


@cli.command("train")
@click.argument("config", required=False, type=click.Path(dir_okay=False))
@click.option("--backend", default=None, help="Registered trainer to use (overrides [train].backend).")
@click.option("--steps", type=click.IntRange(min=1), default=None, help="GRPO steps (overrides [train].steps).")
@_set_option
def train_cmd(config: str | None, backend: str | None, steps: int | None, overrides: tuple[str, ...]) -> None:
    """Multi-turn GRPO on live sessions with CONFIG's [train] section (docs/training.md).

    Trains on <run_dir>/synth/corpus.jsonl (from `prove synth`) unless [train].corpus names
    another; `--backend` picks any registered trainer (`prove plugins` lists them)."""
    from prove_core.train.core import run_training

    overrides = (*overrides, *([f"train.backend={json.dumps(backend)}"] if backend else []),
                 *([f"train.steps={steps}"] if steps is not None else []))
    plugins = _plugins()
    experiment = _checked(config, overrides, ["train"], plugins)
    summary = run_training(experiment, plugins, echo=click.echo)
    if not summary["ok"]:
        sys.exit(1)


@cli.command("eval")
@click.argument("config", required=False, type=click.Path(dir_okay=False))
@click.option("--model", "models", multiple=True, metavar="CLIENT",
              help="Add a model by client with default options (oracle, no_call, spammer); repeatable.")
@click.option("--benchmark", "benchmarks", multiple=True, metavar="NAME",
              help="Add a benchmark with default options (prove, bfcl, tau2, teval, nestful); repeatable. "
                   "tau2's default user simulator is an LLM endpoint (docs/evaluation.md).")
@click.option("--only", "only", multiple=True, metavar="NAME", help="Run only these models/benchmarks of the config.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Tasks per category (sets options.limit).")
@click.option("--out", default=None, type=click.Path(file_okay=False),
              help="Report folder [default: <run_dir>/eval; runs/eval without a CONFIG].")
@click.option("--fresh", is_flag=True, help="Delete the results of these models and benchmarks in the folder first.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@_set_option
def eval_cmd(config: str | None, models: tuple[str, ...], benchmarks: tuple[str, ...], only: tuple[str, ...],
             limit: int | None, out: str | None, fresh: bool, as_json: bool, overrides: tuple[str, ...]) -> None:
    """Evaluate every model of CONFIG's [eval] section on every benchmark: JSON and markdown
    tables, PNG plots, per benchmark and category, with the number of tasks and a confidence
    interval (docs/evaluation.md). Resumable: tasks already scored are not played again; results
    made with other model or benchmark options are refused (--fresh starts over)."""
    from prove_core.eval.core import run_evaluation
    from prove_core.stages import check_experiment

    plugins = _plugins()
    experiment = _eval_experiment(config, models, benchmarks, only, limit, out, overrides)
    check_experiment(experiment, plugins, run=["eval"])
    report = run_evaluation(experiment, plugins, echo=(lambda _: None) if as_json else click.echo, fresh=fresh)
    if as_json:
        _echo_json(report)


def _eval_experiment(config: str | None, models: tuple[str, ...], benchmarks: tuple[str, ...], only: tuple[str, ...],
                     limit: int | None, out: str | None, overrides: tuple[str, ...] = ()) -> Any:
    """The experiment with its [eval] section adjusted by the command-line flags."""
    import attrs

    from prove_core.config import BenchmarkConfig, EvalConfig, ModelConfig, load_experiment

    experiment = load_experiment(config, overrides)
    settings = experiment.eval
    model_list = list(settings.models) if settings else []
    bench_list = list(settings.benchmarks) if settings else []
    model_list += [ModelConfig(name=m, client=m) for m in models]
    bench_list += [BenchmarkConfig(name=b) for b in benchmarks]
    if only:
        unknown = set(only) - {m.name for m in model_list} - {b.label or b.name for b in bench_list}
        if unknown:
            raise ProveError(f"--only names no model or benchmark of the config: {', '.join(sorted(unknown))}")
        model_list = [m for m in model_list if m.name in only] or model_list
        bench_list = [b for b in bench_list if (b.label or b.name) in only] or bench_list
    if limit is not None:
        bench_list = [attrs.evolve(b, options={**b.options, "limit": limit}) for b in bench_list]
    if not model_list or not bench_list:
        raise ProveError("nothing to evaluate: give a config with an [eval] section, or --model and --benchmark")
    base = settings or EvalConfig(models=model_list, benchmarks=bench_list)
    if out is None and config is None and not base.output:  # no run name given: not the quickstart's folder
        out = str(Path(experiment.output_dir) / "eval")
    return attrs.evolve(experiment, eval=attrs.evolve(base, models=model_list, benchmarks=bench_list,
                                                      output=out or base.output))


@cli.command("run")
@click.argument("config", required=False, type=click.Path(dir_okay=False))
@_set_option
def run_cmd(config: str | None, overrides: tuple[str, ...]) -> None:
    """Run every stage CONFIG names, in order (the embedded quickstart config if omitted).

    \b
    Stages (`stages = [...]` in CONFIG, run in the order listed):
      episode  a scripted multi-step episode on live sessions ([episode])
      synth    a grounded training corpus ([synth]; docs/synthesis.md)
      reward   score rollouts or the corpus ([reward]; docs/reward.md)
      train    multi-turn GRPO on live sessions ([train]; docs/training.md)
      eval     models on benchmarks ([eval]; docs/evaluation.md)

    The whole config is checked before the first stage starts: every problem is listed at once."""
    from prove_core.stages import run_experiment

    summary = run_experiment(config, plugins=_plugins(), echo=click.echo, overrides=overrides)
    if not summary["ok"]:
        sys.exit(1)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="prove", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.exceptions.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(1)
    except ProveError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
