"""Topic switches on public dialogues, through the chat turn: CrossWOZ (Chinese) and MultiWOZ 2.1 (English).

**Labels** (from the corpora's own per-turn dialogue acts, not from our rules): a user turn's domains are the
domains of its acts (CrossWOZ ``[intent, domain, slot, value]`` with intent ≠ ``General``; MultiWOZ
``"Hotel-Inform"`` → ``hotel``, ``general-*`` left out). Against the last earlier user turn that had a domain:

- **switch** — the turn names a domain not yet active in the dialogue ("please book a taxi to the museum" after
  the museum: the taxi is the new matter, although the museum is named too);
- **follow-up** — every domain it names is one the earlier turn named;
- neither — no domain (greetings, thanks), or a change back to a domain already active (a return).

The first user turn with a domain opens the dialogue's first topic and counts for neither.

**Path measured**: every dialogue is one chat session of its own end user, opened with
``chat.sessions.lifecycle.do_open_session`` (what ``POST /api/v1/sessions`` calls); each user turn goes through
``chat.turn.run.run_turn`` (what the REST endpoint and the WebSocket consumer call) against the fake Ollama
(``testkit.fake_ollama.FakeOllama``, a real HTTP server), whose reply is the corpus's next clerk turn. A turn
*resets* when the prompt the model received carries ``<|context_reset|>`` (a line of the system message that
starts with it; the role text names the marker mid-sentence).

**Scores**: *false resets on follow-ups* — resets on follow-up turns / follow-up turns, except the one turn that
confirms a switch made on the turn before it (the product may wait one turn for a second message on the new matter:
memory.topics.detect, "two turns"); *switch recall* — switches with a reset on the switch turn or on the next user
turn (when that turn is not itself a switch) / switches; *resets elsewhere* — on turns labelled neither.

**Halves**: a dialogue belongs to the fit half when the first byte of sha256(its id) is even, to the report half
otherwise. Half of the fit half's dialogues lend their turns to the domain model's examples (``in_bank``); the
other half (``--half tune``) is where the thresholds are chosen. ``--half report`` is run once, at the end.

Run from the repository root::

    .venv/bin/python bench/quality/topic_switch_public.py --half fit [--corpus crosswoz|multiwoz|both]
        [--limit N] [--errors 30] [--out NAME]

Writes ``bench/out/<NAME or topic_switch_public_<half>>.json`` (per-turn outcomes, the figures, the command).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import re
import shlex
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR.parent) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR.parent))

from bench import common  # noqa: E402

SHARED = Path("/work/shared/bench")
CORPORA = {"crosswoz": (SHARED / "crosswoz_val.json.zip", "zh"), "multiwoz": (SHARED / "multiwoz21_val.json.zip", "en")}
DB_NAME = "memdesk_bench_topic_public"
PATH_MEASURED = (
    "chat.turn.run.run_turn per user turn (fake Ollama replies with the corpus's clerk turn); a reset is a "
    "prompt whose system message has a line starting with <|context_reset|>"
)
RESET_LINE = re.compile(r"^<\|context_reset\|>", re.MULTILINE)


@dataclass
class UserTurn:
    text: str
    domains: frozenset[str]
    reply: str
    label: str = ""  # "switch", "follow", or "" (neither)


@dataclass
class PublicDialogue:
    id: str
    corpus: str
    language: str
    turns: list[UserTurn]


def half_of(dialogue_id: str) -> str:
    """``fit`` or ``report``: fixed by the id alone, so every run and every tool agrees."""
    return "fit" if hashlib.sha256(dialogue_id.encode()).digest()[0] % 2 == 0 else "report"


def in_bank(dialogue_id: str) -> bool:
    """Whether a fit-half dialogue lends its turns to the domain model's examples
    (``bench/quality/topic_domains_build.py``); the rest of the fit half (``--half tune``) is where the thresholds
    are chosen, on turns the examples do not contain."""
    return half_of(dialogue_id) == "fit" and hashlib.sha256(dialogue_id.encode()).digest()[1] % 2 == 0


def label_turns(turns: list[UserTurn]) -> None:
    """Label each turn switch / follow / neither from the domains of its acts (the module docstring)."""
    active: set[str] = set()
    previous: frozenset[str] = frozenset()
    for turn in turns:
        if not turn.domains:
            continue
        if previous:
            if turn.domains - active:
                turn.label = "switch"
            elif turn.domains <= previous:
                turn.label = "follow"
        active |= turn.domains
        previous = turn.domains


def _read(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read(archive.namelist()[0]))


def load_crosswoz(path: Path) -> list[PublicDialogue]:
    out = []
    for dialogue_id, raw in _read(path).items():
        messages = raw["messages"]
        turns = []
        for n, message in enumerate(messages):
            if message["role"] != "usr":
                continue
            reply = messages[n + 1]["content"] if n + 1 < len(messages) and messages[n + 1]["role"] == "sys" else ""
            domains = frozenset(act[1] for act in message["dialog_act"] if act[0] != "General")
            turns.append(UserTurn(message["content"], domains, reply or "好的。"))
        label_turns(turns)
        out.append(PublicDialogue(f"crosswoz-{dialogue_id}", "crosswoz", "zh", turns))
    return out


def load_multiwoz(path: Path) -> list[PublicDialogue]:
    out = []
    for dialogue_id, raw in _read(path).items():
        log = raw["log"]
        turns = []
        for n in range(0, len(log), 2):  # user turns are the even entries, each followed by the clerk's
            acts = log[n].get("dialog_act") or {}
            domains = frozenset(k.split("-")[0].lower() for k in acts if not k.lower().startswith("general"))
            reply = log[n + 1]["text"] if n + 1 < len(log) else ""
            turns.append(UserTurn(_detokenise(log[n]["text"]), domains, _detokenise(reply) or "OK."))
        label_turns(turns)
        out.append(PublicDialogue(f"multiwoz-{dialogue_id}", "multiwoz", "en", turns))
    return out


def _detokenise(text: str) -> str:
    """MultiWOZ's texts are tokenised ("does n't", "parking ."): joined back as a customer would type them."""
    text = re.sub(r"\s+([.,!?;:])", r"\1", text.strip())
    return re.sub(r"\s+(n't|'s|'m|'re|'ll|'d|'ve)\b", r"\1", text)


