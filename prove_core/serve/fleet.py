"""Scale-out: one ``prove serve`` process per core behind nginx, each session pinned to one process.

A session lives in the memory of the process that opened it, so every request of a session must
reach that process. ``prove serve ... --transport http --workers N`` starts N backend processes
on loopback ports and nginx in front of them (``nginx_config`` writes its configuration):

- the proxy routes by the session id's *route key*: the part of the id before its first ``.``,
  taken from the ``X-Prove-Session`` header, or for the session control API from the path
  (``/sessions/{id}/...``); ``hash ... consistent`` maps a key to one backend, always the same.
  Forks made through the control API get ids that start with their parent's route key (``key.
  suffix``), so a fork lands on the process that holds its state;
- nginx never gives a request to another backend when one fails (``proxy_next_upstream off``)
  and never marks a backend down (``max_fails=0``): a retry elsewhere would meet an unknown id
  there and start a fresh session in its place, which is exactly the silent state loss the
  runtime refuses. A backend that dies stops the whole deployment with an error naming it;
- the proxy cannot read JSON bodies, so behind it a client sends its session id in the
  ``X-Prove-Session`` header (``_meta.session_id`` may carry the same id; a different one is
  refused with SESSION_ID_MISMATCH). Requests without the header (the MCP handshake, tool lists,
  the shared ``default`` session) all go to one backend.

docs/serving.md shows the deployment and the configuration; ``benchmarks/bench_load.py --workers``
drives it with hundreds of sessions and replays every call to check that none lost its state.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prove_core.errors import ConfigError, ProveError

WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")  # bind addresses that name no host clients would use


def route_key(session_id: str) -> str:
    """The part of a session id the proxy routes by: everything before the first ``.``."""
    return session_id.split(".", 1)[0]


def nginx_config(*, listen: str, backends: Sequence[str], workdir: str | Path, worker_processes: int = 1) -> str:
    """An nginx configuration (the whole file) that serves ``listen`` (``host:port``) and pins
    every session to one of ``backends`` (``host:port`` of each ``prove serve``)."""
    work = Path(workdir)
    servers = "\n".join(f"        server {b} max_fails=0;" for b in backends)
    return f"""# Written by prove serve --workers: one prove serve process per backend, sessions pinned by route key.
daemon off;
worker_processes {worker_processes};
pid {work}/nginx.pid;
error_log {work}/error.log warn;

events {{
    worker_connections 4096;
}}

http {{
    access_log off;
    client_body_temp_path {work}/client_body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
    client_max_body_size 16m;

    # The route key: the X-Prove-Session header up to its first dot, else the id in a
    # /sessions/{{id}}/... path of the control API, else empty (one backend for all of those).
    map $uri $prove_path_route {{
        "~^/sessions/([^/.]+)" $1;
        default "";
    }}
    map $http_x_prove_session $prove_route {{
        "~^([^.]+)" $1;
        default $prove_path_route;
    }}

    upstream prove_backends {{
        hash $prove_route consistent;
{servers}
        keepalive 64;
    }}

    server {{
        listen {listen};
        location / {{
            proxy_pass http://prove_backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 3600s;
            proxy_next_upstream off;
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


class Fleet:
    """``workers`` backend ``prove serve`` processes and nginx in front (a context manager).

    ``serve_args``: the ``prove serve`` arguments every backend gets (servers, seed, sessions
    options), without transport, host and port; ``listen``: the proxy's ``host:port``."""

    def __init__(self, serve_args: Sequence[str], *, workers: int, host: str = "127.0.0.1", port: int = 8000,
                 nginx: str | None = None, env: dict[str, str] | None = None) -> None:
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
        self.env = {**os.environ, **(env or {})}
        self.workdir = Path(tempfile.mkdtemp(prefix="prove-fleet-"))
        self.workdir.chmod(0o755)  # nginx's workers may run as another user (a root master)
        self.backends: list[tuple[int, subprocess.Popen[bytes]]] = []
        self.proxy: subprocess.Popen[bytes] | None = None
        self.failed = False  # keep the logs in workdir when something stopped
        self._logs: list[Any] = []

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/mcp"

    def start(self) -> Fleet:
        try:
            for i in range(self.workers):
                port = free_port()
                log_path = self.workdir / f"backend-{i}.log"
                log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
                self._logs.append(log)
                argv = [sys.executable, "-m", "prove_core", "serve", *self.serve_args, "--transport", "http",
                        "--host", "127.0.0.1", "--port", str(port)]
                proc = subprocess.Popen(argv, env=self.env, stdout=subprocess.DEVNULL, stderr=log)
                self.backends.append((port, proc))
            for i, (port, proc) in enumerate(self.backends):
                wait_for_port("127.0.0.1", port, proc, f"backend {i} (prove serve on port {port})",
                              self.workdir / f"backend-{i}.log")
            conf = self.workdir / "nginx.conf"
            conf.write_text(nginx_config(listen=f"{self.host}:{self.port}",
                                         backends=[f"127.0.0.1:{p}" for p, _ in self.backends],
                                         workdir=self.workdir, worker_processes=min(self.workers, os.cpu_count() or 1)))
            log = open(self.workdir / "nginx.stderr", "wb")  # noqa: SIM115 - closed in stop()
            self._logs.append(log)
            self.proxy = subprocess.Popen([self.nginx, "-p", str(self.workdir), "-c", str(conf), "-e",
                                           str(self.workdir / "error.log")], stdout=subprocess.DEVNULL, stderr=log)
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
        """What has stopped (a backend, or nginx), or None while all run."""
        for i, (port, proc) in enumerate(self.backends):
            if proc.poll() is not None:
                return f"backend {i} (port {port}) exited with code {proc.returncode}: its sessions are lost"
        if self.proxy is not None and self.proxy.poll() is not None:
            return f"nginx exited with code {self.proxy.returncode}"
        return None

    def wait(self) -> None:
        """Block until a process stops (raises ProveError naming it) or Ctrl-C."""
        while True:
            problem = self.dead()
            if problem is not None:
                self.failed = True
                raise ProveError(f"the deployment stopped: {problem} (logs in {self.workdir})")
            time.sleep(0.5)

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
                proc.send_signal(signal.SIGINT)
        for _, proc in self.backends:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in self._logs:
            log.close()
        self._logs.clear()
        if not self.failed:
            shutil.rmtree(self.workdir, ignore_errors=True)
