"""The agent answers from the business's articles: venue databases imported as a tenant's knowledge, customers'
questions that name a venue replayed through the chat turn. CrossWOZ (Chinese) and MultiWOZ 2.1 (English).

**Articles.** ``/work/shared/bench/crosswoz_db/`` (attractions, hotels, restaurants; Apache-2.0) and
``multiwoz_db/`` (attractions, hotels, restaurants; MIT) are the databases the corpora's clerks answered from.
Each venue becomes one Markdown article as a business would write it (:func:`render_zh`, :func:`render_en`): the
venue's name as title, a short introduction, then sections ("地址与电话" / "Address and phone", prices and hours,
what it offers, nearby places — the nearby lists cut to five names each, as a page would list a few, not the
corpus's hundred). Fields the database does not know (``?``, ``无``, null) are left out. One tenant per corpus;
the Chinese tenant also gets generated filler venues in the same style (:func:`filler_zh`, names that contain no
real venue's name) up to ``--kb-size`` articles in all, so every Chinese figure is measured against that many
articles. The articles are written as a folder of ``.md`` files and imported with ``manage.py import_knowledge``
(what an operator runs; it checks, splits, embeds and writes in the command itself — memdesk has no separate
indexing worker for knowledge), timed: the **import rate** is articles per second of the whole command.

**Questions.** A customer turn *names a venue* when a venue's name appears in its text (whole words in English,
case-folded; the longest name in Chinese) and the corpus's acts of that turn or of the clerk's next turn carry the
name (so "ask" the restaurant is not found in "can I ask"); a turn naming two different venues is left out. Each
dialogue's naming turns are replayed in order in one chat session of its own end user
(``chat.sessions.lifecycle.do_open_session``) through ``chat.turn.run.run_turn`` (what the REST endpoint and the
WebSocket consumer call), against the fake Ollama (``testkit.fake_ollama.FakeOllama``, a real HTTP server).

**The fake model** (:class:`Citer`) replies with the clerk's next turn and cites one label of the prompt's
knowledge part, as a model that cites what it used: the best-ranked passage whose text holds a value its reply
states (the turn's checkable values, below); when none does, the best-ranked passage of the named venue's article
(its prompt line starts with the venue's name as title), else the best-ranked one whose text names the venue,
else ``K1``; nothing when the prompt has no knowledge part. The citation goes through the product's own path
(the reply's ``[K…]`` read by ``chat.turn.knowledge.citations``, ``TurnResult.citations`` with the passage's id)
and is judged on the stored passage (``Passage.text`` by its ``public_id``).

**Figures.**

- *(a) right venue in the prompt*: naming turns whose prompt's knowledge part (at most five passages) holds a
  passage of the named venue's article / naming turns.
- *(b) citation precision*: the **stated values** of a turn are the values of the clerk's next turn's ``Inform``
  (``Recommend``) acts of the venue's domain for the slots :data:`VALUE_SLOTS` (address, phone, postcode, prices,
  hours, fees…); a value is *checkable* when the named venue's article text holds it. A passage **holds** a value
  when, after :func:`normalise` (NFKC, case-folded, every character that is not a letter or a digit removed) of
  both, the passage's own text (``Passage.text``: not its title or headings) contains the value; a value of at most
  four characters that starts or ends with a digit must not touch another digit there ("60" is not found in
  "1604"). Precision = citations (from ``TurnResult.citations``, the REST reply's ``citations``) whose passage holds
  one of the turn's checkable values / citations made on turns with a checkable value. With this fake, a citation
  misses when the knowledge part held no passage with the value (or the path from label to passage is wrong).
  *Value in prompt*: turns with a checkable value where some passage of the prompt holds one. *Top venue passage
  holds*: turns with a checkable value where the best-ranked passage of the venue's article holds it — what a
  model that cites the venue's first passage without reading would get (passage ranking within an article).
- *(c) turn latency*: the Chinese naming turns (``--ab-turns``) run twice, on the knowledge tenant and on a tenant
  with no article, alternating which goes first; p50/p95 of ``run_turn``'s wall time each, and their ratio.
- *(d) import rate*, above.

Every figure is over the dialogues chosen by ``--half`` (default ``all``; ``fit``/``report`` split by sha256 of the
dialogue id as ``topic_switch_public.half_of``). The knowledge search's ranking and speed settings
(``knowledge.search``) were chosen on the ``fit`` half's Chinese dialogues: only the ``report`` half's figures say
how the search does on questions it was not tuned on (bench/RESULTS.md).

Run from the repository root (the memory writer is off: conversation units play no part here)::

    nice -n 5 .venv/bin/python bench/quality/knowledge_venues.py [--corpus crosswoz|multiwoz|both]
        [--limit N] [--kb-size 10000] [--ab-turns 200] [--half all|fit|report] [--errors 20] [--out NAME]

Writes ``bench/out/<NAME or knowledge_venues>.json`` (the figures, per-turn outcomes, the command).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import random
import re
import shlex
import sys
import tempfile
import time
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR.parent) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR.parent))

from bench import common  # noqa: E402
from bench.quality.topic_switch_public import _detokenise, half_of  # noqa: E402

SHARED = Path("/work/shared/bench")
DB_NAME = "memdesk_bench_knowledge_venues"
DIALOGUES = {"crosswoz": SHARED / "crosswoz_val.json.zip", "multiwoz": SHARED / "multiwoz21_val.json.zip"}
LANGUAGE = {"crosswoz": "zh", "multiwoz": "en"}
PATH_MEASURED = (
    "manage.py import_knowledge <tenant> <folder of .md> (check, split, embed, write) for the import; "
    "chat.turn.run.run_turn per naming user turn (fake Ollama replies with the clerk's next turn and cites one "
    "[K…] label of its prompt) for the prompt's knowledge part, TurnResult.citations and the latency"
)
#: The clerk's slots whose values a venue's article states, by corpus (the acts' own slot names).
VALUE_SLOTS = {
    "crosswoz": frozenset(
        {"地址", "电话", "人均消费", "价格", "营业时间", "门票", "游玩时间", "评分", "酒店类型", "推荐菜"}
    ),
    "multiwoz": frozenset({"Addr", "Phone", "Post", "Price", "Fee", "Open", "Food", "Stars"}),
}
ZH_DOMAINS = {"attraction": "景点", "hotel": "酒店", "restaurant": "餐馆"}
EN_DOMAINS = ("attraction", "hotel", "restaurant")
NEARBY = 5
_LABELLED = re.compile(r"^\[(K\d+)\] (.*)$", re.MULTILINE)


# --- venues and their articles -----------------------------------------------------------------------------


@dataclass
class Venue:
    corpus: str
    domain: str
    name: str
    markdown: str

    @property
    def key(self) -> str:
        return normalise(self.name)


def _known(value: Any) -> bool:
    return value not in (None, "", "?", "无", "none", [])


def _zh_list(values: Any, limit: int | None = None) -> str:
    items = [str(v) for v in (values or []) if _known(v)]
    return "、".join(items[:limit] if limit else items)


def render_zh(domain: str, raw: dict[str, Any]) -> str:
    """A Chinese venue page: title, introduction, address and phone, prices and hours, what it offers, nearby."""
    name = raw["名称"]
    kind = {"景点": "景点", "酒店": f"{raw.get('酒店类型') or ''}酒店", "餐馆": "餐馆"}[domain]
    lines = [f"# {name}", ""]
    intro = f"{name}是北京的一家{kind}。" if domain != "景点" else f"{name}是北京的一处景点。"
    if _known(raw.get("评分")):
        intro += f"游客评分{raw['评分']}分。"
    lines += [intro, "", "## 地址与电话", ""]
    if _known(raw.get("地址")):
        lines.append(f"地址：{raw['地址']}。")
    if _known(raw.get("地铁")):
        lines.append(f"地铁：{raw['地铁']}。")
    if _known(raw.get("电话")):
        lines.append(f"电话：{raw['电话']}。")
    money = []
    if domain == "景点":
        if raw.get("门票") == 0:
            money.append("门票：免费。")
        elif _known(raw.get("门票")):
            money.append(f"门票：{raw['门票']}元。")
        if _known(raw.get("游玩时间")):
            money.append(f"建议游玩时间：{raw['游玩时间']}。")
    elif domain == "酒店":
        if _known(raw.get("价格")):
            money.append(f"价格：{raw['价格']}元起每晚。")
    else:
        if _known(raw.get("人均消费")):
            money.append(f"人均消费：{raw['人均消费']}元。")
        if _known(raw.get("营业时间")):
            money.append(f"营业时间：{raw['营业时间']}。")
    if money:
        lines += ["", "## 价格与时间" if domain != "景点" else "## 门票与游玩", "", *money]
    if domain == "酒店" and raw.get("酒店设施"):
        lines += ["", "## 酒店设施", "", f"本店提供：{_zh_list(raw['酒店设施'])}。"]
    if domain == "餐馆" and raw.get("推荐菜"):
        lines += ["", "## 推荐菜", "", f"推荐菜：{_zh_list(raw['推荐菜'])}。"]
    near = [
        f"周边{what}：{_zh_list(raw.get(f'周边{what}'), NEARBY)}。"
        for what in ("景点", "餐馆", "酒店")
        if _zh_list(raw.get(f"周边{what}"))
    ]
    if near:
        lines += ["", "## 周边", "", *near]
    return "\n".join(lines) + "\n"


def render_en(domain: str, raw: dict[str, Any]) -> str:
    """An English venue page, written from MultiWOZ's fields as a business would."""
    name = raw["name"].title()
    kind = raw.get("type") or domain
    intro = f"{name} is a {kind}" + (f" in the {raw['area']} of Cambridge." if _known(raw.get("area")) else ".")
    if domain == "restaurant" and _known(raw.get("food")):
        intro += f" We serve {raw['food']} food."
    if domain == "hotel" and _known(raw.get("stars")):
        intro += f" It has {raw['stars']} stars."
    lines = [f"# {name}", "", intro]
    if _known(raw.get("introduction")):
        lines += ["", raw["introduction"].strip().rstrip(".") + "."]
    contact = []
    if _known(raw.get("address")):
        contact.append(f"Address: {raw['address']}, Cambridge.")
    if _known(raw.get("postcode")):
        contact.append(f"Postcode: {raw['postcode']}.")
    if _known(raw.get("phone")):
        contact.append(f"Phone: {raw['phone']}.")
    if contact:
        lines += ["", "## Address and phone", "", *contact]
    money = []
    if _known(raw.get("pricerange")):
        money.append(f"Price range: {raw['pricerange']}.")
    prices = raw.get("price")
    if isinstance(prices, dict) and prices:
        money.append("Rooms: " + ", ".join(f"{room} {p} pounds a night" for room, p in prices.items()) + ".")
    if _known(raw.get("entrance fee")):
        money.append(f"Entrance fee: {raw['entrance fee']}.")
    if _known(raw.get("openhours")):
        money.append(f"Opening hours: {raw['openhours'].strip().rstrip('.')}.")
    if money:
        lines += ["", "## Prices and opening hours", "", *money]
    if domain == "hotel":
        facilities = [what for what in ("internet", "parking") if raw.get(what) == "yes"]
        if facilities:
            lines += ["", "## Facilities", "", f"Free {' and '.join(facilities)} for guests."]
    return "\n".join(lines) + "\n"


