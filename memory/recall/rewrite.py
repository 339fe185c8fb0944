"""Query rewriting by intent (S7 stage 2): a regex table first, then the intent of the query's embedding.

A vague reference such as 「那个产品」 or "the same way as last time" is a poor vector query; rewritten to what it
stands for (「用户近期咨询过的产品名称或型号」) it finds the right memory. Each rule of :data:`RULES` says which
words it recognises, what they are rewritten to in each language, the intent, and the memory keys the rule stage
(S7 stage 1) looks up directly. :func:`rewrite_query` reports which rules fired in ``reason``: the table is the
explainable fast path, and needs no model.

A query the table leaves alone (「上次推荐给我的东西」) is classified by the embedding recall computes for it anyway
(:func:`rewrite_and_embed`): the nearest of the labelled :data:`INTENT_EXAMPLES` gives the intent when it is near
enough (:func:`intent_models`: per model, thresholds chosen on ``bench/data/vague_queries.json``) and is not an
example of a plain query; the query is then kept and followed by that intent's table text.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import numpy as np

from memory.text.language import detect_language

__all__ = [
    "EMBEDDING_RULES",
    "INTENT_EXAMPLES",
    "NO_INTENT",
    "RULES",
    "IntentMatch",
    "Rewrite",
    "RewriteRule",
    "classify_intent",
    "intent_models",
    "rewrite_and_embed",
    "rewrite_by_embedding",
    "rewrite_query",
    "rule_keys",
]


@dataclass(frozen=True)
class Rewrite:
    """The rewritten query. ``intent`` is ``None`` and ``text`` the query itself when no rule applies."""

    text: str
    intent: str | None
    keys: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class RewriteRule:
    """One row of the table: ``pattern`` (both languages) → ``zh``/``en`` replacement, ``intent``, ``keys``.

    ``keys`` are memory keys; for results and batches, which are keyed by their type, the type name
    (``tool_result``, ``batch_operation``). ``pattern`` is ``None`` for an intent that only the embedding
    classifier recognises (no wording of it is narrow enough for a regex).
    """

    intent: str
    pattern: re.Pattern[str] | None
    zh: str
    en: str
    keys: tuple[str, ...]


def _rule(intent: str, pattern: str | None, zh: str, en: str, keys: tuple[str, ...]) -> RewriteRule:
    return RewriteRule(intent, re.compile(pattern, re.IGNORECASE) if pattern else None, zh, en, keys)


_B = r"(?<![A-Za-z])"  # ASCII word boundaries: \b does not work next to Chinese characters
_E = r"(?![A-Za-z])"

# Order matters: the first rule that matches a span owns it, so narrower rules come first
# (「快递单号」 is a tracking number, not an order; 「订单进度」 is an order, not a batch).
RULES: tuple[RewriteRule, ...] = (
    _rule(
        "product_reference",
        r"(?:那|这)(?:个|款|台|件)(?:产品|商品|型号|东西|机器|手机|电脑)|那款|上次(?:说|提到|问|看)的(?:那个|那款)?(?:产品|商品|型号|东西)?|"
        r"之前(?:看|问|说)的那(?:个|款)|" + _B + r"(?:that|this|the same) (?:product|item|model|device|thing I "
        r"(?:mentioned|asked about))" + _E + "|" + _B + r"the (?:product|item|model) I (?:mentioned|asked about)" + _E,
        "用户近期咨询过的产品名称或型号",
        "the product name or model the user recently asked about",
        ("product",),
    ),
    _rule(
        "last_operation",
        r"(?:按|照|用|跟|和)?上次的?(?:方式|办法|做法|操作|流程)|跟上次一样|和上次一样|照旧|老样子|"
        + _B
        + r"(?:(?:the )?same (?:way|thing) as (?:last time|before)|like last time|as (?:I did )?last time|the usual)"
        + _E,
        "用户上一次成功执行的操作及其参数",
        "the user's last successful operation and its parameters",
        ("tool_result",),
    ),
    _rule(
        "tracking",
        r"(?:我的)?(?:快递|物流|运)单号|(?:我的)?(?:快递|包裹|物流)(?:信息|状态)?到哪(?:里|儿)?了?|物流(?:信息|状态)|"
        + _B
        + r"(?:tracking(?: number| no\.?| code)?|where(?:'s| is) my (?:package|parcel|delivery))"
        + _E,
        "用户订单的快递单号及物流状态",
        "the tracking number and delivery status of the user's order",
        ("tracking_number",),
    ),
    _rule(
        "order",
        r"(?:查(?:一下|下)?(?:我的|那个|这个)?|我的|那个|这个)订单(?:状态|进度|号|到哪(?:里|儿)?了?|怎么样了?)?|"
        r"订单(?:状态|进度|号|到哪(?:里|儿)?了?)|"
        + _B
        + r"(?:my (?:last |recent )?order|order status|where(?:'s| is) my order|check (?:on )?(?:my |the )?order)"
        + _E,
        "用户的订单号及订单状态",
        "the user's order number and order status",
        ("order_id",),
    ),
    _rule(
        "batch_progress",
        r"进度(?:如何|怎么样|怎样|到哪了?)?|完成(?:多少|几个)了|还剩(?:多少|几个)|到哪一步了|"
        + _B
        # English "progress" only with a batch word or alone: "Gina's progress with her store" is not a batch
        # (LoCoMo questions misfired on the bare word), and "how's it going" is a greeting.
        + r"(?:(?:batch|import|job|task|upload)(?:'s)? progress|progress (?:of|on|with) (?:the |my |this )?"
        + r"(?:batch|import|job|task|upload)|^\s*(?:(?:what(?:'s| is) the|any) )?progress\s*\??\s*$|how far along|"
        + r"how many (?:are )?(?:left|done|remaining))"
        + _E,
        "当前批量操作的进度（已完成数/总数）",
        "progress of the current batch operation (completed/total)",
        ("batch_operation",),
    ),
    _rule(
        "phone",
        r"(?:我的|我)?(?:手机号码?|电话号码?|联系方式)|那个号码?|"
        + _B
        + r"(?:my (?:phone|mobile|cell)(?: number)?|my number|contact number)"
        + _E,
        "用户的手机号码",
        "the user's phone number",
        ("phone",),
    ),
    _rule(
        "email",
        r"(?:我的)?(?:邮箱|邮件地址|电子邮件)|" + _B + r"(?:my )?e-?mail(?: address)?" + _E,
        "用户的电子邮箱",
        "the user's e-mail address",
        ("email",),
    ),
    _rule(
        "address",
        r"(?:我的|收货|收件|送货)?地址|送到哪|寄到哪|" + _B + r"(?:my|shipping|delivery|home) address" + _E,
        "用户的收货地址",
        "the user's delivery address",
        ("address",),
    ),
    _rule(
        "name",
        r"我叫什么|我的名字|我是谁|我姓什么|" + _B + r"(?:my name|who am I)" + _E,
        "用户的姓名",
        "the user's name",
        ("name",),
    ),
    _rule(
        "coupon",
        r"优惠券|优惠码|折扣码|那张券|" + _B + r"(?:coupon|promo code|discount code|voucher)s?" + _E,
        "客服发放给用户的优惠券及有效期",
        "the coupon issued to the user and its expiry",
        ("coupon",),
    ),
    _rule(
        "points",
        r"(?:有|剩|还有|还剩)?多少(?:个)?积分|积分(?:余额|还有多少|有多少|还剩多少|还剩|够不够|够)|"
        + _B
        + r"(?:how many (?:reward |loyalty |member(?:ship)? )?points|(?:my )?points balance)"
        + _E,
        "用户当前的积分余额",
        "the user's current points balance",
        ("points_balance",),
    ),
    _rule(
        "membership",
        r"(?:我是|现在是|我的)?什么(?:等级的?)?会员|会员(?:等级|级别)|"
        + _B
        + r"(?:my (?:membership|member(?:ship)? (?:tier|level|status))|what (?:tier|membership) (?:am I|do I have))"
        + _E,
        "用户的会员等级及有效期",
        "the user's membership tier and its validity",
        ("membership",),
    ),
    _rule(
        "callback",
        r"(?:多久|什么时候|几点|哪天)(?:会)?(?:给我)?回(?:电话?|访)|回电(?:时间)?是?(?:什么时候|几点)|"
        + _B
        + r"(?:when (?:will|would) (?:you|someone|they|he|she) call (?:me )?back|(?:the )?call ?back (?:time|promised))"
        + _E,
        "客服承诺的回电时间",
        "the callback the agent promised",
        ("callback",),
    ),
    _rule(
        "topic_reference",
        r"刚才(?:说|聊)的(?:那件事|事情|问题)|之前的问题|那件事|"
        + _B
        + r"(?:what we were (?:talking|discussing) about|my (?:earlier|previous) question)"
        + _E,
        "本次会话当前咨询的主题",
        "the topic of the current conversation",
        ("current_topic",),
    ),
)

#: Intents only the embedding classifier recognises (``pattern`` and ``keys`` empty). 「上次推荐给我的东西」: a
#: recommendation is said in too many ways (推荐, 建议, 推的, "suggested") that also occur in plain requests
#: (「推荐一款耳机」 asks for a new one), and it has no memory key (it lives in the agent's conversation units).
EMBEDDING_RULES: tuple[RewriteRule, ...] = (
    _rule(
        "recommendation",
        None,
        "客服之前推荐给用户的产品或方案",
        "the product or plan the agent recommended to the user",
        (),
    ),
)

NO_INTENT = "none"

#: Example phrasings per intent (zh and en) for the embedding classifier, and of queries that name no intent
#: (``NO_INTENT``: plain questions and requests): a query nearest to one of those is left alone. Written to
#: cover wordings the regexes miss; the labelled set that measures them (``bench/data/vague_queries.json``) is
#: another set of phrasings, so the figures are not read off the examples themselves.
INTENT_EXAMPLES: dict[str, tuple[str, ...]] = {
    "product_reference": (
        "上次看的那个产品", "之前问过的那款", "我咨询过的那个型号", "上回提到的那个商品", "之前聊的那台机器",
        "the product I asked about before", "that item from last time", "the model we talked about",
        "the thing I was looking at earlier",
    ),
    "recommendation": (
        "你们上次推荐的产品", "客服推荐给我的那款", "之前给我推荐的是什么", "上次建议我买的东西", "你们给我推荐过什么",
        "the product you recommended", "what did you suggest I buy", "the item you recommended to me",
        "your recommendation from before",
    ),
    "last_operation": (
        "按之前那样办", "还是像上次那样处理", "跟以前一样操作", "用上次的设置再来一次",
        "do it like before", "repeat what we did last time", "the way you handled it before",
    ),
    "tracking": (
        "包裹现在在哪", "我的东西发货了吗", "物流走到哪了", "什么时候能送到",
        "where is my parcel now", "has my package shipped", "when will it arrive",
    ),
    "order": (
        "我下的单怎么样了", "我那笔订单", "之前下的单", "我买的那个订单",
        "the order I placed", "what I bought last week", "status of my purchase",
    ),
    "batch_progress": (
        "导入做到哪一步了", "批量任务完成了吗", "处理了多少条了",
        "is the import finished", "how much of the batch is done", "how many items remain",
    ),
    "phone": (
        "我留的电话", "你们记的我的号码", "登记的手机是哪个",
        "the number you have for me", "which phone number is on file",
    ),
    "email": ("我留的邮箱", "登记的电子邮件", "the email on file", "which email did I give you"),
    "address": (
        "东西寄到哪里", "我留的地址", "登记的收件地",
        "where is it being shipped", "the address you have for me", "where will it be delivered",
    ),
    "name": ("你们登记的我的姓名", "怎么称呼我", "what name do you have for me", "my name on the account"),
    "coupon": (
        "那张券", "给我的优惠还能用吗", "之前发的红包",
        "that voucher from before", "the discount code you sent me",
    ),
    "topic_reference": (
        "刚才说的事", "我们刚才在聊什么", "前面那个问题",
        "what we were discussing", "the issue from a minute ago", "back to my previous question",
    ),
    NO_INTENT: (
        "你好", "谢谢", "你们几点上班", "怎么退货", "运费多少钱", "有什么新品", "我想投诉", "帮我推荐一款耳机",
        "hello", "thank you", "what are your hours", "how do I return something", "how much is delivery",
        "I'd like to complain", "can you recommend a laptop",
    ),
}  # fmt: skip


def rewrite_query(query: str, *, language: str | None = None) -> Rewrite:
    """Rewrite the vague references in ``query`` to what they stand for.

    Every rule that matches replaces its own span (spans already owned by an earlier rule are left alone); the
    replacement is in ``language`` (detected from the query when ``None``). ``intent`` is the first matching
    rule's, ``keys`` the union of all matching rules' keys in table order, ``reason`` names each replacement.
    A query that matches no rule comes back unchanged, with ``intent=None``, ``keys=()`` and a reason saying so.
    """
    stripped = query.strip()
    code = (language or "").lower()
    lang = "zh" if code.startswith("zh") else "en" if code.startswith("en") else detect_language(stripped)
    owned: list[tuple[int, int, RewriteRule]] = []
    for rule in RULES:
        if rule.pattern is None:
            continue
        for match in rule.pattern.finditer(stripped):
            start, end = match.span()
            if end > start and not any(start < e and s < end for s, e, _ in owned):
                owned.append((start, end, rule))
    if not owned:
        return Rewrite(stripped, None, (), "no vague reference; query unchanged")

    owned.sort(key=lambda item: item[0])
    parts: list[str] = []
    cursor = 0
    reasons: list[str] = []
    for start, end, rule in owned:
        replacement = rule.zh if lang == "zh" else rule.en
        parts.append(stripped[cursor:start])
        parts.append(replacement)
        cursor = end
        reasons.append(f"「{stripped[start:end]}」→ {rule.intent} ({', '.join(rule.keys)})")
    parts.append(stripped[cursor:])
    text = re.sub(r"\s{2,}", " ", "".join(parts)).strip()

    first = min(owned, key=lambda item: RULES.index(item[2]))[2]
    keys: list[str] = []
    for rule in RULES:
        if any(owner is rule for *_, owner in owned):
            keys.extend(key for key in rule.keys if key not in keys)
    return Rewrite(text, first.intent, tuple(keys), "; ".join(reasons))


def rule_keys(query: str) -> tuple[str, ...]:
    """The exact memory keys the rule stage should look up for ``query`` (「查我的订单」 → ``("order_id",)``)."""
    return rewrite_query(query).keys


# --- Intent by embedding (S7: 「先用一个小模型对 query 做一次“意图增强”」) -----------------------------------------


@dataclass(frozen=True)
class IntentMatch:
    """The labelled example nearest to a query: its ``intent`` (``NO_INTENT`` for an example of a plain query),
    the cosine ``similarity``, the ``example`` itself and the ``model`` both were embedded with."""

    intent: str
    similarity: float
    example: str
    model: str


def intent_models() -> dict[str, tuple[tuple[str, ...], float]]:
    """Per embedding model: the query languages it reads and the similarity an intent example must reach.

    The thresholds were chosen on ``bench/data/vague_queries.json`` by ``bench/quality/intent_rewrite.py``, for each
    model
    on the languages it reads: the value that gets most queries right (the labelled intent, or a plain query left
    unchanged) among those 0.05 or more above every plain query's similarity to an intent example — a false
    rewrite changes what recall searches for, a miss only keeps the query as it was. MiniLM maps most Chinese
    characters to ``[UNK]``, so every Chinese query looks alike to it: it classifies English queries only.
    A model not named here (multilingual-e5) is not calibrated and never rewrites by embedding.
    """
    from memory.embeddings import models as embeddings

    return {embeddings.USE_MODEL: (("zh", "en"), 0.7), embeddings.DEFAULT_MODEL: (("en",), 0.55)}


_BY_INTENT = {rule.intent: rule for rule in (*RULES, *EMBEDDING_RULES)}
_examples_lock = threading.Lock()
_examples: dict[str, tuple[np.ndarray, tuple[str, ...], tuple[str, ...]]] = {}


def _example_vectors(model: str) -> tuple[np.ndarray, tuple[str, ...], tuple[str, ...]]:
    """The examples a model reads, embedded once per process (a few hundred ms on first use): the matrix, the
    intent of each row and its text."""
    cached = _examples.get(model)
    if cached is not None:
        return cached
    with _examples_lock:
        if model not in _examples:
            from memory.embeddings import models as embeddings

            languages = intent_models()[model][0]
            rows = [
                (intent, text)
                for intent, texts in INTENT_EXAMPLES.items()
                for text in texts
                if detect_language(text) in languages
            ]
            matrix = embeddings.embed([text for _, text in rows], model=model, kind="query")
            _examples[model] = (matrix, tuple(i for i, _ in rows), tuple(t for _, t in rows))
        return _examples[model]


def _language(text: str, language: str | None) -> str:
    code = (language or "").lower()
    return "zh" if code.startswith("zh") else "en" if code.startswith("en") else detect_language(text)


#: Someone other than the user: every intent's rewrite says "the user's" (「我妈的电话」 is not 「用户的手机号码」),
#: so a query about another person is never rewritten by embedding.
_SOMEONE_ELSE = re.compile(
    r"我(?:的)?(?:妈妈?|爸爸?|母亲|父亲|老公|老婆|丈夫|妻子|爱人|儿子|女儿|孩子|弟弟?|哥哥?|姐姐?|妹妹?|朋友|同事|家人|"
    r"爷爷|奶奶|外公|外婆)|"
    + _B
    + r"my (?:mom|mum|mother|dad|father|wife|husband|partner|son|daughter|kids?|child(?:ren)?|brother|sister|"
    r"friend|colleague|parents?)" + _E,
    re.IGNORECASE,
)


def classify_intent(
    query: str, *, model: str, vector: np.ndarray | None = None, language: str | None = None
) -> IntentMatch | None:
    """The labelled example nearest to ``query`` under ``model``, or ``None`` when ``model`` is not calibrated
    (``intent_models``), does not read the query's language, or the query is about someone other than the user
    (``_SOMEONE_ELSE``). ``vector``: the query already embedded with ``model`` (``kind="query"``, unit length),
    so that recall's own query embedding is reused."""
    known = intent_models().get(model)
    if known is None or _language(query, language) not in known[0] or _SOMEONE_ELSE.search(query):
        return None
    matrix, intents, texts = _example_vectors(model)
    if vector is None:
        from memory.embeddings import models as embeddings

        vector = embeddings.embed_one(query.strip(), model=model, kind="query")
    similarities = matrix @ vector
    best = int(np.argmax(similarities))
    return IntentMatch(intents[best], float(similarities[best]), texts[best], model)