def load(corpus: str, half: str, limit: int | None) -> list[PublicDialogue]:
    path, _ = CORPORA[corpus]
    dialogues = (load_crosswoz if corpus == "crosswoz" else load_multiwoz)(path)
    if half == "tune":
        chosen = [d for d in dialogues if half_of(d.id) == "fit" and not in_bank(d.id)]
    else:
        chosen = [d for d in dialogues if half in ("all", half_of(d.id))]
    return chosen[:limit] if limit else chosen


@dataclass
class Outcome:
    dialogue: str
    corpus: str
    n: int
    label: str
    reset: bool
    text: str
    previous: str
    domains: list[str]


class Prompts:
    """The fake Ollama's reply source: replies with the clerk's turn and notes whether the prompt reset."""

    def __init__(self) -> None:
        self.reply = "OK."
        self.reset = False
        self.mismatches = 0
        self.expect = ""

    def __call__(self, body: dict[str, Any]) -> Any:
        from testkit.fake_ollama import Reply

        messages = body.get("messages") or [{}]
        self.reset = bool(RESET_LINE.search(str(messages[0].get("content", ""))))
        if self.expect not in str(messages[-1].get("content", "")):
            self.mismatches += 1
        return Reply(text=self.reply)


@dataclass
class Run:
    outcomes: list[Outcome] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    turns: int = 0
    seconds: float = 0.0


def replay(dialogues: list[PublicDialogue], fake: Prompts, host: str) -> Run:
    from django.conf import settings

    from chat.llm import OllamaChat
    from chat.turn.run import run_turn

    tenants = {
        lang: common.make_tenant(f"tsp-{lang}", language=lang).tenant for lang in {d.language for d in dialogues}
    }
    sessions = [common.open_session(tenants[d.language], d.id, {"benchmark": "topic_switch_public"}) for d in dialogues]
    run = Run()
    started = time.perf_counter()

    async def go() -> None:
        llm = OllamaChat(host, settings.OLLAMA_MODEL, timeout_s=settings.OLLAMA_TIMEOUT_S)
        for number, (dialogue, session) in enumerate(zip(dialogues, sessions, strict=True), 1):
            tenant = tenants[dialogue.language]
            previous = ""
            for n, turn in enumerate(dialogue.turns):
                fake.reply, fake.expect, fake.reset = turn.reply, turn.text, False
                try:
                    await run_turn(tenant, session, turn.text, f"{dialogue.id}-{n}"[:100], llm=llm)
                except Exception as exc:  # counted by its text; the dialogue goes on
                    key = f"{type(exc).__name__}: {exc}"[:200]
                    run.errors[key] = run.errors.get(key, 0) + 1
                    continue
                run.turns += 1
                run.outcomes.append(
                    Outcome(dialogue.id, dialogue.corpus, n, turn.label, fake.reset, turn.text, previous,
                            sorted(turn.domains))
                )  # fmt: skip
                previous = turn.text
            if number % 50 == 0 or number == len(dialogues):
                rate = run.turns / (time.perf_counter() - started)
                common.log(f"  {number}/{len(dialogues)} dialogues, {run.turns} turns, {rate:.1f} turns/s")

    asyncio.run(go())
    run.seconds = time.perf_counter() - started
    return run


