"""A later statement supersedes an earlier one about the same subject and attribute with another value.

When the writer stores a conversation unit, it compares what the unit states (``memory.conversation.claims``)
with the customer's earlier current units nearest to it:

- **subjects**: two units naming identifiers, none in common, are about different things and never touch;
- **attributes**: an attribute both give (a date, a weekday, a time, an amount, a phone, an address, what a
  count counts), where the new unit gives a value the older did not, is *changed* — when the two are about the
  same matter: their masked texts read alike (``SAME_WORDS``), or the new one was said a few messages later in the
  same session (``NEARBY``), or
  the new value is a near copy of the old (「4栋2单元301」 → 「4栋1单元301」, the 20th → the 21st: a correction);
- **status**: a unit with no values that names every identifier of an older one, on the same matter, gives its
  new state (「工单TS20240318009施工排期中」 → 「工单TS20240318009已完成」); so does one naming every identifier of
  an older one when both say where it stands (``states_a_state``: 「状态」, "status", a short state in quotes),
  whatever values either gives besides.

An older unit all of whose attributes are changed (and whose identifiers the new unit names) is **superseded**:
``superseded_at``/``superseded_by`` point at the new one; it keeps its retention, and recall ranks it after every
current hit for any moment from then on (a question about the past still finds it; ``as_of`` an earlier moment
it is current). An older unit with other attributes still true keeps them: the changed attributes are noted in
its ``data["changed"]`` (attribute → the unit that changed it and when), and recall treats it as stale for a
question about them.

Whoever said either unit, and however it is phrased, does not matter: the customer's correction, the agent's
confirmation and a later status are all just later statements.
"""

from __future__ import annotations

import difflib
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

import numpy as np
from django.db import connection

from memory.conversation.claims import (
    EN_STOP,
    Claim,
    claim_of,
    clause_label,
    identifiers,
    is_brief,
    label_of,
    masked_similarity,
    states_criterion,
)
from memory.conversation.replacement import labelled_replacements, named_replacements
from memory.conversation.terms import MAX_TERMS, attribute_of, same_attribute, stem, terms_of, zh_terms
from memory.conversation.terms import refused as refused_terms
from memory.conversation.terms import replaced as replaced_terms
from memory.models import MemoryUnit
from memory.store import audit
from memory.store.audit import Kind, event_row, insert_events, snapshot
from memory.text.language import has_cjk, pos_cut
from memory.topics.domains import MIN_SIMILARITY, classify, leaning, named_domains
from memory.topics.values import attributes_in

logger = logging.getLogger(__name__)

#: The prefix of a changed attribute that is a term (a word with no form of its own: "term:panasian").
TERM = "term:"
#: Masked texts whose words overlap at least this much (Dice) give the same attribute.
SAME_WORDS = 0.5
#: Values that identify someone or somewhere: changed only by a near copy (a correction).
IDENTITY_KINDS = frozenset({"phone", "email", "address"})
#: Kinds of value that, in the customer's own requests on one matter in one session, name their attribute by
#: themselves: what a count counts ("2 nights" after "3 nights"), a day of the week (the stay's, the table's).
REQUESTED_KINDS = frozenset({"count", "weekday"})
#: Kinds of value that say when something happens: their label is the event's verb ("leave by 17:00", "leave after
#: 13:00"), which a customer's many bookings share, so a label in common does not make them one attribute.
EVENT_KINDS = frozenset({"date", "time", "weekday"})
#: Kinds of value whose attribute is named with the value: a quantity's unit, a label's word, a name's noun.
NAMED_KINDS = frozenset({"measure", "label", "name"})
#: A new value this like the old one (characters in common) is a correction of it.
NEAR_COPY = 0.8
#: How many of the customer's earlier units, nearest first, each new unit is compared with; and how far back
#: (newest first) they are looked for.
NEIGHBOURS = 24
WINDOW = 3000
#: A unit at most this many messages after another in the same session is on the same matter when it gives one
#: of its attributes another value ("How about 18:45 instead?" after "a table for 2 at 19:45"): a conversation
#: changes what it is settling as it goes.
NEARBY = 8
#: Vectors at least this close, for two statements naming the same identifier and stating no value: a later
#: state of the same thing.
SAME_THING = 0.4
#: Masked texts overlapping at least this much (Dice) are about one act when one says it is not done yet and
#: the other that it is done: lower than ``SAME_WORDS``, for the later statement adds what it came to.
PROGRESS_WORDS = 0.3
#: How many messages back the agent's "there is none of X" frames the customer's choice as X's replacement: the
#: reply just before it. Further back, a customer's booking details and farewells were paired with the refused
#: choice (fitted on MultiWOZ's fit half).
REFUSAL_REACH = 1
#: A unit whose neighbours among the domain examples vote this much for one domain, short of agreeing, is of that
#: matter before any shown around it ("I'd like to go see a college that's in the same area as the hotel.").
LEANING_VOTE = 6 / 9
#: A unit whose own words show no matter (domain) takes the last one shown in its session this many messages back.
CONTEXT = 6

# The customer's current conversation units said before each new unit, nearest first. The window is the
# customer's newest units (an index range scan), ranked exactly; a unit of the same message never supersedes
# another (they were said at one moment).
_NEIGHBOURS_SQL = f"""
SELECT n.id, o.id, o.content, o.data, o.created_at,
       COALESCE(om.session_id = nm.session_id AND nm.seq - om.seq <= {NEARBY}, false),
       1 - (o.embedding <=> n.embedding), om.session_id, om.seq, o.embedding::text
FROM memory_memoryunit n
LEFT JOIN chat_message nm ON nm.tenant_id = n.tenant_id AND nm.id = n.source_message_id
CROSS JOIN LATERAL (
    SELECT w.* FROM (
        SELECT o.* FROM memory_memoryunit o
        WHERE o.tenant_id = n.tenant_id AND o.end_user_id = n.end_user_id AND o.key LIKE 'conversation:%%'
          AND o.superseded_at IS NULL AND o.created_at < n.created_at AND o.expires_at > n.created_at
          AND o.id <> n.id AND o.source_message_id IS DISTINCT FROM n.source_message_id
          AND o.embedding IS NOT NULL AND o.embedding_model = n.embedding_model
        ORDER BY o.created_at DESC LIMIT {WINDOW}
    ) w ORDER BY w.embedding <=> n.embedding LIMIT {NEIGHBOURS}
) o
LEFT JOIN chat_message om ON om.tenant_id = o.tenant_id AND om.id = o.source_message_id
WHERE n.tenant_id = %(tenant)s AND n.id = ANY(%(ids)s) AND n.embedding IS NOT NULL
"""  # noqa: S608 - our own constants, no input
# The customer's current units said a few messages before each new unit in its session, however unlike it: "Can
# you search for a college?" is not among the nearest of "Thanks again. I wonder if there are any entertainment
# attractions nearby." by vectors, and revises it all the same.
_NEARBY_SQL = f"""
SELECT n.id, o.id, o.content, o.data, o.created_at, true,
       1 - (o.embedding <=> n.embedding), om.session_id, om.seq, o.embedding::text
FROM memory_memoryunit n
JOIN chat_message nm ON nm.tenant_id = n.tenant_id AND nm.id = n.source_message_id
JOIN chat_message om ON om.tenant_id = nm.tenant_id AND om.session_id = nm.session_id
                    AND om.seq BETWEEN nm.seq - {NEARBY} AND nm.seq
JOIN memory_memoryunit o ON o.tenant_id = n.tenant_id AND o.source_message_id = om.id
WHERE n.tenant_id = %(tenant)s AND n.id = ANY(%(ids)s) AND n.embedding IS NOT NULL
  AND o.end_user_id = n.end_user_id AND o.key LIKE 'conversation:%%'
  AND o.superseded_at IS NULL AND o.created_at < n.created_at AND o.expires_at > n.created_at
  AND o.id <> n.id AND o.source_message_id IS DISTINCT FROM n.source_message_id
  AND o.embedding IS NOT NULL AND o.embedding_model = n.embedding_model
ORDER BY n.id, 7 DESC
"""  # noqa: S608 - our own constants, no input
# The customer's current units naming an identifier (a ticket's status weeks later is not among the nearest), as
# ``claims.identifiers`` reads it: upper-cased, hyphens dropped (「CMP-10233」 names CMP10233); with their vectors'
# likeness to the new unit, which a later state of the same thing is judged by.
_NAMING_SQL = f"""
SELECT o.id, o.content, o.data, o.created_at, false,
       COALESCE((SELECT 1 - (o.embedding <=> n.embedding) FROM memory_memoryunit n
                 WHERE n.tenant_id = o.tenant_id AND n.id = %(unit)s AND n.embedding_model = o.embedding_model), 0.0),
       NULL::uuid, NULL::integer, o.embedding::text
FROM memory_memoryunit o
WHERE o.tenant_id = %(tenant)s AND o.end_user_id = %(end_user)s AND o.key LIKE 'conversation:%%'
  AND o.superseded_at IS NULL AND o.created_at < %(at)s AND o.expires_at > %(at)s
  AND o.source_message_id IS DISTINCT FROM %(source)s AND replace(upper(o.content), '-', '') LIKE ANY(%(patterns)s)
ORDER BY o.created_at DESC LIMIT {NEIGHBOURS}
"""  # noqa: S608 - our own constants, no input
# Each unit's own message and the messages before it in its session, newest first: what a brief answer
# (「人均消费是23元」) is about is named there (「王胖子驴肉火烧（鼓楼店）这家餐馆有您要吃的菜」, then
# 「这家餐馆的人均消费是多少钱？」).
_SAID_AROUND_SQL = f"""
SELECT u.id, m.text,
       ARRAY(SELECT p.text FROM chat_message p
             WHERE p.tenant_id = m.tenant_id AND p.session_id = m.session_id
               AND p.seq BETWEEN m.seq - {NEARBY} AND m.seq - 1
             ORDER BY p.seq DESC)
FROM memory_memoryunit u
JOIN chat_message m ON m.tenant_id = u.tenant_id AND m.id = u.source_message_id
WHERE u.tenant_id = %(tenant)s AND u.id = ANY(%(ids)s)
"""  # noqa: S608 - our own constants, no input
#: rjieba's tags of proper nouns: a person's, a place's, an organisation's, another name.
_PROPER_TAGS = frozenset({"nr", "ns", "nt", "nz"})


