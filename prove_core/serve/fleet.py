"""Scale-out: one ``prove serve`` process per core behind nginx, each session held by one process.

A session lives in the memory of the process that holds it, so whatever touches a session's
state (a tool call, a control request) must run on that process. ``prove serve ... --transport
http --workers N`` starts N worker processes on loopback ports and nginx in front of them:

- **Ownership is a function of the id.** Worker ``owner_of(id, N)`` holds a session: a hash of
  the id's *route key* (the part before its first ``.``; forks get ``<parent's key>.<suffix>``, so
  a fork lives beside its parent). Every worker can compute it, for any id, with any characters.
- **nginx routes what it can see**: the ``X-Prove-Session`` header's route key (and the id in a
  ``/sessions/{id}`` path) through ``hash $prove_route``, the same function (``owner_of`` is
  nginx's hash of a key), so such requests reach the owner directly; ``Mcp-Session-Id`` (the MCP
  handshake era's transport session) through its prefix ``w<i>-``, which each worker adds to the
  ids its SDK issues (``TransportPin``), to the worker that issued it; anything else round robin.
- **Workers route what nginx cannot see** (nginx cannot read JSON bodies): a tool call whose
  session (``_meta.session_id``, the header, or ``default``) another worker owns is run there
  through an internal call (``POST /_prove/call``), and a control request for an id another worker
  owns is passed to it. ``POST /sessions`` issues an id the receiving worker owns. So no request
  ever starts a fresh session on the wrong process, whatever way the client names it.
- **A worker that dies costs only its sessions.** nginx tries another worker only when one
  cannot be reached (``proxy_next_upstream error``; ``max_fails=0``: none is ever marked down),
  which is safe because every worker passes a request on to its session's owner: a call on a dead
  worker's session gets a typed UNAVAILABLE WORKER_UNAVAILABLE (nginx's own answer is the same
  typed 503 when no worker answers); the supervisor (``Fleet.wait``) logs the loss once, records it
  (``GET /sessions`` reports it under ``fleet.losses``) and restarts the worker empty on the same
  port. Each worker journals the ids it opens; the restarted one reads its predecessor's journal,
  so a call on a lost id gets SESSION_LOST instead of a fresh session.
- **Lifecycle**: SIGTERM, SIGINT and SIGHUP stop nginx and every worker (workers also get
  SIGTERM if the supervisor itself is killed), and the port is free when ``prove serve`` exits.

docs/serving.md shows the deployment and why this mechanism; ``benchmarks/bench_load.py
--workers`` drives it with hundreds of sessions and checks that none lost its state.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from prove_core.errors import ConfigError, ProveError

log = structlog.get_logger()

WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")  # bind addresses that name no host clients would use
FLEET_ENV = "PROVE_FLEET"  # a worker's place in the fleet (JSON, set by Fleet): see FleetMember
TRANSPORT_PREFIX = "w{index}-"  # what a worker puts before the Mcp-Session-Id its SDK issues
LOST_IDS_KEPT = 100_000  # ids of a dead worker's sessions its successor remembers (the newest)


def route_key(session_id: str) -> str:
    """The part of a session id the proxy routes by: everything before the first ``.``."""
    return session_id.split(".", 1)[0]


def owner_of(session_id: str, workers: int) -> int:
    """The worker (0..workers-1) that holds the session with this id: nginx's ``hash $key``
    choice for its route key (Cache::Memcached's ``((crc32(key) >> 16) & 0x7fff) % n``, the key's
    UTF-8 bytes), so requests nginx routes by the header land on the owner directly. The empty
    key (nginx would route it round robin) is owned by worker 0."""
    key = route_key(session_id).encode("utf-8", "surrogatepass")
    if not key:
        return 0
    return ((zlib.crc32(key) >> 16) & 0x7FFF) % workers


def nginx_config(*, listen: str, backends: Sequence[str], workdir: str | Path, worker_processes: int = 1,
                 header_timeout_s: float = 10.0, body_timeout_s: float = 30.0, max_connections: int = 4096) -> str:
    """An nginx configuration (the whole file) that serves ``listen`` (``host:port``) in front of
    ``backends`` (``host:port`` of each worker, in worker order), routing as the module says.
    ``header_timeout_s`` / ``body_timeout_s``: a client that sends its headers / body slower is
    cut off (408); ``max_connections``: open client connections at most."""
    work = Path(workdir)
    servers = "\n".join(f"        server {b} max_fails=0;" for b in backends)
    pinned = "\n".join(f"    upstream prove_w{i} {{\n        server {b} max_fails=0;\n        keepalive 16;\n    }}"
                       for i, b in enumerate(backends))
    down = json.dumps({"code": "UNAVAILABLE", "reason": "WORKER_UNAVAILABLE",
                       "message": "the worker process for this request is not answering (it stopped and is being "
                                  "restarted; sessions it held are lost): retry shortly, then start new sessions"})
    busy = json.dumps({"code": "RESOURCE_EXHAUSTED", "reason": "TOO_MANY_CONNECTIONS",
                       "message": f"the server serves {max_connections} connections at once: retry shortly, or start "
                                  "prove serve with a larger --max-connections"})
    return f"""# Written by prove serve --workers: one prove serve process per backend (prove_core.serve.fleet).
