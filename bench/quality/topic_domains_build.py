"""Build ``memory/topics/data/woz_domains.json``: the public dialogues' examples of the domain model
(``memory.topics.domains``), from the **fit halves** only: the dialogues ``topic_switch_public.in_bank`` names
(the rest of the fit half is where the thresholds are tuned, on turns that are no example).

Each user turn whose acts name exactly one domain is an example of that domain (CrossWOZ's 餐馆/酒店/景点/出租/地铁
named in English: restaurant, hotel, attraction, taxi, metro); a turn with no domain (greetings, thanks, goodbyes)
is an example of ``none`` — a message that says nothing about a matter. At most ``--per-domain`` examples per domain
and language, picked by a hash of the text (stable from run to run), the shortest-first bias avoided.

    .venv/bin/python bench/quality/topic_domains_build.py [--per-domain 150]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR.parent) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR.parent))

from bench.quality.topic_switch_public import in_bank, load  # noqa: E402

OUT = BENCH_DIR.parent / "memory" / "topics" / "data" / "woz_domains.json"
ENGLISH = {"餐馆": "restaurant", "酒店": "hotel", "景点": "attraction", "出租": "taxi", "地铁": "metro"}


def build(per_domain: int) -> dict:
    pools: dict[str, dict[str, set[str]]] = {}
    for corpus in ("crosswoz", "multiwoz"):
        for dialogue in load(corpus, "fit", None):
            if not in_bank(dialogue.id):
                continue
            for turn in dialogue.turns:
                if len(turn.domains) > 1:
                    continue
                domain = ENGLISH.get(next(iter(turn.domains)), next(iter(turn.domains))) if turn.domains else "none"
                pools.setdefault(domain, {}).setdefault(dialogue.language, set()).add(turn.text.strip())
    domains: dict[str, dict[str, list[str]]] = {}
    for domain in sorted(pools):
        for language, texts in sorted(pools[domain].items()):
            ranked = sorted(texts, key=lambda t: hashlib.sha256(t.encode()).hexdigest())[:per_domain]
            domains.setdefault(domain, {})[language] = sorted(ranked)
    return {
        "about": (
            "User turns of the public dialogues' fit halves by the domain their acts name (none: no domain), as "
            "examples for memory.topics.domains. Built by bench/quality/topic_domains_build.py; do not edit by hand."
        ),
        "sources": {
            "crosswoz": "CrossWOZ validation split, fit half (Apache License 2.0; Zhu et al., TACL 2020)",
            "multiwoz": "MultiWOZ 2.1 validation split, fit half (MIT; Budzianowski et al. 2018, Eric et al. 2020)",
        },
        "per_domain": per_domain,
        "domains": domains,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-domain", type=int, default=150)
    args = parser.parse_args()
    data = build(args.per_domain)
    OUT.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    counts = {d: {lang: len(t) for lang, t in v.items()} for d, v in data["domains"].items()}
    print(f"wrote {OUT}: {counts}")


if __name__ == "__main__":
    main()
