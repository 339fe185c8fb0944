"""A fake Ollama: a real HTTP server on 127.0.0.1 speaking Ollama's wire protocol.

Nothing in memdesk is mocked (DESIGN.md): tests point ``OLLAMA_HOST`` at this
server and the product's real client talks HTTP to it. It serves

- ``POST /api/chat``: NDJSON streamed over chunked transfer encoding (one
  ``{"model", "created_at", "message": {"role": "assistant", "content": piece},
  "done": false}`` line per delta, tool calls in a message of their own, then a
  final ``{"done": true, "done_reason", "prompt_eval_count", "eval_count", …}``
  line), or one JSON object when the request says ``"stream": false``;
- ``POST /api/show``: ``model_info`` with ``qwen2.context_length`` and the
  Modelfile ``parameters`` text (``num_ctx 32768``), 404 for an unknown model;
- ``GET /api/tags`` and ``GET /api/version``.

Each ``/api/chat`` request takes the next scripted :class:`Reply` (or asks a
callable; ``Reply.content(obj)`` answers an exact body, e.g. the JSON for a
request with a ``format`` schema); replies can delay, fail with an HTTP status before streaming, cut
the connection after K deltas, or hang. Every request body is recorded, and
the server notices when a client goes away mid-stream, so a test can assert
that generation stopped.

Use it as a context manager (``with FakeOllama() as fake: …``) or through the
``fake_ollama`` fixture in ``tests/conftest.py``.
"""

from __future__ import annotations

import json
import re
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_MODEL = "qwen2.5:7b"
VERSION = "0.6.8"
_POLL_S = 0.005


@dataclass
class Reply:
    """What the fake answers to one ``/api/chat`` request.

    ``text`` is split into word/character deltas unless ``deltas`` gives them.
    ``status`` other than 200 answers that HTTP status with ``{"error": error}``
    before any streaming. ``close_after`` drops the connection after that many
    deltas (no final line, no end of the chunked body). ``hang`` never answers
    at all, until the client gives up or the server stops. Usage figures
    default to a character count of the prompt (not real tokens) and the number
    of deltas.
    """

    text: str = ""
    deltas: list[str] | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    first_token_delay_s: float = 0.0
    token_delay_s: float = 0.0
    status: int = 200
    error: str = "llama runner process has terminated: exit status 2"
    close_after: int | None = None
    hang: bool = False
    prompt_eval_count: int | None = None
    eval_count: int | None = None
    done_reason: str = "stop"

    @classmethod
    def content(cls, body: Any) -> Reply:
        """A reply whose message content is exactly ``body`` (JSON-encoded
        unless it is a str), in one delta: what a model answers to a request
        with a ``format`` schema, or a malformed answer to one."""
        return cls(deltas=[body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)])

    def pieces(self) -> list[str]:
        if self.deltas is not None:
            return list(self.deltas)
        # Latin words keep their leading space; CJK and punctuation go one
        # character at a time, roughly as a BPE model streams them.
        return re.findall(r"\s*[A-Za-z0-9_'’-]+|\s*\S|\s+$", self.text)


@dataclass
class RecordedRequest:
    method: str
    path: str
    body: dict[str, Any] | None


ReplySource = Reply | str | Callable[[dict[str, Any]], "Reply | str"]


