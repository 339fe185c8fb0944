"""Long-term memory measured on the path users run: conversations enter through the chat turn, questions are
asked where a returning customer's are answered.

- **Ingest**: every dialogue turn goes through ``chat.turn.run.run_turn`` — the function the WebSocket consumer
  and the REST endpoint call — against the fake Ollama (``testkit.fake_ollama.FakeOllama``, a real HTTP server on
  127.0.0.1, in this process), whose reply to each turn is the dataset's agent turn (a short acknowledgement
  that carries no fact where the dataset has none). Per dialogue: a tenant set up as the other benchmarks do
  (rate limits raised so no turn is refused), one end user, one chat session per dialogue session, opened with
  ``chat.sessions.lifecycle.do_open_session`` (what ``POST /v1/sessions`` calls). A dataset turn is mapped to the
  message
  it became: ``TurnResult.message_id`` (the user's message) and ``TurnResult.reply_id`` (the agent's reply).
- **Recall**: each question through ``memory.recall.pipeline.recall(…, k=10, record=False)`` in a NEW session of the
same
  end user (what a returning customer gets); a hit counts for the turn of its ``memory.source_message_id``
  (a memory without a source message, or from a message that is no dataset turn, counts for none).
  ``record=False`` so no question changes what the next one finds; the chat turn calls it that way too.
- **Scores**: evidence R@1/5/10 — the share of a question's evidence (answer) turns among the turns of the
  top-k hits, averaged over questions — overall and per category/kind; hit@5 — the share of questions with at
  least one of them in the top 5. With ``stale_turns``: *stale served* — the share of those questions where a
  stale turn is in the top 5 ranked above every answer turn (or no answer turn is in the top 5); *stale@5* — the
  share where a stale turn is in the top 5 at all; *stale@5 as current* — the share where one is there that recall
  did not mark as no longer current (the API's ``current``), what a caller reading that field takes as true now;
  *hit@5 as current* — the share of questions with an answer turn in the top 5 that recall did not mark as no longer
  current: an answer marked so reaches the prompt as "[…, no longer current]", and the model is told not to trust it;
  *answer marked* — the share of questions with an answer turn in the top 5 that recall marked so, whether or not
  another answer turn is shown as current: a true statement called out of date.
- **Baseline**: Okapi BM25 with the product's k1 and b (``bench/retrieval.py``) over the raw dataset turns of
  the same end user, tokenised as ``memory.text.language`` does (``segment`` for turns, ``query_terms`` for questions).
- **Storage**: rows of ``memory_memoryunit``, ``memory_memoryevent`` and ``chat_message`` of this run's
  tenants, with ``sum(pg_column_size(row))`` (row data as stored, compressed values compressed, no indexes),
  and the growth of ``pg_total_relation_size`` (heap, TOAST and indexes; the database is this run's alone), per
  1,000 turns — a *turn* is one ``run_turn`` call: a user message and its reply.
- **Time**: ingestion turns/s; ``run_turn`` wall time per turn; the time until the reply is complete and
  stored (``run_turn``'s ``on_done`` callback) against the time ``run_turn`` returns — the difference is what
  runs after the reply (the conversation-memory write, and the tenant's periodic health check); recall wall time
  per question.

Datasets (``--dataset``):

- ``locomo`` — ``/work/shared/bench/locomo10.json`` (LoCoMo, CC BY-NC 4.0: evaluation only, never shipped;
  citation in ``bench/quality/locomo_recall.py``). Every turn is one message "Speaker: text" (a shared photo's caption
  appended as "[shared a photo: …]"): within each session the turns alternate as the user's message and the
  fake model's reply (``--locomo-turns paired``, the figure), a session's odd last turn answered "OK."; or every
  turn is a user message answered "OK." (``--locomo-turns acked``). One tenant (``en``) per conversation, one
  chat session per LoCoMo session. Questions of categories 1–4 make the overall figure; 5 (adversarial) is reported
  on its own. Evidence ids normalised as ``locomo_recall.normalise_evidence`` does. The session dates are not
  sent (a chat turn is stamped with the time it runs), so temporal questions lose their anchor.
- ``zh_cs`` — ``bench/data/zh_cs_memory.json`` (``--data`` for another file): Chinese customer-service
  dialogues, tenant language ``zh``. The loader expects::

      {"dialogues": [{"id": "d1",
                      "sessions": [{"id": "s1", "turns": [{"id": "t1", "role": "user", "text": "…"},
                                                          {"id": "t2", "role": "assistant", "text": "…"}]}],
                      "questions": [{"id": "q1", "question": "…", "kind": "…",
                                     "answer_turns": ["t2"], "stale_turns": ["t1"]}]}]}

  and takes the usual variants (a bare list of dialogues; ``turns`` with a ``session`` field; ``content`` for
  ``text``; ``speaker`` or ``agent`` for the role; ``qa``/``evidence``/``category``); ``load_zh_cs`` says
  exactly which. A user turn is a user message; an assistant turn is the fake model's reply to the user turn
  just before it. A user turn with no assistant turn after it is answered "好的。"; an assistant turn with no
  user turn before it is sent after a filler user message "你好。" (both counted in the output).
- ``multiwoz``, ``crosswoz`` — fact questions from the clerk's turns of public service dialogues (MultiWOZ 2.1,
  English; CrossWOZ, Chinese): ``--customers`` pseudo customers of five dialogues each, one chat session per
  dialogue, from the ``--half`` (``fit`` or ``report``) of the dialogues; ``bench/quality/woz_facts.py`` builds
  them and says how. The kind of each question is the slot it asks for (``ref``, ``train id``, ``taxi car``…).
- ``scale`` — one end user with ``--turns`` turns (default 5,000) and one with 50, in one tenant, of synthetic
  Chinese and English customer-service chat generated from ``--seed`` by ``bench/synthetic.py`` (orders, products,
  amounts, dates, addresses, phone numbers, tracking numbers, tickets), 20 turns a session; then ``--queries`` distinct
  questions for each user (default 150), asked alternately, one user's then the other's, in the same run:
  recall p50/p95 per user and p95(large)/p95(small), the figure for "recall p95 for an end user with 5,000 turns
  ≤ 2× that for an end user with 50 turns", plus memory rows per user and R@k.

Usage (from the repository root; a benchmark is not a test: one at a time, ``nice``)::

    nice -n 10 .venv/bin/python bench/quality/chat_memory.py --dataset locomo --conversations 0 --max-turns 150
    nice -n 10 .venv/bin/python bench/quality/chat_memory.py --dataset locomo                 # all 10: 5,882 turns
    nice -n 10 .venv/bin/python bench/quality/chat_memory.py --dataset zh_cs
    nice -n 10 .venv/bin/python bench/quality/chat_memory.py --dataset scale --turns 5000
    nice -n 10 .venv/bin/python bench/quality/chat_memory.py --dataset multiwoz --half fit --customers 40

Prints a Markdown table and writes ``bench/out/chat_memory_<dataset>.json`` (``--out`` to name it otherwise).
The database ``memdesk_bench_chat_memory_<output name>`` is dropped and created afresh each run (so two runs
with different ``--out`` can go side by side). ``--knobs JSON`` (repeatable) asks every question again with those
``MEMDESK_RECALL`` settings on the same ingest and reports each variant beside the default. ``--reuse-ingest`` asks
the questions again on the database an earlier run with the same arguments left (its turns were ingested through the
chat path, by the code of that run's commit, which the output names): for comparing recall settings or recall code
without waiting for the ingest again; the product's figure comes from a run that ingests. Nothing of the product is
patched; the database is read directly only to map memories to turns and to measure storage.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import os
import random
import re
import shlex
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: common, retrieval, synthetic
import common  # noqa: E402
import locomo_recall  # noqa: E402
import retrieval  # noqa: E402
import synthetic  # noqa: E402

DB_NAME = "memdesk_bench_chat_memory"
ZH_CS_DATA = common.BENCH_DIR / "data" / "zh_cs_memory.json"
PATH_MEASURED = (
    "ingest: chat.turn.run.run_turn with the fake model answering; "
    "recall: memory.recall.pipeline.recall(k=10) in a new session of the same end user"
)
PATH_MEASURED_IMPORT = (
    "ingest: each session through POST /api/v1/end-users/<id>/conversations at its own day, then manage.py "
    "run_worker --once; recall: memory.recall.pipeline.recall(k=10) in a new session of the same end user, today"
)
KS = (1, 5, 10)
RECALL_K = 10
STALE_K = 5
#: The fake model's answer to a user turn the dataset gives no answer to: it carries no fact.
ACK = {"en": "OK.", "zh": "好的。"}
#: The user message sent before an agent turn that has no user turn before it.
FILLER = {"en": "Hi.", "zh": "你好。"}
#: Turns per block of the per-dialogue trend of run_turn's time.
TREND_BLOCK = 500


# --- datasets --------------------------------------------------------------------------------------------------


@dataclass
class Turn:
    id: str
    role: str  # "user" | "assistant"
    text: str


@dataclass
class Session:
    label: str
    turns: list[Turn]
    #: The day the session happened, counted from the dialogue's first (the zh_cs schema's ``day``): the import
    #: path (``--via import``) dates its messages with it.
    day: int | None = None


@dataclass
class Question:
    id: str
    text: str
    kind: str
    answer: list[str]
    stale: list[str] = field(default_factory=list)
    #: Counted in the overall figure (LoCoMo's adversarial category 5 is reported on its own).
    overall: bool = True


@dataclass
class Dialogue:
    id: str
    tenant: str  # dialogues with the same tenant key share a tenant
    language: str
    end_user: str
    sessions: list[Session]
    questions: list[Question]

    def turns(self) -> list[Turn]:
        return [t for s in self.sessions for t in s.turns]


@dataclass
class Dataset:
    name: str
    dialogues: list[Dialogue]
    #: (dialogue index, question) in the order they are asked.
    asked: list[tuple[int, Question]]
    info: dict[str, Any] = field(default_factory=dict)


def _ask_in_order(dialogues: list[Dialogue]) -> list[tuple[int, Question]]:
    return [(i, q) for i, d in enumerate(dialogues) for q in d.questions]


def _cap_turns(dialogue: Dialogue, max_turns: int | None) -> int:
    """Keep the first ``max_turns`` turns of ``dialogue`` (all when None) and only the questions whose answer
    turns were all kept (their stale turns are cut to the kept ones); returns how many questions were dropped."""
    if not max_turns:
        return 0
    left = max_turns
    sessions = []
    for session in dialogue.sessions:
        if left <= 0:
            break
        sessions.append(Session(session.label, session.turns[:left]))
        left -= len(sessions[-1].turns)
    dialogue.sessions = sessions
    kept = {t.id for t in dialogue.turns()}
    before = len(dialogue.questions)
    dialogue.questions = [q for q in dialogue.questions if all(a in kept for a in q.answer)]
    for q in dialogue.questions:
        q.stale = [s for s in q.stale if s in kept]
    return before - len(dialogue.questions)


def load_locomo(conversations: list[int] | None, max_turns: int | None, mode: str = "paired") -> Dataset:
    """LoCoMo's conversations as chat sessions. ``paired`` (the figure): within each session, turns alternate
    as the user's message and the model's reply (the fake model answers turn 2k+1 with turn 2k+2, each
    "Speaker: text"), so every turn is one message and the message before each is the turn before it, as in a
    two-party chat; a session's odd last turn gets the short acknowledgement. ``acked``: every turn is a user
    message, each answered "OK." (which stores nothing): the message before each turn is then an "OK."."""
    convs = locomo_recall.load_conversations(10, None)
    chosen = [c for c in convs if conversations is None or c.index in conversations]
    dialogues = []
    glitches: Counter[str] = Counter()
    dropped = 0
    for conv in chosen:
        sessions: dict[str, list[Turn]] = {}
        for t in conv.turns:
            # "D3:12" is turn 12 of session 3.
            turns = sessions.setdefault(t.dia_id.split(":")[0], [])
            role = "assistant" if mode == "paired" and len(turns) % 2 == 1 else "user"
            turns.append(Turn(t.dia_id, role, f"{t.speaker}: {t.text}"))
        questions = [
            Question(
                f"{conv.sample_id}#{n}",
                q.question,
                f"cat{q.category} {locomo_recall.CATEGORY_NAMES.get(q.category, '?')}",
                q.evidence,
                overall=q.category != 5,
            )
            for n, q in enumerate(conv.qa)
            if q.evidence
        ]
        dialogue = Dialogue(
            conv.sample_id, conv.sample_id, "en", "locomo-user", [Session(k, v) for k, v in sessions.items()], questions
        )
        dropped += _cap_turns(dialogue, max_turns)
        dialogues.append(dialogue)
        glitches.update(conv.evidence_glitches)
    info = {
        "path": str(locomo_recall.DATA),
        "citation": locomo_recall.CITATION,
        "license": "CC BY-NC 4.0 (non-commercial evaluation; never shipped)",
        "conversations": [d.id for d in dialogues],
        "turns_as": mode,
        "evidence_glitches": dict(glitches),
        "questions_without_evidence_skipped": sum(c.evidence_glitches["no_evidence"] for c in chosen),
        "questions_dropped_by_max_turns": dropped,
        "all_ten_conversations": {
            "turns": sum(len(c.turns) for c in convs),
            "questions_with_evidence": sum(1 for c in convs for q in c.qa if q.evidence),
        },
    }
    return Dataset("locomo", dialogues, _ask_in_order(dialogues), info)


_USER_ROLES = {"user", "customer", "end_user", "用户", "客户"}
_AGENT_ROLES = {"assistant", "agent", "bot", "客服", "service"}


def _first(item: dict[str, Any], *names: str, default: Any = None) -> Any:
    for name in names:
        if name in item and item[name] is not None:
            return item[name]
    return default


def _role(raw: Any, where: str) -> str:
    role = str(raw).strip().lower()
    if role in _USER_ROLES:
        return "user"
    if role in _AGENT_ROLES:
        return "assistant"
    raise ValueError(f"{where}: unknown role {raw!r} (expected one of {sorted(_USER_ROLES | _AGENT_ROLES)})")


def _turn_ids(raw: Any) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str | int):
        raw = [raw]
    return [str(x) for x in raw]


def parse_zh_cs(raw: Any, *, max_turns: int | None = None) -> Dataset:
    """Dialogues from the ``zh_cs`` schema (module docstring). Accepted variants: the top level a list of
    dialogues or ``{"dialogues": […]}``; a dialogue's ``id``/``dialogue_id``, ``end_user``/``user_id``;
    ``sessions`` as a list of ``{"id"/"session_id", "turns"}`` or of turn lists, or a flat ``turns`` list whose
    turns name their ``session``; a turn's ``id``/``turn_id``, ``role``/``speaker``, ``text``/``content``; the
    questions in ``questions``/``qa``, each with ``question``/``query``/``text``, ``kind``/``category``/``type``,
    ``answer_turns``/``evidence``/``answers`` and ``stale_turns``/``stale``. Turn ids must be unique within a
    dialogue (ids missing from the file become ``s<session>t<n>``); a dialogue's ``language`` (default ``zh``)
    is its tenant's. A question naming a turn that does not exist is an error: the data is wrong, and a silent
    drop would inflate the scores."""
    items = raw["dialogues"] if isinstance(raw, dict) else raw
    dialogues = []
    dropped = 0
    for n, item in enumerate(items):
        did = str(_first(item, "id", "dialogue_id", default=f"d{n}"))
        days: dict[str, int] = {}
        if "sessions" in item:
            raw_sessions = [
                (str(_first(s, "id", "session_id", default=i)), s["turns"]) if isinstance(s, dict) else (str(i), s)
                for i, s in enumerate(item["sessions"])
            ]
            days = {
                str(_first(s, "id", "session_id", default=i)): int(s["day"])
                for i, s in enumerate(item["sessions"])
                if isinstance(s, dict) and isinstance(s.get("day"), int)
            }
        else:
            grouped: dict[str, list[Any]] = {}
            for t in item["turns"]:
                grouped.setdefault(str(_first(t, "session", "session_id", default=0)), []).append(t)
            raw_sessions = list(grouped.items())
        sessions = []
        for label, turns in raw_sessions:
            parsed = []
            for i, t in enumerate(turns):
                where = f"dialogue {did} session {label} turn {i}"
                parsed.append(
                    Turn(
                        str(_first(t, "id", "turn_id", default=f"s{label}t{i}")),
                        _role(_first(t, "role", "speaker", default=""), where),
                        str(_first(t, "text", "content")).strip(),
                    )
                )
            sessions.append(Session(label, parsed, days.get(label)))
        ids = [t.id for s in sessions for t in s.turns]
        if len(ids) != len(set(ids)):
            raise ValueError(f"dialogue {did}: turn ids repeat: {[k for k, c in Counter(ids).items() if c > 1]}")
        questions = []
        for i, q in enumerate(_first(item, "questions", "qa", default=[])):
            question = Question(
                str(_first(q, "id", "question_id", default=f"{did}#q{i}")),
                str(_first(q, "question", "query", "text")),
                str(_first(q, "kind", "category", "type", default="all")),
                _turn_ids(_first(q, "answer_turns", "evidence", "answers")),
                _turn_ids(_first(q, "stale_turns", "stale")),
            )
            unknown = [t for t in question.answer + question.stale if t not in ids]
            if unknown:
                raise ValueError(f"dialogue {did} question {question.id}: no such turns {unknown}")
            if not question.answer:
                raise ValueError(f"dialogue {did} question {question.id}: no answer turns")
            questions.append(question)
        end_user = str(_first(item, "end_user", "user_id", default=f"customer-{did}"))
        language = str(_first(item, "language", default="zh"))
        dialogue = Dialogue(did, did, language, end_user, sessions, questions)
        dropped += _cap_turns(dialogue, max_turns)
        dialogues.append(dialogue)
    info = {"questions_dropped_by_max_turns": dropped}
    return Dataset("zh_cs", dialogues, _ask_in_order(dialogues), info)


def zh_half_of(dialogue_id: str) -> str:
    """``fit`` or ``report`` for a zh_cs dialogue: the first byte of sha256(its id) even or odd, as the public
    corpora's halves (bench/quality/topic_switch_public.py). Rules are fitted on ``fit``; ``report`` is run once."""
    return "fit" if hashlib.sha256(dialogue_id.encode()).digest()[0] % 2 == 0 else "report"


