"""Query rewriting by intent (S7 stage 2): table-driven, explainable, no model.

A vague reference such as 「那个产品」 or "the same way as last time" is a poor vector query; rewritten to what it
stands for (「用户近期咨询过的产品名称或型号」) it finds the right memory. Each rule of :data:`RULES` says which
words it recognises, what they are rewritten to in each language, the intent, and the memory keys the rule stage
(S7 stage 1) looks up directly. :func:`rewrite_query` reports which rules fired in ``reason``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory.compression import detect_language

__all__ = ["RULES", "Rewrite", "RewriteRule", "rewrite_query", "rule_keys"]


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
    (``tool_result``, ``batch_operation``).
    """

    intent: str
    pattern: re.Pattern[str]
    zh: str
    en: str
    keys: tuple[str, ...]


def _rule(intent: str, pattern: str, zh: str, en: str, keys: tuple[str, ...]) -> RewriteRule:
    return RewriteRule(intent, re.compile(pattern, re.IGNORECASE), zh, en, keys)


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