class FakeOllama:
    """A threaded fake Ollama server; see the module docstring.

    ``models`` are the names it knows (others get 404). ``context_length`` goes
    into ``model_info``; ``num_ctx`` (None for none) into the Modelfile
    ``parameters`` text.
    """

    def __init__(
        self,
        *,
        models: Iterable[str] = (DEFAULT_MODEL,),
        context_length: int = 32768,
        num_ctx: int | None = 32768,
        default_reply: ReplySource = "你好！",
    ) -> None:
        self.models = list(models)
        self.context_length = context_length
        self.num_ctx = num_ctx
        self.default_reply = default_reply
        self.requests: list[RecordedRequest] = []
        #: Streams the client abandoned before the final line was written.
        self.disconnects = 0
        #: Streams written to the end (final ``done`` line sent).
        self.completed = 0
        self.disconnected = threading.Event()
        #: TCP connections accepted, and those closed again (by either side).
        self.connections_opened = 0
        self.connections_closed = 0
        self._replies: deque[ReplySource] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting --------------------------------------------------------

    def script(self, *replies: ReplySource) -> FakeOllama:
        """Queue replies for the next ``/api/chat`` requests, in order. A
        callable gets the request body and returns a Reply (or text)."""
        with self._lock:
            self._replies.extend(replies)
        return self

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            source = self._replies.popleft() if self._replies else self.default_reply
        if callable(source):
            source = source(body)
        return Reply(text=source) if isinstance(source, str) else source

    # -- inspection -------------------------------------------------------

    @property
    def host(self) -> str:
        assert self._server is not None, "FakeOllama is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """Bodies of every ``/api/chat`` request received, oldest first."""
        return [r.body or {} for r in self.requests if r.path == "/api/chat"]

    @property
    def show_requests(self) -> list[dict[str, Any]]:
        return [r.body or {} for r in self.requests if r.path == "/api/show"]

    def wait_for_disconnect(self, timeout: float = 15.0) -> bool:
        """True once a client has dropped a stream (waits up to ``timeout``; it returns as soon as one has, so
        only a failing wait takes that long — a loaded 2-core host once took longer than 5 s to notice)."""
        return self.disconnected.wait(timeout)

    # -- lifecycle --------------------------------------------------------

    def start(self) -> FakeOllama:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-ollama", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        # Hanging handlers poll _stopping, so they end with the server.
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOllama:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- bodies -----------------------------------------------------------

    def show_body(self, model: str) -> dict[str, Any]:
        parameters = ['stop                           "<|im_start|>"', 'stop                           "<|im_end|>"']
        if self.num_ctx is not None:
            parameters.insert(0, f"num_ctx                        {self.num_ctx}")
        return {
            "license": "Apache License Version 2.0",
            "modelfile": f"FROM {model}\n",
            "parameters": "\n".join(parameters),
            "template": "{{- if .Messages }}…{{ end }}",
            "details": _details(),
            "model_info": {
                "general.architecture": "qwen2",
                "general.parameter_count": 7615616512,
                "qwen2.attention.head_count": 28,
                "qwen2.attention.head_count_kv": 4,
                "qwen2.block_count": 28,
                "qwen2.context_length": self.context_length,
                "qwen2.embedding_length": 3584,
                "qwen2.rope.freq_base": 1000000,
            },
            "capabilities": ["completion", "tools"],
            "modified_at": "2025-01-01T00:00:00Z",
        }


def _details() -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": "qwen2",
        "families": ["qwen2"],
        "parameter_size": "7.6B",
        "quantization_level": "Q4_K_M",
    }


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class _Server(ThreadingHTTPServer):
    # Ollama (Go) listens with the system's backlog; socketserver's default of 5 refused connections when a
    # burst of turns opened many at once, an error the real server does not make.
    request_queue_size = 1024


class _ClientGone(Exception):
    """The client closed the connection before the reply was complete."""


class _Stopping(Exception):
    """The server is shutting down; end the handler quietly."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "FakeOllama"

    @property
    def fake(self) -> FakeOllama:
        return self.server.fake  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep pytest output clean

    # -- connection -------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        self._requests_seen = 0
        with self.fake._lock:
            self.fake.connections_opened += 1

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.fake._lock:
                self.fake.connections_closed += 1

    def parse_request(self) -> bool:
        ok = super().parse_request()
        self._requests_seen += ok
        return ok

    def handle_one_request(self) -> None:
        # A client that gives up before its request is read (a timeout that
        # fires while the machine is loaded) resets or closes the connection
        # here, before any handler runs: that is a disconnect too.
        try:
            super().handle_one_request()
        except (ConnectionResetError, BrokenPipeError):
            self.close_connection = True
            self._dropped()
            return
        if not self.raw_requestline and not self._requests_seen:
            self._dropped()

    def _dropped(self) -> None:
        with self.fake._lock:
            self.fake.disconnects += 1
        self.fake.disconnected.set()

    # -- routing ----------------------------------------------------------

    def do_GET(self) -> None:
        self.fake.requests.append(RecordedRequest("GET", self.path, None))
        if self.path == "/api/version":
            self._json(200, {"version": VERSION})
        elif self.path == "/api/tags":
            models = [
                {
                    "name": m,
                    "model": m,
                    "modified_at": "2025-01-01T00:00:00Z",
                    "size": 4683087332,
                    "digest": "845dbda0ea48ed749caafd9e6037047aa19acfcfd82e704d7ca97d631a0b697e",
                    "details": _details(),
                }
                for m in self.fake.models
            ]
            self._json(200, {"models": models})
        elif self.path == "/":
            self._raw(200, b"Ollama is running", "text/plain; charset=utf-8")
        else:
            self._json(404, {"error": "404 page not found"})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self.fake.requests.append(RecordedRequest("POST", self.path, None))
            self._json(400, {"error": "invalid character in request body"})
            return
        self.fake.requests.append(RecordedRequest("POST", self.path, body))
        if self.path == "/api/show":
            model = body.get("model") or body.get("name") or ""
            if model not in self.fake.models:
                self._json(404, {"error": f"model '{model}' not found"})
            else:
                self._json(200, self.fake.show_body(model))
        elif self.path == "/api/chat":
            self._chat(body)
        else:
            self._json(404, {"error": "404 page not found"})

    # -- /api/chat --------------------------------------------------------

    def _chat(self, body: dict[str, Any]) -> None:
        model = body.get("model", "")
        if model not in self.fake.models:
            self._json(404, {"error": f'model "{model}" not found, try pulling it first'})
            return
        reply = self.fake._next_reply(body)
        try:
            if reply.hang:
                self._wait(None)
            if reply.status != 200:
                self._json(reply.status, {"error": reply.error})
                return
            # Like Ollama, nothing (not even headers) goes out before the first
            # token: loading the model and evaluating the prompt happen first.
            self._wait(reply.first_token_delay_s)
            if body.get("stream", True):
                self._stream(model, body, reply)
            else:
                self._wait(reply.token_delay_s * len(reply.pieces()))
                final = self._final(model, body, reply)
                final["message"] = {"role": "assistant", "content": "".join(reply.pieces())}
                if reply.tool_calls:
                    final["message"]["tool_calls"] = reply.tool_calls
                self._json(200, final)
                self._count_completed()
        except _ClientGone:
            self._dropped()
            self.close_connection = True
        except _Stopping:
            self.close_connection = True

    def _stream(self, model: str, body: dict[str, Any], reply: Reply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for index, piece in enumerate(reply.pieces()):
            if index == reply.close_after:
                self._cut()
                return
            if index:
                self._wait(reply.token_delay_s)
            self._line(self._part(model, {"role": "assistant", "content": piece}))
        if reply.close_after is not None:  # more than the deltas there were: cut before the final line
            self._cut()
            return
        if reply.tool_calls:
            self._line(self._part(model, {"role": "assistant", "content": "", "tool_calls": reply.tool_calls}))
        self._line(self._final(model, body, reply))
        self._chunk(b"")  # end of the chunked body
        self._count_completed()

    def _count_completed(self) -> None:
        with self.fake._lock:
            self.fake.completed += 1

    def _part(self, model: str, message: dict[str, Any]) -> dict[str, Any]:
        return {"model": model, "created_at": _now(), "message": message, "done": False}

    def _final(self, model: str, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        prompt_chars = sum(len(str(m.get("content") or "")) for m in body.get("messages", []))
        return {
            "model": model,
            "created_at": _now(),
            "message": {"role": "assistant", "content": ""},
            "done_reason": reply.done_reason,
            "done": True,
            "total_duration": 1_000_000,
            "load_duration": 100_000,
            "prompt_eval_count": reply.prompt_eval_count if reply.prompt_eval_count is not None else prompt_chars,
            "prompt_eval_duration": 200_000,
            "eval_count": reply.eval_count if reply.eval_count is not None else len(reply.pieces()),
            "eval_duration": 700_000,
        }

    # -- wire helpers -----------------------------------------------------

    def _line(self, obj: dict[str, Any]) -> None:
        if self._client_gone():
            raise _ClientGone
        self._chunk(json.dumps(obj, ensure_ascii=False).encode() + b"\n")

    def _chunk(self, data: bytes) -> None:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise _ClientGone from exc

    def _cut(self) -> None:
        """Drop the connection mid-body, as a crashed runner would."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _json(self, status: int, obj: dict[str, Any]) -> None:
        self._raw(status, json.dumps(obj, ensure_ascii=False).encode(), "application/json; charset=utf-8")

    def _raw(self, status: int, data: bytes, content_type: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise _ClientGone from exc

    def _client_gone(self) -> bool:
        """True when the peer has closed its end (readable with nothing to read).

        HTTP/1.1 clients send nothing while a response is in flight, so a
        readable socket here means EOF or a reset."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _wait(self, seconds: float | None) -> None:
        """Sleep ``seconds`` (forever for None), watching for the client leaving
        (raises _ClientGone) and for the server stopping."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while deadline is None or time.monotonic() < deadline:
            if self._client_gone():
                raise _ClientGone
            if self.fake._stopping.is_set():
                raise _Stopping
            time.sleep(_POLL_S if deadline is None else max(0.0, min(_POLL_S, deadline - time.monotonic())))