@lru_cache(maxsize=8192)
def places_named(text: str) -> frozenset[str]:
    """The Chinese proper nouns ``text`` names, its values masked (rjieba's ``nr``, ``ns``, ``nt``, ``nz``, two
    characters or more: 「庆云」「什刹海」 in 「庆云楼(什刹海店)」, 「王胖子」 in 「王胖子驴肉火烧（鼓楼店）」)."""
    masked = claim_of(text).masked
    if not has_cjk(masked):
        return frozenset()
    return frozenset(w for w, flag in pos_cut(masked) if flag in _PROPER_TAGS and len(w) >= 2 and has_cjk(w))


class _Named:
    """What a unit that names nothing itself is about: the things its message names, else those the nearest message
    before it in its session names, up to ``NEARBY`` messages back (what the question a brief answer answers was
    about: 「这家餐馆的人均消费是多少钱？」 after 「王胖子驴肉火烧（鼓楼店）这家餐馆有您要吃的菜」)."""

    def __init__(self, tenant: Any, ids: list[Any], contents: dict[Any, str]) -> None:
        self._context: dict[Any, frozenset[str]] = {}
        unnamed = [
            pk
            for pk in ids
            if has_cjk(contents.get(pk, "")) and not places_named(contents[pk]) and not identifiers(contents[pk])
        ]
        if not unnamed:
            return
        with connection.cursor() as cursor:
            cursor.execute(_SAID_AROUND_SQL, {"tenant": tenant.pk, "ids": unnamed})
            rows = cursor.fetchall()
        for unit_id, own_message, before in rows:
            for text in (own_message or "", *(before or ())):
                names = places_named(text)
                if names:
                    self._context[unit_id] = names
                    break

    def apart(self, a: Any, b: Any) -> bool:
        """Whether two units that name nothing themselves answer for different things: the messages they were said
        after name things, none in common."""
        x, y = self._context.get(a), self._context.get(b)
        return bool(x and y and not (x & y))


# The units of the new units' sessions said up to a few messages before them (and their own message's): where a
# brief unit's matter is read from (「How about 18:45?」 is about the table the turns before it discussed).
_SESSION_SQL = f"""
SELECT o.id, m.session_id, m.seq, o.embedding::text, o.embedding_model, o.content
FROM memory_memoryunit o
JOIN chat_message m ON m.tenant_id = o.tenant_id AND m.id = o.source_message_id
JOIN (
    SELECT nm.session_id, nm.seq FROM chat_message nm WHERE nm.tenant_id = %(tenant)s AND nm.id = ANY(%(messages)s)
) n ON n.session_id = m.session_id AND m.seq BETWEEN n.seq - {NEARBY + CONTEXT} AND n.seq
WHERE o.tenant_id = %(tenant)s AND o.key LIKE 'conversation:%%' AND o.embedding IS NOT NULL
"""  # noqa: S608 - our own constants, no input


@dataclass(frozen=True)
class Verdict:
    """What a newer unit does to an older one: ``changed`` attributes, and whether the older is ``superseded``
    as a whole. ``terms``: the older's terms the newer replaced (``memory.conversation.terms``), as ``(old, new)``;
    each is also a changed attribute ``term:<old>``."""

    changed: frozenset[str]
    superseded: bool
    terms: tuple[tuple[str, str], ...] = ()
    #: Changed attributes whose old and new values carry the same label (``claims.label_of``): a question that
    #: names the label asks for them.
    labelled: frozenset[str] = frozenset()


def _near_copy(old: set[str], new: set[str], kind: str) -> bool:
    """Whether a new value is a near copy of an old one: a correction rather than another thing."""
    for a in old:
        for b in new:
            if kind == "date":
                # 「8月20号」 → "the 21st": a day of an unnamed month is compared by its day
                da, db = a[-2:], b[-2:]
                if (
                    da.isdigit()
                    and db.isdigit()
                    and 0 < abs(int(da) - int(db)) <= 3
                    and (a[:2] == b[:2] or "--" in (a[:2], b[:2]))
                ):
                    return True
                continue
            if kind == "phone" and len(a) == len(b) and sum(x != y for x, y in zip(a, b, strict=True)) <= 2:
                return True  # a digit or two mistyped
            if kind == "email" and "@" in a and "@" in b:
                (local_a, domain_a), (local_b, domain_b) = a.rsplit("@", 1), b.rsplit("@", 1)
                if domain_a == domain_b and difflib.SequenceMatcher(None, local_a, local_b).ratio() >= NEAR_COPY:
                    return True  # the same mailbox misspelt, not a colleague's at the same company
                continue
            if kind == "address" and _near_address(a, b):
                return True
    return False


def _near_address(a: str, b: str) -> bool:
    """Whether two addresses are one with a slip: alike as a whole, or the shorter alike the longer's end — a
    correction restates the flat without the estate (「阳光小区7栋3单元402」, then 「7栋2单元402」)."""
    if difflib.SequenceMatcher(None, a, b).ratio() >= NEAR_COPY:
        return True
    short, long_ = sorted((a, b), key=len)
    return len(short) >= 5 and difflib.SequenceMatcher(None, short, long_[-len(short) :]).ratio() >= NEAR_COPY


#: A number long enough to be a reading, a room, an account (four digits or more, no letters around it), not a
#: year (2023 and 2024 are two years, not a slip).
_NUMBER = re.compile(r"(?<![\dA-Za-z])\d{4,}(?![\dA-Za-z])")
_YEAR = re.compile(r"(?:19|20)\d\d")
#: A capitalised Latin word not opening a sentence: a name ("Noor Hadad", "it's Haddad").
_LATIN_NAME = re.compile(r"(?<![.!?]\s)(?<![.!?])(?<=[\s\"'“(])[A-Z][a-z]{3,}\b")


def _spellings(claim: Claim) -> set[str]:
    """The names and long numbers a statement spells: numbers (``_NUMBER``), Latin names (``_LATIN_NAME``),
    Chinese personal names (rjieba's ``nr``)."""
    masked = claim.masked
    out = {n for n in _NUMBER.findall(masked) if not _YEAR.fullmatch(n)}
    out |= set(_LATIN_NAME.findall(masked))
    out |= _zh_names(masked)
    return out


def _zh_names(masked: str) -> set[str]:
    """The Chinese personal names rjieba reads in a statement (``nr``, 2 to 4 characters)."""
    if not has_cjk(masked):
        return set()
    return {w for w, flag in pos_cut(masked) if flag == "nr" and 2 <= len(w) <= 4 and has_cjk(w)}


def _zh_respelled(old: str, new: str) -> set[tuple[str, str]]:
    """Chinese names one statement spells that the other spells with one slip: looked for in the other's text
    itself, for the segmenter cuts a name after a word that ends in its surname's character unlike one
    (「为何秀兰女士」: 为何 / 秀兰)."""
    out = set()
    # Two characters are a surname and one more: another given name is as likely another person (张伟, 张玮).
    for name in (n for n in _zh_names(new) if len(n) >= 3):
        for i in range(len(old) - len(name) + 1):
            said = old[i : i + len(name)]
            if said not in new and _one_slip(said, name):
                out.add((said, name))
    for name in (n for n in _zh_names(old) if len(n) >= 3):
        for i in range(len(new) - len(name) + 1):
            said = new[i : i + len(name)]
            if said not in old and _one_slip(name, said):
                out.add((name, said))
    return out