def load_zh_cs(path: Path, max_turns: int | None) -> Dataset:
    dataset = parse_zh_cs(json.loads(path.read_text()), max_turns=max_turns)
    dataset.info["path"] = str(path)
    return dataset


# --- the synthetic scale dataset ---------------------------------------------------------------------------------


def _scale_dialogue(
    name: str, turns: int, rng: random.Random, prefix: str, per_session: int
) -> tuple[list[synthetic.Exchange], Dialogue]:
    facts = synthetic.exchanges(rng, turns, prefix)
    sessions = []
    for start in range(0, turns, per_session):
        session_turns = []
        for n in range(start, min(turns, start + per_session)):
            session_turns += [
                Turn(f"{name}-u{n}", "user", facts[n].user),
                Turn(f"{name}-a{n}", "assistant", facts[n].reply),
            ]
        sessions.append(Session(f"{name}-s{start // per_session}", session_turns))
    return facts, Dialogue(name, "scale", "zh", f"{name}-user", sessions, [])


def build_scale(turns: int, small: int, queries: int, seed: int, per_session: int = 20) -> Dataset:
    """Two end users of one tenant: ``turns`` and ``small`` exchanges; ``queries`` distinct questions each,
    asked alternately. A question names its exchange's order number; both turns of the exchange answer it."""
    rng = random.Random(seed)
    big_facts, big = _scale_dialogue("large", turns, rng, "B", per_session)
    small_facts, little = _scale_dialogue("small", small, rng, "S", per_session)

    def pick(facts: list[synthetic.Exchange], name: str) -> list[Question]:
        pool = [(n, q) for n, f in enumerate(facts) for q in dict.fromkeys(f.questions)]
        if len(pool) < queries:
            raise SystemExit(f"{name}: only {len(pool)} distinct questions for --queries {queries}")
        # One question per exchange first (spread over the whole history), then second ones, …
        by_fact: dict[int, list[str]] = defaultdict(list)
        for n, q in pool:
            by_fact[n].append(q)
        order = list(by_fact)
        rng.shuffle(order)
        chosen: list[tuple[int, str]] = []
        round_no = 0
        while len(chosen) < queries:
            chosen += [(n, by_fact[n][round_no]) for n in order if round_no < len(by_fact[n])][: queries - len(chosen)]
            round_no += 1
        return [
            Question(f"{name}#{i}", q, f"{facts[n].kind} ({facts[n].language})", [f"{name}-u{n}", f"{name}-a{n}"])
            for i, (n, q) in enumerate(chosen)
        ]

    big.questions, little.questions = pick(big_facts, "large"), pick(small_facts, "small")
    asked = [(i, q) for pair in zip(big.questions, little.questions, strict=True) for i, q in enumerate(pair)]
    info = {"seed": seed, "turns": {"large": turns, "small": small}, "turns_per_session": per_session,
            "languages": dict(Counter(f.language for f in big_facts + small_facts))}  # fmt: skip
    return Dataset("scale", [big, little], asked, info)


