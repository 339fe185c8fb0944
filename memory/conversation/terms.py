"""Values with no form of their own: a cuisine, an area, a price range, a kind of place ("a Panasian place",
"in the south", "a cinema"). No pattern finds them, but a conversation shows them: a customer who asks "How
about a cheap Chinese place?" just after asking for "a cheap Panasian place" replaces one word with another of
the same kind, and keeps the rest.

A **term** is a content word of a statement: a word of letters that is not a function word or a common verb
(sumy's English stop-word list), not what a count counts ("people", "nights": ``claims``), and not part of a
value (the masked text is read). Two statements of the same matter said close together, where a term of the
newer takes the place of a term of the older, change that term:
the pair is the one each word finds nearest in the other statement, and at least ``SAME_KIND`` alike by word
vectors (co-hyponyms — two cuisines, two areas, two price levels — are; a cuisine and "restaurant" are less).

Word vectors are the sentence model's vectors of the single words: measured for English words only. The
Chinese sentence model's word vectors place 「额度」 (a card's limit) nearest 「账单」 (its bill), so Chinese words
are compared by frame alone (``zh_replaced``); their values are mostly typed (amounts, scores, hours:
``memory.conversation.claims``). In both languages two values of one attribute of the labelled vocabulary
(``memory.topics.values``: "college" and "museum", 「公共区域提供wifi」 and 「宽带上网」) fill one slot.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from functools import cache, lru_cache
from typing import Any

import numpy as np

from memory.conversation.claims import COUNTED_WORDS_EN
from memory.embeddings import models as embeddings
from memory.text.language import has_cjk, pos_cut, stop_words
from memory.topics.values import attribute_names, senses, vocabulary, zh_values_in

#: Word vectors at least this alike make two terms of the same kind (fitted on MultiWOZ's fit half); more alike
#: than ``SYNONYM`` they are one thing said two ways ("centre", "center").
SAME_KIND = 0.45
SYNONYM = 0.85
#: Two terms in the same frame (a word around them in common) need only be this alike.
FRAMED_KIND = 0.1
#: A statement with more terms than this is not a brief revision of one choice: its terms are not compared.
MAX_TERMS = 10
#: A revision brings at most this many terms the older statement did not say ("How about a cheap *Chinese*
#: place?" after "a cheap Panasian place"): more is another request, not the same one revised.
MAX_NEW = 3
#: Word vectors kept per process: a word is embedded once per model.
CACHE_SIZE = 20_000

_MASK = re.compile(r"⟨\w+⟩")
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]")
#: A possessive or a contraction's ending: "Kettle's", "that'll", "we'd" are read by the word before it.
_POSSESSIVE = re.compile(r"(?:'(?:s|ll|d|re|ve|m)|n't)$")
#: Participles ("leaving", "booked") describe what is done, not a choice made.
_VERB_FORM = re.compile(r"(?:ing|ed)$")

_lock = threading.Lock()
_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()


@cache
def _tagger() -> Any:
    # TextBlob ships the Brill lexicon and context rules of Tom de Smedt's Pattern in its wheel: a tagger that needs
    # no download (nltk's taggers do).
    from textblob.en.taggers import PatternTagger

    return PatternTagger()


#: Contractions the tagger reads wrongly ("I'd like" tags *like* as a preposition): spelled out before tagging.
_CONTRACTIONS = (
    (re.compile(r"(?i)\b(i|you|we|they|he|she|it)'d\b"), r"\1 would"),
    (re.compile(r"(?i)n't\b"), " not"),
    (re.compile(r"(?i)'ll\b"), " will"),
    (re.compile(r"(?i)'re\b"), " are"),
    (re.compile(r"(?i)'ve\b"), " have"),
    (re.compile(r"(?i)\bi'm\b"), "I am"),
    (re.compile(r"(?i)\b(what|that|it|there|here|where|how|who)'s\b"), r"\1 is"),
)
#: Determiners of a thing already known: "the address", "their phone number", "its postcode".
_DEFINITE = frozenset({"the", "their", "its", "his", "her", "your", "our", "my", "this", "that", "these", "those"})


@lru_cache(maxsize=4096)
def _tagged(masked: str) -> tuple[tuple[str, str], ...]:
    """A masked statement's words with their Penn tags (a value reads as "it"; contractions spelled out). Each
    statement is compared with many: tagged once."""
    text = _MASK.sub(" it ", masked)
    for pattern, spelled in _CONTRACTIONS:
        text = pattern.sub(spelled, text)
    return tuple((str(w), str(t)) for w, t in _tagger().tag(text))


def _word_classes(masked: str) -> dict[str, frozenset[str]]:
    """Each word's classes in a statement: "N" a noun, "J" an adjective (lower-cased words)."""
    out: dict[str, set[str]] = {}
    for word, tag in _tagged(masked):
        if tag.startswith(("NN", "JJ")):
            out.setdefault(_POSSESSIVE.sub("", word.lower()), set()).add(tag[0])
    return {w: frozenset(c) for w, c in out.items()}


