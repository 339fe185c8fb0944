"""What is true now: of the hits, the conversation units stating a value that is no longer current at
``as_of`` (superseded, expired) rank after the current ones, and a newer unit that changes an older one
overtakes it (``current_first``)."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from datetime import datetime
from functools import lru_cache
from typing import Any

from django.db import connection

from conversations.models import ChatSession
from memory.conversation.claims import Claim, asked_attrs, claim_of, clause_label, names_label, states_criterion
from memory.conversation.replacement import Replacement, named_replacements
from memory.conversation.supersede import TERM, changed_in_form, said_expired
from memory.conversation.units import TIMELESS_KEYS, asks_about, is_conversation_key, is_question, squash
from memory.models import MemoryUnit
from memory.recall.candidates import RecallHit
from memory.recall.ranking import about_past, is_question_unit, names_any, query_identifiers
from memory.recall.tuning import tuning
from memory.store.read import SCOPE_SQL, scope_params, valid_sql
from memory.text.language import ZH_STOPWORDS, query_terms, stop_words
from memory.topics.domains import named_domains
from tenants.models import Tenant

# The keyed facts of some keys that a session may see and that are valid at ``as_of`` (the current values).
_CURRENT_TEMPLATE = "SELECT m.key, m.content, m.data FROM memory_memoryunit m WHERE {scope} AND m.key = ANY(%(keys)s)"
_CURRENT_SQL = _CURRENT_TEMPLATE.format(scope=SCOPE_SQL)


# Every keyed fact of some keys this end user has had until ``as_of``, current or not (what was once theirs), each
# with whether it is current and a change put it in place: its message's conversation unit says it changes something
# (``data["update"]``: 「默认改成hejing.home@…」), not merely a value said later (「发送到您的邮箱 hezq@…」).
_HISTORY_TEMPLATE = """SELECT m.key, m.content, m.data,
    ({valid} AND (m.data -> 'frozen_topic') IS NULL
     AND EXISTS (SELECT 1 FROM memory_memoryunit u WHERE u.tenant_id = m.tenant_id
        AND u.source_message_id = m.source_message_id AND u.key LIKE 'conversation:%%' AND u.data ? 'update'))
