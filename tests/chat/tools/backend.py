"""A fake tenant back end: a real, threaded HTTP server on 127.0.0.1.

It records every request exactly as it arrived (raw body, headers) and
verifies nothing itself: tests check signatures and bodies from the record.
What it answers is decided per request by ``responder`` (default: ``{"ok":
true}``): JSON, any status, a non-JSON body, or a delay past the caller's
timeout. ``hold`` makes a request wait until the test releases it (or the
server stops), which lets a test kill a worker while a call is in flight.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Answer:
    status: int = 200
    json: Any = None
    body: bytes | None = None  # raw body; wins over ``json``
    content_type: str = "application/json"
    delay_s: float = 0.0
    hold: threading.Event | None = None
    #: Seconds between the body's bytes: a back end whose answer trickles in.
    trickle_s: float = 0.0


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    raw: bytes
    started: float
    ended: float | None = None

    @property
    def json(self) -> Any:
        return json.loads(self.raw)

    @property
    def arguments(self) -> dict[str, Any]:
        return self.json["arguments"]


@dataclass
class FakeBackend:
    responder: Callable[[Recorded], Answer] | None = None
    requests: list[Recorded] = field(default_factory=list)
    entered: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/tool"

    def calls_where(self, key: str, value: Any) -> int:
        """How many calls had ``arguments[key] == value``."""
        with self._lock:
            return sum(1 for r in self.requests if r.arguments.get(key) == value)

    def start(self) -> FakeBackend:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.backend = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeBackend:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record(self, recorded: Recorded) -> Answer:
        with self._lock:
            self.requests.append(recorded)
        answer = self.responder(recorded) if self.responder else Answer(json={"ok": True})
        self.entered.set()
        return answer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        backend: FakeBackend = self.server.backend  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        recorded = Recorded(path=self.path, headers=dict(self.headers.items()), raw=raw, started=time.monotonic())
        answer = backend._record(recorded)
        if answer.hold is not None:
            while not answer.hold.wait(0.05) and not backend._stopping.is_set():
                pass
        deadline = time.monotonic() + answer.delay_s
        while time.monotonic() < deadline and not backend._stopping.is_set():
            time.sleep(0.01)
        recorded.ended = time.monotonic()
        body = answer.body if answer.body is not None else json.dumps(answer.json, ensure_ascii=False).encode()
        try:
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if answer.trickle_s:
                for byte in body:
                    if backend._stopping.is_set():
                        break
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(answer.trickle_s)
            else:
                self.wfile.write(body)
        except OSError:
            pass  # the caller gave up (timeout) or died