#: Prepositions of place and direction, and "about" ("how about the north"), a closed class: a definite phrase after
#: one names a place chosen.
_PLACING = frozenset(
    {"in", "at", "on", "near", "around", "about", "to", "from", "into", "towards", "toward", "by", "inside", "outside",
     "within", "across", "along", "behind", "beside", "between"}
)  # fmt: skip


def _not_choices(masked: str) -> frozenset[str]:
    """Words of a statement that cannot be a choice it makes, by their part of speech in it (the Pattern tagger):
    a verb ("leave", "travel", "to *book*"), a modal or an interjection; and a word of a definite noun phrase that
    is not a preposition's object ("What is *the address*?", "Can I get *their postcode*?", "Is *the museum*
    free?", "provide me with *the phone number*"): it asks about a thing already found. A place named after a
    preposition of place or direction (``_PLACING``: "in *the south*", "how about *the north*") is a choice."""
    raw = _tagged(masked)
    tagged = [(w.lower(), tag) for w, tag in raw]
    verbs: set[str] = set()
    choices: set[str] = set()
    asked: set[str] = set()
    i = 0
    while i < len(tagged):
        word, tag = tagged[i]
        before = tagged[i - 1] if i > 0 else ("", "")
        # A place is named after a preposition of place or direction ("in the south", "how about the north"); "with
        # the phone number" and "like the address" (the tagger's preposition in "I would like") ask for a thing.
        # "that" before a noun is a determiner, whatever the tagger says ("for that restaurant": IN).
        determiner = tag in ("DT", "PRP$") or (
            word == "that" and i + 1 < len(tagged) and tagged[i + 1][1][:2] in ("NN", "JJ")
        )
        if word in _DEFINITE and determiner and (before[1] not in ("IN", "TO") or before[0] not in _PLACING):
            j = i + 1
            while j < len(tagged) and tagged[j][1].startswith(("JJ", "NN")):
                asked.add(tagged[j][0])
                j += 1
                # "the address and phone number", "their postcode, address and phone number": a noun joined to
                # the phrase, by a conjunction or in a list, is asked too
                while (
                    j + 1 < len(tagged)
                    and tagged[j][1] in ("CC", ",")
                    and tagged[j + 1][1].startswith(("JJ", "NN", "CC"))
                ):
                    j += 1
                # "the restaurant's address": the possessive goes on to what it owns
                while j < len(tagged) and (tagged[j][1] == "POS" or tagged[j][0] == "s" and tagged[j - 1][1] == "POS"):
                    j += 1
            if j > i + 1:
                i = j
                continue
        after = tagged[i + 1] if i + 1 < len(tagged) else ("", "")
        # A word with an object right after it is a verb, whatever the tagger says of it: "book me a table",
        # "book the room", "book it for Monday" (a noun is not followed by "me", "it" or "the").
        governs = tag.startswith("NN") and (after[0] in _OBJECT_PRONOUNS or after[1] == "DT")
        # A word right after a modal, or after a modal and its subject, is a verb's base form, whatever the tagger
        # says of it ("That should *work*", "Would you *forward* the address").
        after_modal = before[1] == "MD" or (before[1] == "PRP" and i >= 2 and tagged[i - 2][1] == "MD")
        if (
            tag.startswith(("VB", "MD", "UH"))
            or governs
            or (after_modal and tag in ("NN", "RB", "JJ"))
            or (before[1] == "TO" and raw[i][0].islower() and tag.startswith("NN") and _known(word))
        ):
            verbs.add(word)
        else:
            choices.add(word)
        i += 1
    return frozenset((verbs | asked) - choices)


def _known(word: str) -> bool:
    """Whether the tagger's lexicon holds ``word``: "book" after "to" may be a verb ("to book a table"), a word
    it does not know is a name ("heading to norwich")."""
    from textblob.en import lexicon

    return lexicon.get(word) is not None


_SENTENCE = re.compile(r"[^.?!]+[.?!]*")
_OBJECT_PRONOUNS = frozenset({"me", "it", "us", "them", "him", "her"})


#: A Chinese indefinite noun phrase's opening: a classifier, with or without 「一」, not after a demonstrative, an
#: interrogative or another numeral (「找一家…的店」, 「找个…的景点」, not 「这家」, 「哪个」, 「两个」).
_INDEFINITE_ZH = re.compile(r"(?<![这那哪每某几两三四五六七八九十\d])一?[个家间座处](?![人月])")