def load_venues(corpus: str) -> list[Venue]:
    venues = []
    if corpus == "crosswoz":
        for domain, zh in ZH_DOMAINS.items():
            for name, raw in json.loads((SHARED / "crosswoz_db" / f"{domain}_db.json").read_text()):
                venues.append(Venue(corpus, zh, name, render_zh(zh, {**raw, "名称": name})))
    else:
        for domain in EN_DOMAINS:
            for raw in json.loads((SHARED / "multiwoz_db" / f"{domain}_db.json").read_text()):
                venues.append(Venue(corpus, domain, raw["name"], render_en(domain, raw)))
    return venues


_SYLLABLES = (
    "安宝北辰春达德东福富广海和红华汇佳嘉金锦京景凯康乐丽隆美明南鹏平庆瑞盛顺泰天通万祥新鑫兴雅怡银永裕悦云正中"
)
_DISTRICTS = ("朝阳", "海淀", "东城", "西城", "丰台", "石景山", "通州", "顺义", "昌平", "大兴", "房山", "怀柔")
_SUFFIX = {"景点": ("公园", "博物馆", "艺术馆", "文化园", "纪念馆"), "酒店": ("大酒店", "宾馆", "饭店", "快捷酒店"),
           "餐馆": ("饭庄", "酒家", "小馆", "餐厅", "火锅")}  # fmt: skip