# --- ingest through the chat turn --------------------------------------------------------------------------------


@dataclass
class Ingested:
    """A dialogue after ingestion: its tenant, and which stored message each dataset turn became."""

    dialogue: Dialogue
    tenant: Any
    turn_of_message: dict[str, str] = field(default_factory=dict)  # stored message id → dataset turn id
    turns: int = 0  # run_turn calls
    fillers: int = 0  # filler user messages sent before an agent turn with no user turn before it
    acks: int = 0  # user turns answered with ACK
    turn_ms: list[float] = field(default_factory=list)  # run_turn, call to return
    reply_ms: list[float] = field(default_factory=list)  # call to on_done (reply complete and stored)
    after_ms: list[float] = field(default_factory=list)  # on_done to return (what runs after the reply)
    seconds: float = 0.0
    errors: Counter[str] = field(default_factory=Counter)
    reply_mismatches: int = 0  # TurnResult.reply differs from the scripted text


class FakeModel:
    """The fake Ollama's reply source: answers every ``/api/chat`` request with the reply set for the turn
    under way, and checks that the request is for that turn's user message (the prompt's last message).

    ``use_every`` N > 0: every N-th request whose prompt shows recalled memories, the reply also quotes the
    first of them (recall's best), as a model that uses its memory would — so the reply, which decides which
    memories count as used or ignored, depends on what was recalled and not only on the script. ``sent`` is
    the reply last sent."""

    def __init__(self, use_every: int = 0) -> None:
        self.reply = ""
        self.expect = ""
        self.sent = ""
        self.requests = 0
        self.prompt_mismatches = 0
        self.use_every = use_every
        self.with_memories = 0
        self.quoted = 0

    def __call__(self, body: dict[str, Any]) -> Any:
        from testkit.fake_ollama import Reply

        self.requests += 1
        messages = body.get("messages") or [{}]
        if self.expect not in str(messages[-1].get("content", "")):
            self.prompt_mismatches += 1
        self.sent = self.reply
        shown = re.findall(r"^- \[\w+\] (.+)$", str(messages[0].get("content", "")), flags=re.MULTILINE)
        if self.use_every and shown:
            self.with_memories += 1
            if self.with_memories % self.use_every == 0:
                self.quoted += 1
                self.sent = f"{self.reply} {shown[0]}"
        return Reply(text=self.sent)