def states_choice_zh(text: str) -> bool:
    """Whether a Chinese question states a choice of the customer's: a clause of it that does not ask (no
    interrogative pronoun) opens an indefinite noun phrase holding a choice — 「我想找个票价免费的景点游玩，你能给我
    推荐一个吗？」, 「找一家有印度咖喱锅底的店吃饭，有合适的么？」 make a request put as a question; 「这个酒店提供
    wifi吗？」 (definite) and 「地址在哪？」 ask for something."""
    for clause in re.split(r"[，。！？；,!?;]", _MASK.sub("，", text)):
        opening = _INDEFINITE_ZH.search(clause)
        if opening is None or _ASKS_ZH.search(clause):
            continue
        if zh_terms(clause[opening.end() :]):
            return True
    return False


def states_choice(text: str) -> bool:
    """Whether an English question states a choice of the customer's: a sentence of it that is not a wh-question
    ("what about" and "how about" propose, they do not ask) holds a content word that is not a verb and not a
    definite noun phrase asked about. "How about Spanish food?", "Do you have any Indian restaurants?", "Is
    there one that serves modern European food?" make a request put as a question; "Can I have the phone
    number?", "What time does it leave?", "What is the postcode for Kettle's Yard?" ask for something. A text
    with no English words states none here."""
    masked = _MASK.sub(" ", text)
    if not _latin_terms(masked):
        return False
    for sentence in _SENTENCE.findall(masked):
        words = _latin_terms(sentence)
        if not words:
            continue
        tagged = [(w.lower(), tag) for w, tag in _tagger().tag(sentence)]
        lead = [(w, t) for w, t in tagged if not t.startswith(("UH", "CC", "RB", ",", ".", ":"))]
        if lead and lead[0][1].startswith("W") and not (len(lead) > 1 and lead[1][0] == "about"):
            continue  # what, when, where, which, who, how …: it asks
        if words - _not_choices(sentence):
            return True
    return False


@cache
def _stemmer() -> Any:
    from nltk.stem.snowball import SnowballStemmer

    return SnowballStemmer("english")


def stem(word: str) -> str:
    """An English word's Snowball stem ("refunded", "refund" → "refund")."""
    return str(_stemmer().stem(word))


def terms_of(masked: str) -> frozenset[str]:
    """The content words of a masked statement (``claims.Claim.masked``), lower-cased: no value, no function
    word, no common verb; plural ``-s`` kept (word vectors read "restaurants" as they read "restaurant"); and
    its Chinese nominal phrases (``zh_terms``)."""
    latin = _latin_terms(masked)
    return latin | frozenset(zh_terms(masked)) if has_cjk(masked) else latin


def _latin_terms(masked: str) -> frozenset[str]:
    stop = stop_words("en")
    words = (_POSSESSIVE.sub("", w.lower()) for w in _LATIN_WORD.findall(_MASK.sub(" ", masked)))
    # What a count counts ("people", "nights", "tickets") is the attribute of a value, not a choice.
    return frozenset(
        w
        for w in words
        if len(w) >= 3
        and w not in stop
        and w not in COUNTED_WORDS_EN
        and stem(w) not in stop
        and not _VERB_FORM.search(w)
    )


#: rjieba's flags of a Chinese choice: nouns (``n``, ``nr``, ``ns``, ``nz`` …), distinguishing words (「高档」,
#: ``b``) and their suffix (「型」, ``k``), verbal nouns (「服务」, ``vn``).
_ZH_NOMINAL = ("n", "b", "k", "vn")
#: Flags that are neither a choice nor its frame: particles, numbers and measures, pronouns, prepositions,
#: conjunctions, modal particles, punctuation and Latin (a value's mask).
_ZH_SKIP = ("u", "m", "q", "r", "p", "c", "y", "e", "o", "x", "w", "eng", "d")


#: A verb's complements of result and aspect, a closed class: 「能吃到肉末烧饼」 and 「能吃三鲜包子」 are one frame.
_ZH_COMPLEMENTS = frozenset({"到", "完", "上", "过", "着", "了"})

#: Words too common to frame a choice: the copula and "have" (「额度是…」, 「账单是…」 are not one slot).
_ZH_WEAK = frozenset({"是", "有", "在", "要", "请"})


#: Flags a verb's object may open with: nouns, distinguishing words, descriptive words (「麻辣」), adjectives.
_ZH_OBJECT_OPENS = ("n", "b", "z", "a")
#: Flags that end a verb's object: particles (「的」, 「了」, 「吗」), marks, pronouns, prepositions, conjunctions,
#: numbers and measures, adverbs, Latin.
_ZH_OBJECT_ENDS = ("u", "y", "x", "w", "r", "p", "c", "m", "q", "d", "eng", "e", "o")


