"""A stand-in OpenAI-compatible endpoint on 127.0.0.1 for tests: a real HTTP server whose replies
and faults are scripted.

``reply(prompt)`` writes the content of each answer from the last message of the request;
``faults`` is a queue consumed one per request before any answer: an HTTP status (500, 503, 400)
answers with that status, ``"timeout"`` waits ``stall_s`` before answering (past the client's
timeout), ``"drop"`` closes the connection without an answer. ``down = True`` answers 503 to
every request until it is set back."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatEndpoint:
    def __init__(self, reply: Callable[[str], str], *, model: str = "tiny", stall_s: float = 2.0) -> None:
        self.reply = reply
        self.model = model
        self.stall_s = stall_s
        self.faults: list[int | str] = []
        self.down = False
        self.requests: list[str] = []  # the prompt of every request, faults included
        self.answered = 0  # requests answered with a 200
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ChatEndpoint:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                assert self.path == "/v1/chat/completions" and body["model"] == endpoint.model
                prompt = body["messages"][-1]["content"]
                endpoint.requests.append(prompt)
                fault = endpoint.faults.pop(0) if endpoint.faults else (503 if endpoint.down else None)
                if fault == "drop":
                    self.close_connection = True
                    self.connection.close()
                    return
                if fault == "timeout":
                    time.sleep(endpoint.stall_s)
                if isinstance(fault, int):
                    self._send(fault, {"error": {"message": f"scripted {fault}"}})
                    return
                endpoint.answered += 1
                content = endpoint.reply(prompt)
                self._send(200, {"choices": [{"message": {"role": "assistant", "content": content}}]})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting (a timeout)
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


def draft_of(prompt: str) -> str:
    """The drafted turn a teacher's rewrite prompt carries (between its two fixed lines)."""
    return prompt.split("This draft says what it must say:\n", 1)[1].split("\n\nKeep every id", 1)[0]