def _one_slip(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with one slip: a character changed, added or dropped, or two swapped (a number's
    digits: any two)."""
    if a.lower() == b.lower():
        return False
    if len(a) == len(b):
        differ = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        if len(differ) == 1:
            return not has_cjk(a) or differ[0] > 0  # a Chinese name keeps its surname
        if len(differ) == 2:
            i, j = differ
            return a[i] == b[j] and a[j] == b[i] and (a.isdigit() or j == i + 1)
        return False
    if abs(len(a) - len(b)) != 1 or has_cjk(a):
        return False
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))


def respelled(old: Claim, new: Claim) -> list[tuple[str, str]]:
    """The names and numbers of ``old`` that ``new`` spells again with one slip fixed (``_one_slip``), each
    ``(old, new)``; only one of a kind (numbers with numbers), each the other's only match."""
    gone = _spellings(old) - _spellings(new)
    came = _spellings(new) - _spellings(old)
    pairs = [(a, b) for a in gone for b in came if a.isdigit() == b.isdigit() and _one_slip(a, b)]
    pairs = sorted(set(pairs) | _zh_respelled(old.masked, new.masked))
    return [(a, b) for a, b in pairs if sum(x == a for x, _ in pairs) == 1 and sum(y == b for _, y in pairs) == 1]


def judge(
    old: Claim,
    new: Claim,
    similarity: float,
    *,
    nearby: bool = False,
    replaced: Sequence[tuple[str, str]] = (),
    requests: bool = False,
) -> Verdict | None:
    """What ``new`` (said later) does to ``old``; None when it leaves it as it was. ``similarity``: the cosine
    of their vectors; ``nearby``: ``new`` was said a few messages after ``old`` in the same session;
    ``replaced``: terms of ``old`` that ``new`` replaced (``memory.conversation.terms.replaced``, which the caller
    asks only for two statements of one matter said close together). A replaced term changes that term only:
    the older statement's other words stay as true as they were. ``requests``: both are the customer's own
    statements in one session on one matter (a second search for a hotel, with another budget): there a value
    labelled as the older one's was (``claims.label_of``: 「门票价格⟨money⟩」 then 「门票⟨money⟩」) gives the same
    attribute, however far apart and however differently the rest is worded."""
    if old.subjects and new.subjects and not (old.subjects & new.subjects):
        return None  # about different things
    # Vectors say two statements are on one topic, not that they give one attribute (a credit card's limit and
    # its bill are both money, in close sentences): a value changes by what surrounds it in words, or in the
    # conversation that was settling it.
    # Nearby counts for a brief follow-up only: a long statement a few messages later is as likely another
    # matter's (a membership's expiry after a birthday).
    alike = masked_similarity(old, new)
    same_matter = (nearby and is_brief(new)) or alike >= SAME_WORDS
    old_attrs, new_attrs = old.attrs, new.attrs
    changed, labelled_attrs = set(), set()
    for attr, values in new_attrs.items():
        before = old_attrs.get(attr)
        if not before or not (values - before):
            continue
        kind = next(v.kind for v in new.values if v.attr == attr)
        # A phone, an e-mail or an address is someone's: another one said later is usually someone else's (the
        # claims centre's number, then the spouse's). Only a near copy corrects it; a real change of the
        # customer's own is a keyed fact's (memory.extraction), whose current value makes the old unit stale.
        # Of the customer's own requests on one matter, a count names its attribute by what it counts ("2 nights"
        # after "3 nights"), and a weekday is the day of what is being settled ("leave on Thursday", later "7:27
        # friday morning"); an amount, a date or a time needs the same label (a budget, not a deposit).
        same_label = _same_label(old, new, attr)
        if kind not in IDENTITY_KINDS and (same_matter or (requests and (kind in REQUESTED_KINDS or same_label))):
            changed.add(attr)
        elif (
            similarity >= SAME_THING
            and not _of_other_things(old, new, attr)
            and (
                (kind in NAMED_KINDS and len(before) == 1 and len(values) == 1)
                or (kind not in IDENTITY_KINDS | EVENT_KINDS and _relabelled(old, new, attr))
            )
        ):
            # The attribute is named with the value ("Cohort A" → "Cohort B", 「300M」 → 「500M」, "our High Street
            # branch" → "our Kingsway Station branch"), or by the words labelling it ("4 monthly instalments of
            # £46.50", later "the 4 instalments are now £39 each"): one value, then another, on one topic, is a
            # change of it however differently the rest is worded.
            changed.add(attr)
        elif _near_copy(before, values - before, kind):
            changed.add(attr)
        else:
            continue
        if same_label:
            labelled_attrs.add(attr)
    if requests:
        # A word where the other statement has a value under the same label (「票价是免费的」, later 「票价是20-50元
        # 的」; 「门票价格20-50元」, later 「门票免费」) gives that value's attribute another value.
        for attr in _worded_in_place(old, new) | _worded_in_place(new, old):
            changed.add(attr)
            labelled_attrs.add(attr)
    names_all = old.subjects <= new.subjects
    shared = _titles(old) & _titles(new) if not old.subjects and not new.subjects else set()
    if (
        shared
        and _states_beside(old, shared)
        and _states_beside(new, shared)
        or old.subjects
        and names_all
        and (states_a_state(old) or _short(old) and _says_where_it_stands(old))
        and _says_where_it_stands(new)
    ):
        # Where a ticket, a claim, a prescription stands: the later state of the same identifier is the one that
        # holds, whatever else either says (「工单…当前状态「待上门」」, weeks later 「工单…已标记为「已完工」，
        # 30天内可申请返修」; "reference CMP-10233, status "Received"", later "CMP-10233 … Status: "Closed"";
        # "RF-2274, status: requested", later "RF-2274 is now refunded").
        return Verdict(frozenset({"status", *changed}), superseded=True)
    if _ends_validity(old, new, similarity):
        # What else the older statement gives stays as true as it was (a refund beside the coupon that expired):
        # it is stale only for a question about what is still valid.
        return Verdict(frozenset({"validity"}), superseded=not old.values)
    terms = tuple(sorted(set(replaced))) if not (old.subjects - new.subjects) else ()
    if not (old.subjects - new.subjects) and (nearby or alike >= PROGRESS_WORDS or similarity >= SAME_THING):
        # A name or a number spelt again with one slip fixed (Hadad → Haddad, 何秀兰 → 何秀岚, 04512 → 04521) is
        # a correction of it, whoever says it and however far apart.
        terms = tuple(sorted(set(terms) | set(respelled(old, new))))
    if changed or terms:
        # An attribute the new statement gives again with the same values is no longer the older one's alone:
        # "4 monthly instalments of £46.50", then "the 4 instalments are now £39 each".
        restated = {a for a, v in old_attrs.items() if new_attrs.get(a) == v}
        whole = bool(changed) and set(old_attrs) <= changed | restated and names_all and not terms
        attrs = frozenset(changed | {f"{TERM}{a}" for a, _ in terms})
        return Verdict(attrs, superseded=whole, terms=terms, labelled=frozenset(labelled_attrs))
    if (
        old.subjects
        and names_all
        and not old.values
        and similarity >= SAME_THING
        and (not new.values or (_says_where_it_stands(new) and _short(old)))
    ):
        # a later state of the same thing: "RF-2274 has been approved and is processing", later "RF-2274 is now
        # refunded: the £12 went back to your card yesterday". A longer older statement says more than where the
        # thing stood ("Dan Whitlow's report is in, and CL-5530 is now under review"): only a later one that gives
        # no values of its own replaces it whole.
        return Verdict(frozenset({"status"}), superseded=True)
    if (
        not (old.subjects - new.subjects)
        and similarity >= SAME_THING
        and (old_states := _stated_states(old))
        and (new_states := _stated_states(new))
        and not (old_states & new_states)
    ):
        # Two states of one matter, named as states (「目前状态「待开具」」, later 「状态是「已开具」」; "Status:
        # waiting for parts", later "Status: collected"): the later is where it stands now.
        return Verdict(frozenset({"status", *changed}), superseded=True)
    if (names_all or not old.subjects) and (alike >= PROGRESS_WORDS or old.subjects) and progressed(old, new):
        # The same identifier needs no likeness of words: 「DJ-3307 目前状态是“待店长审批”」, later 「DJ-3307已经审批
        # 通过」.
        return Verdict(frozenset({"status"}), superseded=True)  # what was not done yet is done now
    return None


#: Chinese: an act not done yet (「还没补发」, 「尚未到账」, 「未处理」), and the same act done (「已经补发了」,
#: 「已于4月2日到账」, 「已为您处理」). The markers are the language's aspect words, a closed class; the act is
#: whatever verb follows them, and it must be the same verb in both.
_PENDING_ZH = re.compile(
    r"(?:还没有?|尚未|暂未|还未|未能|未|没有?)(?:被|给您|为您)?(?P<act>[\u4e00-\u9fff]{2})"
    # A state named as awaiting an act, the act last (「待店长审批」, 「待交管所受理」): who acts comes between.
    # Not the 待 of words that do not await (期待, 接待, 对待…).
    r"|(?<![期接招款对看虐优善])待[\u4e00-\u9fff]{0,4}?(?P<awaited>[\u4e00-\u9fff]{2})(?=[」”\"，。；,;\s]|$)"
)
_DONE_ZH = re.compile(r"已经?(?:于[^，。；！？]{0,12}?)?(?:被|给您|为您)?(?P<act>[\u4e00-\u9fff]{2})")


#: English: an act not done yet ("hasn't been refunded", "has not arrived yet", "still isn't fixed", "didn't
#: arrive", "is yet to be shipped"), and the same act done ("has been refunded", "has now arrived", "was shipped",
#: "is fixed now"). The markers are the perfect, the passive and their negation, a closed class; the act is the
#: verb after them, compared by its stem (refunded, refund).
_PENDING_EN = re.compile(
    r"(?i)\b(?:(?:has|have|had|is|are|was|were|did|does|do)(?:n't|\s+not)|never|not\s+yet|yet\s+to)"
    r"(?:\s+(?:yet|still|even|been|be|get|got|being))*\s+(?P<act>[a-z]{3,})\b"
)
#: An act a state awaits, named as a noun or a verb ("awaiting approval", "pending review", "we need approval from
#: the grid operator", "waiting for the assessor to confirm"): the English of 「待…」.
_AWAITED_EN = re.compile(
    r"(?i)\b(?:awaiting|pending|waiting\s+(?:for|on)|needs?|requires?)\s+(?:the\s+|an?\s+|your\s+)?"
    r"(?:[a-z]+\s+(?:to\s+))?(?P<act>[a-z]{3,})\b"
)
_DONE_EN = re.compile(
    r"(?i)\b(?:has|have|had|is|are|was|were|got)(?!n't)(?:\s+(?:now|already|just|finally|successfully|been))*"
    r"\s+(?P<act>[a-z]{3,}(?:ed|en))\b"
)


#: That something has stopped being valid (「已经过期了」, 「已失效」, "has expired", "is no longer valid"), and
#: that something may be used or is valid (「7天内有效」, 「都能用」, "valid for 14 days", "you can use it"): closed
#: classes of the language's words for validity, not of any one thing's.
_EXPIRED = re.compile(
    r"过期|失效|作废|已到期|不能再?用|无法再?(?:使用|兑换|用)"
    r"|(?i:\b(?:has|have|had|is|are|was|were)\s+(?:now\s+|already\s+)?expired\b|\bno\s+longer\s+(?:valid|usable|active)\b"
    r"|\bexpired\s+on\b)"
)
_VALID = re.compile(
    r"有效|能用|可用|可以用|能兑换|可以兑换|(?i:\bvalid\b|\busable\b|\bcan\s+(?:still\s+)?use\b|\bexpires?\b)"
)


def _expiry_clauses(text: str) -> list[str]:
    """The sentences of ``text`` that say something has stopped being valid."""
    return [c for c in re.split(r"(?<=[。！？!?\n])|(?<=\.)\s+", text) if _EXPIRED.search(c)]


def said_expired(text: str, value: str) -> bool:
    """Whether a sentence of ``text`` that says something has stopped being valid names ``value`` (「之前那个180元的
    报价是48小时内有效，现在已经过期了」 for 180)."""
    wanted = re.sub(r"\s+", "", value).casefold()
    return bool(wanted) and any(wanted in re.sub(r"\s+", "", c).casefold() for c in _expiry_clauses(text))


def _ends_validity(old: Claim, new: Claim, similarity: float) -> bool:
    """Whether ``new`` says that what ``old`` said may be used has stopped being valid: a sentence of ``new`` says
    something expired, ``old`` says something is valid or usable and says nothing has expired, and the expired
    thing is ``old``'s — the sentence names one of its identifiers, or ``old`` names none and the two are on one
    topic (「那张50元话费券在有效期内都能兑换」, later 「HF50-QX3已于发放7天后过期，无法再兑换」)."""
    if not _VALID.search(old.text) or _EXPIRED.search(old.text):
        return False
    clauses = _expiry_clauses(new.text)
    if not clauses:
        return False
    if old.subjects:
        return any(s in re.sub(r"[\s-]", "", c).upper() for c in clauses for s in old.subjects)
    return similarity >= SAME_THING


#: Where something stands, in words: its status or progress named ("status", 「状态」, 「进度」), or a short state
#: in quotes (「待上门」, "Being prepared", "Collected") — the words a ticket's, a claim's or a prescription's state
#: is given in. An act marked done alone (「已为您…」, "I've sent") is not: agents say it of everything they do.
_STATE = re.compile(r"(?i)\bstatus\b|状态|进度|「[^」]{1,12}」|“[^”]{1,24}”|\"[^\"]{1,24}\"")


#: A title in quotes: several words, or a Chinese name of four characters or more ("User interviews", 「年度体检套餐」).
_TITLE = re.compile(r"[「“\"](?P<t>[^」”\"]*?(?:[A-Za-z]+\s+[A-Za-z]+|[\u4e00-\u9fff]{4,})[^」”\"]*?)[」”\"]")


def _titles(claim: Claim) -> set[str]:
    """The quoted titles a statement names, lower-cased: a named thing, as an identifier is."""
    return {m.group("t").strip().lower() for m in _TITLE.finditer(claim.masked)}


def _states_beside(claim: Claim, titles: set[str]) -> bool:
    """Whether a statement says where something stands besides naming ``titles`` in quotes: a film's title said
    twice ("I watched "Little Women"") is no state of it."""
    rest = claim.masked
    for title in titles:
        rest = re.sub(r"[「“\"]\s*" + re.escape(title) + r"\s*[」”\"]", " ", rest, flags=re.I)
    return bool(_STATE.search(rest))


def states_a_state(claim: Claim) -> bool:
    """Whether a statement says where something stands (``_STATE``)."""
    return bool(_STATE.search(claim.masked))


#: A state named as one: quoted short (「已开具」, “Closed”), or after the word for it (「状态是已签收」, "Status:
#: settled").
_NAMED_STATE = re.compile(
    r"「(?P<a>[^」]{1,8})」|“(?P<b>[^”]{1,16})”|(?:状态|进度)(?:是|为|：|:)?\s*(?P<c>[\u4e00-\u9fff]{2,5})(?![\u4e00-\u9fff「“])"
    r"|(?i:\bstatus\b\s*(?:is|:)?\s*(?P<d>[a-z]+(?:\s+[a-z]+)?))"
)


def _stated_states(claim: Claim) -> set[str]:
    """The states a statement names as states (``_NAMED_STATE``), case-folded."""
    return {
        next(g for g in m.groups() if g).strip().casefold()
        for m in _NAMED_STATE.finditer(claim.text)
        if any(m.groups())
    }


#: At most this many words (or twice as many Chinese characters): a statement that says little but a state.
SHORT_WORDS = 12


def _short(claim: Claim) -> bool:
    if has_cjk(claim.text):
        return len(re.findall(r"[\u4e00-\u9fff]", claim.text)) <= 2 * SHORT_WORDS
    return len(claim.text.split()) <= SHORT_WORDS


def _says_where_it_stands(claim: Claim) -> bool:
    """A statement says where something stands: a state named as one, or said to hold now ("is now refunded",
    「目前已…」). An act marked done alone (「已为您…」, "has been updated") is no state: agents say it of
    everything they do."""
    return states_a_state(claim) or bool(_NOW_STATE.search(claim.masked))


_NOW_STATE = re.compile(r"(?i)\b(?:is|are)\s+now\s+(?!the\b|a\b|an\b)[a-z]+|(?:现在|目前)(?:是|已经?|处于)")


def _pending_zh(masked: str) -> set[str]:
    """The acts a Chinese text says are not done yet, or that a state awaits (``_PENDING_ZH``)."""
    return {m.group("act") or m.group("awaited") for m in _PENDING_ZH.finditer(masked)}


def _acts(pattern: re.Pattern[str], masked: str) -> set[str]:
    return {stem(m.group("act").lower()) for m in pattern.finditer(masked)}


def progressed(old: Claim, new: Claim) -> bool:
    """``old`` says an act is not done yet and ``new`` that the same act is done, and says it of nothing still
    pending: 「双倍的部分还没补发」, later 「已经补发了」; "my refund hasn't been processed yet", later "your refund has
    been processed"."""
    if has_cjk(old.masked) and has_cjk(new.masked):
        pending = _pending_zh(old.masked)
        done = {m.group("act") for m in _DONE_ZH.finditer(new.masked)}
        still = _pending_zh(new.masked)
    elif not (has_cjk(old.masked) or has_cjk(new.masked)):
        pending = _acts(_PENDING_EN, old.masked) | _acts(_AWAITED_EN, old.masked)
        still = _acts(_PENDING_EN, new.masked) | _acts(_AWAITED_EN, new.masked)
        done = _acts(_DONE_EN, _PENDING_EN.sub(" ", new.masked))  # "hasn't been refunded" is not "been refunded"
    else:
        return False
    return bool(pending & done) and not (pending & done & still)


def changed_in_form(old: Claim, new: Claim, similarity: float) -> list[str]:
    """What of ``old`` the form of ``new`` says it changes, for a caller that already knows the two are about one
    matter (recall: ``new`` overtook ``old`` for a question); each as written in ``old``, empty when nothing is: a
    name or a number spelt again with one slip fixed (``respelled``: the reading 00418, later 「已更正为00481」); the
    act ``old`` said was not done yet said done (``progressed``: 「待交管所受理」, later 「交管所已经受理」); a state
    named as one, where ``new`` names another and none in common (「状态「运输中」」, later 「状态「已签收」」); what
    ``old`` said may be used, where a sentence of ``new`` says it has expired (``_ends_validity``). Unlike ``judge``,
    no likeness of words is asked for: what brought the two together stands for it. Two identifiers one slip apart
    are as often two things (orders 10245 and 10246), and an older statement naming an identifier the newer does
    not is about another thing, but for a respelt value of its own."""
    out = [
        a
        for a, b in respelled(old, new)
        if not any(a.upper() in s for s in old.subjects) and not any(b.upper() in s for s in new.subjects)
    ]
    if old.subjects - new.subjects:
        return out
    if progressed(old, new):
        out += sorted(_pending_zh(old.masked) if has_cjk(old.masked) else _pending_words(old.masked))
    old_states, new_states = _stated_states(old), _stated_states(new)
    if old_states and new_states and not old_states & new_states:
        out += sorted(old_states)
    if _ends_validity(old, new, similarity):
        out += [m.group(0) for m in _VALID.finditer(old.text)]
    return out


def _pending_words(masked: str) -> set[str]:
    """The words naming the acts an English text says are not done yet, as written (``_PENDING_EN``)."""
    return {m.group("act") for m in _PENDING_EN.finditer(masked)}


def _worded_in_place(worded: Claim, valued: Claim) -> set[str]:
    """The attributes of ``valued``'s values whose label (``claims.label_of``) stands just before a Chinese term of
    ``worded`` that ``valued`` does not say — as the term's frame or its head: the term stands where the value
    stands (「票价是免费的」 against 「票价是⟨money⟩」, 「门票免费」 against 「门票价格⟨money⟩」). Chinese only: an
    English word after a label is as often the thing itself ("a table for ⟨count⟩")."""
    if not (has_cjk(worded.masked) and has_cjk(valued.masked)) or not valued.values:
        return set()
    labels = {
        v.attr: {w for w in label_of(valued, v) if has_cjk(w)} for v in valued.values if v.attr not in worded.attrs
    }
    out: set[str] = set()
    for term, frames in zh_terms(worded.masked).items():
        if term in valued.masked:
            continue
        heads = {f[1:] for f in frames if f.startswith("<")}
        for attr, names in labels.items():
            if heads & names or any(term.startswith(n) and len(term) > len(n) for n in names):
                out.add(attr)
    return out


def _owner(claim: Claim, attr: str) -> str | None:
    """The noun just before a statement's value of ``attr``, when one stands there: what the value is of
    ("amlodipine 10mg", 「阿莫西林500mg」). None after a function word or a verb ("it's 5mg", 「升级到500M」)."""
    value = next(v for v in claim.values if v.attr == attr)
    before = claim.text[: value.start].rstrip()
    if has_cjk(before[-1:]):
        words = pos_cut(before[-12:])
        word, flag = words[-1] if words else ("", "")
        return word if flag.startswith("n") and len(word) >= 2 else None
    latin = re.search(r"([A-Za-z][A-Za-z'’]*)$", before)
    word = latin.group(1).lower() if latin else ""
    return word if len(word) >= 3 and word not in EN_STOP and "'" not in word and "’" not in word else None


def _of_other_things(old: Claim, new: Claim, attr: str) -> bool:
    """Whether two statements' values of ``attr`` are each a different thing's: each follows a noun the other
    statement never says ("amlodipine 5mg", "atorvastatin 20mg")."""
    a, b = _owner(old, attr), _owner(new, attr)
    return bool(a and b and a != b and a not in new.text.lower() and b not in old.text.lower())


def _relabelled(old: Claim, new: Claim, attr: str) -> bool:
    """Whether ``new`` gives the one value ``old`` gives of ``attr`` another value under the same label: of its
    values of ``attr``, exactly one carries a word of the old one's label (``claims.label_of``), and it differs.
    Only a lone value: a change is noted per attribute, and which of several amounts a later amount changed is
    not known (a bill's total beside its overage fee, 「核减超出流量费三十元」 later)."""
    values = [v for v in old.values if v.attr == attr]
    if len(values) != 1:
        return False
    label = {w for w in label_of(old, values[0]) if w not in _FLEETING}
    if not label:
        return False
    relabelled = {
        v.norm for v in new.values if v.attr == attr and _shares_label(label_of(new, v) | clause_label(new, v), label)
    }
    return len(relabelled) == 1 and values[0].norm not in relabelled


def _shares_label(a: frozenset[str], b: set[str]) -> bool:
    """Whether two labels share a word: an English word, or two Chinese character pairs (a word of three characters
    or two words: 「席位上限」 twice, not 「取件时间」 and 「工作时间」, whose one pair is the kind's own name)."""
    common = a & b
    return any(not has_cjk(w) for w in common) or sum(has_cjk(w) for w in common) >= 2


#: Words that label no attribute though they stand before a value: when it holds, not what it is.
_FLEETING = frozenset({"now", "currently", "today", "still", "also", "each", "only", "about", "around", "just",
                       "现在", "目前", "当前", "还是", "大概", "大约"})  # fmt: skip


def _same_label(old: Claim, new: Claim, attr: str) -> bool:
    """Whether a value of ``attr`` in ``new`` is labelled with a word that labels one in ``old``."""
    labels = [label_of(old, v) for v in old.values if v.attr == attr]
    return any(label_of(new, v) & label for v in new.values if v.attr == attr for label in labels)


@dataclass(frozen=True)
class _Earlier:
    """An earlier unit to compare a new one with."""

    id: Any
    content: str
    created_at: datetime
    similarity: float
    nearby: bool
    session_id: Any
    seq: int | None
    vector: str | None
    role: str | None = None
    #: Compared only because it was said just before in the session, not among the nearest by vectors: only two
    #: values of one attribute of the vocabulary (``terms.same_attribute``) change it, for unlike statements a few
    #: messages apart in a chat ("a piece of chocolate cake" after "a chocolate raspberry tart") are rarely one
    #: choice revised.
    unlike: bool = False


def _role(data: Any) -> str | None:
    if isinstance(data, str):
        data = json.loads(data)
    return (data or {}).get("role")


def _candidates(tenant: Any, new: Sequence[MemoryUnit]) -> dict[Any, list[_Earlier]]:
    """For each new unit, the earlier units to compare it with (``nearby``: said shortly before it in the same
    session)."""
    out: dict[Any, list[_Earlier]] = {u.pk: [] for u in new}
    with connection.cursor() as cursor:
        cursor.execute(_NEIGHBOURS_SQL, {"tenant": tenant.pk, "ids": [u.pk for u in new]})
        for (
            new_id,
            old_id,
            content,
            data,
            created_at,
            nearby,
            similarity,
            session_id,
            seq,
            vector,
        ) in cursor.fetchall():
            out[new_id].append(
                _Earlier(
                    old_id, content, created_at, float(similarity), bool(nearby), session_id, seq, vector, _role(data)
                )
            )
        # Units said just before in the same session that the nearest by vectors left out, after them.
        seen_by = {pk: {e.id for e in earlier} for pk, earlier in out.items()}
        cursor.execute(_NEARBY_SQL, {"tenant": tenant.pk, "ids": [u.pk for u in new]})
        for new_id, old_id, content, data, created_at, nearby, similarity, session_id, seq, vector in cursor.fetchall():
            if old_id not in seen_by[new_id]:
                out[new_id].append(
                    _Earlier(
                        old_id,
                        content,
                        created_at,
                        float(similarity),
                        nearby,
                        session_id,
                        seq,
                        vector,
                        _role(data),
                        unlike=True,
                    )
                )
        for unit in new:
            subjects = (unit.data or {}).get("about", {}).get("subjects") or []
            if not subjects:
                continue
            seen = {e.id for e in out[unit.pk]}
            cursor.execute(
                _NAMING_SQL,
                {
                    "tenant": tenant.pk, "end_user": unit.end_user_id, "at": unit.created_at, "unit": unit.pk,
                    "source": unit.source_message_id, "patterns": [f"%{s}%" for s in subjects],
                },
            )  # fmt: skip
            for old_id, content, data, created_at, nearby, similarity, session_id, seq, vector in cursor.fetchall():
                if old_id not in seen:
                    out[unit.pk].append(
                        _Earlier(
                            old_id, content, created_at, float(similarity), nearby, session_id, seq, vector, _role(data)
                        )
                    )
    return out


def _vector(raw: Any) -> np.ndarray | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        return np.asarray(json.loads(raw), dtype=np.float32)
    return np.asarray(raw, dtype=np.float32)


class _Matters:
    """The matter (``memory.topics.domains``) of units: a unit's own when its words show one (its neighbours
    among the domain examples agree, or vote ``LEANING_VOTE`` for one), else the last one shown in its session up
    to ``CONTEXT`` messages before it, else the one domain its words name. None when none of these shows one, and
    for a unit unlike every example (its nearest below ``memory.topics.domains.MIN_SIMILARITY``) that is no brief
    follow-up."""

    def __init__(self, tenant: Any, new: Sequence[MemoryUnit]) -> None:
        self._own: dict[Any, str | None] = {}
        self._content: dict[Any, str] = {}
        self._leaning: dict[Any, str] = {}  # the domain most of a unit's neighbours vote for, short of agreeing
        self._no_matter: set[Any] = set()
        self._unlike: set[Any] = set()  # units unlike every domain example
        self._at: dict[Any, list[tuple[int, Any]]] = {}  # session → [(seq, unit id)]
        self._where: dict[Any, tuple[Any, int]] = {}
        messages = [u.source_message_id for u in new if u.source_message_id]
        if not messages:
            return
        with connection.cursor() as cursor:
            cursor.execute(_SESSION_SQL, {"tenant": tenant.pk, "messages": messages})
            for unit_id, session_id, seq, vector, model, content in cursor.fetchall():
                self._note(unit_id, session_id, seq, vector, model, content)

    def _note(self, unit_id: Any, session_id: Any, seq: int | None, vector: Any, model: str, content: str) -> None:
        if unit_id in self._own:
            return
        guess = classify(_vector(vector), model) if vector is not None else None
        self._own[unit_id] = guess.domain if guess else None
        if guess is not None and guess.similarity < MIN_SIMILARITY and not is_brief(claim_of(content)):
            # Unlike every domain example (small talk about a cake, a photo of a sports car): of no matter, neither
            # its own, however the far examples vote, nor one shown around it. A brief follow-up is unlike them too
            # ("Let's try Lebanese."): it takes the matter being settled.
            self._unlike.add(unit_id)
        elif guess is not None and guess.likely is not None and guess.share >= LEANING_VOTE:
            self._leaning[unit_id] = guess.likely
        if guess is not None and guess.no_matter:
            self._no_matter.add(unit_id)
        else:
            self._content[unit_id] = content  # its words name a matter only where nothing else shows one (``of``)
        if session_id is not None and seq is not None:
            self._at.setdefault(session_id, []).append((seq, unit_id))
            self._where[unit_id] = (session_id, seq)

    def note(self, earlier: _Earlier, model: str) -> None:
        self._note(earlier.id, earlier.session_id, earlier.seq, earlier.vector, model, earlier.content)

    def own(self, unit_id: Any) -> str | None:
        """The matter a unit's own words show, its neighbours among the domain examples agreeing; not one read
        from its session."""
        return self._own.get(unit_id)

    def names_none(self, unit_id: Any) -> bool:
        """Whether a unit's own words name no matter at all: thanks, a farewell, "that is all for today"."""
        return unit_id in self._no_matter

    def seq_of(self, unit_id: Any) -> int | None:
        """A unit's message's place in its session, if known."""
        where = self._where.get(unit_id)
        return where[1] if where else None

    def session_of(self, unit_id: Any) -> Any:
        """The session a unit was said in, if known."""
        where = self._where.get(unit_id)
        return where[0] if where else None

    def of(self, unit_id: Any) -> str | None:
        if unit_id in self._unlike:
            return None
        own = self._own.get(unit_id) or self._leaning.get(unit_id)
        if own is not None:
            return own
        if unit_id not in self._where:
            return self._named(unit_id)
        session_id, seq = self._where[unit_id]
        before = sorted(
            ((s, self._own.get(u)) for s, u in self._at.get(session_id, []) if seq - CONTEXT <= s <= seq),
            key=lambda pair: pair[0],
        )
        shown = [d for _, d in before if d is not None]
        # Neither its neighbours nor its session's last messages show one (a booking's people and nights: a
        # hotel's, a restaurant's, a train's): the one domain its own words name ("the hotel called Lovell Lodge …
        # 5 nights"). Only its own: an agent's "Which area would you like to visit?" does not frame the messages
        # after it.
        return shown[-1] if shown else self._named(unit_id)

    def _named(self, unit_id: Any) -> str | None:
        """The one domain a unit's own words name, if they name exactly one."""
        named = named_domains(self._content.get(unit_id, ""))
        return next(iter(named)) if len(named) == 1 else None


class _Claims:
    """What each earlier unit states, read once per batch (a unit is the neighbour of many new ones)."""

    def __init__(self) -> None:
        self._read: dict[Any, Claim] = {}

    def of(self, earlier: _Earlier) -> Claim:
        claim = self._read.get(earlier.id)
        if claim is None:
            claim = self._read[earlier.id] = claim_of(earlier.content, earlier.created_at)
        return claim


def _replacing(
    unit: MemoryUnit,
    claim: Claim,
    earlier: Sequence[_Earlier],
    matters: _Matters,
    matter: str | None,
    named: set[str],
    claims: _Claims,
) -> dict[str, str]:
    """The terms the customer's ``unit`` puts in place of terms of their own statements said just before it in
    the same session, on the same matter (``memory.conversation.terms``): old term → new term. Only the customer's
    own revision of their request counts (the agent's reply names a venue, its street, its phone: other words,
    not another choice); once found, it changes every unit of the matter said in between that names the old term
    (the agent's "no Panasian restaurants in the south")."""
    # Thanks and farewells ("That is all for today!", "Thank you goodbye") choose nothing, whatever their words.
    if unit.source_role != "user" or matter is None or matters.names_none(unit.pk):
        return {}
    new_terms = terms_of(claim.masked)
    if not new_terms:
        return {}
    out: dict[str, str] = {}
    # What the agent said there was none of in the reply just before this statement: (when, terms). The customer's
    # next request answers that refusal; a later one answers whatever was said in between. A message's place in
    # its session orders the two parties' words (a reply's units may be stored at the moment of the request's).
    seq = matters.seq_of(unit.pk)
    refusals = [
        (_said(e), refused_terms(claims.of(e).masked))
        for e in earlier
        if e.role == "assistant" and e.nearby and seq is not None and e.seq is not None and e.seq >= seq - REFUSAL_REACH
    ]
    session = matters.session_of(unit.pk)
    chinese = has_cjk(claim.masked)
    for e in earlier:
        # Chinese choices are paired by frame, not by word vectors: the customer's own earlier request in the
        # session, however far back, is revised by a later one in the same frame (「我想吃枣糕牛舌饼」, many turns
        # later 「给我找一个可以吃胡同菜的餐馆」).
        close = e.nearby or (chinese and session is not None and e.session_id == session and has_cjk(e.content))
        if e.role != "user" or not close or (named and matter not in named):
            continue
        matters.note(e, unit.embedding_model)
        if matters.of(e.id) != matter:
            continue
        none_of = frozenset().union(*(terms for at, terms in refusals if at > _said(e)))
        # A statement whose own words show its matter means that matter's attributes ("Is there something like a
        # museum?": an attraction's kind), whatever words it says.
        meant = attributes_in(matters.own(unit.pk)) | attributes_in(matters.own(e.id))
        pairs = replaced_terms(claims.of(e).masked, claim.masked, unit.embedding_model, none_of, meant)
        for old_term, new_term in pairs:
            if _other_matters(old_term, new_term):
                continue  # 「餐馆」 then 「酒店」: a second matter asked about, not another choice in the first
            if e.unlike and not same_attribute(old_term, new_term):
                continue
            out.setdefault(old_term, new_term)
    return out


def _other_matters(old_term: str, new_term: str) -> bool:
    """Whether two terms lean to different matters (``memory.topics.domains.leaning``): a restaurant and a
    hotel are not two choices of one kind. Two values of one attribute (``terms.attribute_of``: "expensive",
    "cheap") are of one kind whatever matters the examples that hold them happen to lean to."""
    if (attribute := attribute_of(old_term)) is not None and attribute == attribute_of(new_term):
        return False
    old, new = leaning(old_term), leaning(new_term)
    return bool(old and new and old.isdisjoint(new))


def _said(unit: _Earlier) -> tuple[int, datetime]:
    """When a unit was said in its session: its message's place, then its time."""
    return (unit.seq if unit.seq is not None else -1, unit.created_at)


def _names_term(masked: str, term: str) -> bool:
    """Whether a statement names ``term``: among its words, or — a Chinese phrase, which segmentation may join
    to the words around it — in its text."""
    return term in masked if has_cjk(term) else term in terms_of(masked)


def _states_something(unit: MemoryUnit) -> bool:
    """Whether a unit may change an earlier one: it states a value, names an identifier, or says a few terms."""
    about = (unit.data or {}).get("about") or {}
    if about.get("values") or about.get("subjects"):
        return True
    terms = terms_of(claim_of(unit.content).masked)
    return 0 < len(terms) <= MAX_TERMS


#: At most this many of a customer's units dated after the ones just written are read back for them (an import of
#: older conversations after newer ones): the earliest first.
LATER_LIMIT = 500

# The customer's current units dated after the given moment that are not the ones just written: stored before them,
# though said later (conversations imported out of order, or side by side).
_LATER_SQL = f"""
SELECT o.id FROM memory_memoryunit o
WHERE o.tenant_id = %(tenant)s AND o.end_user_id = ANY(%(users)s) AND o.key LIKE 'conversation:%%'
  AND o.superseded_at IS NULL AND o.created_at > %(after)s AND NOT (o.id = ANY(%(ids)s))
  AND o.embedding IS NOT NULL
ORDER BY o.created_at LIMIT {LATER_LIMIT}
"""  # noqa: S608 - our own constants, no input


def _said_later(tenant: Any, written: Sequence[MemoryUnit]) -> list[MemoryUnit]:
    """The customer's current units said after some of ``written`` but stored before them, that may change one of
    them: naming one of its identifiers, or at least ``SAME_THING`` alike by vectors. None in a live chat (what is
    written is the newest), nor in an import of a customer's conversations oldest first."""
    dated = [u for u in written if u.end_user_id is not None]
    if not dated:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            _LATER_SQL,
            {
                "tenant": tenant.pk, "users": list({u.end_user_id for u in dated}),
                "after": min(u.created_at for u in dated), "ids": [u.pk for u in written],
            },
        )  # fmt: skip
        ids = [row[0] for row in cursor.fetchall()]
    if not ids:
        return []

    def read(unit: MemoryUnit) -> tuple[set[str], np.ndarray | None]:
        """A unit's identifiers and its unit vector."""
        vector = _vector(unit.embedding)
        if vector is not None:
            vector = vector / (float(np.linalg.norm(vector)) or 1.0)
        return set(((unit.data or {}).get("about") or {}).get("subjects") or []), vector

    own = [(unit, *read(unit)) for unit in dated]
    out = []
    for later in MemoryUnit.objects.for_tenant(tenant).filter(pk__in=ids).order_by("created_at"):
        subjects, vector = read(later)
        for unit, named, mine in own:
            if unit.end_user_id != later.end_user_id or unit.created_at >= later.created_at:
                continue
            alike = (
                vector is not None and mine is not None and unit.embedding_model == later.embedding_model
                and float(vector @ mine) >= SAME_THING
            )  # fmt: skip
            if subjects & named or alike:
                out.append(later)
                break
    return out