def _object_word(tokens: list[tuple[str, str]], k: int, shared: frozenset[str], *, first: bool) -> bool:
    """Whether word ``k`` continues a verb's object: a noun, distinguishing, descriptive word or adjective, or —
    not first — a word the segmenter took for a verb that closes the object (「至尊」, 「爆肚」, 「上网」), not one
    that opens another (「还有」 in 「红烧肉还有绿茶饼」)."""

    def ends(n: int) -> bool:
        if n >= len(tokens):
            return True
        word, flag = tokens[n]
        return not has_cjk(word) or word in shared or word in _ZH_WEAK or flag.startswith(_ZH_OBJECT_ENDS)

    if ends(k):
        return False
    if tokens[k][1].startswith(_ZH_OBJECT_OPENS):
        return True
    return not first and ends(k + 1)


def zh_tokens(masked: str) -> list[tuple[str, str]]:
    """A masked Chinese statement's words with rjieba's flags (a value's mask read as a comma)."""
    return [(w, f) for w, f in pos_cut(_MASK.sub("，", masked)) if w.strip()]


def zh_terms(
    masked: str, shared: frozenset[str] = frozenset(), tokens: list[tuple[str, str]] | None = None
) -> dict[str, frozenset[str]]:
    """The Chinese choices of a masked statement with their frames: each run of nominal words (「黄桥烧饼」) → the
    words around it, "<" the content word just before it ("<吃" in 「想吃黄桥烧饼」), ">" the one just after. A word
    of ``shared`` (said in both statements compared) is a frame, never part of a choice: 「高档型酒店」 and
    「舒适型酒店」 are 「高档型」 and 「舒适型」 before 「酒店」. ``tokens``: the statement's words and flags, when the
    caller has them."""
    tokens = zh_tokens(masked) if tokens is None else tokens

    def nominal(k: int) -> bool:
        word, flag = tokens[k]
        return flag.startswith(_ZH_NOMINAL) and has_cjk(word) and word not in shared

    def frame(k: int, step: int) -> str | None:
        while 0 <= k < len(tokens):
            word, flag = tokens[k]
            if flag.startswith(_ZH_SKIP) or not has_cjk(word) or word in _ZH_WEAK or word in _ZH_COMPLEMENTS:
                if flag == "x" and word not in "（）()":
                    return None  # a clause ends: no frame across it
                k += step
                continue
            if flag.startswith("v") and len(word) == 2 and word[1] in _ZH_COMPLEMENTS:
                return word[0]  # 「吃到」 frames as 「吃」 does
            return word
        return None

    out: dict[str, set[str]] = {}
    # A verb's object is one choice whatever the segmenter cut it into: 「想吃超级至尊」 (「超级」 b, 「至尊」 v),
    # 「能吃到麻辣小龙虾吗」 (「麻辣」 z), 「提供宽带上网的」 (「上网」 v). It runs from a content word right after
    # the verb (and its complement) to the next particle, mark or function word.
    spans: list[tuple[int, int, str]] = []
    for k, (word, flag) in enumerate(tokens):
        if (
            not flag.startswith("v")
            or flag.startswith("vn")
            or word in _ZH_WEAK
            or word in _ZH_COMPLEMENTS
            or not has_cjk(word)
        ):
            continue
        i = k + 1
        while i < len(tokens) and tokens[i][0] in _ZH_COMPLEMENTS:
            i += 1
        j = i
        while _object_word(tokens, j, shared, first=j == i):
            j += 1
        if j - i >= 2 and any(not nominal(n) for n in range(i, j)):
            spans.append((i, j, word[0] if len(word) == 2 and word[1] in _ZH_COMPLEMENTS else word))
    covered = {n for i, j, _ in spans for n in range(i, j)}
    for i, j, verb in spans:
        # the verb frames its object; what follows it belongs to another phrase
        out.setdefault("".join(w for w, _ in tokens[i:j]), set()).add("<" + verb)
    i = 0
    while i < len(tokens):
        if not nominal(i) or i in covered:
            i += 1
            continue
        j = i
        while j < len(tokens) and nominal(j) and j not in covered:
            j += 1
        term = "".join(w for w, _ in tokens[i:j])
        if len(term) >= 2:
            around = out.setdefault(term, set())
            before, after = frame(i - 1, -1), frame(j, 1)
            if before:
                around.add("<" + before)
            if after:
                around.add(">" + after)
        i = j
    return {t: frozenset(a) for t, a in out.items()}


#: Chinese interrogative pronouns, a closed class: a clause holding one asks for a value (「这家酒店的地址是在哪？」,
#: 「人均消费是多少？」, 「电话是啥？」) and the words it names are what is asked about, not a choice.
_ASKS_ZH = re.compile(r"哪|什么|啥|多少|几[点时个天号位家]|怎么|怎样|如何|谁|何时|为何")


def asks_a_value_zh(text: str) -> bool:
    """Whether a Chinese text asks for a value: it holds an interrogative pronoun (``_ASKS_ZH``: 「评分是多少」,
    「地址在哪」), not only a yes-no particle (「退款到账了吗」)."""
    return bool(_ASKS_ZH.search(text))