FROM memory_memoryunit m
WHERE m.tenant_id = %(tenant)s AND m.end_user_id = %(end_user)s AND m.key = ANY(%(keys)s)
    AND m.created_at <= %(as_of)s"""
_HISTORY_SQL = _HISTORY_TEMPLATE.format(valid=valid_sql("m", "%(as_of)s"))

#: Keys whose value a unit that keys nothing may say again as written (the agent's 「结果会发到hejing.work@…」 after
#: the customer gave it): the value's kind in ``claims.values_of`` is the key.
ECHOED_KEYS = frozenset({"email"})


def _states(memory: dict[str, Any], value: str) -> bool:
    """Whether a keyed memory holds ``value`` (in its content or its data's values)."""
    wanted = squash(value)
    texts = [memory["content"], *(str(v) for v in (memory["data"] or {}).values() if isinstance(v, str | int))]
    return any(wanted and wanted in squash(t) for t in texts)


#: Stateful keys whose value is about one of several things, and the data field naming it: the progress of
#: BATCH-2031 is not made untrue by BATCH-2107's, nor coupon SAVE20 by a second coupon VIP50.
SUBJECT_FIELDS = {"batch_progress": "task_id", "coupon": "coupon"}


def _subject(key: str, value: str) -> str | None:
    """What a unit's ``value`` of ``key`` is about (``"BATCH-2031 100/100"`` → ``"BATCH-2031"``), for a key
    of ``SUBJECT_FIELDS``; else None."""
    if key not in SUBJECT_FIELDS:
        return None
    head = value.split(" ", 1)[0]
    return head or None


def _stale_units(
    tenant: Tenant,
    session: ChatSession,
    units: list[MemoryUnit],
    as_of: datetime,
    query: str | None = None,
    *,
    present: bool = False,
) -> dict[Any, list[str]]:
    """The conversation units among ``units`` that state a value no longer current at ``as_of``: the key's
    current memories hold another value, or — for a key with a validity of its own — none is current any
    more. With ``query``, only the values it asks about count (``memory.conversation.units.asks_about``): the rest
    of such a unit is as true as it was; ``present``: the query asks how things stand now (``about_now``). One
    query of the current values, only when a unit states such facts; one of the key's history, only when a unit
    says an e-mail again without keying it (``ECHOED_KEYS``)."""
    stale = _changed_units(units, query, as_of)
    scope = str(tuning().stale_scope)

    def asked(key: str) -> bool:
        return query is None or scope == "any" or asks_about(query, key, about_now=present)

    echoed = _echoed(units, {k for k in ECHOED_KEYS if asked(k)} if tuning().echoed_stale else set())
    keys = sorted(
        {key for u in units for key in (u.data or {}).get("facts", {}) if asked(key)}
        | {key for said in echoed.values() for key, _ in said}
    )
    if not keys:
        return stale
    params = {**scope_params(tenant, session, as_of), "keys": keys}
    with connection.cursor() as cursor:
        cursor.execute(_CURRENT_SQL, params)
        current = _by_key(cursor.fetchall())
        history: dict[str, list[dict[str, Any]]] = {}
        changed_now: set[str] = set()
        if echoed:
            cursor.execute(_HISTORY_SQL, params)
            rows = cursor.fetchall()
            history = _by_key([row[:3] for row in rows])
            changed_now = {row[0] for row in rows if row[3]}
    for pk, said in echoed.items():
        # A value the customer's keyed fact once held and a change replaced, said again by a unit that keys
        # nothing: that unit says the old value (an agent's echo of a replaced e-mail). A value never keyed as the
        # customer's (a colleague's e-mail beside it) is not theirs to replace; one merely keyed later (another
        # address of theirs said in passing) shows no change. A unit saying the current value too says the change
        # ("will now go to jade.morrow@… instead of jade.m@…").
        for key, value in said:
            now = current.get(key, [])
            if (
                key in changed_now
                and not any(_states(m, v) for m in now for k, v in said if k == key)
                and any(_states(m, value) for m in history.get(key, []))
            ):
                stale.setdefault(pk, [])
    for unit in units:
        for key, value in (unit.data or {}).get("facts", {}).items():
            if key not in keys:
                continue
            now = current.get(key, [])
            subject = _subject(key, value)
            if subject is not None:  # a value about one of several things: only that thing's current value counts
                now = [m for m in now if (m["data"] or {}).get(SUBJECT_FIELDS[key]) == subject]
                if not now:
                    continue
            if now and not any(_states(m, value) for m in now):
                stale.setdefault(unit.pk, [])  # another value is current
            elif not now and key not in TIMELESS_KEYS:
                stale.setdefault(unit.pk, [])  # the value's own validity has ended
    return stale


def _by_key(rows: list[tuple[str, str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for key, content, data in rows:
        out.setdefault(key, []).append(
            {"content": content, "data": json.loads(data) if isinstance(data, str) else data}
        )
    return out


def _echoed(units: list[MemoryUnit], keys: set[str]) -> dict[Any, list[tuple[str, str]]]:
    """Of ``units``, those that key none of ``keys`` but state a value of one's kind (``data["about"]``), each with
    the (key, value as written) pairs."""
    out: dict[Any, list[tuple[str, str]]] = {}
    if not keys:
        return out
    for unit in units:
        data = unit.data or {}
        facts = data.get("facts", {})
        said = [
            (v["kind"], str(v.get("text", "")))
            for v in (data.get("about") or {}).get("values", [])
            if v.get("kind") in keys and v["kind"] not in facts and v.get("text")
        ]
        if said:
            out[unit.pk] = said
    return out


def _changed_units(units: list[MemoryUnit], query: str | None, as_of: datetime) -> dict[Any, list[str]]:
    """The units among ``units`` a later unit had superseded by ``as_of`` (``memory.conversation.supersede``:
    every value it gives has another value now), and those it had changed in part (another value of some of
    their attributes) where ``query`` asks for one of those attributes: for that question the unit gives an
    old value, however true the rest of it still is. Each with the units that made it stale for ``query``
    (newest first)."""
    if query and about_past(query):
        return {}  # the earlier statement is the answer
    stale: dict[Any, list[str]] = {
        u.pk: [str(u.superseded_by_id)] if u.superseded_by_id else []
        for u in units
        if u.superseded_at is not None and u.superseded_at <= as_of
    }
    marked = [u for u in units if (u.data or {}).get("changed") and u.pk not in stale]
    if not marked or not query:
        return stale
    asked = asked_attrs(query)
    named = named_domains(query)
    # What a unit gives is also what it changed in an older one: 「门票免费」 gives the ticket's price though its
    # words hold no amount (the writer read it in the older 「门票价格20-50元」's place).
    gave: dict[str, set[str]] = defaultdict(set)
    for unit in units:
        for attr, change in ((unit.data or {}).get("changed") or {}).items():
            if not attr.startswith(TERM) and isinstance(change, dict) and change.get("by"):
                gave[str(change["by"])].add(attr)
    for unit in marked:
        by: list[tuple[str, str]] = []
        for attr, change in unit.data["changed"].items():
            change = change if isinstance(change, dict) else {}
            at = change.get("at")
            if at is not None and datetime.fromisoformat(at) > as_of:
                continue
            if attr.startswith(TERM):
                if tuning().restated_current and _replaces_itself(unit.content, attr[len(TERM) :]):
                    continue  # "the 15th instead of the 1st": the unit asked for the change, the 1st is not its value
                # a typed attribute the question asks for and the unit states is what it asks (not the term)
                states = {v.get("attr") for v in ((unit.data.get("about") or {}).get("values") or [])}
                states |= gave[str(unit.pk)]
                # A replaced term that holds a value of the kind asked ("the garden at 9 Orchard Close", asked
                # "where"): the term is what the question asks for.
                asks = _asks_term(asked & states, named, change) or bool(
                    asked and asked & claim_of(attr[len(TERM) :]).attrs.keys()
                )
            else:
                asks = attr in asked or bool(
                    change.get("labelled") and names_label(query, claim_of(unit.content), attr)
                )
            if asks:
                by.append((str(at or ""), str(change.get("by") or "")))
        if by:
            stale[unit.pk] = [pk for _, pk in sorted(by, reverse=True) if pk]
    return stale


def _asks_term(asked: set[str], named: set[str], change: dict[str, Any]) -> bool:
    """Whether a question may ask for a term a later statement replaced (``memory.conversation.terms``): it
    asks for no typed attribute the unit states (``asked``: a date, a count, an amount — those have their own
    changes; "where" asks for an address, and a unit naming only a town states none) and names no other matter
    than the one the term was replaced in. Which of the matter's choices it asks for is not
    read — word vectors do not tell "what kind of food" from "which area" reliably — so a question about
    another choice of the same matter also sees the older statement as changed; the prompt says what
    replaced what (``changes``)."""
    if asked:
        return False
    matter = change.get("matter")
    return not named or matter is None or matter in named


# Pairs of candidate units, the older first, with the cosine similarity of their vectors (same model only) and
# whether the two were said in one conversation (their messages' session). ``{later}``: what makes ``b`` the newer.
_PAIRS_TEMPLATE = """
SELECT a.id, b.id, 1 - (a.embedding <=> b.embedding), am.session_id IS NOT DISTINCT FROM bm.session_id
FROM memory_memoryunit a
JOIN memory_memoryunit b ON b.tenant_id = a.tenant_id AND b.id = ANY(%(ids)s) AND b.embedding_model = a.embedding_model
     AND b.id <> a.id
LEFT JOIN chat_message am ON am.tenant_id = a.tenant_id AND am.id = a.source_message_id
LEFT JOIN chat_message bm ON bm.tenant_id = b.tenant_id AND bm.id = b.source_message_id
WHERE a.tenant_id = %(tenant)s AND a.id = ANY(%(ids)s) AND a.embedding IS NOT NULL AND b.embedding IS NOT NULL
      AND ({later})
"""
# Strictly older: the units of one message share its moment, and neither overtakes the other.
_PAIRS_SQL = _PAIRS_TEMPLATE.format(later="b.created_at > a.created_at")
# Older, or said before in the same turn: a customer's message and the agent's reply to it share their turn's moment,
# and the reply ("6 months, not 3") comes after.
_SAID_BEFORE_SQL = _PAIRS_TEMPLATE.format(
    later="b.created_at > a.created_at"
    " OR b.created_at = a.created_at AND am.session_id = bm.session_id AND bm.seq > am.seq"
)


def overtaken(
    tenant: Tenant,
    units: list[MemoryUnit],
    *,
    about_now: bool,
    identifiers: list[str] | None = None,
    asked: set[str] | None = None,
    changed: set[Any] | None = None,
    query: str = "",
) -> dict[Any, Any]:
    """Units a newer unit among ``units`` has overtaken, each with the one that did: a unit that changes or
    corrects something (``data["update"]``) and is at least ``update_similarity`` similar, or — for a query
    about the present — any newer unit at least ``now_similarity`` similar. Where several did, one that
    changes it comes before one merely newer, then the newest. A unit naming an identifier the query quotes
    is never overtaken by one that does not name it: BATCH-2107's progress is not BATCH-2031's. Nor is a unit
    overtaken for a question about an attribute it gives (``asked``, ``claims.asked_attrs``) that the newer one
    does not give: "6 people instead" leaves "on Friday at 18:30" the answer to "what day".

    Overtaking orders; it does not by itself say the older is out of date. ``changed``, where given, receives
    the overtaken units whose overtaker is shown to be about the same thing (``_same_thing``, for ``query``):
    those are no longer current."""
    knobs = tuning()
    updates = {u.pk for u in units if (u.data or {}).get("update")}
    if len(units) < 2 or not (updates or about_now):
        return {}
    created = {u.pk: u.created_at for u in units}
    naming = {u.pk for u in units if identifiers and names_any(u, identifiers)}
    with connection.cursor() as cursor:
        cursor.execute(_PAIRS_SQL, {"tenant": tenant.pk, "ids": [u.pk for u in units]})
        pairs = cursor.fetchall()
    overtaken: dict[Any, Any] = {}
    best: dict[Any, tuple[bool, Any, float]] = {}
    by_id = {u.pk: u for u in units}
    attrs: dict[Any, set[str]] = {}

    def attrs_of(pk: Any) -> set[str]:
        if pk not in attrs:
            attrs[pk] = set(_values_by_attr(by_id[pk]))
        return attrs[pk]

    for older, newer, similarity, _ in pairs:
        if older in naming and newer not in naming:
            continue
        if asked and (asked & attrs_of(older)) and not (asked & attrs_of(older) & attrs_of(newer)):
            continue
        by_update = newer in updates and similarity >= float(knobs.update_similarity)
        if by_update or (about_now and similarity >= float(knobs.now_similarity)):
            # A unit that says it changes something succeeds the older one before any merely newer unit;
            # then the newest; of units said at the same moment, the one most like the older unit.
            rank = (by_update, created[newer], similarity)
            if older not in best or rank > best[older]:
                overtaken[older], best[older] = newer, rank
    if changed is not None:
        changed.update(o for o, n in overtaken.items() if _same_thing(by_id[o], by_id[n], best[o][2], query))
    return overtaken


def _same_thing(older: MemoryUnit, newer: MemoryUnit, similarity: float, query: str) -> bool:
    """Whether a newer unit that overtook an older one is shown to be about the same thing, so that the older is
    out of date: the two are at least ``overtaken_mark_similarity`` similar; or the newer names what it replaces
    as the older said it (``replacement.named_replacements``, a value it says is wrong: 「不是东十二舍，是西十二舍」);
    or it gives an attribute the older gives one value of that value and one other ("由300M改为500M" after
    "先要300M的"); or it gives such an attribute another value under a word that labels it in both and that
    ``query`` names ("总价三千八百四十元", then "总价变为四千零四十元", asked "酒店总价是多少"). Merely newer and
    somewhat alike is not enough — a corrected phone number after a confirmed reservation, a new coupon after a
    completed refund, business hours ending at 18:00 after a pickup from 18:00: the older stays current, ranked
    below what overtook it. So does an older that asked for what the newer confirms (it names what the newer puts
    in place, or itself replaces what the newer replaces; or, for likeness alone, the newer gives again every value
    it gives: ``restated_current``). The form of the newer shows a change too (``supersede.changed_in_form``: a
    number respelt, an awaited act done, another named state, validity ended); a change it shows, or a value
    replaced, said wrong or moved from one to another, marks the older only where the clause of it that ``query``
    asks about holds what changed (``_asked_part_holds``, ``mark_asked_part``)."""
    old, new = _values_by_attr(older), _values_by_attr(newer)
    replacements = named_replacements(newer.content)
    own = _own_replaced(older.content) if replacements else []
    if tuning().restated_current and any(
        Replacement(r.new, r.old).stated_in(older.content)
        or _names_both(older.content, r)
        or any(_flat(r.old) in o for o in own)
        for r in replacements
    ):
        # The older says what the newer puts in place: it asked for the change the newer confirms ("the number's
        # now 07700 900671", then "Texts will go to 07700 900671 instead of 07700 900233"; 「要燕麦色的，不要灰色」,
        # then 「已把沙发颜色由灰色改为燕麦色」).
        return False
    # Every value the older gives said again is a confirmation, not a change: "No, it's 3 bedrooms", then "I've
    # updated it to 3 bedrooms" — both current.
    restated = bool(old) and all(values <= new.get(attr, set()) for attr, values in old.items())
    # What the newer shows changed, as the older wrote it: marked only where the part of the older the question
    # asks about holds it (a repair booking whose phone was changed still answers for its work order number).
    narrow = bool(tuning().mark_asked_part)
    shared = old.keys() & new.keys()
    if similarity >= float(tuning().overtaken_mark_similarity) and not (restated and tuning().restated_current):
        # alike: what differs is what changed, where they share attributes; else the whole — where the newer says
        # it changes something or a shared attribute's value differs: alike and merely newer changes nothing
        differing = {a for a in shared if old[a] != new[a]}
        differ = _written(older.content, differing)
        says_change = bool(differing) or (
            bool((newer.data or {}).get("update"))
            and (bool(new) or bool(replacements) or not tuning().update_needs_value)
        )
        if (says_change or not tuning().alike_needs_change) and (
            not (narrow and differ) or _asked_part_holds(older.content, query, differ)
        ):
            return True
    replaced = [r.old for r in replacements if r.stated_in(older.content)] + _rejects(newer.content, older)
    if replaced and (not narrow or _asked_part_holds(older.content, query, replaced)):
        return True
    if tuning().overtaken_in_form:
        changed = changed_in_form(claim_of(older.content), claim_of(newer.content), similarity)
        if changed and _asked_part_holds(older.content, query, changed):
            return True
    moved = {a for a in shared if _one_to_another(old[a], new[a])}
    if moved and (not narrow or _asked_part_holds(older.content, query, _written(older.content, moved))):
        return True
    other = {a for a in shared if not old[a] & new[a]}
    if not other or not query:
        return False
    ours, theirs = _value_labels(older.content, other), _value_labels(newer.content, other)
    asked = query.casefold()
    words = {_singular(w) for w in re.findall(r"[a-z0-9']+", asked)}
    return any(
        _singular(w.casefold()) in words if w.isascii() else w in asked for a in other for w in ours[a] & theirs[a]
    )


#: Where one clause of a statement ends: a sentence's end, or a Chinese comma (a Chinese sentence strings several
#: facts together: 「已核实企业账号ENT-40817，当前为企业标准版，席位上限200个」) — never inside quotes (a state named
#: as one: “体检已审核，待交管所受理”).
_CLAUSE_END = re.compile(r"[。！？；;!?\n，]|\.(?=\s)")
_OPENING, _CLOSING = '「“"(（', '」”")）'


def _clauses(text: str) -> list[str]:
    """``text``'s clauses in order (``_CLAUSE_END``), each with the mark that ends it."""
    out, start, depth = [], 0, 0
    for i, char in enumerate(text):
        if char in _CLOSING and depth and not (char == '"' and depth % 2 == 0):
            depth -= 1
        elif char in _OPENING:
            depth += 1
        elif depth == 0 and _CLAUSE_END.match(text, i):
            out.append(text[start : i + 1])
            start = i + 1
    out.append(text[start:])
    return [c for c in out if c.strip()]


def _asked_part_holds(text: str, query: str, changed: list[str]) -> bool:
    """Whether the part of ``text`` a question asks about holds something changed (``changed``, as written in
    ``text``): the clauses its words find best (most of the query's words; Chinese and English function words
    left out) — "Your new account number is RW-552019" for "what's my water account number", not "an opening
    meter reading of 00418" beside it. A question none of whose words a clause holds asks about the whole, and
    what changed, where not written as such in ``text``, is in the whole."""
    clauses = _clauses(text)
    words = [w.casefold() for w in query_terms(query) if w.casefold() not in _function_words()]
    if len(clauses) < 2 or not words or not any(x in text for x in changed):
        return True  # one clause, a question of no words, or what changed not written as such: the whole
    found = [sum(w in c.casefold() for w in words) for c in clauses]
    best = max(found)
    if best == 0:
        return True
    return any(n == best and any(x in c for x in changed) for n, c in zip(found, clauses, strict=True))


@lru_cache(maxsize=1)
def _function_words() -> frozenset[str]:
    return stop_words("en") | ZH_STOPWORDS


#: A value said to be wrong: 「不是东十二舍，是西十二舍」, 「并非1203」, "not 04512", "not Row F". English takes only a
#: span with a digit or a capital (a value or a name): "not sure", "not today" reject nothing.
_REJECTED_ZH = re.compile(r"(?:不是|并非)(?P<old>[^，。；！？,;!?\s]{2,20}?)(?=[，。；！？,;!?\s]|$)")
_REJECTED_EN = re.compile(
    r"\bnot\s+(?:the\s+)?(?P<old>[£$€#]?(?:\d[\w:/-]*(?:[.,]\d+)*|[A-Z][\w'-]*(?:\s+[A-Z0-9][\w'-]*){0,2}))"
)


def _rejects(text: str, older: MemoryUnit) -> list[str]:
    """What ``text`` says is wrong of what ``older`` states: the values it rejects that are in the older's words."""
    flat = re.sub(r"\s+", "", older.content)
    out = [m.group("old") for m in _REJECTED_ZH.finditer(text) if m.group("old") in flat]
    return out + [m.group("old") for m in _REJECTED_EN.finditer(text) if m.group("old") in older.content]


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).casefold()


def _names_both(text: str, replacement: Replacement) -> bool:
    """Whether ``text`` names both the value ``replacement`` replaces and the one it puts in its place: it is about
    that change (it asked for it), not a statement of the old value."""
    flat = _flat(text)
    return _flat(replacement.old) in flat and _flat(replacement.new) in flat


def _own_replaced(text: str) -> list[str]:
    """What ``text`` itself names as replaced ("the 15th instead of the 1st", 「要燕麦色的，不要灰色」), flattened: a
    later statement replacing it changes nothing ``text`` holds true."""
    rejected = [m.group("old") for m in _REJECTED_ZH.finditer(text)]
    return [_flat(old) for old in [r.old for r in named_replacements(text)] + rejected]


def _replaces_itself(text: str, term: str) -> bool:
    """Whether ``text`` itself names ``term`` as what it replaces (``_own_replaced``)."""
    return any(_flat(term) in old for old in _own_replaced(text))


def _written(text: str, attrs: set[str]) -> list[str]:
    """The values of ``attrs`` as ``text`` writes them."""
    return [text[v.start : v.end] for v in claim_of(text).values if v.attr in attrs]


def _one_to_another(old: set[str], new: set[str]) -> bool:
    """Whether an attribute's values go from one to another: the older gives one value, the newer that value and
    one other ("由300M改为500M" after "先要300M的")."""
    return len(old) == 1 and old < new and len(new) == ONE_VALUE


def _value_labels(text: str, attrs: set[str]) -> dict[str, set[str]]:
    """The words labelling each of ``attrs``'s values in ``text`` (``claims.clause_label``), in either language."""
    claim = claim_of(text)
    out: dict[str, set[str]] = {a: set() for a in attrs}
    for value in claim.values:
        if value.attr in out:
            out[value.attr] |= set(clause_label(claim, value))
    return out


def _values_by_attr(memory: MemoryUnit) -> dict[str, set[str]]:
    """Each attribute a unit gives, with the normalised values it gives it (what the writer stored in
    ``data["about"]``; a unit written before it did is read again)."""
    about = (memory.data or {}).get("about")
    if about is None:
        return claim_of(memory.content).attrs
    out: dict[str, set[str]] = {}
    for v in about.get("values", []):
        out.setdefault(v["attr"], set()).add(str(v.get("value")))
    return out


#: A newer unit answers anew for an older one only from this many places of the ranking: one the question's words
#: hardly found is about something else (a painting job's time is not the leak repair's).
ANEW_PLACES = 10
#: At most this many values of the attribute asked on either side (one value, or a range's two ends): of a
#: statement giving several amounts, which one the question asks for is not known.
ONE_VALUE = 2


#: An English bound of a value ("arrive by 11:30", "leave after 17:00", "under £50"): what is wanted.
_BOUND_EN = re.compile(
    r"(?i)\b(?:after|before|by|until|till|no later than|no earlier than|at the latest|at least|at most|under|over"
    r"|more than|less than|between)\s+[£$€]?\d"
)


def wants_bound(text: str) -> bool:
    """Whether ``text`` gives a range or a bound of a value (「400-500元之间」, "arrive by 11:30"): what is wanted,
    not what a thing is."""
    return states_criterion(text) or bool(_BOUND_EN.search(text))


def _singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and not word.endswith("ss") and len(word) > 3 else word


def _labels(text: str, attrs: dict[str, set[str]]) -> dict[str, frozenset[str]]:
    """The English words labelling each of ``attrs``'s values in ``text`` (``claims.clause_label``, singular): "book it
    for 13:15" labels its time *book*, "leaving at 9:17" *leaving*, "our 10-class packs are valid for 6 months" its
    months *class*, *pack*, *valid*. Chinese labels are left out: the characters just before a
    value are as often the agent's 「已为您改到」 as what the value is of."""
    labelled = _value_labels(text, set(attrs))
    return {a: frozenset(_singular(w) for w in labelled[a] if w.isascii()) for a in attrs}


def _one_matter(
    subjects: set[str],
    newer_subjects: set[str],
    one_conversation: bool,
    matters: set[str],
    newer_matters: set[str],
    named: set[str],
) -> bool:
    """Whether an older and a newer statement are about one thing, for ``answered_anew``: they name no different
    identifiers; they were said in one conversation, or name the same identifier (another conversation is another
    matter: a train's time to leave and a taxi's); the newer names no matter the older does not, nor one other than
    the question's (``named``): a hotel's price range and an attraction's are two attributes of one kind."""
    if subjects and newer_subjects and not subjects & newer_subjects:
        return False
    if not one_conversation and not subjects & newer_subjects:
        return False
    if matters and newer_matters - matters:
        return False
    return not (named and newer_matters and not named & newer_matters)


def answered_anew(tenant: Tenant, units: list[MemoryUnit], asked: set[str], named: set[str]) -> dict[Any, Any]:
    """For a question asking for the attributes ``asked`` (``claims.asked_attrs``) and naming the matters ``named``:
    the units among ``units`` (ranked) that a newer one answers anew, each with the newest that does. A newer unit
    answers anew for an older one when it gives an asked attribute another value — no value in common, at most
    ``ONE_VALUE`` on either side, and in English labelled by a common word where both are labelled ("book it for
    13:15" and "leaving at 9:17" are two events' times) — is at least ``asked_similarity`` similar, ranks among
    the first ``ANEW_PLACES``, is about the same thing (``_one_matter``), and wants a value (a range, a bound) just
    when the older does: "catering for about 45 guests", then "For 52 guests we'll send 3 staff" answers "how many
    guests" anew, though neither says it changes anything. A newer unit giving the older's one value and one
    other ("from 300M to 500M", ``anew_from_to``) answers anew in another conversation too, unless it pairs
    values as a list does."""
    knobs = tuning()
    threshold, from_to_on = float(knobs.asked_similarity), knobs.anew_from_to
    if not asked or threshold > 1 or len(units) < 2:
        return {}
    by_id = {u.pk: u for u in units}
    place = {u.pk: i for i, u in enumerate(units)}
    everything = {u.pk: _values_by_attr(u) for u in units}
    values = {u.pk: {a: v for a, v in everything[u.pk].items() if a in asked} for u in units}
    if sum(1 for v in values.values() if v) < 2:
        return {}
    wants = {u.pk: wants_bound(u.content) for u in units if values[u.pk]}
    labels = {u.pk: _labels(u.content, values[u.pk]) for u in units if values[u.pk]}
    matters = {u.pk: named_domains(u.content) for u in units if values[u.pk]}
    subjects = {u.pk: set(((u.data or {}).get("about") or {}).get("subjects") or []) for u in units}
    with connection.cursor() as cursor:
        cursor.execute(_SAID_BEFORE_SQL, {"tenant": tenant.pk, "ids": [u.pk for u in units if values[u.pk]]})
        pairs = cursor.fetchall()
    out: dict[Any, Any] = {}
    best: dict[Any, tuple[Any, float]] = {}
    for older, newer, similarity, one_conversation in pairs:
        if similarity < threshold or not values[older] or not values[newer] or place[newer] >= ANEW_PLACES:
            continue
        common = values[older].keys() & values[newer].keys()
        # "From 300M to 500M": the newer names the older's one value and one other. The old value said again links
        # the two as a shared identifier would, across conversations too. A list pairs its values ("£40 for 4
        # people, £55 for 6"): where another attribute has two values as well, nothing was changed.
        from_to = from_to_on and any(
            _one_to_another(values[older][a], values[newer][a])
            and not any(len(v) == ONE_VALUE for b, v in everything[newer].items() if b != a)
            for a in common
        )
        linked = one_conversation or from_to
        if not _one_matter(subjects[older], subjects[newer], linked, matters[older], matters[newer], named):
            continue
        if wants[older] != wants[newer]:
            continue  # what is wanted (a range, a bound) is answered by what a thing is, not replaced by it
        anew = from_to or any(
            not values[older][a] & values[newer][a]
            and len(values[older][a]) <= ONE_VALUE
            and len(values[newer][a]) <= ONE_VALUE
            and not (labels[older][a] and labels[newer][a] and not labels[older][a] & labels[newer][a])
            for a in common
        )
        if anew and (older not in out or (by_id[newer].created_at, similarity) > best[older]):
            out[older], best[older] = newer, (by_id[newer].created_at, similarity)
    return out


# The agent's reply to a customer's message: the next message of its session, said by the agent, with its
# conversation units (none where the writer kept only keyed facts of it).
_REPLY_SQL = """
SELECT q.id, rm.text, r.id
FROM memory_memoryunit q
JOIN chat_message qm ON qm.tenant_id = q.tenant_id AND qm.id = q.source_message_id
JOIN chat_message rm ON rm.tenant_id = qm.tenant_id AND rm.session_id = qm.session_id AND rm.seq = qm.seq + 1
     AND rm.role = 'assistant'
LEFT JOIN memory_memoryunit r ON r.tenant_id = rm.tenant_id AND r.source_message_id = rm.id
     AND r.key LIKE 'conversation:%%'
WHERE q.tenant_id = %(tenant)s AND q.id = ANY(%(ids)s)
"""
#: A number as a customer writes it in a question (「还是6800吧？」, "Doors at 7, right?"): bare, without a unit.
_NUMBER = re.compile(r"(?<![0-9A-Za-z.])\d+(?:[.:]\d+)?(?![0-9A-Za-z])")
#: A code as written ("BK-77120", with its dash): compared with the reply's words as they are.
_CODE_TOKEN = re.compile(r"[A-Za-z0-9-]{4,}")
#: A value wanted rather than proposed: a range or a bound (「人均50-100元」, 「评分4.5分以上」, 「50元以下」).
_WANTED = re.compile(r"\d\s*[-~～到至]\s*\d|以上|以下|以内|之间|不超过|不低于|至少|最多|低于|高于|左右")


def _proposed(text: str, claim: Claim) -> tuple[set[str], set[str]]:
    """What a question proposes (``claim`` is ``text``'s): the kinds of the values it states, and every value as
    written (those, its codes and its bare numbers)."""

    def bare(match: re.Match[str]) -> bool:  # outside every value the claim reads
        return not any(v.start < match.end() and match.start() < v.end for v in claim.values)

    written = {v.text for v in claim.values} | {m.group(0) for m in _NUMBER.finditer(text) if bare(m)}
    written |= {m.group(0) for m in _CODE_TOKEN.finditer(text) if bare(m) and re.search(r"\d", m.group(0))}
    return {v.kind for v in claim.values}, {w for w in written if w.strip()}


def _asks(unit: MemoryUnit) -> bool:
    """Whether a unit asks something: the writer said so, or one of its sentences is a question (「私教课包还是6800
    吧？我想买了。」)."""
    return is_question_unit(unit) or any(is_question(s) for s in re.split(r"(?<=[。！？!?\n])", unit.content) if s)


def _answers_otherwise(question: MemoryUnit, reply: str, asks: bool) -> list[str]:
    """What of ``question`` the agent's ``reply`` did not keep: the values it says are wrong or have expired, or —
    for a question proposing one value — that value, where the reply gives one of its kind (a bare number: any
    number) and not it. A question wanting a range or a bound, or giving several values, asks for something the
    reply offers (「帮我找一家人均100-150元、评分4.5分以上的餐馆」, answered 「人均消费64元」): no check. ``asks``:
    whether ``question`` asks (``_asks``)."""
    claim = claim_of(question.content)
    kinds, proposed = _proposed(question.content, claim)
    wrong = _rejects(reply, question) or [p for p in sorted(proposed) if said_expired(reply, p)]
    if wrong or len(proposed) != 1 or _WANTED.search(question.content) or wants_bound(question.content):
        return wrong  # several values, a range or a bound: a request the reply offers something for, no check
    if not asks:
        return []
    said = _flat(reply).replace(" ", "")
    answer = claim_of(reply).values
    # the value said again, as written or as read (「100块」 is 「100元」), or its number among the reply's
    norms = {v.norm for v in claim.values}
    numbers = set(_NUMBER.findall(reply)) | {n for v in answer for n in _NUMBER.findall(v.norm)}
    if (
        any(_flat(p).replace(" ", "") in said for p in proposed)
        or norms & {v.norm for v in answer}
        or (not norms and proposed & numbers)
    ):
        return []
    given = [v for v in answer if v.kind in kinds or (not kinds and _NUMBER.search(v.text))]
    return sorted(proposed) if given else []


def answered_otherwise(tenant: Tenant, units: list[MemoryUnit], query: str) -> dict[Any, Any]:
    """The customer's statements among ``units`` that the agent's reply in the same turn did not keep, each with a
    unit of that reply (None where the reply left none): a value the reply says is wrong or has expired
    (「东门A区？我刚过去看了没有」, answered 「是东门B区，不是A区」; 「之前说的是180对？」, answered 「180元的报价…已经
    过期了」), or a question's value where the reply gives another of its kind and not that one (「私教课包还是
    6800吧？」, answered 「20节现在是7200元」). A question is no statement: what the reply says is what holds; a reply
    that says the value again keeps it ("Is it order 12345?", "Yes, 12345 ships Friday"). Message and reply share
    their turn's moment, so no rule of order sees this. Of a statement, only the part ``query`` asks about counts
    (``_asked_part_holds``)."""
    theirs = {u.pk: u for u in units if u.source_role == "user"}
    if not theirs:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_REPLY_SQL, {"tenant": tenant.pk, "ids": list(theirs)})
        rows = cursor.fetchall()
    out: dict[Any, Any] = {}
    for pk, reply, reply_unit in rows:
        if pk in out:
            continue
        asks = _asks(theirs[pk])
        changed = _answers_otherwise(theirs[pk], reply, asks)
        # a question asks about one thing, its subject often in the sentence before (「那搬运费我还是得付。之前说
        # 的是180对？」): only a statement is narrowed to the part asked
        if changed and (asks or not query or _asked_part_holds(theirs[pk].content, query, changed)):
            out[pk] = reply_unit
    return out


def _after_overtakers(hits: list[RecallHit], overtaken: dict[Any, Any], changed: set[Any]) -> list[RecallHit]:
    """``hits`` where a unit ranked above the newer unit that overtook it gives that unit its place: the
    newer one moves up to just above it, and the older is marked ``stale`` where it is among ``changed``.
    Nothing leaves the list."""
    if not overtaken:
        return hits
    by_id = {h.memory.pk: h for h in hits}
    position = {pk: i for i, pk in enumerate(by_id)}
    out: list[RecallHit] = []
    emitted: set[Any] = set()
    for hit in hits:
        if hit.memory.pk in emitted:
            continue
        newer = overtaken.get(hit.memory.pk)
        if newer in by_id:
            hit.stale = hit.stale or hit.memory.pk in changed
        if newer in by_id and position[newer] > position[hit.memory.pk]:
            if newer not in emitted:
                out.append(by_id[newer])
                emitted.add(newer)
        out.append(hit)
        emitted.add(hit.memory.pk)
    return out


def _changers_in_place(hits: list[RecallHit], changers: dict[Any, list[str]]) -> list[RecallHit]:
    """The current hits of ``hits`` in order, where a unit that made a stale hit stale (``changers``: for this
    question) and ranked below it takes that hit's place: the value said later answers where the one it changed
    would have."""
    current = {str(h.memory.pk): h for h in hits if not h.stale}
    position = {str(h.memory.pk): i for i, h in enumerate(hits)}
    out: list[RecallHit] = []
    emitted: set[str] = set()
    for hit in hits:
        pk = str(hit.memory.pk)
        if hit.stale:
            for newer in changers.get(hit.memory.pk, []):
                if newer in current and newer not in emitted and position[newer] > position[pk]:
                    out.append(current[newer])
                    emitted.add(newer)
            continue
        if pk not in emitted:
            out.append(hit)
            emitted.add(pk)
    return out


# The units among some ids that a session may see at ``as_of``, each with what had superseded it by then, if anything.
_SEEN_TEMPLATE = (
    "SELECT m.id, CASE WHEN m.superseded_at <= %(as_of)s THEN m.superseded_by_id END FROM memory_memoryunit m"
    " WHERE {scope} AND m.id = ANY(%(ids)s)"
)
_SEEN_SQL = _SEEN_TEMPLATE.format(scope=SCOPE_SQL)
#: How many supersessions in a row are followed to the unit that holds (a ticket's third state after its first).
CHAIN = 4


def _holders(
    tenant: Tenant, session: ChatSession, hits: list[RecallHit], stale: dict[Any, list[str]], as_of: datetime
) -> tuple[dict[Any, list[str]], list[RecallHit]]:
    """For each stale hit, the unit that holds now in place of what made it stale: its newest changer, followed
    through later supersessions (``CHAIN``: a prescription's first state → its second → its third), among the
    hits or stored; and the holders not among ``hits``, each with the score of the hit it stands for — what
    holds now answers where what it changed would have, though the question's words found only the older (a
    reference number asked for, said in a prescription's first state and again in its last). Only units the
    session may see at ``as_of``."""
    by_id = {str(h.memory.pk): h for h in hits}
    stale_hits = {h.memory.pk for h in hits if h.stale}
    first = {pk: newer[0] for pk, newer in stale.items() if newer and pk in stale_hits}
    holder = {n: n for n in first.values()}  # a changer → the unit that holds in its place
    pending = {n for n in holder if n not in by_id or by_id[n].stale}
    for _ in range(CHAIN):
        if not pending:
            break
        with connection.cursor() as cursor:
            cursor.execute(_SEEN_SQL, {**scope_params(tenant, session, as_of), "ids": sorted(pending)})
            later = {str(pk): (str(by) if by is not None else None) for pk, by in cursor.fetchall()}
        moved = {}
        for changer in pending:
            if changer not in later:  # not the session's to see at as_of
                holder = {k: (None if v == changer else v) for k, v in holder.items()}
            elif later[changer] is not None:
                moved[changer] = later[changer]
        holder = {k: moved.get(v, v) for k, v in holder.items()}
        pending = set(moved.values()) - {n for n in moved.values() if n in by_id and not by_id[n].stale}
    holders = {pk: [holder[n]] for pk, n in first.items() if holder.get(n) and holder[n] not in pending}
    wanted: dict[str, RecallHit] = {}
    for hit in hits:
        for n in holders.get(hit.memory.pk, []):
            if n not in by_id:
                wanted.setdefault(n, hit)
    brought = [
        RecallHit(
            m, wanted[str(m.pk)].stage, wanted[str(m.pk)].similarity, wanted[str(m.pk)].score, wanted[str(m.pk)].fused
        )
        for m in MemoryUnit.objects.for_tenant(tenant).filter(pk__in=list(wanted))
    ]
    return {**stale, **holders}, brought


def current_first(
    tenant: Tenant,
    session: ChatSession,
    hits: list[RecallHit],
    as_of: datetime,
    *,
    about_now: bool = False,
    query: str | None = None,
) -> list[RecallHit]:
    """One ranked list over keyed facts and conversation units: of a keyed fact and a unit from the same
    message, only the higher ranked stays (one fact, said once), and units stating a superseded or ended
    value follow every current hit, in their own order."""
    units = [h.memory for h in hits if is_conversation_key(h.memory.key)]
    if not units:
        return hits
    # A keyed fact and a unit of the same message say the same thing once: a rule-stage fact (asked for by
    # key) stays and the unit goes; otherwise the unit, which says it in the customer's or agent's own words
    # with what surrounds it, takes the better of the two places and the fact goes.
    by_rule = {h.memory.source_message_id for h in hits if h.stage == "rule" and not is_conversation_key(h.memory.key)}
    with_unit = {h.memory.source_message_id for h in hits if is_conversation_key(h.memory.key)}
    kept: list[RecallHit] = []
    taken: set[Any] = set()
    for hit in hits:
        memory, source = hit.memory, hit.memory.source_message_id
        unit = is_conversation_key(memory.key)
        if source is not None and memory.key and not unit and hit.stage != "rule" and source in with_unit:
            moved = [h for h in hits if h.memory.source_message_id == source and is_conversation_key(h.memory.key)]
            kept.extend(h for h in moved if h.memory.pk not in taken)  # the units move up here
            taken.update(h.memory.pk for h in moved)
            continue
        if unit and source in by_rule or memory.pk in taken:
            continue
        taken.add(memory.pk)
        kept.append(hit)
    kept_units = [h.memory for h in kept if is_conversation_key(h.memory.key)]
    stale = _stale_units(tenant, session, kept_units, as_of, query, present=about_now)
    for hit in kept:
        hit.stale = hit.memory.pk in stale
    # What is stale by what is stored follows every current hit; a hit marked below (overtaken, answered anew)
    # keeps its place among them, once.
    ended = [h for h in kept if h.stale]
    changers, brought = _holders(tenant, session, kept, stale, as_of)
    current = _changers_in_place(kept + brought, changers)
    asked = asked_attrs(query) if query else None
    overtakers = overtaken(
        tenant,
        [h.memory for h in current if is_conversation_key(h.memory.key)],
        about_now=about_now,
        identifiers=query_identifiers(query) if query else None,
        asked=asked,
        changed=(changed := set()),
        query=query or "",
    )
    current = _after_overtakers(current, overtakers, changed)
    if tuning().answered_otherwise and query and not about_past(query):
        replied = answered_otherwise(tenant, [h.memory for h in current if is_conversation_key(h.memory.key)], query)
        for hit in current:
            hit.stale = hit.stale or hit.memory.pk in replied
        current = _after_overtakers(current, replied, set(replied))
    if query and asked and not about_past(query):
        anew = answered_anew(
            tenant, [h.memory for h in current if is_conversation_key(h.memory.key)], asked, named_domains(query)
        )
        for hit in current:
            if hit.memory.pk in anew:
                hit.stale = True
        current = [h for h in current if h.memory.pk not in anew] + [h for h in current if h.memory.pk in anew]
    if tuning().marked_last and not (query and about_past(query)):
        # What recall has shown out of date for this question follows every current hit: a question about the
        # present is answered by what holds; one about the past keeps the order the question's words gave.
        current = [h for h in current if not h.stale] + [h for h in current if h.stale]
    elif tuning().overtaken_last:
        # What a later statement says it changed (``data["update"]``) follows every current hit; what is merely
        # older stays beside what overtook it.
        updates = {h.memory.pk for h in current if (h.memory.data or {}).get("update")}
        moved = {h.memory.pk for h in current if h.stale and overtakers.get(h.memory.pk) in updates}
        current = [h for h in current if h.memory.pk not in moved] + [h for h in current if h.memory.pk in moved]
    return current + ended