daemon off;
worker_processes {worker_processes};
pid {work}/nginx.pid;
error_log {work}/error.log warn;

events {{
    worker_connections {max_connections + 2 * len(backends) * 64};
}}

http {{
    access_log off;
    client_body_temp_path {work}/client_body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
    client_max_body_size 16m;
    client_header_timeout {header_timeout_s:g}s;
    client_body_timeout {body_timeout_s:g}s;
    map $host $prove_everyone {{ default "all"; }}  # one key for every client: a bound on them all
    limit_conn_zone $prove_everyone zone=prove_conns:1m;
    limit_conn_status 503;

    # The route key: the X-Prove-Session header up to its first dot, else the id in a
    # /sessions/{{id}}/... path of the control API, else empty (round robin; the workers pass on
    # what belongs to another).
    map $uri $prove_path_route {{
        "~^/sessions/([^/.]+)" $1;
        default "";
    }}
    map $http_x_prove_session $prove_route {{
        "~^([^.]+)" $1;
        default $prove_path_route;
    }}
    # An Mcp-Session-Id names the worker that issued it (w<i>-...).
    map $http_mcp_session_id $prove_upstream {{
        "~^w([0-9]+)-" prove_w$1;
        default prove_backends;
    }}

    upstream prove_backends {{
        hash $prove_route;
{servers}
        keepalive 64;
    }}
{pinned}

    server {{
        listen {listen};
        limit_conn prove_conns {max_connections};
        location / {{
            proxy_pass http://$prove_upstream;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 3600s;
            proxy_next_upstream error;  # only a worker that could not be reached: any other passes the request on
            error_page 502 504 = @prove_down;
            error_page 503 = @prove_busy;      # limit_conn's refusal
        }}
        location /_prove/ {{                    # worker to worker only (serve.member), never from outside
            default_type application/json;
            return 404 '{{"code": "NOT_FOUND", "reason": "NOT_FOUND", "message": "no such path"}}';
        }}
        location @prove_busy {{
            default_type application/json;
            return 503 '{busy}';
        }}
        location @prove_down {{
            default_type application/json;
            return 503 '{down}';
        }}
    }}
}}
"""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_port(host: str, port: int, proc: subprocess.Popen[bytes], what: str, log: Path,
                  timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return
        except OSError:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
                raise ProveError(f"{what} exited with code {proc.returncode} before listening on {port}:\n{tail}") from None
            time.sleep(0.05)
    raise ProveError(f"{what} did not listen on {host}:{port} within {timeout:g} s")


def port_free(host: str, port: int) -> str | None:
    """None when ``host:port`` can be bound now, else why not (checked before anything says
    "serving"; the listener that binds it later sets SO_REUSEADDR too)."""
    bind_host = "0.0.0.0" if host == "" else host.strip("[]")
    family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((bind_host, port))
    except OSError as exc:
        return f"cannot listen on {host or '*'}:{port}: {exc.strerror or exc} (is another server on that port?)"
    return None


def _die_with_parent() -> None:
    """In a child before exec: get SIGTERM when the supervisor dies, however it dies (Linux)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001, S110 - not Linux: the supervisor's own stop() is what stops them
        pass