def _asked_only(tokens: list[tuple[str, str]], shared: frozenset[str]) -> frozenset[str]:
    """The choices of a statement said only in clauses that ask (an interrogative pronoun): 「该酒店的价格是多少钱」
    names 价格 to ask for it. A choice also said in a clause that does not ask stays one."""
    asking: list[tuple[str, str]] = []
    other: list[tuple[str, str]] = []
    clause: list[tuple[str, str]] = []
    for token in [*tokens, ("。", "x")]:
        if token[1] == "x" and token[0] not in "（）()":
            (asking if _ASKS_ZH.search("".join(w for w, _ in clause)) else other).extend([*clause, ("，", "x")])
            clause = []
        else:
            clause.append(token)
    if not asking:
        return frozenset()
    kept = zh_terms("", shared, other) if other else {}
    return frozenset(t for t in zh_terms("", shared, asking) if t not in kept)


def zh_replaced(old_masked: str, new_masked: str) -> list[tuple[str, str]]:
    """Chinese choices of the older statement that one of the newer takes the place of: a phrase that went and
    one that came in the same frame, each the other's only best by frames shared (「想吃黄桥烧饼」, later
    「想吃雪碧」: "<吃"; 「高档型酒店」, later 「舒适型酒店」: ">酒店"). Word vectors are not used: the Chinese
    model's place 「额度」 nearest 「账单」."""
    old_tokens, new_tokens = zh_tokens(old_masked), zh_tokens(new_masked)
    shared = frozenset(w for w, _ in old_tokens) & frozenset(w for w, _ in new_tokens)
    old, new = zh_terms(old_masked, shared, old_tokens), zh_terms(new_masked, shared, new_tokens)
    old_asked, new_asked = _asked_only(old_tokens, shared), _asked_only(new_tokens, shared)
    gone = {t: f for t, f in old.items() if t not in new and t not in old_asked}
    came = {t: f for t, f in new.items() if t not in old and t not in new_asked}
    # each pair by the frames it shares; a pair counts when it is the best of both its phrases, alone
    shares = {(u, w): len(fu & fw) for u, fu in gone.items() for w, fw in came.items() if fu & fw}
    out = []
    for (u, w), n in sorted(shares.items()):
        rivals = [m for (a, b), m in shares.items() if (a == u) != (b == w)]
        if all(m < n for m in rivals):
            out.append((u, w))
    # Values of one attribute in the vocabulary (a hotel's facilities, a dish) replace each other wherever each
    # stands: 「有公共区域提供wifi」, later 「能够提供宽带上网」.
    old_values, new_values = zh_values_in(old_masked), zh_values_in(new_masked)
    paired = {u for u, _ in out} | {w for _, w in out}
    for attribute, said in old_values.items():
        gone = sorted(
            v for v in said - new_values.get(attribute, frozenset()) if v not in new_masked and v not in paired
        )
        came = sorted(
            v for v in new_values.get(attribute, frozenset()) - said if v not in old_masked and v not in paired
        )
        out.extend(zip(gone, came, strict=False))
    return out


def word_vectors(words: Iterable[str], model: str) -> dict[str, np.ndarray]:
    """Unit vectors of single words by ``model``, each computed once per process."""
    wanted = list(dict.fromkeys(words))
    out: dict[str, np.ndarray] = {}
    missing = []
    with _lock:
        for word in wanted:
            vector = _vectors.get((model, word))
            if vector is None:
                missing.append(word)
            else:
                _vectors.move_to_end((model, word))
                out[word] = vector
    if missing:
        computed = embeddings.embed(missing, model=model)
        with _lock:
            for word, vector in zip(missing, computed, strict=True):
                _vectors[(model, word)] = vector
                out[word] = vector
            while len(_vectors) > CACHE_SIZE:
                _vectors.popitem(last=False)
    return out


#: Prepositions of direction, a closed class: the word after one is where something goes or comes from.
_DIRECTIONS = {"to": "to", "into": "to", "towards": "to", "toward": "to", "from": "from"}
#: A clause ends at a mark of punctuation or a conjunction that opens another ("not Chinese, but Italian").
_CLAUSE_END = re.compile(r"(?i)[,;:.!?]|\b(?:but|and|or|so|because)\b")