def supersede_older(tenant: Any, new: Sequence[MemoryUnit], *, among: frozenset[Any] | None = None) -> int:
    """Apply what each of ``new`` (stored conversation units, with vectors) does to the customer's earlier
    units, in the caller's transaction: supersede those it replaces, note the changed attributes of those it
    changes in part; then what the customer's units said after them but stored before (``_said_later``) do to
    them, so that what holds does not depend on the order conversations were written in. ``among``: only these
    earlier units may be changed. Returns how many units it superseded."""
    written = list(new)
    new = [u for u in new if _states_something(u)]
    later = _said_later(tenant, written) if among is None else []
    if not new:
        return supersede_older(tenant, later, among=frozenset(u.pk for u in written)) if later else 0
    candidates = _candidates(tenant, new)
    if among is not None:
        candidates = {pk: [e for e in earlier if e.id in among] for pk, earlier in candidates.items()}
    matters = _Matters(tenant, new)
    contents = {u.pk: u.content for u in new} | {e.id: e.content for es in candidates.values() for e in es}
    named_things = _Named(tenant, list(contents), contents)
    ends: dict[Any, tuple[MemoryUnit, Verdict]] = {}
    changers: dict[Any, dict[str, MemoryUnit]] = {}
    matter_of: dict[Any, str | None] = {}
    claims = _Claims()
    for unit in sorted(new, key=lambda u: u.created_at):
        claim = claim_of(unit.content, unit.created_at)
        verdicts: dict[Any, Verdict] = {}
        # A question that states no value changes nothing ("What time does it leave?"), but a request put as a
        # question may revise a choice's terms ("How about a cheap Chinese place?").
        asks_only = bool((unit.data or {}).get("question")) and not claim.values
        matter = matters.of(unit.pk)
        named = named_domains(unit.content)
        replacing = _replacing(unit, claim, candidates.get(unit.pk, []), matters, matter, named, claims)
        # What this statement says it puts in another's place ("swap the lamb for chicken", 「由烤瓷改成全瓷冠」):
        # an earlier statement of the old value is changed, however unlike the two read otherwise.
        replacements = named_replacements(unit.content)
        chinese = has_cjk(claim.masked)  # Chinese choices change across a whole session (``_replacing``)
        for earlier in candidates.get(unit.pk, []):
            matters.note(earlier, unit.embedding_model)
            other = matters.of(earlier.id)
            old_claim = claims.of(earlier)
            # The same identifier is the same thing, whatever matter the domain examples read each statement as
            # (a complaint's reference, later its credit on the account: a complaint, then billing).
            same_thing = bool(old_claim.subjects) and old_claim.subjects <= claim.subjects
            explicit = tuple((r.old, r.new) for r in replacements if r.stated_in(earlier.content))
            if not explicit and not asks_only:
                # A value under the label an earlier statement gave another value under (「默认投递柜点是…」, later
                # 「已把默认投递柜点修改为…」) names what it replaces as plainly.
                explicit = tuple((r.old, r.new) for r in labelled_replacements(earlier.content, unit.content))
            # A thing named as replaced (「基础套餐」, "lamb tagine") is that thing in whatever matter the examples
            # read either statement as; a day or an amount named as replaced is only in the same matter.
            named_thing = any(not claim_of(old).values for old, _ in explicit)
            if matter is not None and other is not None and matter != other and not same_thing and not named_thing:
                continue  # a hotel's day and a train's day are different attributes
            old_id = earlier.id
            # A unit that names a matter of its own ("a train arriving by 10:00") opens it: what was said just
            # before about an unknown matter is not changed by its being near.
            nearby = earlier.nearby and not (named and other not in named)
            if asks_only and not nearby and not explicit:
                continue
            # The agent's words about what it found (「天坛的评分是4.5分，能玩2小时 - 3小时。」) describe a
            # candidate: they change the customer's criterion (「有能玩3小时 - 4小时的地方吗」) only when they say
            # they change something, or name every identifier the customer's statement named (「车位现在是B2-117，
            # 有没有近一点的？」, later 「您的车位已从B2-117换为B2-032」: the same thing, not a candidate).
            if (
                unit.source_role != "user"
                and earlier.role == "user"
                and not (unit.data or {}).get("update")
                and not same_thing
                and not explicit
                and states_criterion(earlier.content)
            ):
                continue
            terms = []
            same_session = earlier.session_id is not None and earlier.session_id == matters.session_of(unit.pk)
            if replacing and matter == other and (nearby or (chinese and same_session)):
                terms = [
                    (u, w)
                    for u, w in replacing.items()
                    if _names_term(old_claim.masked, u) and not _names_term(old_claim.masked, w)
                ]
            if (asks_only or earlier.unlike) and not terms and not explicit:
                continue
            # The customer's own requests on one matter, in one session: a later one with another value of a
            # labelled attribute is a new wish for it (a second search with another budget).
            requests = (
                unit.source_role == "user"
                and earlier.role == "user"
                and matter is not None
                and matter == other
                and earlier.session_id is not None
                and earlier.session_id == matters.session_of(unit.pk)
            )
            if (
                unit.source_role == "user"
                and earlier.role == "assistant"
                and not same_thing
                and not explicit
                and states_criterion(unit.content)
                and not states_criterion(earlier.content)
                and earlier.session_id != matters.session_of(unit.pk)
            ):
                # The other way round: what the customer wants in another conversation (「求推荐人均消费是150-500元的
                # 餐馆」) is a new search; it does not change what the agent said a thing is (「推荐仿膳饭庄(北海店)，
                # 人均消费229元」: a value, not a range). In the same conversation it may ask to change it (「原航班是
                # 下周五上午10:05起飞的YH5702」, then 「改到下周日，下午3点以后」).
                continue
            if not requests and not same_thing and not explicit and named_things.apart(unit.pk, old_id):
                # Two answers of one form about two venues (「人均消费是23元」 asked of one restaurant,
                # 「人均消费是131元」 of another): each is about what its message, or the question before it, names.
                # The customer's own requests in one session are one search, whatever place each is near.
                continue
            verdict = judge(old_claim, claim, earlier.similarity, nearby=nearby, replaced=terms, requests=requests)
            if explicit:
                verdict = _with_named(verdict, explicit)
            logger.debug(
                "%r (%s) vs earlier %r (%s): similarity %.3f, %s",
                unit.content, matter, earlier.content, other, earlier.similarity, verdict,
            )  # fmt: skip
            if verdict is None:
                continue
            verdicts[old_id] = verdict
            _note_verdict(ends, changers, matter_of, old_id, unit, verdict, matter)
        for old_id, verdict in _said_again(claim, candidates.get(unit.pk, []), claims, verdicts).items():
            _note_verdict(ends, changers, matter_of, old_id, unit, verdict, matter)
    if not ends:
        return supersede_older(tenant, later, among=frozenset(u.pk for u in written)) if later else 0
    rows = {m.pk: m for m in MemoryUnit.objects.for_tenant(tenant).select_for_update().filter(pk__in=list(ends))}
    events, superseded = [], 0
    for old_id, (unit, verdict) in ends.items():
        row = rows.get(old_id)
        if row is None or row.superseded_at is not None:
            continue
        before = snapshot(row)
        if verdict.superseded:
            at = unit.created_at
            # Its retention is kept: a question about the past (「我最早那个套餐」) still finds it; recall ranks it
            # after every current hit for a moment after ``superseded_at`` (memory.recall.currency).
            row.superseded_at, row.superseded_by = at, unit
            row.updated_at = max(row.updated_at, at)
            row.save(update_fields=["superseded_at", "superseded_by", "updated_at"])
            note = f"superseded by {unit.pk}"
            events.append(event_row(row, Kind.REPLACE, audit.SYSTEM, before=before, after=snapshot(unit), note=note))
            superseded += 1
        else:
            data = dict(row.data or {})
            changed = dict(data.get("changed") or {})
            # Each attribute keeps the newest statement that changed it, whichever batch wrote which first (an
            # import writes a customer's sessions in any order): what holds does not depend on the order.
            kept = set()
            for attr in verdict.changed:
                by = changers[old_id][attr]
                was = changed.get(attr)
                if isinstance(was, dict) and was.get("at") and datetime.fromisoformat(was["at"]) > by.created_at:
                    continue
                changed[attr] = {"by": str(by.pk), "at": by.created_at.isoformat()}
                kept.add(attr)
            if not kept:
                continue  # each attribute had been changed by a later statement already
            for attr in verdict.labelled & kept:  # the same label: a question naming it asks for this attribute
                changed[attr]["labelled"] = True
            for old_term, new_term in verdict.terms:  # what replaced it, and in which matter (recall reads both)
                if f"{TERM}{old_term}" in kept:
                    changed[f"{TERM}{old_term}"].update({"to": new_term, "matter": matter_of.get(old_id)})
            data["changed"] = changed
            row.data = data
            row.save(update_fields=["data"])
            by_changer: dict[str, list[str]] = {}
            for attr in sorted(kept):
                by_changer.setdefault(changed[attr]["by"], []).append(attr)
            note = "; ".join(f"{', '.join(attrs)} changed by {pk}" for pk, attrs in by_changer.items())
            events.append(event_row(row, Kind.EDIT, audit.SYSTEM, before=before, after=snapshot(row), note=note))
    insert_events(events)
    if later:
        superseded += supersede_older(tenant, later, among=frozenset(u.pk for u in written))
    return superseded


