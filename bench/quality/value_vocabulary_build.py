"""Build ``memory/topics/data/woz_values.json``: the values each attribute took in the public dialogues' labelled
dialogue states, from the **fit halves** only (``topic_switch_public.half_of``), as the vocabulary of
``memory.topics.values``.

An attribute is a slot of MultiWOZ 2.1's belief state whose values are words, not names or numbers: a restaurant's
``food``, an attraction's or a hotel's ``type``, an ``area`` and a ``pricerange`` (one attribute each, whatever the
domain), and a train's ``departure`` and ``destination`` (one attribute, ``place``: the same stations are both); and of
CrossWOZ's ``sys_state``, a hotel's facilities and type and a restaurant's dishes, each item of a list a value.
Venue names, times, days and counts are left out: names are said whole and have other words in common ("… guest
house", "… college"), the rest have patterns of their own (``memory.conversation.claims``). Each value is kept as
said in the states (lower-cased; "hotel|guesthouse" is two values). Each attribute's sense words
(``memory.topics.values.senses_of``) come from the customer turns of MultiWOZ's fit half that gave it a new value
said in their words; its domains are those it is a slot of.

    .venv/bin/python bench/quality/value_vocabulary_build.py
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR.parent) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR.parent))

import django  # noqa: E402

import bench.common  # noqa: E402, F401  (its settings module)
from bench.quality.topic_switch_public import half_of  # noqa: E402

django.setup()  # the models module only: no database is opened

from memory.topics.values import senses_of, vocabulary_of  # noqa: E402

SHARED = Path("/work/shared/bench")
OUT = BENCH_DIR.parent / "memory" / "topics" / "data" / "woz_values.json"
#: (domain, slot) of MultiWOZ's belief state → the attribute its values belong to.
ATTRIBUTES = {
    ("restaurant", "food"): "food",
    ("attraction", "type"): "attraction type",
    ("hotel", "type"): "lodging type",
    ("restaurant", "area"): "area", ("hotel", "area"): "area", ("attraction", "area"): "area",
    ("restaurant", "pricerange"): "price range", ("hotel", "pricerange"): "price range",
    ("train", "departure"): "place", ("train", "destination"): "place",
}  # fmt: skip
_WORD = re.compile(r"[a-z][a-z'-]*[a-z]")
SKIP = {"", "not mentioned", "none", "dontcare", "don't care", "dont care"}
#: (domain, slot) of CrossWOZ's ``sys_state`` → the attribute; its values are lists said with spaces between
#: (「24小时热水 无烟房」), each item a value.
ATTRIBUTES_ZH = {("酒店", "酒店设施"): "酒店设施", ("酒店", "酒店类型"): "酒店类型", ("餐馆", "推荐菜"): "推荐菜"}


def _fit_half(corpus: str) -> list[dict]:
    """The dialogues of a corpus's validation split in its fit half."""
    path = SHARED / ("crosswoz_val.json.zip" if corpus == "crosswoz" else "multiwoz21_val.json.zip")
    with zipfile.ZipFile(path) as archive:
        raw = json.loads(archive.read(archive.namelist()[0]))
    return [d for i, d in raw.items() if half_of(f"{corpus}-{i}") == "fit"]


def build_zh() -> dict[str, set[str]]:
    values: dict[str, set[str]] = {}
    for dialogue in _fit_half("crosswoz"):
        for message in dialogue["messages"]:
            for domain, slots in (message.get("sys_state") or {}).items():
                for slot, value in slots.items():
                    attribute = ATTRIBUTES_ZH.get((domain, slot))
                    if attribute is None or not isinstance(value, str):
                        continue
                    values.setdefault(attribute, set()).update(v.strip().lower() for v in value.split() if v.strip())
    for attribute, catalogue in catalogue_zh().items():
        values.setdefault(attribute, set()).update(catalogue)
    return values