def _exchanges(session: Session, language: str) -> list[tuple[str, str | None, str, str | None]]:
    """``(user text, its turn id, reply text, its turn id)`` per run_turn call; None for a filler or an ACK."""
    out: list[tuple[str, str | None, str, str | None]] = []
    turns = session.turns
    i = 0
    while i < len(turns):
        turn = turns[i]
        if turn.role == "user":
            nxt = turns[i + 1] if i + 1 < len(turns) and turns[i + 1].role == "assistant" else None
            out.append((turn.text, turn.id, nxt.text if nxt else ACK[language], nxt.id if nxt else None))
            i += 2 if nxt else 1
        else:
            out.append((FILLER[language], None, turn.text, turn.id))
            i += 1
    return out


#: ``Tenant.settings`` for the measured tenants (``--tenant-settings``), e.g. ``{"auto_ignore": true}``.
TENANT_SETTINGS: dict[str, Any] = {}


def make_tenant(slug: str, language: str) -> Any:
    return common.make_tenant(slug, language=language, settings=TENANT_SETTINGS).tenant


def open_session(tenant: Any, end_user: str, metadata: dict[str, Any]) -> Any:
    return common.open_session(tenant, end_user, {"benchmark": "chat_memory", **metadata})


async def _ingest(ing: Ingested, sessions: list[Any], fake: FakeModel, llm: Any, progress: Callable[[], None]) -> None:
    from chat.turn.run import run_turn

    dialogue = ing.dialogue
    for session, dsession in zip(sessions, dialogue.sessions, strict=True):
        for n, (text, user_id, reply, reply_id) in enumerate(_exchanges(dsession, dialogue.language)):
            fake.reply, fake.expect = reply, text
            done_at: list[float] = []

            async def on_done(_result: Any, done_at: list[float] = done_at) -> None:
                done_at.append(time.perf_counter())

            started = time.perf_counter()
            try:
                result = await run_turn(
                    ing.tenant, session, text, f"{dsession.label}-{n}"[:100], llm=llm, on_done=on_done
                )
            except Exception as exc:  # recorded with its text (ApiError or not); the run goes on
                ing.errors[f"{type(exc).__name__}: {exc}"] += 1
                message_id = getattr(exc, "message_id", "")
                if message_id and user_id:
                    ing.turn_of_message[message_id] = user_id
                continue
            ended = time.perf_counter()
            ing.turns += 1
            ing.fillers += user_id is None
            ing.acks += reply_id is None
            ing.turn_ms.append((ended - started) * 1000)
            if done_at:
                ing.reply_ms.append((done_at[0] - started) * 1000)
                ing.after_ms.append((ended - done_at[0]) * 1000)
            else:
                ing.errors["on_done was not called"] += 1
            if result.reply != (fake.sent or reply):
                ing.reply_mismatches += 1
            if user_id:
                ing.turn_of_message[result.message_id] = user_id
            if reply_id:
                ing.turn_of_message[result.reply_id] = reply_id
            progress()


def warmup_dataset(languages: list[str]) -> Dataset:
    dialogues = []
    for language in languages:
        texts = {
            "zh": ["你好，我的订单号是 WARM0001。", "请问什么时候发货？"],
            "en": ["Hi, my order is WARM0001.", "When?"],
        }
        turns = [Turn(f"w{n}", "user", text) for n, text in enumerate(texts.get(language, texts["en"]))]
        dialogues.append(
            Dialogue(f"warmup-{language}", f"warmup-{language}", language, "warmup", [Session("w", turns)], [])
        )
    return Dataset("warmup", dialogues, [])


def ingest(dataset: Dataset, fake_host: str, fake: FakeModel) -> list[Ingested]:
    """Every dialogue's turns through ``run_turn``, one event loop for the whole dataset."""
    from django.conf import settings

    from chat.llm import OllamaChat
    from memory.embeddings import models as embeddings
    from memory.models import MemoryType

    tenants: dict[str, Any] = {}
    plan = []
    for dialogue in dataset.dialogues:
        key = dialogue.tenant
        if key not in tenants:
            tenants[key] = make_tenant(f"cm-{dataset.name}-{len(tenants)}"[:50], dialogue.language)
            for model in embeddings.models_for(tenants[key], MemoryType.values):  # loaded before the first turn
                embeddings.embed(["warm up"], model=model)
        tenant = tenants[key]
        sessions = [open_session(tenant, dialogue.end_user, {"dialogue": dialogue.id, "session": s.label})
                    for s in dialogue.sessions]  # fmt: skip
        plan.append((Ingested(dialogue, tenant), sessions))
    total = sum(len(_exchanges(s, d.language)) for d in dataset.dialogues for s in d.sessions)
    done = [0]
    started = time.perf_counter()

    def progress() -> None:
        done[0] += 1
        if done[0] % 250 == 0 or done[0] == total:
            rate = done[0] / (time.perf_counter() - started)
            common.log(f"  {done[0]}/{total} turns, {rate:.1f} turns/s, ~{(total - done[0]) / rate:.0f} s left")

    async def run_all() -> None:
        llm = OllamaChat(fake_host, settings.OLLAMA_MODEL, timeout_s=settings.OLLAMA_TIMEOUT_S)
        for ing, sessions in plan:
            began = time.perf_counter()
            await _ingest(ing, sessions, fake, llm, progress)
            ing.seconds = time.perf_counter() - began

    asyncio.run(run_all())
    return [ing for ing, _ in plan]


def ingest_by_import(dataset: Dataset) -> list[Ingested]:
    """Every dialogue's sessions as past conversations through ``POST /api/v1/end-users/<id>/conversations``
    (the test client, the tenant's key), dated by their ``day`` (each dialogue's last day yesterday, a minute between
    messages, each turn's id its message's ``external_id``), then ``manage.py run_worker --once`` until each
    import is done. The questions are then asked today, as a customer who comes back would ask them."""
    from django.core.management import call_command
    from django.utils import timezone
    from rest_framework.test import APIClient

    from conversations.models import Message
    from tenants.rls import tenant_scope

    def day_of(session: Session, n: int) -> int:
        return session.day if session.day is not None else n

    # Each dialogue's last session was yesterday: its questions come the day after, whatever other dialogues span
    # (a voucher "valid for 7 days" given in the last session is still valid when asked about).
    today = timezone.now().replace(hour=9, minute=0, second=0, microsecond=0)
    clients: dict[str, tuple[Any, Any]] = {}
    plan: list[tuple[Ingested, list[str]]] = []
    started = time.perf_counter()
    for dialogue in dataset.dialogues:
        if dialogue.tenant not in clients:
            provisioned = common.make_tenant(
                f"cm-{dataset.name}-{len(clients)}"[:50], language=dialogue.language, settings=TENANT_SETTINGS
            )
            client = APIClient(SERVER_NAME="localhost")
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {provisioned.api_key}")
            clients[dialogue.tenant] = (provisioned.tenant, client)
        tenant, client = clients[dialogue.tenant]
        ing = Ingested(dialogue, tenant)
        session_ids = []
        last = max((day_of(s, n) for n, s in enumerate(dialogue.sessions)), default=0)
        first_day = today - timedelta(days=last + 1)
        for n, session in enumerate(dialogue.sessions):
            start = first_day + timedelta(days=day_of(session, n), hours=n % 8)
            turns = [t for t in session.turns if t.text]
            body = {
                "external_id": f"{dialogue.id}/{session.label}"[:200],
                "started_at": start.isoformat(),
                "messages": [
                    {"role": "user" if t.role == "user" else "agent", "text": t.text[:4000],
                     "sent_at": (start + timedelta(minutes=i)).isoformat(), "external_id": t.id[:100]}
                    for i, t in enumerate(turns)
                ],
            }  # fmt: skip
            response = client.post(f"/api/v1/end-users/{dialogue.end_user}/conversations", body, format="json")
            if response.status_code not in (200, 202):
                ing.errors[f"import {response.status_code}: {response.content[:200]!r}"] += 1
                continue
            session_ids.append(response.json()["session_id"])
            ing.turns += len(turns)
        plan.append((ing, session_ids))
    call_command("run_worker", "--once", "--nice", "0")
    seconds = time.perf_counter() - started
    for ing, session_ids in plan:
        with tenant_scope(ing.tenant):
            rows = Message.objects.for_tenant(ing.tenant).filter(session_id__in=session_ids)
            ing.turn_of_message = {str(m.pk): m.client_msg_id for m in rows if m.client_msg_id}
        ing.seconds = seconds * ing.turns / max(1, sum(i.turns for i, _ in plan))
    return [ing for ing, _ in plan]