_FACILITIES = ("宽带上网", "吹风机", "24小时热水", "中式餐厅", "健身房", "行李寄存", "叫醒服务")
_KINDS = ("经济型", "舒适型", "高档型", "豪华型")
_DISHES = ("宫保鸡丁", "北京烤鸭", "麻婆豆腐", "糖醋里脊", "水煮鱼", "炸酱面", "羊蝎子", "红烧肉", "干锅虾", "酸菜鱼")


def filler_zh(count: int, venues: list[Venue], seed: int = 38) -> list[Venue]:
    """``count`` made-up Beijing venues rendered like the real ones; no name holds a real venue's name (so a
    question naming a real venue never names a filler one), and names are unique."""
    rng = random.Random(seed)
    real = {v.name for v in venues}
    attractions = [v.name for v in venues if v.domain == "景点"]
    taken: set[str] = set(real)
    out: list[Venue] = []
    while len(out) < count:
        domain = rng.choice(tuple(_SUFFIX))
        district = rng.choice(_DISTRICTS)
        core = "".join(rng.sample(_SYLLABLES, 2))
        name = (
            f"{core}{rng.choice(_SUFFIX[domain])}（{district}店）"
            if domain != "景点"
            else f"{district}{core}{rng.choice(_SUFFIX[domain])}"
        )
        if name in taken or any(name[i:j] in real for i in range(len(name)) for j in range(i + 2, len(name) + 1)):
            continue
        taken.add(name)
        raw: dict[str, Any] = {
            "名称": name,
            "地址": f"北京市{district}区{''.join(rng.sample(_SYLLABLES, 2))}路{rng.randint(1, 300)}号",
            "地铁": f"{''.join(rng.sample(_SYLLABLES, 2))}地铁站{rng.choice('ABCD')}口",
            "电话": f"010-{rng.randint(10_000_000, 99_999_999)}",
            "评分": round(rng.uniform(3.5, 5.0), 1),
            "周边景点": rng.sample(attractions, NEARBY),
        }
        if domain == "景点":
            raw.update({"门票": rng.choice((0, 10, 20, 30, 40, 60, 80)), "游玩时间": f"{rng.randint(1, 4)}小时"})
        elif domain == "酒店":
            facilities = rng.sample(_FACILITIES, 4)
            raw.update({"酒店类型": rng.choice(_KINDS), "价格": rng.randint(150, 2000), "酒店设施": facilities})
        else:
            open_at, close_at = rng.randint(6, 11), rng.randint(20, 23)
            raw.update({"人均消费": rng.randint(20, 300), "营业时间": f"周一至周日 {open_at:02d}:00-{close_at}:00",
                        "推荐菜": rng.sample(_DISHES, 4)})  # fmt: skip
        out.append(Venue("crosswoz", domain, name, render_zh(domain, raw)))
    return out


