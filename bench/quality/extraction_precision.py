"""Rule extraction, per key: precision and recall on hand-labelled customer-service messages.

Data: ``bench/data/extraction_labels.json`` — Chinese and English messages of the user and the agent (venues,
couriers, hotlines, relatives, companies, quoted numbers, corrections, and the Chinese customer-service facts of
``memory.extraction.service``), each labelled with every keyed fact it should yield for the scored keys and whose it is.

A predicted fact is correct when its key and normalised value (:func:`normalise`) match a label of the same
message. Two extractors run on the same set:

- ``new``: ``memory.extraction.rules.extract_facts`` as it is in the working tree;
- ``original``: ``memory/extraction/rules.py`` as it was before the ownership rule — by default the newest commit whose
  ``memory/extraction/rules.py`` has no ``disowned_keys`` (``--baseline REV`` to choose another), loaded from a
  temporary
  file with importlib under another module name. It imports ``memory.text.compression`` and ``memory.text.redaction``
  from the working tree.

Run from the repository root: ``.venv/bin/python bench/quality/extraction_precision.py`` (a few seconds; rjieba loads
its dictionary once). Prints a Markdown table and writes ``bench/out/extraction_precision.json``. ``--errors`` lists
each wrong or missed fact of the new code. ``--data PATH`` scores another labelled file of the same schema (e.g.
the held-out ``bench/data/extraction_labels_holdout.json``); ``--half fit`` or ``--half report`` scores one half of a
set split in two (ids in pairs: 1–2, 5–6, … fit; 3–4, 7–8, … report); its result then goes to
``bench/out/extraction_precision_<stem>.json`` (the stem less ``extraction_labels_``) unless ``--out NAME`` names
another ``bench/out/NAME.json``. Django's apps are loaded (``memory.extraction`` exports its entry point, which
stores), but no database is opened.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR.parent) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR.parent))

import django  # noqa: E402

from bench.common import REPO_ROOT, git_state, now_iso, table, write_result  # noqa: E402

django.setup()  # the settings module is bench.common's; no connection is opened

LABELS = BENCH_DIR / "data" / "extraction_labels.json"
SCORED = (
    "phone",
    "email",
    "address",
    "name",
    "order_id",
    "contact_phone",
    "contact_address",
    "work_address",
    "birthday",
    "ship_date",
    "delivery_date",
    "pickup_time",
    "appointment",
    "renewal_date",
    "expiry_date",
    "account_id",
    "membership",
    "points_balance",
    "callback",
    "coupon",
    "batch_progress",
    "amount",
)
#: The keys whose precision target is 0.98 (recall no lower than the original code's).
PROFILE = ("phone", "email", "address", "name")
_DATED = {"ship_date", "delivery_date", "pickup_time", "appointment", "renewal_date", "expiry_date", "callback"}
_PHONES = {"phone", "contact_phone"}

Extractor = Callable[..., list[Any]]


def normalise(key: str, value: str) -> str:
    """The form in which a value is compared: the day of a dated fact, a phone's digits (with its +; ten digits
    of a North-American number count as its E.164, as the product stores it), and
    otherwise the value without spaces or commas, case-folded."""
    value = value.strip()
    if key in _DATED and re.match(r"\d{4}-\d{2}-\d{2}T", value):
        value = value[:10]
    if key in _PHONES:
        value = ("+" if value.startswith("+") else "") + re.sub(r"\D", "", value)
        if re.fullmatch(r"[2-9]\d{9}", value):  # a North-American number in its ten digits: our older labels
            value = "+1" + value
        if re.fullmatch(r"\+86\d{9,11}", value) and not re.fullmatch(r"\+861[3-9]\d{9}", value):
            # a Chinese landline in E.164, as the product stores it: its area code with the trunk 0
            value = "0" + value[3:]
    return re.sub(r"[\s,，]", "", value).casefold()


#: Where the rules live now, and where they lived before the package layout (``git log --follow`` bridges the two).
RULES_PATH = "memory/extraction/rules.py"
#: The modules an older ``memory/rules.py`` imports, by their names today.
_MOVED_MODULES = {"memory.compression": "memory.text.compression", "memory.redaction": "memory.text.redaction"}


def baseline_revision() -> str:
    """The newest commit whose rules predate the ownership rule (have no ``disowned_keys``)."""
    for sha, path in _history():
        source = git_show(sha, path)
        if "def disowned_keys" not in source:
            return sha
    raise SystemExit(f"no commit of {RULES_PATH} without disowned_keys")


def _history() -> list[tuple[str, str]]:
    """``(commit, path of the rules at that commit)``, newest first, across the move into ``memory/extraction``."""
    command = ["git", "log", "--follow", "--format=%H", "--name-only", "--", RULES_PATH]
    log = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    lines = [line for line in log.stdout.splitlines() if line.strip()]
    return list(zip(lines[::2], lines[1::2], strict=True))


def _path_at(revision: str) -> str:
    for path in (RULES_PATH, "memory/rules.py"):
        found = subprocess.run(["git", "cat-file", "-e", f"{revision}:{path}"], cwd=REPO_ROOT, capture_output=True)
        if found.returncode == 0:
            return path
    raise SystemExit(f"{revision} has no rules module")


def git_show(revision: str, path: str | None = None) -> str:
    path = path or _path_at(revision)
    source = subprocess.run(
        ["git", "show", f"{revision}:{path}"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    for old, new in _MOVED_MODULES.items():
        source = re.sub(rf"\b{re.escape(old)}\b", new, source)
    return source


def load_original(revision: str, workdir: Path) -> ModuleType:
    path = workdir / "rules_original.py"
    path.write_text(git_show(revision))
    spec = importlib.util.spec_from_file_location("memdesk_rules_original", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def predictions(extract: Extractor, items: list[dict[str, Any]], now: datetime) -> list[set[tuple[str, str]]]:
    result = []
    for item in items:
        facts = extract(item["text"], role=item["role"], now=now)
        result.append({(f.key, normalise(f.key, f.value)) for f in facts if f.key in SCORED})
    return result


def score(items: list[dict[str, Any]], predicted: list[set[tuple[str, str]]]) -> dict[str, Any]:
    """Counts, precision and recall per key, over all messages and per language (``per_language``), and the
    wrong and missed facts."""
    counts: dict[str, Counter[str]] = {key: Counter() for key in SCORED}
    by_language: dict[str, dict[str, Counter[str]]] = {}
    errors = []
    for item, pred in zip(items, predicted, strict=True):
        language = by_language.setdefault(item["lang"], {key: Counter() for key in SCORED})
        expected = {(f["key"], normalise(f["key"], f["value"])) for f in item["expect"]}
        for key, _ in pred & expected:
            counts[key]["tp"] += 1
            language[key]["tp"] += 1
        for key, value in pred - expected:
            counts[key]["fp"] += 1
            language[key]["fp"] += 1
            errors.append({"id": item["id"], "text": item["text"], "wrong": f"{key}={value}"})
        for key, value in expected - pred:
            counts[key]["fn"] += 1
            language[key]["fn"] += 1
            errors.append({"id": item["id"], "text": item["text"], "missed": f"{key}={value}"})
    return {
        "per_key": _rates(counts),
        "per_language": {lang: _rates(c) for lang, c in sorted(by_language.items())},
        "errors": errors,
    }


def _rates(counts: dict[str, Counter[str]]) -> dict[str, dict[str, Any]]:
    per_key = {}
    for key, c in counts.items():
        predicted_n, labelled_n = c["tp"] + c["fp"], c["tp"] + c["fn"]
        per_key[key] = {
            "tp": c["tp"],
            "fp": c["fp"],
            "fn": c["fn"],
            "precision": round(c["tp"] / predicted_n, 3) if predicted_n else None,
            "recall": round(c["tp"] / labelled_n, 3) if labelled_n else None,
        }
    return per_key


def _rel(path: Path) -> str:
    """``path`` relative to the repository root where it lies inside it, else as given."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _half(item_id: int) -> str:
    """The half an item is in, by its id taken in pairs: a set written alternating languages (or roles) keeps both
    in each half."""
    return "fit" if (item_id - 1) // 2 % 2 == 0 else "report"


