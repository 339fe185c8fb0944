"""Values that changed, on public dialogues: does recall serve the current value or a superseded one?

Data: the validation splits of MultiWOZ 2.1 (English) and CrossWOZ (Chinese), ``/work/shared/bench``. Their
turn-level dialogue states label every change of a slot's value: MultiWOZ's belief state (``metadata``, each domain's
``semi`` and ``book`` slots) on every clerk turn, CrossWOZ's ``sys_state``. A **change** is a slot whose value moves
from one stated value to another, where the customer's turn that caused it says the new value verbatim (a hotel
booked for 1 night, then "try it for 4 nights instead"; 「人均消费50-100元」 then 「人均消费150-500元」).

**Questions.** One per changed slot, about its final value, from a template per slot ("How many nights is my hotel
stay?", 「我后来要找的餐馆人均消费是多少？」): *answer* turns are the customer's turn that stated the final value
and the clerk's next turn when it repeats it; *stale* turns those that stated an earlier value (the customer's turn
and the clerk's next when it repeats it). A customer is one dialogue with changes and ``--per-customer`` − 1 filler
dialogues without changes that set none of its changed domains (so "my hotel stay" means one booking).

**Path.** Each pseudo customer is ``--per-customer`` dialogues, one chat session each, every turn through
``chat.turn.run.run_turn`` (the fake Ollama replying with the clerk's turn) — bench/quality/chat_memory.py's ingest —
then each question through ``memory.recall.pipeline.recall(k=10)`` in a new session of that customer.
**Scores**: *current@5* — an answer turn in the top 5; *stale@5* — a stale turn in the top 5 (served as a candidate
at all); *stale first* — chat_memory's ``stale_served``: a stale turn above every answer turn in the top 5;
*current@5 as current* — an answer turn in the top 5 that recall did not mark as no longer current. Baseline:
BM25 over the customer's raw turns.

**Halves**: as ``topic_switch_public.half_of`` (sha256 of the dialogue id); fit every rule on ``--half fit``, report
``--half report`` once.

    .venv/bin/python bench/quality/woz_updates.py --half fit [--corpus multiwoz|crosswoz|both] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shlex
import sys
import zipfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR.parent) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR.parent))

sys.path.insert(0, str(BENCH_DIR / "quality"))  # chat_memory imports its neighbours as top-level modules

import chat_memory as cm  # noqa: E402

from bench import common  # noqa: E402
from bench.quality.topic_switch_public import _detokenise, half_of  # noqa: E402

SHARED = Path("/work/shared/bench")
DB_NAME = "memdesk_bench_woz_updates"

EN_QUESTIONS = {
    ("hotel", "stay"): "How many nights is my hotel stay?",
    ("hotel", "people"): "For how many people is my hotel booking?",
    ("hotel", "day"): "What day does my hotel stay start?",
    ("hotel", "pricerange"): "What price range did I want for the hotel?",
    ("hotel", "type"): "What type of place did I want to stay at?",
    ("hotel", "area"): "Which area did I want my hotel in?",
    ("hotel", "stars"): "How many stars did I want for the hotel?",
    ("hotel", "name"): "Which hotel did I go with?",
    ("restaurant", "food"): "What kind of food did I want at the restaurant?",
    ("restaurant", "time"): "What time is my restaurant table for?",
    ("restaurant", "people"): "For how many people is my restaurant booking?",
    ("restaurant", "day"): "What day is my restaurant booking?",
    ("restaurant", "area"): "Which area did I want the restaurant in?",
    ("restaurant", "pricerange"): "What price range did I want for the restaurant?",
    ("restaurant", "name"): "Which restaurant did I go with?",
    ("attraction", "type"): "What type of attraction did I want to visit?",
    ("attraction", "area"): "Which area did I want the attraction in?",
    ("attraction", "name"): "Which attraction did I pick?",
    ("train", "destination"): "Where is my train going?",
    ("train", "departure"): "Where does my train leave from?",
    ("train", "leaveAt"): "What time did I want my train to leave?",
    ("train", "arriveBy"): "By what time did my train need to arrive?",
    ("train", "day"): "What day is my train?",
    ("train", "people"): "How many train tickets did I need?",
    ("taxi", "destination"): "Where is my taxi going?",
    ("taxi", "departure"): "Where does my taxi pick me up?",
    ("taxi", "leaveAt"): "What time does my taxi leave?",
    ("taxi", "arriveBy"): "By what time does my taxi need to arrive?",
}
ZH_QUESTIONS = {
    ("餐馆", "推荐菜"): "我后来想吃的是哪道菜？",
    ("餐馆", "人均消费"): "我后来要找的餐馆人均消费是多少？",
    ("餐馆", "评分"): "我要求餐馆评分是多少？",
    ("餐馆", "名称"): "我最后去的是哪家餐馆？",
    ("景点", "门票"): "我后来找的景点门票是什么价位？",
    ("景点", "游玩时间"): "我后来想找的景点要玩多长时间？",
    ("景点", "评分"): "我要求景点评分是多少？",
    ("景点", "名称"): "我最后去的是哪个景点？",
    ("酒店", "价格"): "我后来要找的酒店价格是多少？",
    ("酒店", "酒店设施"): "我后来要求酒店提供什么设施？",
    ("酒店", "酒店类型"): "我后来想住什么类型的酒店？",
    ("酒店", "评分"): "我要求酒店评分是多少？",
    ("酒店", "名称"): "我最后住的是哪家酒店？",
}
#: What a change of each slot is, for the table by kind.
KIND = {
    "stay": "booking", "people": "booking", "day": "booking", "time": "booking",
    "destination": "route", "departure": "route", "leaveAt": "route", "arriveBy": "route",
    "name": "choice", "名称": "choice",
}  # fmt: skip
SKIP_VALUES = {"", "not mentioned", "none", "dontcare", "don't care", "dont care"}


@dataclass
class Change:
    domain: str
    slot: str
    values: list[tuple[str, int]]  # (value, the customer's turn index that stated it), oldest first


def _said(value: str, text: str) -> bool:
    return bool(re.search(rf"(?<!\w){re.escape(value.lower())}(?!\w)", text.lower()))


Loaded = dict[str, tuple[list[tuple[str, str]], list[Change], set[str]]]


def multiwoz_dialogues(path: Path) -> Loaded:
    """Dialogue id → (turns as (role, text), changes, the domains whose slots it sets)."""
    with zipfile.ZipFile(path) as archive:
        raw = json.loads(archive.read(archive.namelist()[0]))
    out = {}
    for dialogue_id, dialogue in raw.items():
        log = dialogue["log"]
        turns = [("user" if n % 2 == 0 else "assistant", _detokenise(entry["text"])) for n, entry in enumerate(log)]
        history: dict[tuple[str, str], list[tuple[str, int]]] = {}
        for n in range(1, len(log), 2):
            user_turn = n - 1
            for domain, parts in (log[n].get("metadata") or {}).items():
                for part in ("semi", "book"):
                    for slot, value in (parts.get(part) or {}).items():
                        if slot == "booked" or not isinstance(value, str) or value.lower() in SKIP_VALUES:
                            continue
                        seen = history.setdefault((domain, slot), [])
                        if seen and seen[-1][0] == value:
                            continue
                        if _said(value, turns[user_turn][1]):
                            seen.append((value, user_turn))
                        elif seen:
                            seen.append((value, -1))  # changed without the customer saying it: not asked
        changes = [Change(d, s, v) for (d, s), v in history.items() if len(v) > 1 and v[-1][1] >= 0]
        out[f"multiwoz-{dialogue_id}"] = (turns, changes, {d for d, _ in history})
    return out


def crosswoz_dialogues(path: Path) -> Loaded:
    with zipfile.ZipFile(path) as archive:
        raw = json.loads(archive.read(archive.namelist()[0]))
    out = {}
    for dialogue_id, dialogue in raw.items():
        messages = dialogue["messages"]
        turns = [("user" if m["role"] == "usr" else "assistant", m["content"]) for m in messages]
        history: dict[tuple[str, str], list[tuple[str, int]]] = {}
        for n, message in enumerate(messages):
            if message["role"] != "sys" or n == 0:
                continue
            for domain, slots in (message.get("sys_state") or {}).items():
                for slot, value in slots.items():
                    if slot == "selectedResults" or not isinstance(value, str) or not value:
                        continue
                    seen = history.setdefault((domain, slot), [])
                    if seen and seen[-1][0] == value:
                        continue
                    seen.append((value, n - 1 if value in turns[n - 1][1] else -1))
        changes = [
            Change(d, s, [(v, i) for v, i in values])
            for (d, s), values in history.items()
            if len(values) > 1 and values[-1][1] >= 0 and any(i >= 0 for _, i in values[:-1])
        ]
        out[f"crosswoz-{dialogue_id}"] = (turns, changes, {d for d, _ in history})
    return out


def hash_order(dialogue_id: str, salt: int) -> str:
    import hashlib

    return hashlib.sha256(f"{salt}:{dialogue_id}".encode()).hexdigest()


def build(corpus: str, half: str, per_customer: int, limit: int | None) -> cm.Dataset:
    language = "zh" if corpus == "crosswoz" else "en"
    templates = ZH_QUESTIONS if corpus == "crosswoz" else EN_QUESTIONS
    loader = crosswoz_dialogues if corpus == "crosswoz" else multiwoz_dialogues
    path = SHARED / ("crosswoz_val.json.zip" if corpus == "crosswoz" else "multiwoz21_val.json.zip")
    chosen = [(i, v) for i, v in sorted(loader(path).items()) if half == "all" or half_of(i) == half]
    changed = [(i, v) for i, v in chosen if v[1]]
    fillers = [(i, v) for i, v in chosen if not v[1]]
    if limit:
        changed = changed[:limit]
    dialogues = []
    dropped: Counter[str] = Counter()
    spare = 0
    for number, (dialogue_id, (turns, changes, _)) in enumerate(changed):
        # The customer's other dialogues are fillers that set none of the changed domains' slots, so that "my hotel
        # stay" means one booking.
        asked_domains = {c.domain for c in changes}
        group = [(dialogue_id, turns)]
        for _ in range(len(fillers)):
            if len(group) == per_customer:
                break
            filler_id, (filler_turns, _, domains) = fillers[spare % len(fillers)]
            spare += 1
            if not domains & asked_domains:
                group.append((filler_id, filler_turns))
        group.sort(key=lambda item: hash_order(item[0], number))  # the changed dialogue is not always first
        customer = f"{corpus}-c{number}"
        sessions = []
        for session_id, session_turns in group:
            ids = [f"{session_id}:{n}" for n in range(len(session_turns))]
            sessions.append(
                cm.Session(session_id, [cm.Turn(i, r, t) for i, (r, t) in zip(ids, session_turns, strict=True)])
            )
        questions = []
        ids = [f"{dialogue_id}:{n}" for n in range(len(turns))]
        for change in changes:
            key = (change.domain, change.slot)
            if key not in templates:
                dropped["no template"] += 1
                continue
            final, final_turn = change.values[-1]
            answer = [ids[final_turn]]
            if final_turn + 1 < len(turns) and _said(final, turns[final_turn + 1][1]):
                answer.append(ids[final_turn + 1])
            stale = []
            for value, turn in change.values[:-1]:
                if turn < 0 or value == final or _said(final, turns[turn][1]):
                    continue
                stale.append(ids[turn])
                if turn + 1 < len(turns) and _said(value, turns[turn + 1][1]):
                    stale.append(ids[turn + 1])
            if not stale:
                dropped["no stale turn of its own"] += 1
                continue
            kind = KIND.get(change.slot, "constraint")
            question_id = f"{dialogue_id}:{change.domain}:{change.slot}"
            questions.append(cm.Question(question_id, templates[key], kind, answer, stale))
        dialogues.append(cm.Dialogue(customer, corpus, language, customer, sessions, questions))
    dataset = cm.Dataset(f"woz_updates_{corpus}_{half}", dialogues, cm._ask_in_order(dialogues))
    dataset.info = {"corpus": corpus, "half": half, "per_customer": per_customer, "dropped": dict(dropped)}
    return dataset


def stale_at_5(rows: list[tuple[cm.Question, list[str]]]) -> float:
    return round(sum(any(t in q.stale for t in r[:5]) for q, r in rows) / len(rows), 4) if rows else 0.0


def figures(scores: cm.Scores) -> dict[str, Any]:
    by_kind: dict[str, list[tuple[cm.Question, list[str]]]] = defaultdict(list)
    for q, r in scores.rows:
        by_kind["overall"].append((q, r))
        by_kind[q.kind].append((q, r))
    out = {}
    for kind, rows in sorted(by_kind.items(), key=lambda x: (x[0] != "overall", x[0])):
        out[kind] = {
            "n": len(rows),
            "current@5": round(sum(any(a in r[:5] for a in q.answer) for q, r in rows) / len(rows), 4),
            "stale@5": stale_at_5(rows),
            "stale_first": round(sum(cm.stale_served(r, q.answer, q.stale) for q, r in rows) / len(rows), 4),
        }
        if scores.marked:
            as_current = sum(cm.stale_as_current(r, scores.marked.get(q.id, []), q.stale) for q, r in rows)
            out[kind]["stale@5_as_current"] = round(as_current / len(rows), 4)
            answered = sum(cm.answer_as_current(r, scores.marked.get(q.id, []), q.answer) for q, r in rows)
            out[kind]["current@5_as_current"] = round(answered / len(rows), 4)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("fit", "report", "all"), required=True)
    parser.add_argument("--corpus", choices=("multiwoz", "crosswoz", "both"), default="both")
    parser.add_argument("--per-customer", type=int, default=3)
    parser.add_argument("--limit", type=int, default=None, help="at most this many customers per corpus")
    parser.add_argument("--out", default="")
    parser.add_argument(
        "--knobs", action="append", default=[], metavar="JSON",
        help="also ask every question with these recall settings (settings.MEMDESK_RECALL), on the same ingest; "
        "repeatable. The default settings stay the figure.",
    )  # fmt: skip
    args = parser.parse_args()
    corpora = ("multiwoz", "crosswoz") if args.corpus == "both" else (args.corpus,)
    datasets = [build(c, args.half, args.per_customer, args.limit) for c in corpora]
    for d in datasets:
        common.log(f"{d.name}: {len(d.dialogues)} customers, {len(d.asked)} questions, dropped {d.info['dropped']}")
    common.setup_django(DB_NAME, fresh=True)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    from django.conf import settings

    from chat.llm import clear_context_cache
    from testkit.fake_ollama import FakeOllama

    results: dict[str, Any] = {
        "benchmark": "woz_updates",
        "command": shlex.join([".venv/bin/python", "bench/quality/woz_updates.py", *sys.argv[1:]]),
        "git": common.git_state(),
        "machine": common.machine_info(),
        "path_measured": cm.PATH_MEASURED,
        "corpora": {},
    }
    fake = cm.FakeModel()
    with FakeOllama(default_reply=fake) as server:
        settings.OLLAMA_HOST = server.host
        settings.MEMORY_WRITER = "inline"
        clear_context_cache()
        for dataset in datasets:
            ingested = cm.ingest(dataset, server.host, fake)
            asked = cm.ask(dataset, ingested)
            product = figures(asked.scores)
            baseline = figures(cm.bm25_baseline(dataset))
            errors = sum(sum(i.errors.values()) for i in ingested)
            results["corpora"][dataset.info["corpus"]] = {
                "info": dataset.info, "questions": len(dataset.asked), "errors": errors,
                "product": product, "bm25": baseline, "details": asked.details,
            }  # fmt: skip
            print(f"\n{dataset.name}: {len(dataset.asked)} questions, ingest errors {errors}")
            print("| kind | n | current@5 | current@5 as current | stale@5 | stale first | stale@5 as current "
                  "| BM25 current@5 | BM25 stale@5 |")  # fmt: skip
            for kind, row in product.items():
                b = baseline[kind]
                print(f"| {kind} | {row['n']} | {row['current@5']:.3f} | {row['current@5_as_current']:.3f} | "
                      f"{row['stale@5']:.3f} | {row['stale_first']:.3f} | {row['stale@5_as_current']:.3f} | "
                      f"{b['current@5']:.3f} | {b['stale@5']:.3f} |")  # fmt: skip
            variants = results["corpora"][dataset.info["corpus"]]["knob_variants"] = []
            default_knobs = settings.MEMDESK_RECALL
            for knobs in args.knobs:
                settings.MEMDESK_RECALL = {**default_knobs, **json.loads(knobs)}
                try:
                    again = cm.ask(dataset, ingested)
                finally:
                    settings.MEMDESK_RECALL = default_knobs
                variant = figures(again.scores)
                variants.append({"knobs": json.loads(knobs), "product": variant, "details": again.details})
                for kind, row in variant.items():
                    print(f"| {knobs} {kind} | {row['n']} | {row['current@5']:.3f} | "
                          f"{row['current@5_as_current']:.3f} | {row['stale@5']:.3f} | {row['stale_first']:.3f} | "
                          f"{row['stale@5_as_current']:.3f} | | |")  # fmt: skip
    out = common.OUT_DIR / f"{args.out or f'woz_updates_{args.half}'}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, ensure_ascii=False, indent=1), encoding="utf-8")
    common.log(f"wrote {out}")


if __name__ == "__main__":
    main()