# --- questions ---------------------------------------------------------------------------------------------


@dataclass
class Question:
    dialogue: str
    n: int
    text: str
    venue: Venue
    reply: str
    values: list[tuple[str, str]]  # (slot, value) stated by the clerk's next turn, checkable only


def normalise(text: str) -> str:
    """NFKC, case-folded, letters and digits only (the module docstring's "holds")."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", str(text)).casefold() if ch.isalnum())


def holds(passage_text: str, value: str) -> bool:
    """Whether ``passage_text`` holds ``value`` (the module docstring)."""
    hay, needle = normalise(passage_text), normalise(value)
    if not needle:
        return False
    if len(needle) > 4 or not (needle[0].isdigit() or needle[-1].isdigit()):
        return needle in hay
    for match in re.finditer(re.escape(needle), hay):
        before = hay[match.start() - 1] if match.start() else ""
        after = hay[match.end()] if match.end() < len(hay) else ""
        if not (needle[0].isdigit() and before.isdigit()) and not (needle[-1].isdigit() and after.isdigit()):
            return True
    return False


def _read(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read(archive.namelist()[0]))


class Names:
    """Finds the venue a customer's turn names (the module docstring)."""

    def __init__(self, venues: list[Venue], corpus: str) -> None:
        self.corpus = corpus
        self.by_name: dict[str, Venue] = {}
        for venue in venues:
            self.by_name.setdefault(venue.name.casefold(), venue)
        names = sorted((n for n in self.by_name if len(n) >= 2), key=len, reverse=True)
        body = "|".join(re.escape(n) for n in names)
        self.pattern = re.compile(rf"(?<![a-z0-9])(?:{body})(?![a-z0-9])" if corpus == "multiwoz" else f"(?:{body})")

    def named(self, text: str, act_values: str) -> Venue | None:
        found = {m.group(0) for m in self.pattern.finditer(text.casefold())}
        found = {n for n in found if n in act_values}
        found = {n for n in found if not any(n != other and n in other for other in found)}
        return self.by_name[found.pop()] if len(found) == 1 else None