def catalogue_zh() -> dict[str, set[str]]:
    """The values the venue database the clerks answered from offers (``crosswoz_db``: each restaurant's dishes,
    each hotel's facilities and type), as a tenant's catalogue would give them: what a customer can ask for,
    whichever dialogues ask. Not labels: no dialogue of either half is read. A value with no noun among the
    segmenter's words (「其他」, a pronoun; 「都可以」) is a phrase of the language, not an offer, and is left out."""
    import rjieba

    out: dict[str, set[str]] = {}
    for (domain, slot), attribute in ATTRIBUTES_ZH.items():
        table = {"餐馆": "restaurant_db.json", "酒店": "hotel_db.json"}[domain]
        for _, venue in json.loads((SHARED / "crosswoz_db" / table).read_text(encoding="utf-8")):
            offered = venue.get(slot)
            for value in offered if isinstance(offered, list) else [offered]:
                value = (value or "").strip().lower()
                if len(value) >= 2 and any(flag.startswith("n") for _, flag in rjieba.tag(value)):
                    out.setdefault(attribute, set()).add(value)
    return out


def names_zh() -> list[str]:
    """The venues' names in the same database (attractions, hotels, restaurants), and each name's head before its
    branch in brackets (「北京烤鸭」 of 「北京烤鸭(前门店)」): a value said inside a name (「烤鸭」) names the venue,
    not a dish asked for. Names shorter than 3 characters are left out: they are words of the language too."""
    out: set[str] = set()
    for table in ("attraction_db.json", "hotel_db.json", "restaurant_db.json"):
        for name, _ in json.loads((SHARED / "crosswoz_db" / table).read_text(encoding="utf-8")):
            name = name.strip().lower()
            for one in (name, re.split(r"[(（]", name)[0].strip()):
                if len(one) >= 3:
                    out.add(one)
    return sorted(out)


def _stating_turns(vocabulary: dict[str, str]) -> list[tuple[str, frozenset[str]]]:
    """Each customer turn of MultiWOZ's fit half, with the attributes it gave a new value that its words say (the
    belief state after the turn, on the system turn that follows it, against the one before)."""
    turns = []
    for dialogue in _fit_half("multiwoz"):
        log, before = dialogue["log"], {}
        for i in range(0, len(log) - 1, 2):
            text = log[i]["text"]
            words = set(_WORD.findall(text.lower()))
            stated = set()
            for domain, parts in (log[i + 1].get("metadata") or {}).items():
                for slot, value in (parts.get("semi") or {}).items():
                    attribute = ATTRIBUTES.get((domain, slot))
                    if attribute is None or not isinstance(value, str):
                        continue
                    if value.lower() not in SKIP and before.get((domain, slot)) != value:
                        if any(vocabulary.get(w) == attribute for w in words & set(_WORD.findall(value.lower()))):
                            stated.add(attribute)
                    before[(domain, slot)] = value
            turns.append((text, frozenset(stated)))
    return turns


def build() -> dict:
    values: dict[str, set[str]] = {}
    for dialogue in _fit_half("multiwoz"):
        for entry in dialogue["log"]:
            for domain, parts in (entry.get("metadata") or {}).items():
                for slot, value in (parts.get("semi") or {}).items():
                    attribute = ATTRIBUTES.get((domain, slot))
                    if attribute is None or not isinstance(value, str):
                        continue
                    for one in value.lower().split("|"):
                        if one.strip() not in SKIP:
                            values.setdefault(attribute, set()).add(one.strip())
    zh = build_zh()
    attributes = {a: sorted(v) for a, v in sorted(values.items())}
    words = vocabulary_of(attributes)
    return {
        "about": (
            "The values each attribute took in the labelled dialogue states of a public corpus's fit half, as the "
            "vocabulary of memory.topics.values. Built by bench/quality/value_vocabulary_build.py; do not edit by "
            "hand."
        ),
        "sources": {
            "multiwoz": "MultiWOZ 2.1 validation split, fit half (MIT; Budzianowski et al. 2018, Eric et al. 2020)",
            "crosswoz": (
                "CrossWOZ validation split, fit half, and its venue database's dishes, hotel facilities and types "
                "(Apache License 2.0; Zhu et al., TACL 2020)"
            ),
        },
        "attributes": attributes,
        "domains": {a: sorted({d for (d, _), b in ATTRIBUTES.items() if b == a}) for a in attributes},
        "senses": senses_of(_stating_turns(words), words),
        "attributes_zh": {a: sorted(v) for a, v in sorted(zh.items())},
        "names_zh": names_zh(),
    }


def main() -> None:
    data = build()
    OUT.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    counts = {a: len(v) for a, v in (data["attributes"] | data["attributes_zh"]).items()}
    print(f"wrote {OUT}: {counts}")


if __name__ == "__main__":
    main()
