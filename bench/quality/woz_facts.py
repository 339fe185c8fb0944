"""Fact questions from public task-oriented service dialogues — MultiWOZ 2.1 (English) and CrossWOZ (Chinese) —
for ``bench/quality/chat_memory.py --dataset multiwoz|crosswoz``: a tourist (the customer) and a booking clerk
(the agent), the clerk's turns stating booking references, train ids, times, taxis, addresses and phones.

- **Data**: ``/work/shared/bench/multiwoz21_val.json.zip`` (MultiWOZ 2.1 validation set, ConvLab format, MIT) and
  ``/work/shared/bench/crosswoz_val.json.zip`` (CrossWOZ validation set, Apache-2.0); evaluation only, never
  shipped (licences beside the files).
- **Halves**: a dialogue is in the *fit* half when the first byte of blake2b(its id) is even, else in the *report*
  half. Rules and thresholds are chosen on the fit half; the report half is run once, at the end.
- **Pseudo customers**: a half's dialogues in the order of that hash, five at a time (``--per-customer``): one
  end user each, one chat session per dialogue; the first ``--customers`` of them are run. Every customer of a
  dataset is in one tenant (``en`` or ``zh``).
- **Questions**: a value the clerk informs (``dialog_act``) that is written verbatim in the clerk's turn and
  appears in no other turn of the same customer (so only that turn answers it), asked by a template that names
  what it was for, from the dialogue state of that turn or its acts: "What is the booking reference for the
  train from cambridge to kings lynn on friday?", "What car is the taxi from bridge guest house to the lucky
  star?", 「北京天伦王朝酒店的电话是多少？」. A question whose text two turns of a customer would both answer
  is dropped (ambiguous). The question's ``kind`` is the slot (``ref``, ``train id``, ``arrive``…), so the
  figures come per slot too. The answer turn is the clerk's turn.

``python bench/quality/woz_facts.py --dataset multiwoz --half fit`` prints the questions' counts per slot and a few
samples without running anything.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/quality: chat_memory
from chat_memory import Dataset, Dialogue, Question, Session, Turn  # noqa: E402

SHARED = Path("/work/shared/bench")
MULTIWOZ = SHARED / "multiwoz21_val.json.zip"
CROSSWOZ = SHARED / "crosswoz_val.json.zip"
HALVES = ("fit", "report")
PER_CUSTOMER = 5
#: Belief-state values that name nothing.
_EMPTY = {"", "not mentioned", "dontcare", "dont care", "don't care", "none"}


def half_of(dialogue_id: str) -> str:
    """``fit`` or ``report``, from a stable hash of the dialogue's id."""
    return HALVES[hashlib.blake2b(dialogue_id.encode(), digest_size=8).digest()[0] % 2]


def _order(dialogue_id: str) -> bytes:
    return hashlib.blake2b(f"order:{dialogue_id}".encode(), digest_size=8).digest()


def _read(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read(archive.namelist()[0]))


def _known(value: Any) -> str:
    text = str(value or "").strip()
    return "" if text.lower() in _EMPTY else text


# --- MultiWOZ ------------------------------------------------------------------------------------------------------

#: (domain of the act, slot) → question kind, for values a question names by their entity.
_ENTITY_SLOTS = {"Addr": "address", "Phone": "phone", "Post": "postcode"}
_ENTITY_DOMAINS = ("Attraction", "Hotel", "Restaurant")


def _semi(meta: dict[str, Any], domain: str) -> dict[str, str]:
    return {k: _known(v) for k, v in (meta.get(domain.lower(), {}).get("semi") or {}).items()}


def _book(meta: dict[str, Any], domain: str) -> dict[str, Any]:
    return meta.get(domain.lower(), {}).get("book") or {}


def _train_route(meta: dict[str, Any]) -> str:
    semi = _semi(meta, "train")
    if semi.get("departure") and semi.get("destination") and semi.get("day"):
        return f"the train from {semi['departure']} to {semi['destination']} on {semi['day']}"
    return ""