def load_questions(corpus: str, venues: list[Venue], half: str, limit: int | None) -> list[list[Question]]:
    """Each chosen dialogue's naming turns, in order (dialogues with none left out); at most ``limit`` dialogues."""
    names = Names(venues, corpus)
    raw = _read(DIALOGUES[corpus])
    out = []
    for dialogue_id, dialogue in raw.items():
        did = f"{corpus}-{dialogue_id}"
        if half != "all" and half_of(did) != half:
            continue
        turns = _turns_crosswoz(dialogue) if corpus == "crosswoz" else _turns_multiwoz(dialogue)
        questions = []
        for n, (text, user_acts, reply, clerk_acts) in enumerate(turns):
            acts_text = " ".join(str(v) for _, _, v in user_acts + clerk_acts).casefold()
            venue = names.named(text, acts_text)
            if venue is None:
                continue
            article_text = venue.markdown
            values = [
                (slot, value)
                for domain, slot, value in clerk_acts
                if domain == venue.domain and slot in VALUE_SLOTS[corpus] and holds(article_text, value)
            ]
            questions.append(Question(did, n, text, venue, reply, values))
        if questions:
            out.append(questions)
        if limit and len(out) >= limit:
            break
    return out


Acts = list[tuple[str, str, str]]


def _turns_crosswoz(dialogue: dict[str, Any]) -> list[tuple[str, Acts, str, Acts]]:
    messages = dialogue["messages"]
    turns = []
    for n, message in enumerate(messages):
        if message["role"] != "usr":
            continue
        clerk = messages[n + 1] if n + 1 < len(messages) and messages[n + 1]["role"] == "sys" else None
        user_acts = [(a[1], a[2], a[3]) for a in message["dialog_act"]]
        clerk_acts = [(a[1], a[2], a[3]) for a in clerk["dialog_act"] if a[0] == "Inform"] if clerk else []
        turns.append((message["content"], user_acts, clerk["content"] if clerk else "好的。", clerk_acts))
    return turns


def _mw_acts(raw: dict[str, Any] | None) -> Acts:
    acts = []
    for key, pairs in (raw or {}).items():
        domain, _, intent = key.partition("-")
        if intent in ("Inform", "Recommend"):
            acts += [(domain.lower(), slot, value) for slot, value in pairs]
    return acts


def _turns_multiwoz(dialogue: dict[str, Any]) -> list[tuple[str, Acts, str, Acts]]:
    log = dialogue["log"]
    turns = []
    for n in range(0, len(log), 2):
        clerk = log[n + 1] if n + 1 < len(log) else None
        reply = _detokenise(clerk["text"]) if clerk else "OK."
        turns.append((_detokenise(log[n]["text"]), _mw_acts(log[n].get("dialog_act")), reply,
                      _mw_acts(clerk.get("dialog_act") if clerk else None)))  # fmt: skip
    return turns


# --- the fake model ------------------------------------------------------------------------------------------


class Citer:
    """The fake Ollama's reply source (the module docstring): the clerk's turn, citing one label it was given."""

    def __init__(self) -> None:
        self.reply = "OK."
        self.venue = ""
        self.values: list[str] = []
        self.seen: dict[str, str] = {}  # the last prompt's label → passage line
        self.cited = ""
        self.trusting = ""

    def set(self, question: Question) -> None:
        self.reply, self.venue, self.values = question.reply, question.venue.name, [v for _, v in question.values]
        self.seen, self.cited, self.trusting = {}, "", ""

    def __call__(self, body: dict[str, Any]) -> Any:
        from testkit.fake_ollama import Reply

        messages = body.get("messages") or [{}]
        self.seen = dict(_LABELLED.findall(str(messages[0].get("content", ""))))
        self.trusting = self.of_venue()
        self.cited = self.holding() or self.trusting
        return Reply(text=f"{self.reply} [{self.cited}]" if self.cited else self.reply)

    def holding(self) -> str:
        """The best-ranked passage whose text holds a value the reply states: the one a model took it from."""
        for label, line in self.seen.items():
            if any(holds(passage_body(line), value) for value in self.values):
                return label
        return ""

    def of_venue(self) -> str:
        """The best-ranked passage of the named venue's article, else one naming it, else K1: a model that trusts
        the ranking."""
        if not self.seen:
            return ""
        name = self.venue.casefold()
        for label, line in self.seen.items():
            if is_of(line, name):
                return label
        for label, line in self.seen.items():
            if name in line.casefold():
                return label
        return next(iter(self.seen))


def is_of(line: str, name: str) -> bool:
    """Whether a prompt line (``title › headings: text``) is a passage of the article titled ``name`` (folded)."""
    return line.casefold().startswith((f"{name} › ", f"{name}: "))