class Fleet:
    """``workers`` worker ``prove serve`` processes and nginx in front (a context manager).

    ``serve_args``: the ``prove serve`` arguments every worker gets (servers, seed, sessions
    options), without transport, host and port; ``host``/``port``: where nginx listens;
    ``header_timeout_s``/``body_timeout_s``/``max_connections``: nginx's limits on clients."""

    def __init__(self, serve_args: Sequence[str], *, workers: int, host: str = "127.0.0.1", port: int = 8000,
                 nginx: str | None = None, env: dict[str, str] | None = None, header_timeout_s: float = 10.0,
                 body_timeout_s: float = 30.0, max_connections: int = 4096) -> None:
        if workers < 2:
            raise ConfigError(f"a fleet needs at least 2 workers, got {workers}")
        found = nginx or shutil.which("nginx") or next(
            (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None)
        if found is None:
            raise ConfigError("--workers needs nginx in front of the processes, and none was found: install it "
                              "(Debian/Ubuntu: apt install nginx-light; macOS: brew install nginx)")
        self.nginx = found
        self.serve_args = list(serve_args)
        self.workers = workers
        self.host, self.port = host, port
        self.limits: dict[str, Any] = {"header_timeout_s": header_timeout_s, "body_timeout_s": body_timeout_s,
                                       "max_connections": max_connections}
        self.env = {**os.environ, **(env or {})}
        self.workdir = Path(tempfile.mkdtemp(prefix="prove-fleet-"))
        self.workdir.chmod(0o755)  # nginx's workers may run as another user (a root master)
        self.ports: list[int] = []
        self.backends: list[tuple[int, subprocess.Popen[bytes]]] = []
        self.generations: list[int] = []
        self.losses: list[dict[str, Any]] = []  # one record per worker that died (also in losses.jsonl)
        self.proxy: subprocess.Popen[bytes] | None = None
        self.failed = False  # keep the logs in workdir when something stopped
        self._logs: list[Any] = []

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/mcp"

    def _spawn(self, index: int) -> subprocess.Popen[bytes]:
        port = self.ports[index]
        place = {"index": index, "ports": self.ports, "dir": str(self.workdir),
                 "generation": self.generations[index]}
        log_file = open(self.workdir / f"backend-{index}.log", "ab")  # noqa: SIM115 - closed in stop()
        self._logs.append(log_file)
        argv = [sys.executable, "-m", "prove_core", "serve", *self.serve_args, "--transport", "http",
                "--host", "127.0.0.1", "--port", str(port)]
        return subprocess.Popen(argv, env={**self.env, FLEET_ENV: json.dumps(place)}, stdout=subprocess.DEVNULL,
                                stderr=log_file, start_new_session=True, preexec_fn=_die_with_parent)

    def start(self) -> Fleet:
        try:
            self.ports = [free_port() for _ in range(self.workers)]
            self.generations = [0] * self.workers
            self.backends = [(self.ports[i], self._spawn(i)) for i in range(self.workers)]
            for i, (port, proc) in enumerate(self.backends):
                wait_for_port("127.0.0.1", port, proc, f"worker {i} (prove serve on port {port})",
                              self.workdir / f"backend-{i}.log")
            conf = self.workdir / "nginx.conf"
            conf.write_text(nginx_config(listen=f"{self.host}:{self.port}",
                                         backends=[f"127.0.0.1:{p}" for p in self.ports], workdir=self.workdir,
                                         worker_processes=min(self.workers, os.cpu_count() or 1), **self.limits))
            log_file = open(self.workdir / "nginx.stderr", "wb")  # noqa: SIM115 - closed in stop()
            self._logs.append(log_file)
            self.proxy = subprocess.Popen([self.nginx, "-p", str(self.workdir), "-c", str(conf), "-e",
                                           str(self.workdir / "error.log")], stdout=subprocess.DEVNULL,
                                          stderr=log_file, start_new_session=True, preexec_fn=_die_with_parent)
            wait_for_port(self.host if self.host not in WILDCARD_HOSTS else "127.0.0.1", self.port, self.proxy,
                          "nginx", self.workdir / "nginx.stderr")
        except BaseException:
            self.failed = True
            self.stop()
            raise
        return self

    def __enter__(self) -> Fleet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def dead(self) -> str | None:
        """What has stopped (a worker, or nginx), or None while all run."""
        for i, (port, proc) in enumerate(self.backends):
            if proc.poll() is not None:
                return f"worker {i} (port {port}) exited with code {proc.returncode}: its sessions are lost"
        if self.proxy is not None and self.proxy.poll() is not None:
            return f"nginx exited with code {self.proxy.returncode}"
        return None

    def check(self) -> None:
        """Restart every worker that died, empty (its loss logged once and recorded); raises
        ProveError when nginx stopped (nothing serves the port any more)."""
        if self.proxy is not None and self.proxy.poll() is not None:
            self.failed = True
            raise ProveError(f"the deployment stopped: nginx exited with code {self.proxy.returncode} "
                             f"(logs in {self.workdir})")
        for i, (_, proc) in enumerate(self.backends):
            if proc.poll() is not None:
                self.restart(i)

    def restart(self, index: int) -> None:
        """Record worker ``index``'s loss, hand its journal of opened ids to its successor (which
        answers SESSION_LOST for them) and start that successor on the same port."""
        port, proc = self.backends[index]
        lost = _carry_lost_ids(self.workdir, index)
        record = {"worker": index, "port": port, "exit_code": proc.returncode, "generation": self.generations[index],
                  "sessions_lost": lost, "at": datetime.now(UTC).isoformat(timespec="seconds")}
        self.losses.append(record)
        with open(self.workdir / "losses.jsonl", "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
        log.error("worker lost", worker=index, port=port, exit_code=proc.returncode, sessions_lost=lost,
                  detail="its sessions answer SESSION_LOST; the worker restarts empty")
        self.generations[index] += 1
        self.backends[index] = (port, self._spawn(index))

    def wait(self, poll_s: float = 0.2) -> None:
        """Supervise until nginx stops (raises ProveError) or a signal interrupts: a worker that
        dies is restarted empty (``check``)."""
        while True:
            self.check()
            time.sleep(poll_s)

    def stop(self) -> None:
        if self.proxy is not None and self.proxy.poll() is None:
            self.proxy.send_signal(signal.SIGQUIT)  # graceful: finish the requests in flight
            try:
                self.proxy.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proxy.kill()
                self.proxy.wait()
        for _, proc in self.backends:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc in self.backends:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log_file in self._logs:
            log_file.close()
        self._logs.clear()
        if not self.failed:
            shutil.rmtree(self.workdir, ignore_errors=True)


def journal_path(workdir: str | Path, index: int) -> Path:
    """Where worker ``index`` appends the id of every session it opens (one JSON string a line)."""
    return Path(workdir) / f"opened-{index}.jsonl"


def lost_path(workdir: str | Path, index: int) -> Path:
    """The ids of sessions worker ``index``'s predecessors held when they died."""
    return Path(workdir) / f"lost-{index}.jsonl"


def read_ids(path: Path) -> list[str]:
    """The ids in a journal, each once, the newest ``LOST_IDS_KEPT`` (a torn last line skipped)."""
    if not path.exists():
        return []
    ids: dict[str, None] = {}
    with open(path, encoding="utf-8", errors="surrogateescape") as lines:
        for line in lines:
            try:
                sid = json.loads(line)
            except ValueError:
                continue
            if isinstance(sid, str):
                ids.pop(sid, None)
                ids[sid] = None
    return list(ids)[-LOST_IDS_KEPT:]


def _carry_lost_ids(workdir: Path, index: int) -> int:
    """Move a dead worker's journal into its lost ids (with those of earlier deaths); their count."""
    opened = read_ids(journal_path(workdir, index))
    ids = list(dict.fromkeys([*read_ids(lost_path(workdir, index)), *opened]))[-LOST_IDS_KEPT:]
    tmp = lost_path(workdir, index).with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(sid) + "\n" for sid in ids), encoding="utf-8")
    tmp.replace(lost_path(workdir, index))
    journal_path(workdir, index).unlink(missing_ok=True)
    return len(opened)
