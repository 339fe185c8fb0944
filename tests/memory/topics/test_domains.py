"""The domain model behind topic switches: a message's matter by its nearest examples (memory.topics.domains)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory.embeddings import models as embeddings
from memory.topics.domains import DATA_DIR, classify, named_domains

BENCH = Path(__file__).resolve().parents[3] / "bench"


def _domain(text: str, model: str = embeddings.USE_MODEL) -> str | None:
    return classify(embeddings.embed_one(text, model=model, kind="query"), model).domain


@pytest.mark.parametrize(
    ("text", "domain"),
    [
        ("你们的客服态度太恶劣了，我要找领导反映", "complaint"),
        ("我想打车，从酒店到首都机场，帮我叫一辆出租车", "taxi"),
        ("My parcel has been stuck at the depot for four days, where is it?", "delivery"),
        ("I need a train from Cambridge to London on Friday morning", "train"),
    ],
)
def test_a_message_that_says_its_matter_gets_that_domain(text: str, domain: str) -> None:
    assert _domain(text) == domain


@pytest.mark.parametrize("text", ["你好，在吗？", "Thanks a lot, that's all for today.", "好的，谢谢你"])
def test_greetings_and_thanks_have_no_domain(text: str) -> None:
    """A message about no matter gives no evidence either way (``none`` is never a domain)."""
    assert _domain(text) is None


def test_minilm_reads_the_english_examples_only() -> None:
    assert _domain("Can you book me a taxi to the station at 7?", embeddings.DEFAULT_MODEL) == "taxi"


def test_a_matter_is_named_by_its_own_words_not_by_attributes() -> None:
    """Words the examples tie to one domain name it; a phone number, a postcode or a count of people name none."""
    assert named_domains("今晚想找个地方住宿") == {"hotel"}
    assert named_domains("I also need a taxi to the museum") >= {"taxi"}
    assert named_domains("What is the postcode and the phone number?") == set()
    assert named_domains("电话是多少？") == set()


def test_the_examples_hold_no_report_half_turn_and_no_labelled_pair() -> None:
    """The public examples come from the fit halves only, and no example is a text of our labelled pairs: the
    report halves and the pairs measure the model on messages it has not seen."""
    zip_path = Path("/work/shared/bench/crosswoz_val.json.zip")
    if not zip_path.exists():
        pytest.skip("the public corpora are not on this machine")
    from bench.quality.topic_switch_public import half_of, load

    woz = json.loads((DATA_DIR / "woz_domains.json").read_text(encoding="utf-8"))["domains"]
    service = json.loads((DATA_DIR / "service_domains.json").read_text(encoding="utf-8"))["domains"]
    examples = {t for by in (*woz.values(), *service.values()) for items in by.values() for t in items}
    fit = {t.text.strip() for c in ("crosswoz", "multiwoz") for d in load(c, "fit", None) for t in d.turns}
    report_only = {
        t.text.strip()
        for c in ("crosswoz", "multiwoz")
        for d in load(c, "report", None)
        if half_of(d.id) == "report"
        for t in d.turns
    } - fit
    assert not examples & report_only
    pairs = json.loads((BENCH / "data" / "topic_switch_labels.json").read_text(encoding="utf-8"))["pairs"]
    service_texts = {t for by in service.values() for items in by.values() for t in items}
    assert not service_texts & {t for p in pairs for t in (p["new"], *p["previous"])}
