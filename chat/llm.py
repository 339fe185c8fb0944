"""The Ollama client: one model on one host, streamed, with typed failures.

Every way Ollama can fail becomes an :class:`LLMError` with a stable ``code``
and a ``retryable`` flag, so the chat turn can tell the user clearly (503
``llm_unavailable``) and never invents a reply:

- host unreachable, timeout, HTTP 5xx, a stream that breaks or ends without its
  final line → :class:`LLMUnavailable` (``llm_unavailable``, retryable);
- the model is not on the host → :class:`ModelNotFound` (``model_not_found``,
  not retryable: an operator must pull it).

Two rules from S19 live here: the context size comes from Ollama itself
(``/api/show``), and every request carries ``options.num_ctx`` so Ollama never
falls back to its small default window and truncates the prompt silently.

Each event loop has its own ``ollama.AsyncClient`` per host (an httpx pool,
keeping its connections to Ollama open between replies), closed when the loop
ends: a pool is bound to the loop it was made in, and memdesk calls from the
server's loop and from ``async_to_sync`` loops (a new one per call outside the
server) alike. A client per reply would cost each turn a TCP connect and the
client's construction (bench/load/chat_load.py reports the Ollama client's share of
a worker's time). The pool has no connection limit (Ollama queues requests
itself, ``OLLAMA_MAX_QUEUE``), so sharing it never makes a reply wait. Building
a TLS context per client would load and parse the whole CA bundle each time
(httpx does), so every client shares one, made on first use (:func:`_ssl_context`).

httpcore asks ``sniffio`` which async library is running each time it makes
a lock, a dozen times a reply; sniffio is not installed, and a failed import
searches the whole of ``sys.path`` again each time. Recording its
absence once in ``sys.modules`` makes the failure immediate, and httpcore
then assumes asyncio, which is what memdesk runs on.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import logging
import re
import ssl
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import ollama
from asgiref.sync import async_to_sync

from chat import metrics

logger = logging.getLogger(__name__)

if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
    sys.modules["sniffio"] = None  # type: ignore[assignment]  # "not installed", answered at once

#: How long a model's context size is trusted before ``/api/show`` is asked
#: again (an operator may ``ollama create`` a new Modelfile under the same name).
CONTEXT_CACHE_TTL_S = 300.0

#: The whole reply must end within this many ``timeout_s``; the first token
#: must come within one ``timeout_s``, and so must each following chunk.
OVERALL_TIMEOUT_FACTOR = 3.0

#: When neither the Modelfile nor the model metadata say (an unusual model):
#: Ollama's historic default window; we still pass it explicitly.
FALLBACK_CONTEXT_SIZE = 2048

_NUM_CTX_RE = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)

# (host, model) -> (context size, monotonic expiry). Shared by every
# OllamaChat in the process; a race only means two lookups, both correct.
_context_cache: dict[tuple[str, str], tuple[int, float]] = {}


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """The TLS context of every Ollama client in the process: httpx's default
    (certifi's CA bundle, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``), built once.
    An ``SSLContext`` is safe to share between clients, threads and loops."""
    return httpx.create_ssl_context()


class _LoopClients:
    """The Ollama clients of one event loop, by (host, timeout), and the task that closes them when the loop
    ends (``asyncio.run`` and ``async_to_sync`` cancel a loop's remaining tasks before closing it)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.clients: dict[tuple[str, float], ollama.AsyncClient] = {}
        self.closer = loop.create_task(self._close_at_end(loop), name="memdesk-ollama-clients")

    async def _close_at_end(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            await loop.create_future()  # never done: this task ends when the loop cancels it
        finally:
            _loop_clients.pop(loop, None)
            for client in list(self.clients.values()):
                with contextlib.suppress(Exception):
                    await client.close()


# One entry per live event loop, removed when the loop ends; touched only from the loop's own thread.
_loop_clients: dict[asyncio.AbstractEventLoop, _LoopClients] = {}


def _shared_client(host: str, timeout_s: float) -> ollama.AsyncClient:
    """This event loop's client for ``host``: made on first use, closed with the loop."""
    loop = asyncio.get_running_loop()
    entry = _loop_clients.get(loop)
    if entry is None:
        for stale in [other for other in list(_loop_clients) if other.is_closed()]:
            _loop_clients.pop(stale, None)  # a loop closed without cancelling its tasks
        entry = _loop_clients[loop] = _LoopClients(loop)
    client = entry.clients.get((host, timeout_s))
    if client is None or client._client.is_closed:
        client = entry.clients[(host, timeout_s)] = ollama.AsyncClient(
            host=host,
            timeout=httpx.Timeout(timeout_s),
            verify=_ssl_context(),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=20),
        )
    return client


class LLMError(Exception):
    """A failure talking to the model. ``code`` is a stable snake_case string
    for clients; ``retryable`` says whether trying again later can help;
    ``status`` is the HTTP status the API answers with. ``str(exc)`` is for
    operators (it may name the host); show clients ``public_message``."""

    code = "llm_error"
    retryable = False
    status = 503
    public_message = "The assistant is unavailable right now."

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class LLMUnavailable(LLMError):
    """Ollama is unreachable, too slow, failing (5xx) or its stream broke."""

    code = "llm_unavailable"
    retryable = True
    public_message = "The assistant is unavailable right now; please try again in a moment."


class ModelNotFound(LLMError):
    """The configured model is not on the Ollama host."""

    code = "model_not_found"
    retryable = False
    public_message = "The assistant is not set up yet; please contact support."

    def __init__(self, host: str, model: str) -> None:
        super().__init__(
            f"Ollama at {host} has no model '{model}'. Run `ollama pull {model}` on that host "
            f"(or `ollama create {model} -f platform/ollama/Modelfile`), or set OLLAMA_MODEL to a model it has."
        )
        self.host = host
        self.model = model


@dataclass(frozen=True, slots=True)
class LLMChunk:
    """One piece of a streamed reply. ``text`` is the new text only.
    ``tool_calls`` are ``{"function": {"name", "arguments"}}`` dicts. The token
    counts are set on the final chunk (``done=True``) and None before."""

    text: str
    done: bool
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def clear_context_cache() -> None:
    """Forget every cached context size (tests; after re-creating a model)."""
    _context_cache.clear()


def parse_context_size(parameters: str | None, model_info: Mapping[str, Any] | None) -> int | None:
    """The context size an ``/api/show`` answer describes, or None.

    The Modelfile's ``num_ctx`` wins: it is the operator's deliberate choice
    (often below the trained length, to bound KV-cache memory). Otherwise the
    model's trained ``<arch>.context_length`` from ``model_info``.
    """
    if parameters and (match := _NUM_CTX_RE.search(parameters)):
        return int(match.group(1))
    for key, value in (model_info or {}).items():
        if key.endswith(".context_length") and isinstance(value, int) and value > 0:
            return value
    return None


class OllamaChat:
    """A chat model on one Ollama host.

    ``timeout_s`` bounds the wait for the first token (model load and prompt
    evaluation included) and each later silence; the whole reply must finish
    within ``OVERALL_TIMEOUT_FACTOR × timeout_s``.
    """

    def __init__(self, host: str, model: str, *, timeout_s: float) -> None:
        self.host = host.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self.overall_timeout_s = timeout_s * OVERALL_TIMEOUT_FACTOR

    def __repr__(self) -> str:
        return f"OllamaChat(host={self.host!r}, model={self.model!r})"

    def _client(self) -> ollama.AsyncClient:
        return _shared_client(self.host, self.timeout_s)

    def _translate(self, exc: BaseException) -> LLMError:
        """The LLMError for an exception raised by the ollama client or httpx."""
        if isinstance(exc, ollama.ResponseError):
            if exc.status_code == 404 and "model" in str(exc.error).lower():
                return ModelNotFound(self.host, self.model)
            if exc.status_code >= 500 or exc.status_code == -1:
                # -1: an {"error": …} line inside a stream (the runner died).
                return LLMUnavailable(f"Ollama at {self.host} failed: {exc.error} (status {exc.status_code})")
            return LLMError(f"Ollama at {self.host} refused the request: {exc.error} (status {exc.status_code})")
        if isinstance(exc, httpx.TimeoutException | TimeoutError):
            return LLMUnavailable(f"Ollama at {self.host} did not answer within {self.timeout_s:g}s")
        if isinstance(exc, ConnectionError | httpx.ConnectError):
            return LLMUnavailable(f"Ollama at {self.host} is unreachable")
        if isinstance(exc, httpx.HTTPError | ValueError):
            # RemoteProtocolError (connection dropped mid-body), ReadError,
            # a garbled NDJSON line (ValueError from json / pydantic).
            return LLMUnavailable(f"The stream from Ollama at {self.host} broke: {type(exc).__name__}: {exc}")
        return LLMUnavailable(f"Ollama at {self.host} failed: {type(exc).__name__}: {exc}")

    async def context_size(self) -> int:
        """The model's context window in tokens, from ``/api/show`` (see
        :func:`parse_context_size`), cached per (host, model) for
        ``CONTEXT_CACHE_TTL_S`` across instances.

        Raises ModelNotFound or LLMUnavailable.
        """
        key = (self.host, self.model)
        cached = _context_cache.get(key)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        client = self._client()
        try:
            async with asyncio.timeout(self.timeout_s):
                shown = await client.show(self.model)
        except (ollama.ResponseError, httpx.HTTPError, ConnectionError, TimeoutError, ValueError) as exc:
            raise _counted(self._translate(exc)) from exc
        size = parse_context_size(shown.parameters, shown.modelinfo)
        if size is None:
            logger.warning(
                "Ollama at %s reports no context size for %s; using %d",
                self.host,
                self.model,
                FALLBACK_CONTEXT_SIZE,
            )
            size = FALLBACK_CONTEXT_SIZE
        _context_cache[key] = (size, time.monotonic() + CONTEXT_CACHE_TTL_S)
        return size

    async def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        num_ctx: int,
        tools: list[dict[str, Any]] | None = None,
    ) -> AsyncIterator[LLMChunk]:
        """Stream the model's reply to ``messages`` as LLMChunks, the last with
        ``done=True`` and the token counts.

        ``num_ctx`` is sent as ``options.num_ctx`` on every request: pass the
        size the prompt was budgeted for (``context_size()``), so Ollama sizes
        its window to it instead of truncating. Raises LLMUnavailable (also
        when the stream ends without its final line: a partial reply is never
        passed off as a whole one) or ModelNotFound.

        Cancelling the consuming task, or closing this generator (use
        ``contextlib.aclosing``), closes the HTTP response, and Ollama stops
        generating when its client goes away.
        """
        loop = asyncio.get_running_loop()
        started = loop.time()
        first_deadline = started + self.timeout_s
        overall_deadline = started + self.overall_timeout_s
        # Builds and validates the request; no I/O happens before the
        # first anext(). A malformed message or tool raises pydantic's
        # ValidationError here, as the programming error it is.
        parts: AsyncGenerator[ollama.ChatResponse, None] = await self._client().chat(
            model=self.model,
            messages=messages,
            tools=tools,
            stream=True,
            options={"num_ctx": num_ctx},
        )
        ended_early = f"The stream from Ollama at {self.host} ended before the reply was complete"
        too_long = f"Ollama at {self.host} did not finish its reply within {self.overall_timeout_s:g}s"
        deadline: _Deadline | None = None
        try:
            while True:
                try:
                    if deadline is None:
                        async with asyncio.timeout_at(first_deadline):
                            part = await anext(parts)
                        # One timer for the rest of the reply, not one per token (that would add two timer
                        # operations to every token streamed); httpx's read timeout
                        # still bounds each silence to ``timeout_s``.
                        deadline = _Deadline(overall_deadline)
                    else:
                        part = await deadline.next_part(parts)
                except StopAsyncIteration:
                    raise LLMUnavailable(ended_early) from None
                except TimeoutError:
                    late = (
                        too_long
                        if deadline is not None
                        else f"Ollama at {self.host} did not send a first token within {self.timeout_s:g}s"
                    )
                    raise LLMUnavailable(late) from None
                chunk = _to_chunk(part)
                if chunk.done:
                    await _read_to_end(parts, overall_deadline)
                    yield chunk
                    return
                if chunk.text or chunk.tool_calls:
                    yield chunk
        except LLMError as exc:
            _counted(exc)
            raise
        except (ollama.ResponseError, httpx.HTTPError, ConnectionError, TimeoutError, ValueError) as exc:
            raise _counted(self._translate(exc)) from exc
        finally:
            if deadline is not None:
                deadline.cancel()
            # Runs on normal end, error, cancellation and aclose() alike:
            # closing the inner generator leaves the ollama client's
            # ``async with client.stream(...)``, which closes the response
            # (a response not read to its end closes its connection too).
            await parts.aclose()

    async def version(self) -> str:
        """The Ollama server's version (a cheap reachability probe for
        ``/readyz``). Raises LLMUnavailable."""
        client = self._client()
        try:
            async with asyncio.timeout(self.timeout_s):
                response = await client._client.get("/api/version")  # the ollama client has no wrapper for it
                response.raise_for_status()
                return str(response.json()["version"])
        except (httpx.HTTPError, ConnectionError, TimeoutError, ValueError, KeyError) as exc:
            raise LLMUnavailable(f"Ollama at {self.host} is unreachable: {type(exc).__name__}") from exc


def _counted(error: LLMError) -> LLMError:
    """``error``, counted in ``memdesk_ollama_errors_total{code}``: the MemdeskOllamaErrors and
    MemdeskOllamaUnavailable alerts (platform/prometheus/alerts.yml) read it. Only the model calls a turn
    makes count (context size, reply stream), once each; ``version()``, the readiness probe, does not, so a
    probe polling a stopped Ollama adds nothing the turns did not."""
    metrics.OLLAMA_ERRORS.labels(code=error.code).inc()
    return error


class _Deadline:
    """A deadline for the rest of a stream, enforced only while the reading task waits for the stream
    (``wait``), never while the consumer runs between chunks: a timeout armed across a ``yield`` would
    cancel the consumer. One timer for the whole reply; like ``asyncio.timeout``, it cancels the waiting
    task and turns that cancellation into ``TimeoutError``, and a cancellation from elsewhere (the client
    went away) still propagates."""

    def __init__(self, when: float) -> None:
        self.task = asyncio.current_task()
        assert self.task is not None
        self.cancelling = self.task.cancelling()
        self.waiting = self.expired = self.fired = False
        self.handle = asyncio.get_running_loop().call_at(when, self._expire)

    def _expire(self) -> None:
        self.expired = True
        if self.waiting:
            self.fired = True
            self.task.cancel()

    async def next_part(self, parts: AsyncGenerator[ollama.ChatResponse, None]) -> ollama.ChatResponse:
        """The stream's next part; TimeoutError once the deadline has passed."""
        if self.expired:
            raise TimeoutError
        self.waiting = True
        try:
            result = await anext(parts)
        except asyncio.CancelledError:
            if self.fired and self.task.uncancel() <= self.cancelling:
                raise TimeoutError from None
            raise
        finally:
            self.waiting = False
        if self.fired:  # the wait ended on its own just as the deadline passed
            self.task.uncancel()
            raise TimeoutError
        return result

    def cancel(self) -> None:
        self.handle.cancel()


async def _read_to_end(parts: AsyncGenerator[ollama.ChatResponse, None], deadline: float) -> None:
    """Read the rest of a reply's body after its final line (the end of the chunked body, normally in the
    same packet), so its connection goes back to the pool instead of being closed: a response closed
    before its end takes its connection with it. The reply is whole already, so a failure here only costs
    that connection."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout_at(deadline):
            async for _ in parts:
                pass


def _to_chunk(part: ollama.ChatResponse) -> LLMChunk:
    message = part.message
    tool_calls = [
        {"function": {"name": call.function.name, "arguments": dict(call.function.arguments)}}
        for call in (message.tool_calls or [])
    ]
    done = bool(part.done)
    return LLMChunk(
        text=message.content or "",
        done=done,
        tool_calls=tool_calls,
        prompt_tokens=part.prompt_eval_count if done else None,
        completion_tokens=part.eval_count if done else None,
    )


def get_llm() -> OllamaChat:
    """The configured model: settings ``OLLAMA_HOST``, ``OLLAMA_MODEL``,
    ``OLLAMA_TIMEOUT_S``. Cheap to call per turn (the context size is cached
    per host and model, not per instance)."""
    from django.conf import settings

    return OllamaChat(settings.OLLAMA_HOST, settings.OLLAMA_MODEL, timeout_s=settings.OLLAMA_TIMEOUT_S)


def structured_answer(system: str, user: str, schema: dict[str, Any]) -> tuple[str, str]:
    """One non-streaming request to the configured model whose answer Ollama constrains to the JSON
    ``schema`` (``format``); returns (the model's name, its raw answer text). Memory's optional model
    extraction is handed this (``memory.extraction.model.StructuredAsk``): memory never calls a model itself.
    Synchronous: it runs inside a turn's database step, on a worker thread."""
    llm = get_llm()
    # The chat's own context size: a request with another num_ctx makes Ollama reload the model, which
    # would cost far more than the request. Cached per host and model; the turn has just asked for it.
    num_ctx = async_to_sync(llm.context_size)()
    response = _sync_client(llm.host, llm.timeout_s).chat(
        model=llm.model,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        format=schema,
        stream=False,
        options={"num_ctx": num_ctx, "temperature": 0},
    )
    return llm.model, response.message.content or ""


@functools.lru_cache(maxsize=4)
def _sync_client(host: str, timeout_s: float) -> ollama.Client:
    """A sync client per (host, timeout), kept for the process: an httpx ``Client`` is thread-safe and bound
    to no event loop, and building one costs a TLS context."""
    return ollama.Client(host=host, timeout=httpx.Timeout(timeout_s))