def _multiwoz_facts(turn: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """``(kind, value, question)`` for each fact a clerk's turn states that a template can ask about."""
    meta = turn.get("metadata") or {}
    acts: dict[str, list[list[str]]] = turn.get("dialog_act") or {}
    names = {act.split("-")[0]: v for act, slots in acts.items() for s, v in slots if s == "Name"}
    for act, slots in acts.items():
        domain, _, kind = act.partition("-")
        for slot, value in slots:
            value = _known(value)
            if not value:
                continue
            if slot == "Ref":
                yield from _reference(meta, value)
            elif domain == "Train" and slot in ("Id", "Arrive", "Leave") and (route := _train_route(meta)):
                question = {
                    "Id": f"What is the train id of {route}?",
                    "Arrive": f"When does {route} arrive?",
                    "Leave": f"When does {route} leave?",
                }[slot]
                yield {"Id": "train id", "Arrive": "arrive", "Leave": "leave"}[slot], value, question
            elif domain == "Taxi" and slot in ("Car", "Phone"):
                semi = _semi(meta, "taxi")
                if semi.get("departure") and semi.get("destination"):
                    taxi = f"the taxi from {semi['departure']} to {semi['destination']}"
                    if slot == "Car":
                        yield "taxi car", value, f"What car is {taxi}?"
                    else:
                        yield "taxi phone", value, f"What is the contact number for {taxi}?"
            elif domain in _ENTITY_DOMAINS and slot in _ENTITY_SLOTS:
                name = _known(names.get(domain)) or _semi(meta, domain).get("name", "")
                if name:
                    what = {"Addr": "the address", "Phone": "the phone number", "Post": "the postcode"}[slot]
                    yield _ENTITY_SLOTS[slot], value, f"What is {what} of {name}?"


def _reference(meta: dict[str, Any], value: str) -> Iterator[tuple[str, str, str]]:
    """The booking a reference belongs to: the domain whose booked list holds it after this turn."""
    for domain in ("train", "hotel", "restaurant", "taxi", "attraction"):
        book = _book(meta, domain)
        for booked in book.get("booked") or []:
            if str(booked.get("reference", "")).strip().lower() != value.lower():
                continue
            if domain == "train" and (route := _train_route(meta)):
                yield "ref", value, f"What is the booking reference for {route}?"
            elif domain == "hotel" and (name := _known(booked.get("name"))) and _known(book.get("day")):
                yield "ref", value, f"What is the booking reference for the stay at {name} from {book['day']}?"
            elif domain == "restaurant" and (name := _known(booked.get("name"))) and _known(book.get("day")):
                yield "ref", value, f"What is the booking reference for the table at {name} on {book['day']}?"
            return


def _multiwoz_turns(dialogue_id: str, raw: dict[str, Any]) -> tuple[list[Turn], list[tuple[str, str, str, str]]]:
    """The dialogue's turns (even: the tourist, odd: the clerk) and ``(turn id, kind, value, question)`` facts."""
    turns, facts = [], []
    for i, entry in enumerate(raw["log"]):
        tid = f"{dialogue_id}:{i}"
        role = "user" if i % 2 == 0 else "assistant"
        turns.append(Turn(tid, role, " ".join(str(entry["text"]).split())))
        if role == "assistant":
            facts += [(tid, kind, value, question) for kind, value, question in _multiwoz_facts(entry)]
    return turns, facts


# --- CrossWOZ ------------------------------------------------------------------------------------------------------

_ZH_ENTITY_SLOTS = {
    "电话": ("phone", "{name}的电话是多少？"),
    "地址": ("address", "{name}的地址在哪里？"),
    "营业时间": ("hours", "{name}的营业时间是几点到几点？"),
    "门票": ("ticket", "{name}的门票多少钱？"),
    "价格": ("price", "{name}的价格是多少？"),
    "人均消费": ("spend", "{name}的人均消费是多少？"),
}
_ZH_METRO_SLOTS = {
    "出发地附近地铁站": ("metro from", "从{dep}到{dest}，出发地附近的地铁站是哪个？"),
    "目的地附近地铁站": ("metro to", "从{dep}到{dest}，目的地附近的地铁站是哪个？"),
}
_ZH_TAXI_SLOTS = {
    "车型": ("taxi car", "从{dep}到{dest}的出租车是什么车型？"),
    "车牌": ("taxi plate", "从{dep}到{dest}的出租车车牌是多少？"),
}


def _crosswoz_facts(message: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    state = message.get("sys_state") or {}
    acts = message.get("dialog_act") or []
    names = {domain: value for intent, domain, slot, value in acts if slot == "名称" and _known(value)}
    for intent, domain, slot, value in acts:
        value = _known(value)
        if intent != "Inform" or not value or value.startswith("#"):  # "#CX", "#CP": CrossWOZ's anonymised taxis
            continue
        dstate = state.get(domain) or {}
        if slot in _ZH_ENTITY_SLOTS:
            selected = dstate.get("selectedResults") or []
            name = names.get(domain) or _known(dstate.get("名称")) or (selected[0] if len(selected) == 1 else "")
            if name:
                kind, template = _ZH_ENTITY_SLOTS[slot]
                yield kind, value, template.format(name=name)
        elif (domain, slot) in {("地铁", s) for s in _ZH_METRO_SLOTS} | {("出租", s) for s in _ZH_TAXI_SLOTS}:
            dep, dest = _known(dstate.get("出发地")), _known(dstate.get("目的地"))
            if dep and dest:
                kind, template = (_ZH_METRO_SLOTS | _ZH_TAXI_SLOTS)[slot]
                yield kind, value, template.format(dep=dep, dest=dest)


def _crosswoz_turns(dialogue_id: str, raw: dict[str, Any]) -> tuple[list[Turn], list[tuple[str, str, str, str]]]:
    turns, facts = [], []
    for i, message in enumerate(raw["messages"]):
        tid = f"{dialogue_id}:{i}"
        role = "user" if message["role"] == "usr" else "assistant"
        turns.append(Turn(tid, role, str(message["content"]).strip()))
        if role == "assistant":
            facts += [(tid, kind, value, question) for kind, value, question in _crosswoz_facts(message)]
    return turns, facts


# --- pseudo customers ----------------------------------------------------------------------------------------------


def _customer_questions(
    customer: str, sessions: list[Session], facts: list[tuple[str, str, str, str]], dropped: Counter[str]
) -> list[Question]:
    """The facts whose value the clerk's turn states verbatim and no other turn of the customer contains; a
    question text two turns would answer is dropped."""
    texts = {t.id: t.text.lower() for s in sessions for t in s.turns}
    by_text: dict[str, list[tuple[str, str]]] = {}
    for tid, kind, value, question in facts:
        needle = value.lower()
        if needle not in texts[tid]:
            dropped["not verbatim"] += 1
            continue
        if any(needle in text for other, text in texts.items() if other != tid):
            dropped["in another turn"] += 1
            continue
        if needle in question.lower():
            dropped["in the question"] += 1
            continue
        by_text.setdefault(question, []).append((tid, kind))
    questions = []
    for n, (text, answers) in enumerate(by_text.items()):
        turns = {tid for tid, _ in answers}
        if len(turns) > 1:
            dropped["ambiguous"] += 1
            continue
        questions.append(Question(f"{customer}#q{n}", text, answers[0][1], [answers[0][0]]))
    return questions


def load_woz(
    name: str, half: str, customers: int, per_customer: int = PER_CUSTOMER, path: Path | None = None
) -> Dataset:
    """``name`` (``multiwoz`` or ``crosswoz``): the first ``customers`` pseudo customers of ``half``."""
    if half not in HALVES:
        raise ValueError(f"half must be one of {HALVES}")
    reader: Callable[[str, dict[str, Any]], tuple[list[Turn], list[tuple[str, str, str, str]]]]
    if name == "multiwoz":
        path, reader, language = path or MULTIWOZ, _multiwoz_turns, "en"
    elif name == "crosswoz":
        path, reader, language = path or CROSSWOZ, _crosswoz_turns, "zh"
    else:
        raise ValueError(f"unknown dataset {name!r}")
    raw = _read(path)
    ids = sorted((d for d in raw if half_of(d) == half), key=_order)
    dialogues = []
    dropped: Counter[str] = Counter()
    for c in range(min(customers, len(ids) // per_customer)):
        chosen = ids[c * per_customer : (c + 1) * per_customer]
        sessions, facts = [], []
        for did in chosen:
            turns, found = reader(did, raw[did])
            sessions.append(Session(did, turns))
            facts += found
        customer = f"{name}-{half}-c{c:03d}"
        questions = _customer_questions(customer, sessions, facts, dropped)
        dialogues.append(Dialogue(customer, name, language, customer, sessions, questions))
    info = {
        "path": str(path),
        "half": half,
        "halves": "blake2b(dialogue id)[0] even: fit, odd: report",
        "per_customer": per_customer,
        "customers": len(dialogues),
        "dialogues_in_half": len(ids),
        "questions_by_kind": dict(Counter(q.kind for d in dialogues for q in d.questions)),
        "facts_dropped": dict(dropped),
        "license": "MultiWOZ: MIT; CrossWOZ: Apache-2.0 (evaluation only, never shipped)",
    }
    return Dataset(name, dialogues, [(i, q) for i, d in enumerate(dialogues) for q in d.questions], info)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=("multiwoz", "crosswoz"), required=True)
    parser.add_argument("--half", choices=HALVES, default="fit")
    parser.add_argument("--customers", type=int, default=40)
    parser.add_argument("--samples", type=int, default=12)
    args = parser.parse_args()
    dataset = load_woz(args.dataset, args.half, args.customers)
    print(json.dumps(dataset.info, ensure_ascii=False, indent=1))
    print(f"questions: {len(dataset.asked)}")
    for index, question in dataset.asked[:: max(1, len(dataset.asked) // args.samples)]:
        dialogue = dataset.dialogues[index]
        answer = next(t.text for t in dialogue.turns() if t.id == question.answer[0])
        print(f"- [{question.kind}] {question.text}\n    → {answer}")


if __name__ == "__main__":
    main()