@lru_cache(maxsize=4096)
def _frames(masked: str) -> dict[str, frozenset[str]]:
    """Each content word's frame: the stems of the content words just before and just after it, each on its
    side ("a cheap Panasian *place*", "*serves* Polynesian food", "the expensive *price* range"); and the
    direction it is given, for the first content word after a preposition of direction ("bring me to
    *Cambridge*", "heading to *norwich*": "@to"). Cached: a statement is compared with many, and its caller
    reads the frames, never changes them."""
    stop = stop_words("en")
    out: dict[str, set[str]] = {}
    # A frame stays within its clause: "the hotel and do they have free parking" does not frame "free" by "hotel".
    text = _MASK.sub(" , ", masked)
    for clause in _CLAUSE_END.split(text):
        content = [w.lower() for w in _LATIN_WORD.findall(clause)]
        content = [w for w in content if w not in stop and stem(w) not in stop]
        for i, word in enumerate(content):
            around = out.setdefault(word, set())
            if i > 0:
                around.add("<" + stem(content[i - 1]))
            if i + 1 < len(content):
                around.add(">" + stem(content[i + 1]))
    direction = None
    for word in (w.lower() for w in _LATIN_WORD.findall(text)):
        if word in _DIRECTIONS:
            direction = _DIRECTIONS[word]
        elif word == "the":
            continue
        else:
            if direction and word in out:
                out[word].add("@" + direction)
            direction = None
    return {w: frozenset(a) for w, a in out.items()}


@cache
def _attributes_by_stem() -> dict[str, str]:
    return {stem(w): a for w, a in vocabulary().items()}


def attribute_of(word: str) -> str | None:
    """The attribute a term is a value of in the labelled vocabulary (``memory.topics.values``), by its stem
    ("museums", "moderately"), or ``None``."""
    return vocabulary().get(word) or _attributes_by_stem().get(stem(word))


def attributes_stated(text: str, among: frozenset[str]) -> frozenset[str]:
    """Which of the attributes ``among`` a text gives a value of: an English word of a value in any of its forms
    (``attribute_of``: "south", "gastropub", "moderately"), a Chinese value of the catalogue (``zh_values_in``);
    each language read only where an attribute of it is among them."""
    found: set[str] = set()
    if any(a.isascii() for a in among):
        found |= {a for w in _LATIN_WORD.findall(text.lower()) if (a := attribute_of(w)) is not None}
    if any(not a.isascii() for a in among) and has_cjk(text):
        found |= set(zh_values_in(text))
    return frozenset(found & among)


def same_attribute(word: str, other: str) -> bool:
    """Whether two terms are values of one attribute of the vocabulary: English words by ``attribute_of``,
    Chinese values by ``memory.topics.values.zh_values_in`` (「公共区域提供wifi」, 「宽带上网」)."""
    if has_cjk(word) or has_cjk(other):
        kinds, other_kinds = zh_values_in(word), zh_values_in(other)
        return any(word in kinds.get(a, ()) and other in other_kinds.get(a, ()) for a in kinds)
    attribute = attribute_of(word)
    return attribute is not None and attribute == attribute_of(other)


@cache
def _sense_stems() -> dict[str, frozenset[str]]:
    return {a: frozenset(stem(w) for w in words) for a, words in senses().items()}


def _sensed(old_masked: str, new_masked: str) -> frozenset[str]:
    """The attributes whose values two statements may mean in the attribute's sense: one of them says a sense word
    of it (``memory.topics.values.senses``: "food", "serves" for a cuisine), in any of its forms. "I'm learning
    German", later "resources for learning Spanish" says none of a cuisine's: two languages, not two cuisines."""
    return _senses_said(old_masked) | _senses_said(new_masked)


@lru_cache(maxsize=4096)
def _senses_said(masked: str) -> frozenset[str]:
    """The attributes a statement says a sense word of. Cached: a statement is compared with many."""
    said = {stem(w) for w in _LATIN_WORD.findall(masked.lower())}
    return frozenset(a for a, stems in _sense_stems().items() if stems & said)


def _same_slot(
    word: str,
    frames: dict[str, frozenset[str]],
    other: str,
    other_frames: dict[str, frozenset[str]],
    sensed: frozenset[str],
) -> bool:
    """Whether two terms are values of one attribute ("college", "museum") meant in its sense (``_sensed``) and
    not given different directions ("from *Cambridge*", "to *London*": two places of one route)."""
    return (
        same_attribute(word, other) and attribute_of(word) in sensed and not _crossed(word, frames, other, other_frames)
    )


def _crossed(word: str, frames: dict[str, frozenset[str]], other: str, other_frames: dict[str, frozenset[str]]) -> bool:
    """Whether two words are given different directions ("from Cambridge", "to London")."""
    roles, other_roles = _roles(frames, word), _roles(other_frames, other)
    return bool(roles and other_roles and not roles & other_roles)


#: A word whose polarity in the sentiment lexicon is at least this strong judges what was found ("nice", "great",
#: "perfect", "lovely"): it is no choice, unless the attribute vocabulary holds it ("expensive").
EVALUATION = 0.5