def passage_body(line: str) -> str:
    """A prompt line's passage text (after ``title › headings: ``)."""
    return line.split(": ", 1)[-1]


# --- import --------------------------------------------------------------------------------------------------


def import_articles(tenant: Any, venues: list[Venue]) -> dict[str, Any]:
    """The venues as a folder of Markdown files, imported by ``manage.py import_knowledge``, timed."""
    from django.core.management import call_command

    with tempfile.TemporaryDirectory(prefix="kv-") as folder:
        for index, venue in enumerate(venues):
            path = Path(folder) / venue.domain / f"{index:05d}.md"
            path.parent.mkdir(exist_ok=True)
            path.write_text(venue.markdown, encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        started = time.perf_counter()
        call_command("import_knowledge", tenant.slug, folder, "--no-progress", stdout=out, stderr=err)
        seconds = time.perf_counter() - started
    counts = json.loads(out.getvalue().strip().splitlines()[-1])
    from knowledge.models import Passage
    from tenants.rls import tenant_scope

    with tenant_scope(tenant):
        passages = Passage.objects.for_tenant(tenant).count()
    return {
        "articles": len(venues),
        "passages": passages,
        "seconds": round(seconds, 1),
        "articles_per_s": round(len(venues) / seconds, 1),
        "counts": counts,
    }


def reused_tenant(slug: str, articles: int) -> Any:
    """``--reuse``: the tenant a previous run made, None when there is none. One holding another number of
    articles (a run stopped mid-import, another ``--kb-size``) stops the run: run once without ``--reuse``."""
    from knowledge.models import Article
    from tenants.models import Tenant
    from tenants.rls import tenant_scope

    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        return None
    with tenant_scope(tenant):
        held = Article.objects.for_tenant(tenant).count()
    if held != articles:
        raise SystemExit(f"bench: --reuse found {slug} with {held} articles, not {articles}; run without --reuse")
    return tenant


# --- replay --------------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    dialogue: str
    n: int
    venue: str
    text: str
    in_prompt: bool
    passages: int
    values: list[tuple[str, str]]
    value_in_prompt: bool
    cited_label: str
    citations: int
    precise: int
    top_venue_passage_holds: bool
    ms: float


@dataclass
class Run:
    outcomes: list[Outcome] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)


def _passage_texts(tenant: Any, passage_ids: list[str]) -> dict[str, str]:
    from knowledge.models import Passage
    from tenants.rls import tenant_scope

    with tenant_scope(tenant):
        rows = Passage.objects.for_tenant(tenant).filter(public_id__in=passage_ids).values_list("public_id", "text")
        return dict(rows)


def replay(tenant: Any, dialogues: list[list[Question]], fake: Citer, host: str) -> Run:
    from asgiref.sync import sync_to_async
    from django.conf import settings

    from chat.llm import OllamaChat
    from chat.turn.run import run_turn

    sessions = [common.open_session(tenant, d[0].dialogue, {"benchmark": "knowledge_venues"}) for d in dialogues]
    run = Run()
    texts = sync_to_async(_passage_texts, thread_sensitive=True)
    started = time.perf_counter()

    async def go() -> None:
        llm = OllamaChat(host, settings.OLLAMA_MODEL, timeout_s=settings.OLLAMA_TIMEOUT_S)
        for number, (questions, session) in enumerate(zip(dialogues, sessions, strict=True), 1):
            for q in questions:
                fake.set(q)
                turn_started = time.perf_counter()
                try:
                    result = await run_turn(tenant, session, q.text, f"{q.dialogue}-{q.n}"[:100], llm=llm)
                except Exception as exc:  # counted by its text; the dialogue goes on
                    key = f"{type(exc).__name__}: {exc}"[:200]
                    run.errors[key] = run.errors.get(key, 0) + 1
                    continue
                ms = (time.perf_counter() - turn_started) * 1000
                name = q.venue.name.casefold()
                lines = list(fake.seen.values())
                in_prompt = any(is_of(line, name) for line in lines)
                values = [v for _, v in q.values]
                value_in_prompt = any(holds(passage_body(line), v) for line in lines for v in values)
                trusted = fake.seen.get(fake.trusting, "")
                top_holds = bool(trusted) and any(holds(passage_body(trusted), v) for v in values)
                cited_ids = [c["passage_id"] for c in result.citations]
                held = await texts(tenant, cited_ids) if cited_ids and values else {}
                precise = sum(any(holds(held.get(pid, ""), v) for v in values) for pid in cited_ids)
                run.outcomes.append(
                    Outcome(q.dialogue, q.n, q.venue.name, q.text, in_prompt, len(lines), q.values, value_in_prompt,
                            fake.cited, len(cited_ids), precise, top_holds, round(ms, 1))
                )  # fmt: skip
            if number % 25 == 0 or number == len(dialogues):
                rate = len(run.outcomes) / (time.perf_counter() - started)
                common.log(f"  {number}/{len(dialogues)} dialogues, {len(run.outcomes)} turns, {rate:.1f} turns/s")

    asyncio.run(go())
    return run


