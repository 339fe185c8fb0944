"""The fake Ollama (``testkit.fake_ollama``) in a process of its own, as the real Ollama is.

In the load generator's process, the fake's handler threads share one GIL with the asyncio loop of the
WebSocket clients that time each turn: a client could read its ``done`` frame only after the fake's
thread, busy with another session's reply, let go of the GIL — a delay of the measurement, not of
memdesk. Here the fake runs in a child process (``spawn``) and the benchmark talks to it over a pipe:
the same few operations ``bench/load/chat_load.py`` uses on the in-process fake.

    with FakeOllamaProcess(deltas=["好的，", "已为您", …]) as fake:
        fake.host; fake.clear_requests(); fake.chat_requests; fake.script("text")
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["FakeOllamaProcess"]


def _serve(conn: Connection, deltas: list[str]) -> None:
    """The child: a FakeOllama answering with ``deltas`` until told to stop."""
    from testkit.fake_ollama import FakeOllama, Reply

    with FakeOllama(default_reply=Reply(deltas=deltas)) as fake:
        conn.send(fake.host)
        while True:
            command, *args = conn.recv()
            if command == "stop":
                conn.send(None)
                return
            if command == "clear":
                fake.requests.clear()
                conn.send(None)
            elif command == "chat_requests":
                conn.send(fake.chat_requests)
            elif command == "script":
                fake.script(*args)
                conn.send(None)
            else:
                conn.send(ValueError(f"unknown command {command!r}"))


class FakeOllamaProcess:
    """A FakeOllama in a child process; the parent's side of the pipe."""

    def __init__(self, *, deltas: list[str]) -> None:
        self.deltas = list(deltas)
        self._conn: Connection | None = None
        self._process: Any = None
        self.host = ""

    def _call(self, command: str, *args: Any) -> Any:
        assert self._conn is not None, "FakeOllamaProcess is not started"
        self._conn.send((command, *args))
        answer = self._conn.recv()
        if isinstance(answer, Exception):
            raise answer
        return answer

    def clear_requests(self) -> None:
        self._call("clear")

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """Bodies of every ``/api/chat`` request received since the last clear, oldest first."""
        return self._call("chat_requests")

    def script(self, *replies: str) -> None:
        self._call("script", *replies)

    def __enter__(self) -> FakeOllamaProcess:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, self.deltas), name="fake-ollama", daemon=True)
        self._process.start()
        if not self._conn.poll(60):
            self._process.kill()
            raise RuntimeError("the fake Ollama process did not start within 60 s")
        self.host = self._conn.recv()
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._call("stop")
        except (EOFError, OSError):  # already gone
            pass
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()

    @property
    def pid(self) -> int:
        return self._process.pid