def _pair(rates: dict[str, Any]) -> str:
    return f"{_fmt(rates['precision'])} / {_fmt(rates['recall'])} ({rates['tp'] + rates['fn']})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--baseline", help="git revision of the original memory/extraction/rules.py (default: see docstring)"
    )
    parser.add_argument("--errors", action="store_true", help="list the new code's wrong and missed facts")
    parser.add_argument("--data", type=Path, default=LABELS, help=f"labelled messages (default: {_rel(LABELS)})")
    parser.add_argument("--out", help="result name, written to bench/out/NAME.json (default: see docstring)")
    parser.add_argument(
        "--half",
        choices=("fit", "report"),
        help="score one half of a set that is split: fit = ids 1-2, 5-6, 9-10 …; report = ids 3-4, 7-8 …",
    )
    args = parser.parse_args()
    data = args.data.resolve()
    out_name = args.out or (
        "extraction_precision"
        if data == LABELS
        else "extraction_precision_" + data.stem.removeprefix("extraction_labels_")
    )

    from memory.extraction.rules import extract_facts

    labels = json.loads(data.read_text())
    items, now = labels["items"], datetime.fromisoformat(labels["now"])
    if args.half:
        items = [item for item in items if _half(item["id"]) == args.half]
        out_name += f"_{args.half}"
    revision = args.baseline or baseline_revision()
    with tempfile.TemporaryDirectory() as workdir:
        original = load_original(revision, Path(workdir))
        results = {
            "new": score(items, predictions(extract_facts, items, now)),
            "original": score(items, predictions(original.extract_facts, items, now)),
        }

    labelled = Counter(f["key"] for item in items for f in item["expect"])
    rows = []
    for key in SCORED:
        new, old = results["new"]["per_key"][key], results["original"]["per_key"][key]
        rows.append(
            [
                key,
                labelled[key],
                _fmt(new["precision"]),
                _fmt(new["recall"]),
                _fmt(old["precision"]),
                _fmt(old["recall"]),
                f"{new['fp']}/{old['fp']}",
            ]
        )
    langs = Counter(item["lang"] for item in items)
    print(f"data: {_rel(data)}" + (f", {args.half} half" if args.half else ""))
    print(f"{len(items)} messages ({langs['zh']} Chinese, {langs['en']} English); original = {revision[:10]}\n")
    print(table(["key", "labels", "new P", "new R", "original P", "original R", "wrong new/orig"], rows))
    print("\nnew, per language (P / R):\n")
    languages = sorted(results["new"]["per_language"])
    print(
        table(
            ["key", *languages],
            [
                [key, *(_pair(results["new"]["per_language"][lang][key]) for lang in languages)]
                for key in (*PROFILE, "order_id", "contact_phone", "contact_address", "work_address")
            ],
        )
    )
    if args.errors:
        print()
        for error in results["new"]["errors"]:
            print(f"#{error['id']} {error.get('wrong') and 'WRONG ' + error['wrong'] or 'MISSED ' + error['missed']}"
                  f"  ← {error['text']}")  # fmt: skip
    path = write_result(
        out_name,
        {
            "benchmark": "extraction_precision",
            "when": now_iso(),
            "git": git_state(),
            "labels": _rel(data),
            "half": args.half,
            "messages": len(items),
            "languages": dict(langs),
            "baseline_revision": revision,
            "targets": {"precision_at_least": 0.98, "keys": list(PROFILE), "recall": "no lower than original"},
            "new": results["new"],
            "original": results["original"],
        },
    )
    print(f"\nwritten {path.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