def _with_named(verdict: Verdict | None, named: tuple[tuple[str, str], ...]) -> Verdict:
    """``verdict`` with the replacements a statement named (old value, new value) as replaced terms: the older
    statement is changed in those, and stays as true as it was in the rest."""
    attrs = frozenset(f"{TERM}{old}" for old, _ in named)
    if verdict is None:
        return Verdict(attrs, superseded=False, terms=named)
    terms = tuple(sorted(set(verdict.terms) | set(named)))
    return Verdict(verdict.changed | attrs, verdict.superseded, terms=terms, labelled=verdict.labelled)


def _note_verdict(
    ends: dict[Any, tuple[MemoryUnit, Verdict]],
    changers: dict[Any, dict[str, MemoryUnit]],
    matter_of: dict[Any, str | None],
    old_id: Any,
    unit: MemoryUnit,
    verdict: Verdict,
    matter: str | None,
) -> None:
    """Record what ``unit`` does to an earlier unit: a supersession wins over a change in part; changes in part
    add up, each attribute keeping the newest unit that changed it (``changers``): what holds now in its place."""
    was = ends.get(old_id)
    if was is None or (verdict.superseded and not was[1].superseded):
        ends[old_id] = (unit, verdict)
        changers[old_id] = dict.fromkeys(verdict.changed, unit)
    elif not was[1].superseded:
        merged = Verdict(
            was[1].changed | verdict.changed,
            superseded=False,
            terms=was[1].terms + verdict.terms,
            labelled=was[1].labelled | verdict.labelled,
        )
        ends[old_id] = (was[0], merged)
        for attr in verdict.changed:  # each attribute keeps the newest unit that changed it, not the first unit's
            if attr not in changers[old_id] or unit.created_at >= changers[old_id][attr].created_at:
                changers[old_id][attr] = unit
    if verdict.terms:
        matter_of[old_id] = matter