def score(outcomes: list[Outcome]) -> dict[str, Any]:
    """The figures of the module docstring, from the per-turn outcomes of one corpus."""
    by_dialogue: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        by_dialogue.setdefault(outcome.dialogue, []).append(outcome)
    follow = false_resets = switches = caught = neither = neither_resets = confirmations = 0
    for turns in by_dialogue.values():
        for i, turn in enumerate(turns):
            after = turns[i + 1] if i + 1 < len(turns) else None
            before = turns[i - 1] if i else None
            if turn.label == "switch":
                switches += 1
                caught += turn.reset or bool(after and after.reset and after.label != "switch")
            elif turn.label == "follow":
                follow += 1
                confirms = bool(turn.reset and before and before.label == "switch" and not before.reset)
                confirmations += confirms
                false_resets += turn.reset and not confirms
            else:
                neither += 1
                neither_resets += turn.reset
    return {
        "turns": len(outcomes),
        "follow_ups": follow,
        "false_resets": false_resets,
        "false_reset_rate": round(false_resets / follow, 4) if follow else None,
        "switches": switches,
        "switches_reset": caught,
        "switch_recall": round(caught / switches, 4) if switches else None,
        "confirmed_next_turn": confirmations,
        "neither": neither,
        "neither_resets": neither_resets,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("fit", "tune", "report", "all"), required=True)
    parser.add_argument("--corpus", choices=("crosswoz", "multiwoz", "both"), default="both")
    parser.add_argument("--limit", type=int, default=None, help="at most this many dialogues per corpus")
    parser.add_argument("--errors", type=int, default=0, help="print up to N wrong turns per corpus")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    corpora = ("crosswoz", "multiwoz") if args.corpus == "both" else (args.corpus,)
    dialogues = [d for c in corpora for d in load(c, args.half, args.limit)]
    common.log(f"{len(dialogues)} dialogues ({', '.join(corpora)}, half {args.half})")
    common.setup_django(DB_NAME, fresh=True)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    from django.conf import settings

    from chat.llm import clear_context_cache
    from testkit.fake_ollama import FakeOllama

    fake = Prompts()
    with FakeOllama(default_reply=fake) as server:
        settings.OLLAMA_HOST = server.host
        settings.MEMORY_WRITER = "off"  # conversation units do not decide resets; the turn's extraction does
        clear_context_cache()
        run = replay(dialogues, fake, server.host)
    results: dict[str, Any] = {
        "benchmark": "topic_switch_public",
        "command": shlex.join([".venv/bin/python", "bench/quality/topic_switch_public.py", *sys.argv[1:]]),
        "half": args.half,
        "path_measured": PATH_MEASURED,
        "git": common.git_state(),
        "machine": common.machine_info(),
        "errors": run.errors,
        "prompt_mismatches": fake.mismatches,
        "turns_per_s": round(run.turns / run.seconds, 1) if run.seconds else None,
        "corpora": {},
    }
    for corpus in corpora:
        outcomes = [o for o in run.outcomes if o.corpus == corpus]
        figures = score(outcomes)
        results["corpora"][corpus] = figures
        n_dialogues = sum(d.corpus == corpus for d in dialogues)
        print(
            f"\n{corpus} ({args.half} half, {n_dialogues} dialogues): false resets on follow-ups "
            f"{figures['false_resets']}/{figures['follow_ups']} = {figures['false_reset_rate']}, switch recall "
            f"{figures['switches_reset']}/{figures['switches']} = {figures['switch_recall']}, resets on other turns "
            f"{figures['neither_resets']}/{figures['neither']}"
        )
        if args.errors:
            shown = 0
            for o in outcomes:
                wrong = (o.label == "follow" and o.reset) or (o.label == "switch" and not o.reset)
                if wrong and shown < args.errors:
                    shown += 1
                    print(f"  [{o.label}{' RESET' if o.reset else ''}] {o.previous[:70]!r} → {o.text[:90]!r}")
    results["outcomes"] = [o.__dict__ for o in run.outcomes]
    out = common.OUT_DIR / f"{args.out or f'topic_switch_public_{args.half}'}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, ensure_ascii=False, indent=1), encoding="utf-8")
    common.log(f"wrote {out}; {run.turns} turns in {run.seconds:.0f} s; errors {sum(run.errors.values())}")


if __name__ == "__main__":
    main()