def _evaluations(words: frozenset[str]) -> frozenset[str]:
    """The words of ``words`` that judge rather than choose (``EVALUATION``; the Pattern sentiment lexicon that
    ships in TextBlob's wheel)."""
    from textblob.en import sentiment

    out = set()
    for word in words:
        entry = sentiment.get(word)
        polarity = entry.get(None) if entry else None
        if polarity and abs(polarity[0]) >= EVALUATION and attribute_of(word) is None:
            out.add(word)
    return frozenset(out)


def _name_words(masked: str) -> frozenset[str]:
    """The words of a statement's names: runs of two or more proper nouns ("Cambridge Artworks", "Curry Prince",
    "London Kings Cross"), lower-cased."""
    out: set[str] = set()
    run: list[str] = []
    for word, tag in (*_tagged(masked), ("", "")):
        if tag.startswith("NNP"):
            run.append(_POSSESSIVE.sub("", word.lower()))
            continue
        if len(run) >= 2:
            out.update(run)
        run = []
    return frozenset(out)


def _roles(frames: dict[str, frozenset[str]], word: str) -> frozenset[str]:
    """The directions a word is given in a statement ("@to", "@from"; ``_frames``)."""
    return frozenset(f for f in frames.get(word, frozenset()) if f.startswith("@"))


#: Words that say there is none: the agent's "Sorry, there are no Afghan restaurants in the centre".
_NONE = re.compile(r"(?i)\b(?:no|not|none|nothing|cannot|unable|unfortunately|sorry)\b|n't\b")


def refused(masked: str) -> frozenset[str]:
    """The terms a reply says there is none of: those after a word of negation in its sentence ("Sorry, there
    are no Afghan restaurants in the centre." → afghan, restaurants, centre; not the words of the sentences
    around it, nor "hours" in "Their hours are not listed"). Empty when it has no word of negation."""
    out: set[str] = set()
    for sentence in _SENTENCE.findall(masked):
        negation = _NONE.search(sentence)
        if negation is not None:
            out |= terms_of(sentence[negation.end() :])
    return frozenset(out)


#: A negation that disowns the words just after it in the customer's own statement: "west, *not south*", "not in
#: the south", "I don't want Chinese", "instead of Indian". A closed class of the language's negation.
_DISOWNING = re.compile(r"(?i)\b(?:not|no longer|instead of|rather than)\b|n't\b")
#: How many words after the negation it reaches.
DISOWN_REACH = 4


@lru_cache(maxsize=4096)
def disowned(masked: str) -> frozenset[str]:
    """The terms a statement says are not its choice: those at most ``DISOWN_REACH`` words after a negation in
    the same clause ("I meant to say west, not south." → south; "not the expensive one" → expensive), and not
    also said outside such a span ("not Chinese food, Italian food" disowns "chinese" only)."""
    negated: set[str] = set()
    kept = masked
    for negation in _DISOWNING.finditer(masked):
        rest = masked[negation.end() :]
        end = _CLAUSE_END.search(rest)
        span = " ".join((rest[: end.start()] if end else rest).split()[:DISOWN_REACH])
        negated |= _latin_terms(span)
        kept = kept.replace(span, " ", 1)
    return frozenset(negated - _latin_terms(kept)) if negated else frozenset()


def replaced(
    old_masked: str,
    new_masked: str,
    model: str,
    none_of: frozenset[str] = frozenset(),
    meant: frozenset[str] = frozenset(),
) -> list[tuple[str, str]]:
    """The terms of the older statement that a term of the newer takes the place of, as ``(old term, new
    term)``: terms only one of them holds, each the other's best match and alike enough — by word vectors
    (``SAME_KIND``), or, in the same frame (a word around them in common: "Indian *food*" after "Polynesian
    *food*"), by less (``FRAMED_KIND``): single-word vectors place "korean" no nearer "afghan" than
    "restaurant", the frame says they fill one slot. A term the agent said there was none of in between
    (``none_of``, read by ``refused``: "no Afghan restaurants") stands in a frame too: the customer's next
    choice is its replacement. Nothing when either says more than ``MAX_TERMS`` terms; a newer statement that
    brings more than ``MAX_NEW`` is no revision of one choice, unless it answers the agent's refusal: then only
    a term refused can be replaced. A term the newer statement disowns ("west, *not south*": ``disowned``) is
    not said by it, and is framed as a refused one is. Two values of one attribute of the vocabulary fill one slot
    only where they are meant in its sense: a sense word of it is said (``_sensed``), or it is among ``meant``
    (the attributes of the statements' own matters, which the caller knows)."""
    chinese = zh_replaced(old_masked, new_masked) if has_cjk(old_masked) and has_cjk(new_masked) else []
    return chinese + _latin_replaced(old_masked, new_masked, model, none_of, meant)