def latency_ab(kb_tenant: Any, none_tenant: Any, questions: list[Question], fake: Citer, host: str) -> dict[str, Any]:
    """The same turns on the knowledge tenant (A) and on one with no article (B), alternating which goes first."""
    from django.conf import settings

    from chat.llm import OllamaChat
    from chat.turn.run import run_turn

    pairs = [
        (common.open_session(kb_tenant, f"ab-kb-{i}", {}), common.open_session(none_tenant, f"ab-none-{i}", {}))
        for i in range(len(questions))
    ]
    times: dict[str, list[float]] = {"kb": [], "none": []}
    errors: dict[str, int] = {}

    async def go() -> None:
        llm = OllamaChat(host, settings.OLLAMA_MODEL, timeout_s=settings.OLLAMA_TIMEOUT_S)
        for i, (q, (kb_session, none_session)) in enumerate(zip(questions, pairs, strict=True)):
            order = [("kb", kb_tenant, kb_session), ("none", none_tenant, none_session)]
            for arm, tenant, session in order if i % 2 == 0 else order[::-1]:
                fake.set(q)
                started = time.perf_counter()
                try:
                    await run_turn(tenant, session, q.text, f"ab-{arm}-{i}", llm=llm)
                except Exception as exc:
                    key = f"{type(exc).__name__}: {exc}"[:200]
                    errors[key] = errors.get(key, 0) + 1
                    continue
                if i >= 5:  # the first pairs warm the models and the caches
                    times[arm].append((time.perf_counter() - started) * 1000)
            if (i + 1) % 50 == 0:
                common.log(f"  A/B {i + 1}/{len(questions)}")

    asyncio.run(go())
    kb, none = common.summarise(times["kb"]), common.summarise(times["none"])
    ratio = round(kb["p95"] / none["p95"], 3) if kb.get("n") and none.get("n") else None
    return {"with_knowledge_ms": kb, "without_ms": none, "p95_ratio": ratio, "errors": errors}


# --- figures -------------------------------------------------------------------------------------------------