def rewrite_by_embedding(
    query: str, *, model: str, vector: np.ndarray | None = None, language: str | None = None
) -> Rewrite:
    """:func:`rewrite_query`, and when no rule of the table applies, the intent of the nearest labelled example
    if it reaches the model's threshold and is not an example of a plain query.

    The embedding does not say which words are vague, so the query is kept and the intent's rewrite follows it
    in brackets (「上次推荐给我的东西（客服之前推荐给用户的产品或方案）」): its specific words still reach the vector
    leg. ``keys`` stays empty: recall's rule stage runs while the query is being embedded, before this intent
    exists. ``reason`` names the example, the similarity and the threshold.
    """
    rewrite = rewrite_query(query, language=language)
    if rewrite.intent is not None:
        return rewrite
    match = classify_intent(query, model=model, vector=vector, language=language)
    if match is None:
        return rewrite
    threshold = intent_models()[model][1]
    if match.intent == NO_INTENT or match.similarity < threshold:
        return rewrite
    rule = _BY_INTENT[match.intent]
    stripped = query.strip()
    text = f"{stripped}（{rule.zh}）" if _language(stripped, language) == "zh" else f"{stripped} ({rule.en})"
    nearest = f"nearest example 「{match.example}」 {match.similarity:.2f} ≥ {threshold}"
    reason = f"embedding ({model}): {nearest} → {rule.intent}"
    return Rewrite(text, rule.intent, (), reason)