def _latin_replaced(
    old_masked: str, new_masked: str, model: str, none_of: frozenset[str], meant: frozenset[str]
) -> list[tuple[str, str]]:
    old, new = _latin_terms(old_masked), _latin_terms(new_masked)
    if not old or not new:
        return []
    # What the newer statement disowns ("west, not south") it does not say, and it frames what replaces it.
    disowning = disowned(new_masked)
    old = old - _not_choices(old_masked) - disowned(old_masked) - _evaluations(old)
    new = new - _not_choices(new_masked) - disowning - _evaluations(new)
    none_of = none_of | disowning
    stems = {w: stem(w) for w in old | new}
    kept_old, kept_new = {stems[w] for w in old}, {stems[w] for w in new}
    # A word said in both, in any of its forms ("restaurants", "restaurant"), was not replaced.
    gone = sorted(w for w in old - new if stems[w] not in kept_new)
    # The name of an attribute ("food", "area": ``memory.topics.values.attribute_names``) says which slot a choice
    # fills, never the choice: "What are the options in the area?" puts no area in place of the gastropub.
    came = sorted(w for w in new - old if stems[w] not in kept_old and w not in attribute_names())
    old_frames, new_frames = _frames(old_masked), _frames(new_masked)
    sensed = _sensed(old_masked, new_masked) | meant
    # A place said in both whose direction another word of the newer now has ("a train *from* Cambridge", later "a
    # train to Cambridge, coming *from* London"): where it stood is left, and that word replaces it.
    taken = {w: _roles(new_frames, w) for w in new}
    gone += sorted(
        w
        for w in old & new
        if (roles := _roles(old_frames, w) - taken[w]) and any(roles & r for u, r in taken.items() if u != w)
    )
    if len(came) > MAX_NEW:
        # A long answer to the agent's "there is none of X" still revises X, and a long statement that gives an
        # attribute another of its values ("sorry for changing my mind again but cheap is fine …") revises that
        # value: only those can be what it replaces.
        gone = [w for w in gone if w in none_of or any(_same_slot(w, old_frames, u, new_frames, sensed) for u in came)]
    if not gone or not came or len(old) > MAX_TERMS or len(new) > MAX_TERMS:
        return []
    vectors = word_vectors([*gone, *came], model)
    alike = np.stack([vectors[w] for w in gone]) @ np.stack([vectors[w] for w in came]).T
    framed = np.array(
        [[bool(old_frames.get(u, frozenset()) & new_frames.get(w, frozenset())) for w in came] for u in gone]
    )
    # One word gone and one come, of one word class (two nouns, two adjectives): the revision changed one slot,
    # and the frame is the whole statement. A noun for an adjective is another slot ("in the east", later
    # "cheap"), or no choice at all ("a train", later "that sounds great").
    if len(gone) == 1 and len(came) == 1:
        framed |= bool(
            _word_classes(old_masked).get(gone[0], frozenset()) & _word_classes(new_masked).get(came[0], frozenset())
        )
    framed |= np.array([[u in none_of] * len(came) for u in gone], dtype=bool)
    # Two values of one attribute in the labelled vocabulary fill one slot ("a college", later "how about a
    # museum?"), where word vectors place them no nearer than the matter's own words.
    slot = np.array([[_same_slot(u, old_frames, w, new_frames, sensed) for w in came] for u in gone], dtype=bool)
    # A word of a name ("I suppose *Cambridge Artworks* sounds cool", "a table at *Curry Prince*") picks a venue;
    # it replaces a value of an attribute only when it is a value of that attribute too ("London Kings Cross").
    named = _name_words(new_masked)
    # Values of two attributes ("in the centre", then "italian") are two choices, never one replacing the other.
    crossed_name = np.array(
        [[(w in named or attribute_of(w) is not None) and attribute_of(u) is not None and not slot[i, j]
          for j, w in enumerate(came)]
         for i, u in enumerate(gone)],
        dtype=bool,
    )  # fmt: skip
    # Two places given different directions ("from Cambridge", later "going to London") are two ends of one route,
    # whatever else frames them.
    crossed = np.array([[_crossed(u, old_frames, w, new_frames) for w in came] for u in gone], dtype=bool)
    fits = (
        (alike < SYNONYM)
        & ~crossed
        & ~crossed_name
        & ((alike >= SAME_KIND) | ((framed | slot) & (alike >= FRAMED_KIND)))
    )
    # a pair of one attribute before any other framed pair (alike + framed < 2), a framed pair before an unframed one
    score = np.where(fits, alike + framed + 2 * slot, -1.0)
    out = []
    for i, j in zip(*np.nonzero(fits), strict=True):
        if score[i].argmax() == j and score[:, j].argmax() == i:
            out.append((gone[i], came[j]))
    return out


__all__ = [
    "FRAMED_KIND", "MAX_NEW", "MAX_TERMS", "SAME_KIND",
    "attribute_of", "disowned", "refused", "replaced", "same_attribute", "states_choice", "stem", "terms_of",
    "word_vectors", "zh_terms", "zh_tokens",
]  # fmt: skip
