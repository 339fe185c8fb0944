"""The human sentence of a rule-extracted fact: at most 150 characters, in the message's language (S2).

One label per key in Chinese and English (「用户手机号：13912345678」, "User's phone: 13912345678"); a change says
so (「已更新为」, "updated to"); dated facts show the local day, the UTC time when one was stated and the words the
user used; a coupon shows its validity; a contact's fact names the contact (「联系人电话：我老婆 138…」). Pure.
"""

from __future__ import annotations

from memory.extraction.state import Found
from memory.text.compression import Language, compress

__all__ = ["CONTENT_LIMIT", "content"]

CONTENT_LIMIT = 150

_LABELS: dict[str, tuple[str, str]] = {
    "name": ("用户姓名", "User's name"),
    "surname": ("用户姓氏", "User's surname"),
    "phone": ("用户手机号", "User's phone"),
    "landline": ("用户电话", "User's phone"),
    "email": ("用户邮箱", "User's e-mail"),
    "address": ("用户地址", "User's address"),
    "order_id": ("订单号", "Order number"),
    "tracking_number": ("快递单号", "Tracking number"),
    "coupon": ("优惠券", "Coupon"),
    "amount": ("涉及金额", "Amount mentioned"),
    "date": ("提到日期", "Date mentioned"),
    "product": ("咨询的产品", "Product asked about"),
    "current_topic": ("当前咨询", "Current topic"),
    "place": ("提到地点", "Place mentioned"),
    "organization": ("相关机构", "Organization"),
    "contact_phone": ("联系人电话", "Contact's phone"),
    "contact_address": ("联系人地址", "Contact's address"),
    "work_address": ("用户单位地址", "User's work address"),
    "account_id": ("账号", "Account ID"),
    "membership": ("会员等级", "Membership"),
    "points_balance": ("积分余额", "Points balance"),
    "batch_progress": ("批量任务进度", "Batch progress"),
    "birthday": ("用户生日", "User's birthday"),
    "ship_date": ("发货时间", "Ship date"),
    "delivery_date": ("送达时间", "Delivery date"),
    "pickup_time": ("取件时间", "Pickup time"),
    "appointment": ("预约时间", "Appointment"),
    "renewal_date": ("续费日期", "Renewal date"),
    "expiry_date": ("到期日期", "Expiry date"),
    "callback": ("约定回电", "Callback promised"),
}
_DATED = frozenset({"date", "ship_date", "delivery_date", "pickup_time", "appointment", "renewal_date", "expiry_date"})


def content(item: Found, language: Language, change: bool) -> str:
    """The fact's human sentence, at most :data:`CONTENT_LIMIT` characters, in ``language``."""
    zh, en = _LABELS[item.label or item.key]
    shown = item.display or item.value
    if item.key in _DATED:
        shown = item.data["local_date"]
        if item.data["granularity"] != "day":
            shown = f"{shown} {item.data['date'][11:16]} UTC"
        text = item.data["text"]
        if text != item.data["local_date"]:
            shown += f"（{text}）" if language == "zh" else f" ({text})"
    elif item.key == "birthday":
        shown = item.value.removeprefix("--")
    elif item.key in ("contact_phone", "contact_address") and item.data.get("contact"):
        shown = f"{item.data['contact']} {shown}"
    elif item.key == "membership":
        shown = item.data["text"]
    elif item.key == "callback":
        due = item.data["due"]
        if due is None:
            shown = "待回电" if language == "zh" else "pending"
        else:
            spoken = item.data["text"]
            shown = f"{due[:10]} {due[11:16]} UTC" + (f"（{spoken}）" if language == "zh" else f" ({spoken})")
    if item.key == "coupon":
        until = item.data.get("valid_until")
        if language == "zh":
            verb = "已发放优惠券 " if item.data.get("issued_by_agent") else "优惠券："
            sentence = f"{verb}{item.value}" + (f"，有效期至 {until}" if until else "")
        else:
            verb = "Coupon issued: " if item.data.get("issued_by_agent") else "Coupon: "
            sentence = f"{verb}{item.value}" + (f", valid until {until}" if until else "")
        return compress(sentence, limit=CONTENT_LIMIT, language=language)
    if item.key == "name" and item.label == "surname" and language == "zh":
        sentence = f"用户姓{shown}"
    elif change:
        sentence = f"{zh}已更新为：{shown}" if language == "zh" else f"{en} updated to: {shown}"
    else:
        sentence = f"{zh}：{shown}" if language == "zh" else f"{en}: {shown}"
    return compress(sentence, limit=CONTENT_LIMIT, language=language)