def _said_again(
    claim: Claim, earlier: Sequence[_Earlier], claims: _Claims, verdicts: dict[Any, Verdict]
) -> dict[Any, Verdict]:
    """The earlier units that give the very value a new statement changed in another earlier unit, of an attribute
    named with its value or an address (``NAMED_KINDS``: "Riverside store", 「300M」): the same fact said again —
    the customer's request and the agent's confirmation of it — is changed with it, however unlike the new
    statement its words are. ``verdicts``: what the new statement did to each earlier unit it was compared with."""
    by_id = {e.id: e for e in earlier}
    changed: dict[str, set[frozenset[str]]] = {}
    for old_id, verdict in verdicts.items():
        old = claims.of(by_id[old_id]).attrs
        for attr in verdict.changed:
            if (attr == "address" or attr.split(":", 1)[0] in NAMED_KINDS) and len(old.get(attr, ())) == 1:
                changed.setdefault(attr, set()).add(frozenset(old[attr]))
    if not changed:
        return {}  # the common case: nothing of such an attribute changed, no earlier unit is read again
    out: dict[Any, Verdict] = {}
    for e in earlier:
        done = verdicts.get(e.id)
        if done is not None and done.superseded:
            continue
        old_claim = claims.of(e)
        if old_claim.subjects and claim.subjects and not (old_claim.subjects & claim.subjects):
            continue  # about different things
        attrs = {
            attr
            for attr, values in old_claim.attrs.items()
            if frozenset(values) in changed.get(attr, ())
            and claim.attrs.get(attr, values) != values
            and not (done and attr in done.changed)
        }
        if not attrs:
            continue
        all_changed = attrs | (done.changed if done else frozenset())
        whole = set(old_claim.attrs) <= all_changed and old_claim.subjects <= claim.subjects
        out[e.id] = Verdict(frozenset(attrs), superseded=whole)
    return out


def validity_seconds(claim: Claim, said: datetime, ttl: int) -> int:
    """A unit's lifetime from ``said``: the retention ``ttl``, or less when its own words end it sooner (a
    validity that ended before it was said is history, and keeps the retention)."""
    if claim.valid_until is None or claim.valid_until <= said:
        return ttl
    return max(1, min(ttl, int((claim.valid_until - said) / timedelta(seconds=1))))


def about_data(claim: Claim) -> dict[str, Any] | None:
    """The stored form of a unit's claim, or None when it states no value and names nothing."""
    if not claim.values and not claim.subjects:
        return None
    return claim.to_data()


__all__ = ["Verdict", "about_data", "judge", "said_expired", "supersede_older", "validity_seconds"]