# --- recall, scores, baseline -------------------------------------------------------------------------------------


def stale_served(ranked: list[str], answer: list[str], stale: list[str], k: int = STALE_K) -> bool:
    """A stale turn among the top ``k`` ranked above every answer turn (or with no answer turn there)."""
    top = ranked[:k]
    stale_ranks = [i for i, t in enumerate(top) if t in stale]
    if not stale_ranks:
        return False
    answer_ranks = [i for i, t in enumerate(top) if t in answer]
    return not answer_ranks or min(stale_ranks) < min(answer_ranks)


def answer_as_current(ranked: list[str], marked: list[bool], answer: list[str], k: int = 5) -> bool:
    """An answer turn among the top ``k`` that recall did not mark as no longer current: what the prompt shows as
    true now (an answer marked stale is shown as "no longer current")."""
    return any(t in answer and not m for t, m in zip(ranked[:k], marked[:k], strict=False))


def answer_marked(ranked: list[str], marked: list[bool], answer: list[str], k: int = 5) -> bool:
    """An answer turn among the top ``k`` that recall marked as no longer current: a true answer the prompt tells
    the model not to trust, whether or not another answer turn is shown as current."""
    return any(t in answer and m for t, m in zip(ranked[:k], marked[:k], strict=False))


def stale_as_current(ranked: list[str], marked: list[bool], stale: list[str], k: int = STALE_K) -> bool:
    """A stale turn among the top ``k`` that recall did not mark as no longer current (``current`` true in the
    API): what a caller reading that field would take as true now."""
    return any(t in stale and not m for t, m in zip(ranked[:k], marked[:k], strict=False))


@dataclass
class Scores:
    rows: list[tuple[Question, list[str]]] = field(default_factory=list)
    #: Per question id, for each ranked hit, whether recall marked it as no longer current (product only).
    marked: dict[str, list[bool]] = field(default_factory=dict)

    def add(self, question: Question, ranked: list[str], marked: list[bool] | None = None) -> None:
        self.rows.append((question, ranked))
        if marked is not None:
            self.marked[question.id] = marked

    def _group(self, rows: list[tuple[Question, list[str]]]) -> dict[str, Any]:
        out: dict[str, Any] = {"n": len(rows)}
        for k in KS:
            out[f"R@{k}"] = round(sum(locomo_recall.recall_at(r, q.answer, k) for q, r in rows) / len(rows), 4)
        out["hit@5"] = round(sum(any(a in r[:5] for a in q.answer) for q, r in rows) / len(rows), 4)
        if self.marked:
            current = sum(answer_as_current(r, self.marked.get(q.id, [False] * len(r)), q.answer) for q, r in rows)
            out["hit@5_as_current"] = round(current / len(rows), 4)
            wrong = sum(answer_marked(r, self.marked.get(q.id, [False] * len(r)), q.answer) for q, r in rows)
            out["answer_marked@5"] = round(wrong / len(rows), 4)
        with_stale = [(q, r) for q, r in rows if q.stale]
        if with_stale:
            served = sum(stale_served(r, q.answer, q.stale) for q, r in with_stale)
            out["stale_questions"] = len(with_stale)
            out["stale_served"] = round(served / len(with_stale), 4)
            in_top = sum(any(t in q.stale for t in r[:STALE_K]) for q, r in with_stale)
            out["stale@5"] = round(in_top / len(with_stale), 4)
            if self.marked:
                as_current = sum(
                    stale_as_current(r, self.marked.get(q.id, [False] * len(r)), q.stale) for q, r in with_stale
                )
                out["stale@5_as_current"] = round(as_current / len(with_stale), 4)
        return out

    def summary(self) -> dict[str, Any]:
        groups: dict[str, list[tuple[Question, list[str]]]] = defaultdict(list)
        for q, r in self.rows:
            groups[q.kind].append((q, r))
            if q.overall:
                groups["overall"].append((q, r))
        return {
            name: self._group(rows) for name, rows in sorted(groups.items(), key=lambda x: (x[0] != "overall", x[0]))
        }


def bm25_baseline(dataset: Dataset) -> Scores:
    """Okapi BM25 over each end user's raw dataset turns (what the dataset says, not what was stored)."""
    scores = Scores()
    indexes = []
    for dialogue in dataset.dialogues:
        turns = dialogue.turns()
        indexes.append((retrieval.BM25([retrieval.doc_tokens(t.text) for t in turns]), [t.id for t in turns]))
    for index, question in dataset.asked:
        bm25, ids = indexes[index]
        ranked = retrieval.rank_by(bm25.scores(retrieval.query_tokens(question.text)), ids)
        scores.add(question, ranked[:RECALL_K])
    return scores