def score(outcomes: list[Outcome]) -> dict[str, Any]:
    with_values = [o for o in outcomes if o.values]
    cited = sum(o.citations for o in with_values)
    precise = sum(o.precise for o in with_values)
    in_prompt = sum(o.in_prompt for o in outcomes)

    def rate(a: int, b: int) -> float | None:
        return round(a / b, 4) if b else None

    return {
        "naming_turns": len(outcomes),
        "venue_in_prompt": in_prompt,
        "venue_in_prompt_rate": rate(in_prompt, len(outcomes)),
        "turns_with_checkable_value": len(with_values),
        "citations_judged": cited,
        "citations_holding_value": precise,
        "citation_precision": rate(precise, cited),
        "value_in_prompt": sum(o.value_in_prompt for o in with_values),
        "value_in_prompt_rate": rate(sum(o.value_in_prompt for o in with_values), len(with_values)),
        "top_venue_passage_holds": sum(o.top_venue_passage_holds for o in with_values),
        "top_venue_passage_holds_rate": rate(sum(o.top_venue_passage_holds for o in with_values), len(with_values)),
        "citations_unjudged": sum(o.citations for o in outcomes if not o.values),
        "turn_ms": common.summarise(o.ms for o in outcomes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=("crosswoz", "multiwoz", "both"), default="both")
    parser.add_argument("--half", choices=("all", "fit", "report"), default="all")
    parser.add_argument("--limit", type=int, default=None, help="at most this many dialogues (with a naming turn)")
    parser.add_argument(
        "--kb-size",
        type=int,
        default=10_000,
        help="the Chinese tenant's articles: its 2,549 venues and filler up to this (never fewer)",
    )
    parser.add_argument("--ab-turns", type=int, default=200, help="Chinese naming turns run on both tenants (0: none)")
    parser.add_argument("--errors", type=int, default=0, help="print up to N turns whose venue missed the prompt")
    parser.add_argument("--out", default="")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep the previous run's database and its imported tenants (no import, no import rate): for iterating",
    )
    args = parser.parse_args()
    corpora = ("crosswoz", "multiwoz") if args.corpus == "both" else (args.corpus,)
    common.setup_django(DB_NAME, fresh=not args.reuse)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    from django.conf import settings

    from chat.llm import clear_context_cache
    from testkit.fake_ollama import FakeOllama

    settings.MEMORY_WRITER = "off"
    results: dict[str, Any] = {
        "benchmark": "knowledge_venues",
        "command": shlex.join(
            ["nice", "-n", "5", ".venv/bin/python", "bench/quality/knowledge_venues.py", *sys.argv[1:]]
        ),
        "half": args.half,
        "path_measured": PATH_MEASURED,
        "memory_writer": "off",
        "git": common.git_state(),
        "machine": common.machine_info(),
        "corpora": {},
    }
    cpu_before = common.cpu_ticks()
    fake = Citer()
    tenants: dict[str, Any] = {}
    all_outcomes: dict[str, list[Outcome]] = {}
    questions_of: dict[str, list[list[Question]]] = {}
    with FakeOllama(default_reply=fake) as server:
        settings.OLLAMA_HOST = server.host
        clear_context_cache()
        for corpus in corpora:
            venues = load_venues(corpus)
            articles = venues + (filler_zh(args.kb_size - len(venues), venues) if corpus == "crosswoz" else [])
            tenant = reused_tenant(f"kv-{corpus}", len(articles)) if args.reuse else None
            if tenant is not None:
                imported = {"articles": len(articles), "reused": True, "articles_per_s": None}
                common.log(f"{corpus}: reusing the imported tenant ({len(articles)} articles)")
            else:
                tenant = common.make_tenant(f"kv-{corpus}", language=LANGUAGE[corpus]).tenant
                common.log(f"{corpus}: importing {len(articles)} articles ({len(venues)} venues)")
                imported = import_articles(tenant, articles)
                common.log(f"{corpus}: imported {imported}")
            tenants[corpus] = tenant
            questions_of[corpus] = load_questions(corpus, venues, args.half, args.limit)
            n_turns = sum(len(d) for d in questions_of[corpus])
            common.log(f"{corpus}: replaying {n_turns} naming turns of {len(questions_of[corpus])} dialogues")
            run = replay(tenant, questions_of[corpus], fake, server.host)
            all_outcomes[corpus] = run.outcomes
            figures = score(run.outcomes)
            results["corpora"][corpus] = {"import": imported, "errors": run.errors, **figures}
            print(
                f"\n{corpus} ({args.half}, {len(questions_of[corpus])} dialogues, {len(articles)} articles): venue in "
                f"prompt {figures['venue_in_prompt']}/{figures['naming_turns']} = {figures['venue_in_prompt_rate']}; "
                f"citation precision {figures['citations_holding_value']}/{figures['citations_judged']} = "
                f"{figures['citation_precision']} (value in prompt {figures['value_in_prompt']}/"
                f"{figures['turns_with_checkable_value']}); import {imported['articles_per_s']} articles/s"
            )
            if args.errors:
                for o in [o for o in run.outcomes if not o.in_prompt][: args.errors]:
                    print(f"  [missed {o.venue}] {o.text[:100]!r}")
        if "crosswoz" in corpora and args.ab_turns:
            none_tenant = reused_tenant("kv-none", 0) if args.reuse else None
            none_tenant = none_tenant or common.make_tenant("kv-none", language="zh").tenant
            questions = [q for d in questions_of["crosswoz"] for q in d][: args.ab_turns]
            common.log(f"A/B latency: {len(questions)} turns on each tenant, alternating")
            ab = latency_ab(tenants["crosswoz"], none_tenant, questions, fake, server.host)
            results["latency_ab"] = {"articles": args.kb_size, **ab}
            print(
                f"\nturn p95 with {args.kb_size} articles {ab['with_knowledge_ms'].get('p95')} ms vs none "
                f"{ab['without_ms'].get('p95')} ms: {ab['p95_ratio']}×"
            )
    results["machine"]["cpu_shares"] = common.cpu_shares(cpu_before, common.cpu_ticks())
    results["outcomes"] = {c: [o.__dict__ for o in outcomes] for c, outcomes in all_outcomes.items()}
    path = common.write_result(args.out or "knowledge_venues", results)
    common.log(f"wrote {path}")


if __name__ == "__main__":
    main()