def rewrite_and_embed(query: str, models: list[str], *, intents: bool = True) -> tuple[Rewrite, dict[str, np.ndarray]]:
    """The rewrite recall searches with, and the rewritten query embedded with each of ``models``.

    The table goes first and, when it fires, its rewrite is embedded as before. Otherwise the query is embedded
    (what recall needed anyway) and, with ``intents``, classified with the first of ``models`` that is calibrated
    for its language (``rewrite_by_embedding``); only when that rewrites is the new text embedded again. The
    added cost for a query no intent claims is one small matrix product.
    """
    from memory.embeddings import models as embeddings

    stripped = query.strip()
    rewrite = rewrite_query(stripped)
    if rewrite.intent is not None or not intents:
        return rewrite, {m: embeddings.embed_one(rewrite.text, model=m, kind="query") for m in models}
    vectors = {m: embeddings.embed_one(stripped, model=m, kind="query") for m in models}
    language = detect_language(stripped)
    model = next((m for m in models if language in intent_models().get(m, ((), 0.0))[0]), None)
    if model is None:
        return rewrite, vectors
    rewrite = rewrite_by_embedding(stripped, model=model, vector=vectors[model], language=language)
    if rewrite.intent is None:
        return rewrite, vectors
    return rewrite, {m: embeddings.embed_one(rewrite.text, model=m, kind="query") for m in models}