@dataclass
class Asked:
    scores: Scores = field(default_factory=Scores)
    wall_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # per dialogue
    #: dialogue → recall's own ``timings_ms`` stage → values (rule, vector, embed, rerank, total)
    stage_ms: dict[str, dict[str, list[float]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    unmapped_hits: int = 0
    hit_types: Counter[str] = field(default_factory=Counter)
    details: list[dict[str, Any]] = field(default_factory=list)


def ask(dataset: Dataset, ingested: list[Ingested]) -> Asked:
    """Every question through ``recall`` in a new session of its dialogue's end user, in ``dataset.asked``
    order (timed one by one; one untimed recall first in each new session)."""
    from memory.recall.pipeline import recall

    sessions = []
    for ing in ingested:
        session = open_session(ing.tenant, ing.dialogue.end_user, {"dialogue": ing.dialogue.id, "session": "ask"})
        recall(ing.tenant, session, "warm up", k=RECALL_K, record=False)
        sessions.append(session)
    out = Asked()
    for index, question in dataset.asked:
        ing, session = ingested[index], sessions[index]
        started = time.perf_counter()
        result = recall(ing.tenant, session, question.text, k=RECALL_K, record=False)
        out.wall_ms[ing.dialogue.id].append((time.perf_counter() - started) * 1000)
        for stage, ms in result.timings_ms.items():
            out.stage_ms[ing.dialogue.id][stage].append(ms)
        ranked, marked = [], []
        for hit in result.hits:
            turn = ing.turn_of_message.get(str(hit.memory.source_message_id), "?")
            out.unmapped_hits += turn == "?"
            out.hit_types[f"{hit.memory.type}/{hit.memory.source_role or '-'}"] += 1
            ranked.append(turn)
            marked.append(bool(hit.stale))
        out.scores.add(question, ranked, marked)
        out.details.append({"id": question.id, "kind": question.kind, "answer": question.answer,
                            "stale": question.stale, "ranked": ranked, "marked_stale": marked})  # fmt: skip
    return out


def feedback_state(tenant_ids: list[Any]) -> dict[str, Any]:
    """What the turns' feedback left: use and ignore events, the live memories' relevance scores, and the
    share of replies whose recall asked to confirm (best relevance_score below 0.7). Every tenant of the run at
    once: it opts out of row-level security (``operator_scope``), a read for the record."""
    from django.db import connection

    from tenants.rls import operator_scope

    with operator_scope(), connection.cursor() as cursor:
        cursor.execute(
            """SELECT (SELECT count(*) FROM memory_memoryevent WHERE tenant_id = ANY(%(t)s) AND kind = 'use'),
                      (SELECT count(*) FROM memory_memoryevent WHERE tenant_id = ANY(%(t)s) AND kind = 'ignore'),
                      avg(relevance_score), avg((relevance_score < 0.7)::int),
                      (SELECT avg((data->>'needs_confirmation')::boolean::int) FROM chat_message
                       WHERE tenant_id = ANY(%(t)s) AND role = 'assistant')
               FROM memory_memoryunit WHERE tenant_id = ANY(%(t)s) AND superseded_at IS NULL""",
            {"t": tenant_ids},
        )
        used, ignored, mean, low, confirm = cursor.fetchone()
    return {
        "use_events": used, "ignore_events": ignored, "mean_relevance_score": round(float(mean or 0), 3),
        "share_below_0_7": round(float(low or 0), 3), "replies_asking_to_confirm": round(float(confirm or 0), 3),
    }  # fmt: skip


# --- storage ----------------------------------------------------------------------------------------------------

_TABLES = ("memory_memoryunit", "memory_memoryevent", "chat_message")


def relation_bytes() -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT t, pg_total_relation_size(t::regclass) FROM unnest(%s::text[]) AS t", [list(_TABLES)])
        return dict(cursor.fetchall())


def storage(tenant_ids: list[Any], before: dict[str, int], turns: int) -> dict[str, Any]:
    """Rows and bytes of this run's tenants. Reads every tenant of the run at once, so it opts out of row-level
    security explicitly (``operator_scope``): a read for the record, never a write."""
    from django.db import connection

    from tenants.rls import operator_scope

    out: dict[str, Any] = {
        "how": "rows: count(*) of the run's tenants; row_bytes: sum(pg_column_size(t.*)) over them (row data as "
        "stored, no indexes); relation_bytes: growth of pg_total_relation_size (heap + TOAST + indexes) over the "
        "ingest, the database holding only this run",
        "turns": turns,
    }
    after = relation_bytes()
    with operator_scope(), connection.cursor() as cursor:
        for table in _TABLES:
            cursor.execute(
                f"SELECT count(*), COALESCE(sum(pg_column_size(t.*)), 0) FROM {table} t "  # noqa: S608 - our names
                "WHERE t.tenant_id = ANY(%s)",
                [tenant_ids],
            )
            rows, row_bytes = cursor.fetchone()
            grown = after[table] - before.get(table, 0)
            out[table] = {
                "rows": rows, "row_bytes": int(row_bytes), "relation_bytes": grown,
                "rows_per_1000_turns": round(rows * 1000 / max(turns, 1), 1),
                "row_kib_per_1000_turns": round(int(row_bytes) * 1000 / max(turns, 1) / 1024, 1),
                "relation_kib_per_1000_turns": round(grown * 1000 / max(turns, 1) / 1024, 1),
            }  # fmt: skip
        cursor.execute(
            "SELECT type, source_role, count(*), count(*) FILTER (WHERE source_message_id IS NULL) "
            "FROM memory_memoryunit WHERE tenant_id = ANY(%s) GROUP BY 1, 2 ORDER BY 3 DESC",
            [tenant_ids],
        )
        out["memoryunit_by_type"] = [
            {"type": t, "source_role": r or "-", "rows": n, "without_source_message": nn}
            for t, r, n, nn in cursor.fetchall()
        ]
        cursor.execute(
            "SELECT u.external_id, count(m.id) FROM tenants_enduser u "
            "LEFT JOIN memory_memoryunit m ON m.tenant_id = u.tenant_id AND m.end_user_id = u.id "
            "WHERE u.tenant_id = ANY(%s) GROUP BY 1 ORDER BY 1",
            [tenant_ids],
        )
        out["memoryunit_rows_by_end_user"] = dict(cursor.fetchall())
        cursor.execute(
            "SELECT kind, actor, count(*) FROM memory_memoryevent WHERE tenant_id = ANY(%s) GROUP BY 1, 2 "
            "ORDER BY 3 DESC",
            [tenant_ids],
        )
        out["memoryevent_by_kind"] = [{"kind": k, "actor": a, "rows": n} for k, a, n in cursor.fetchall()]
    return out


def _record_ingest(
    results: dict[str, Any], ingested: list[Ingested], fake: FakeModel, show_requests: int, before: dict[str, int]
) -> None:
    """The ingest's figures, storage and feedback state into ``results``."""
    turns = sum(i.turns for i in ingested)
    seconds = sum(i.seconds for i in ingested)
    turn_ms = [x for i in ingested for x in i.turn_ms]
    reply_ms = [x for i in ingested for x in i.reply_ms]
    after_ms = [x for i in ingested for x in i.after_ms]
    errors = sum((i.errors for i in ingested), Counter())
    results["ingest"] = {
        "turns": turns,
        "seconds": round(seconds, 1),
        "turns_per_s": round(turns / seconds, 2) if seconds else None,
        "run_turn_ms": common.summarise(turn_ms),
        "until_reply_done_ms": common.summarise(reply_ms),
        "after_reply_ms": common.summarise(after_ms),
        "errors": dict(errors),
        "acks": sum(i.acks for i in ingested),
        "fillers": sum(i.fillers for i in ingested),
        "model_requests": fake.requests,
        "model_show_requests": show_requests,
        "prompt_mismatches": fake.prompt_mismatches,
        "replies_quoting_a_memory": fake.quoted,
        "reply_mismatches": sum(i.reply_mismatches for i in ingested),
        "per_dialogue": {
            i.dialogue.id: {
                "turns": i.turns,
                "seconds": round(i.seconds, 1),
                "run_turn_ms": common.summarise(i.turn_ms),
                # how a turn's cost grows with the end user's history
                f"run_turn_ms_by_{TREND_BLOCK}_turns": [
                    common.summarise(i.turn_ms[n : n + TREND_BLOCK]) for n in range(0, len(i.turn_ms), TREND_BLOCK)
                ],
            }
            for i in ingested
        },
    }
    common.log(f"  {turns} turns in {seconds:.1f} s ({results['ingest']['turns_per_s']} turns/s); errors: "
               f"{dict(errors) or 'none'}")  # fmt: skip
    tenant_ids = list({i.tenant.pk for i in ingested})
    results["storage"] = storage(tenant_ids, before, turns)
    results["feedback"] = feedback_state(tenant_ids)
    common.log(f"  feedback: {results['feedback']}")


def _ingest_args(args: argparse.Namespace) -> dict[str, Any]:
    """The arguments that decide what was ingested: a reused ingest must have been made with the same."""
    names = ("dataset", "conversations", "max_turns", "locomo_turns", "data", "turns", "small_turns", "queries",
             "seed", "tenant_settings", "fake_uses_memory", "via", "half", "customers", "zh_half")  # fmt: skip
    return {name: str(getattr(args, name)) for name in names}


def _write_manifest(path: Path, ingest_args: dict[str, Any], results: dict[str, Any], ingested: list[Ingested]) -> None:
    """What ``--reuse-ingest`` needs to ask again on this run's database: each dialogue's tenant, the stored
    message → dataset turn map and per-turn times, with the ingest's figures."""
    payload = {
        "args": ingest_args,
        "git": results["git"],
        "results": {key: results[key] for key in ("ingest", "storage", "feedback")},
        "dialogues": [
            {
                "id": i.dialogue.id,
                "tenant_id": str(i.tenant.pk),
                "turn_of_message": i.turn_of_message,
                "turn_ms": i.turn_ms,
                "reply_ms": i.reply_ms,
                "after_ms": i.after_ms,
            }  # fmt: skip
            for i in ingested
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, ensure_ascii=False, default=str) + "\n")


def _read_manifest(path: Path, ingest_args: dict[str, Any]) -> dict[str, Any]:
    if not path.exists():
        raise SystemExit(f"--reuse-ingest: {path} does not exist (run once without it, with the same arguments)")
    manifest = json.loads(path.read_text())
    if manifest["args"] != ingest_args:
        differ = sorted(k for k in ingest_args if manifest["args"].get(k) != ingest_args[k])
        raise SystemExit(f"--reuse-ingest: {path} was ingested with other arguments ({', '.join(differ)})")
    return manifest


def _reused(dataset: Dataset, manifest: dict[str, Any]) -> list[Ingested]:
    from tenants.models import Tenant

    by_id = {d["id"]: d for d in manifest["dialogues"]}
    out = []
    for dialogue in dataset.dialogues:
        saved = by_id[dialogue.id]
        ing = Ingested(dialogue, Tenant.objects.get(pk=saved["tenant_id"]), turn_of_message=saved["turn_of_message"])
        ing.turn_ms, ing.reply_ms, ing.after_ms = saved["turn_ms"], saved["reply_ms"], saved["after_ms"]
        out.append(ing)
    return out


# --- report -------------------------------------------------------------------------------------------------------


def report_rows(summary: dict[str, Any], label: str) -> list[list[Any]]:
    rows = []
    for group, s in summary.items():
        rows.append(
            [label, group, s["n"], s["R@1"], s["R@5"], s["R@10"], s["hit@5"], s.get("hit@5_as_current", "-"),
             s.get("answer_marked@5", "-"), s.get("stale_served", "-"),
             s.get("stale@5", "-"), s.get("stale@5_as_current", "-")]
        )  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=("locomo", "zh_cs", "scale", "multiwoz", "crosswoz"), required=True)
    parser.add_argument(
        "--half", choices=("fit", "report"), default="fit",
        help="multiwoz/crosswoz: the half of the dialogues (bench/quality/woz_facts.py); rules are fitted on fit",
    )  # fmt: skip
    parser.add_argument(
        "--zh-half", choices=("all", "fit", "report"), default="all",
        help="zh_cs: its fit or report half (zh_half_of); all: the whole set, whose rules were fitted on it",
    )  # fmt: skip
    parser.add_argument("--customers", type=int, default=40, help="multiwoz/crosswoz: pseudo customers of 5 dialogues")
    parser.add_argument("--conversations", help="locomo: conversation indexes, e.g. 0,1 (default all 10)")
    parser.add_argument("--max-turns", type=int, default=0, help="locomo/zh_cs: first N turns of each dialogue")
    parser.add_argument(
        "--locomo-turns", choices=("paired", "acked"), default="paired",
        help="locomo: turns alternate as user message and model reply (paired), or all are user messages (acked)",
    )  # fmt: skip
    parser.add_argument("--data", type=Path, default=ZH_CS_DATA, help="zh_cs: the dataset file")
    parser.add_argument(
        "--via", choices=("chat", "import"), default="chat",
        help="chat: every turn through run_turn, now; import: each session imported as a past conversation at "
        "its own day (the API and the worker), the questions asked today",
    )  # fmt: skip
    parser.add_argument("--turns", type=int, default=5000, help="scale: the large end user's turns")
    parser.add_argument("--small-turns", type=int, default=50, help="scale: the small end user's turns")
    parser.add_argument("--queries", type=int, default=150, help="scale: distinct questions per end user")
    parser.add_argument("--seed", type=int, default=20240601, help="scale: the generator's seed")
    parser.add_argument("--out", help="output name under bench/out/ (default chat_memory_<dataset>)")
    parser.add_argument(
        "--knobs", action="append", default=[], metavar="JSON",
        help="also ask every question with these recall settings (settings.MEMDESK_RECALL, e.g. "
        "'{\"recency_weight\": 1.0}'), on the same ingest; repeatable. The default settings stay the figure.",
    )  # fmt: skip
    parser.add_argument(
        "--tenant-settings", default="{}", metavar="JSON",
        help="Tenant.settings for the measured tenants, e.g. '{\"auto_ignore\": true}' (automatic ignored feedback)",
    )  # fmt: skip
    parser.add_argument(
        "--reuse-ingest", action="store_true",
        help="ask the questions again on the database and ingest an earlier run with the same arguments left "
        "(bench/out/<output name>_ingest.json): recall is measured afresh, with today's code and migrations; "
        "the ingest's figures are the earlier run's, and the output says so",
    )  # fmt: skip
    parser.add_argument(
        "--fake-uses-memory", type=int, default=0, metavar="N",
        help="every N-th turn whose prompt shows memories, the fake's reply also quotes the first one (0: never)",
    )  # fmt: skip
    args = parser.parse_args()
    TENANT_SETTINGS.update(json.loads(args.tenant_settings))
    started = time.perf_counter()

    max_turns = args.max_turns or None
    if args.dataset == "locomo":
        conversations = [int(x) for x in args.conversations.split(",")] if args.conversations else None
        dataset = load_locomo(conversations, max_turns, args.locomo_turns)
    elif args.dataset == "zh_cs":
        if not args.data.exists():
            raise SystemExit(f"{args.data} does not exist (--data names another file)")
        dataset = load_zh_cs(args.data, max_turns)
        if args.zh_half != "all":  # the same rule as the public corpora's halves: sha256 of the dialogue id
            kept = [d for d in dataset.dialogues if zh_half_of(d.id) == args.zh_half]
            dataset = Dataset(f"{dataset.name}_{args.zh_half}", kept, _ask_in_order(kept), dataset.info)
            dataset.info["half"] = args.zh_half
    elif args.dataset in ("multiwoz", "crosswoz"):
        import woz_facts

        dataset = woz_facts.load_woz(args.dataset, args.half, args.customers)
    else:
        dataset = build_scale(args.turns, args.small_turns, args.queries, args.seed)
    n_turns = sum(len(d.turns()) for d in dataset.dialogues)
    common.log(f"{dataset.name}: {len(dataset.dialogues)} dialogues, {n_turns} dataset turns, "
               f"{len(dataset.asked)} questions")  # fmt: skip

    # One database per output name: two runs side by side (a dataset and another) never drop each other's.
    out_name = args.out or f"chat_memory_{dataset.name}"
    manifest_path = common.OUT_DIR / f"{out_name}_ingest.json"
    ingest_args = _ingest_args(args)
    manifest = _read_manifest(manifest_path, ingest_args) if args.reuse_ingest else None
    db_name = f"{DB_NAME}_{re.sub(r'[^a-z0-9_]', '_', (args.out or dataset.name).lower())}"
    common.setup_django(db_name, fresh=manifest is None)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per model request otherwise
    from django.conf import settings

    from chat.llm import clear_context_cache
    from testkit.fake_ollama import FakeOllama

    results: dict[str, Any] = {
        "benchmark": "chat_memory",
        "dataset": dataset.name,
        "date": common.now_iso(),
        "command": shlex.join([".venv/bin/python", "bench/quality/chat_memory.py", *sys.argv[1:]]),
        "niceness": os.nice(0),
        "path_measured": PATH_MEASURED_IMPORT if args.via == "import" else PATH_MEASURED,
        "git": common.git_state(),
        "machine": common.machine_info(),
        "dataset_info": {
            **dataset.info,
            "dialogues": len(dataset.dialogues),
            "dataset_turns": n_turns,
            "questions": len(dataset.asked),
        },
        "setup": {
            "k": RECALL_K,
            "record": False,
            "rate_limits": common.RATE_LIMITS,
            "ack": ACK,
            "filler": FILLER,
            "tenant_settings": TENANT_SETTINGS,
            "fake_uses_memory_every": args.fake_uses_memory,
        },
    }

    fake = FakeModel(use_every=args.fake_uses_memory)
    with FakeOllama(default_reply=fake) as server:
        settings.OLLAMA_HOST = server.host  # what chat.llm.get_llm() would use too
        # Each turn's conversation units are written by the turn itself ("inline"): the same
        # memory.conversation.units.index_messages the background worker runs by default, without a second process
        # to wait for before the questions.
        settings.MEMORY_WRITER = "inline"
        clear_context_cache()
        if manifest is None:
            # A few turns of a tenant of their own first, left out of every figure: the first turn of a process
            # loads the tokenizer, rjieba's dictionary and the encoders (seconds).
            ingest(warmup_dataset(sorted({d.language for d in dataset.dialogues})), server.host, FakeModel())
            before = relation_bytes()
            if args.via == "import":
                common.log("ingest through POST /api/v1/end-users/<id>/conversations and the worker")
                ingested = ingest_by_import(dataset)
            else:
                common.log("ingest through chat.turn.run.run_turn")
                ingested = ingest(dataset, server.host, fake)
        show_requests = len(server.show_requests)
    if manifest is not None:
        common.log(f"ingest reused: {manifest_path} ({manifest['git']})")
        ingested = _reused(dataset, manifest)
        results["ingest_reused_from"] = {"manifest": str(manifest_path), "git": manifest["git"]}
        for key in ("ingest", "storage", "feedback"):
            results[key] = manifest["results"][key]
    if manifest is None:
        _record_ingest(results, ingested, fake, show_requests, before)
        _write_manifest(manifest_path, ingest_args, results, ingested)
    turns = results["ingest"]["turns"]
    seconds = results["ingest"]["seconds"]
    turn_ms = [x for i in ingested for x in i.turn_ms]
    reply_ms = [x for i in ingested for x in i.reply_ms]
    after_ms = [x for i in ingested for x in i.after_ms]

    common.log("questions through memory.recall.pipeline.recall in a new session of each end user")
    asked = ask(dataset, ingested)
    baseline = bm25_baseline(dataset)
    recall_summary, bm25_summary = asked.scores.summary(), baseline.summary()
    all_wall = [x for v in asked.wall_ms.values() for x in v]
    results["recall"] = {
        "scores": recall_summary,
        "wall_ms": common.summarise(all_wall),
        "wall_ms_by_dialogue": {k: common.summarise(v) for k, v in asked.wall_ms.items()},
        "stage_ms_by_dialogue": {
            k: {stage: common.summarise(v) for stage, v in stages.items()} for k, stages in asked.stage_ms.items()
        },
        "hits_without_a_dataset_turn": asked.unmapped_hits,
        "hits_by_type": dict(asked.hit_types.most_common()),
    }
    results["baseline_bm25"] = {"scores": bm25_summary, "over": "the end user's raw dataset turns"}
    variants = []
    scale_variants: list[dict[str, Any]] = []
    for raw in args.knobs:
        knobs = json.loads(raw)
        settings.MEMDESK_RECALL = knobs  # a declared setting: what an operator would set
        common.log(f"questions again with MEMDESK_RECALL={knobs}")
        again = ask(dataset, ingested)
        if dataset.name == "scale":  # what the knobs cost or save: the same p95 ratio as the default's
            large, small = (again.wall_ms[d.id] for d in dataset.dialogues)
            p95 = {"large": common.percentile(large, 95), "small": common.percentile(small, 95)}
            common.log(f"  recall p95 ms {p95}, ratio {p95['large'] / p95['small']:.2f}")
            ratio = round(p95["large"] / p95["small"], 3)
            scale_variants.append({"knobs": knobs, "recall_p95_ms": p95, "ratio": ratio})
        variants.append((knobs, again.scores.summary(), again.details))
        settings.MEMDESK_RECALL = {}
    results["knob_variants"] = [
        {"knobs": knobs, "scores": summary, "questions": details} for knobs, summary, details in variants
    ]
    if dataset.name == "scale":
        large, small = (asked.wall_ms[d.id] for d in dataset.dialogues)
        p95_large, p95_small = common.percentile(large, 95), common.percentile(small, 95)
        results["scale"] = {
            "recall_wall_ms": {"large": common.summarise(large), "small": common.summarise(small)},
            "p95_ratio_large_to_small": round(p95_large / p95_small, 3),
            "target": "recall p95 for an end user with 5,000 turns ≤ 2× that for an end user with 50 turns",
            "memoryunit_rows_by_end_user": results["storage"]["memoryunit_rows_by_end_user"],
            "knob_variants": scale_variants,
        }
    if dataset.name == "locomo" and turns:
        full = dataset.info["all_ten_conversations"]
        ingest_s = full["turns"] / (turns / seconds)
        ask_s = full["questions_with_evidence"] * (sum(all_wall) / max(len(all_wall), 1)) / 1000
        results["projection"] = {
            **full,
            "ingest_s": round(ingest_s),
            "questions_s": round(ask_s),
            "note": "linear at this run's rates: a turn costs more as its end user's history grows (bench/out/"
            "chat_memory_scale.json), so a run on fewer or shorter conversations than the full set's underestimates",
        }
    results["questions"] = asked.details
    results["wall_s"] = round(time.perf_counter() - started, 1)
    path = common.write_result(args.out or f"chat_memory_{dataset.name}", results)

    print()
    print(f"{results['path_measured']}\n")
    headers = [
        "", "group", "n", "R@1", "R@5", "R@10", "hit@5", "hit@5 as current", "answer marked", "stale served", "stale@5",
        "stale@5 as current",
    ]  # fmt: skip
    rows = report_rows(recall_summary, "recall (chat path)") + report_rows(bm25_summary, "BM25 raw turns")
    for knobs, summary, _details in variants:
        rows += report_rows(summary, f"recall with {json.dumps(knobs)}")[:1]
    print(common.table(headers, rows))
    print()
    st = results["storage"]
    timing = [
        ["ingest", f"{turns} turns, {seconds:.1f} s, {results['ingest']['turns_per_s']} turns/s"],
        ["run_turn p50/p95 ms", f"{common.summarise(turn_ms).get('p50')} / {common.summarise(turn_ms).get('p95')}"],
        [
            "until reply done p50/p95 ms",
            f"{common.summarise(reply_ms).get('p50')} / {common.summarise(reply_ms).get('p95')}",
        ],
        [
            "after the reply p50/p95 ms",
            f"{common.summarise(after_ms).get('p50')} / {common.summarise(after_ms).get('p95')}",
        ],
        ["recall p50/p95 ms", f"{common.summarise(all_wall).get('p50')} / {common.summarise(all_wall).get('p95')}"],
    ]
    for table in _TABLES:
        s = st[table]
        timing.append([f"{table} per 1,000 turns",
                       f"{s['rows_per_1000_turns']} rows, {s['row_kib_per_1000_turns']} KiB rows, "
                       f"{s['relation_kib_per_1000_turns']} KiB relation"])  # fmt: skip
    if "scale" in results:
        sc = results["scale"]
        for name in ("large", "small"):
            w = sc["recall_wall_ms"][name]
            timing.append([f"recall {name} user p50/p95 ms", f"{w['p50']} / {w['p95']} (n={w['n']})"])
        timing.append(["p95 large / p95 small", sc["p95_ratio_large_to_small"]])
        timing.append(["memory rows by end user", json.dumps(sc["memoryunit_rows_by_end_user"])])
    if "projection" in results:
        pr = results["projection"]
        timing.append(
            [
                "projected full LoCoMo",
                f"ingest {pr['ingest_s'] / 60:.1f} min ({pr['turns']} turns) + questions {pr['questions_s']} s "
                f"({pr['questions_with_evidence']})",
            ]
        )
    errors = results["ingest"]["errors"]
    if errors:
        timing.append(["errors", json.dumps(dict(errors), ensure_ascii=False)])
    print(common.table(["measure", "value"], timing))
    print(f"\nwrote {path} in {results['wall_s']} s")


if __name__ == "__main__":
    main()
