"""The benchmarks' one synthetic-data module: Chinese and English customer-service values and sentences.

Every generator draws from the ``random.Random`` it is given and from nothing else, so a seed gives the same data on
any machine (no clock, no ``uuid4``, no set order). Two vocabularies, one per kind of text:

- **memories** (``bench/scale/recall_scale.py``): :class:`Gen` draws values (names, phones, e-mails, addresses, order
  and tracking numbers, amounts, dates, coupons); :func:`make_text` turns them into one memory's content of a given
  type and language, :func:`random_memory` draws the type, language and keyedness in the product's mix
  (:data:`TYPE_WEIGHTS`, :data:`KEYED_SHARE`), :func:`make_query` a customer's question;
- **dialogues** (``bench/quality/chat_memory.py --dataset scale``): :func:`exchanges` draws user messages with facts,
  the agent's replies and questions that name each exchange by its order number; their sentences are
  templates in ``bench/data/synthetic_exchanges.json``.

The two keep the vocabularies and the draw order they had when their figures in ``bench/RESULTS.md`` were
measured, so the same seed still gives the same data; merge them only together with a rerun of both benchmarks.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

# --- vocabulary of the memories --------------------------------------------------------------------------------

SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢"
GIVEN = "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀兰霞平刚桂英华玉萍红娥玲芬燕彬鹏辉建国志文斌浩宇欣怡子涵梓萱"
EN_FIRST = [
    "James",
    "Mary",
    "John",
    "Linda",
    "Michael",
    "Emma",
    "David",
    "Olivia",
    "Daniel",
    "Sophia",
    "Kevin",
    "Grace",
    "Ryan",
    "Chloe",
    "Jason",
    "Emily",
    "Eric",
    "Hannah",
    "Brian",
    "Zoe",
    "Wei",
    "Li",
    "Ming",
]
EN_LAST = [
    "Smith",
    "Johnson",
    "Brown",
    "Taylor",
    "Miller",
    "Wilson",
    "Moore",
    "Clark",
    "Lewis",
    "Walker",
    "Hall",
    "Young",
    "King",
    "Wright",
    "Chen",
    "Wang",
    "Zhang",
    "Liu",
    "Nguyen",
    "Garcia",
    "Lee",
    "Kim",
]
CITIES = [
    ("北京市", ["朝阳区", "海淀区", "东城区", "丰台区"]),
    ("上海市", ["浦东新区", "徐汇区", "静安区", "闵行区"]),
    ("广州市", ["天河区", "越秀区", "海珠区"]),
    ("深圳市", ["南山区", "福田区", "宝安区"]),
    ("杭州市", ["西湖区", "滨江区", "余杭区"]),
    ("成都市", ["武侯区", "锦江区", "高新区"]),
    ("武汉市", ["洪山区", "江汉区"]),
    ("南京市", ["鼓楼区", "玄武区"]),
]
ROADS = ["建国路", "世纪大道", "文三路", "科技园南路", "中山路", "人民路", "解放大道", "天府大道", "南京西路", "长安街"]
EN_CITIES = ["Shanghai", "Beijing", "Shenzhen", "Hangzhou", "Singapore", "London", "Seattle", "Toronto", "Sydney"]
EN_STREETS = ["Main St", "Oak Avenue", "King Road", "Harbour Drive", "Park Lane", "Century Avenue", "Queen St"]
PRODUCTS_ZH = [
    "iPhone 15 Pro",
    "华为 Mate 60",
    "小米 14 Ultra",
    "X200 扫地机器人",
    "KFR-35GW 空调",
    "戴森 V12 吸尘器",
    "索尼 WH-1000XM5 耳机",
    "联想 ThinkPad X1",
    "美的 M3 洗碗机",
    "格力 云佳 空调",
    "九阳豆浆机 D2",
    "飞利浦电动牙刷 HX6730",
    "海尔冰箱 BCD-470",
    "大疆 Mini 4 Pro 无人机",
    "任天堂 Switch OLED",
]
PRODUCTS_EN = [
    "iPhone 15 Pro",
    "Galaxy S24",
    "Pixel 8",
    "X200 robot vacuum",
    "Dyson V12 vacuum",
    "Sony WH-1000XM5",
    "ThinkPad X1 Carbon",
    "Kindle Paperwhite",
    "Nintendo Switch OLED",
    "AirPods Pro 2",
    "iPad Air M2",
    "Instant Pot Duo 7-in-1",
    "Philips Hue starter kit",
    "DJI Mini 4 Pro",
]
CARRIERS = [("顺丰", "SF"), ("圆通", "YT"), ("中通", "ZT"), ("韵达", "YD"), ("京东物流", "JDL"), ("EMS", "EMS")]
TOPICS_ZH = [
    "退款",
    "物流查询",
    "发票开具",
    "投诉客服",
    "账单疑问",
    "会员权益",
    "售后维修",
    "退换货",
    "改签",
    "宽带故障",
    "优惠券使用",
    "支付失败",
    "地址修改",
    "积分兑换",
]
TOPICS_EN = [
    "refund",
    "delivery status",
    "invoice",
    "complaint",
    "billing question",
    "membership",
    "repair",
    "return and exchange",
    "rebooking",
    "broadband outage",
    "coupon",
    "payment failure",
    "address change",
]
COMPANIES = [
    "北京星辰科技有限公司",
    "上海云杉信息技术有限公司",
    "深圳前海微众科技有限公司",
    "杭州青柠电子商务有限公司",
    "成都天府软件有限公司",
]
OPS_ZH = ["退款", "发券", "改地址", "导出订单", "发送通知"]
OPS_EN = ["refund", "coupon issue", "address update", "order export", "notification"]
LEVELS = [("金卡", "gold"), ("银卡", "silver"), ("钻石", "diamond"), ("普通", "basic")]


# --- vocabulary of the dialogues ------------------------------------------------------------------------------

DIALOGUE_PRODUCTS = [
    ("扫地机器人 X200", "robot vacuum X200"), ("空气净化器 AP-9", "air purifier AP-9"),
    ("蓝牙耳机 B3 Pro", "B3 Pro earbuds"), ("电饭煲 R5", "R5 rice cooker"), ("机械键盘 K87", "K87 keyboard"),
    ("儿童自行车 16 寸", "16-inch kids bike"), ("净水器 W600", "W600 water filter"), ("投影仪 P1", "P1 projector"),
    ("跑步机 T30", "T30 treadmill"), ("咖啡机 C9", "C9 espresso machine"), ("电动牙刷 S2", "S2 toothbrush"),
    ("显示器 27 寸 4K", "27-inch 4K monitor"), ("登山包 45L", "45L hiking pack"),
    ("羽绒服 L 码", "down jacket, size L"),
    ("智能手表 G5", "G5 smartwatch"), ("加湿器 H2", "H2 humidifier"), ("电热水壶 E1", "E1 kettle"),
    ("游戏手柄 J4", "J4 controller"), ("行李箱 24 寸", "24-inch suitcase"), ("台灯 L8", "L8 desk lamp"),
]  # fmt: skip
DIALOGUE_PLACES_ZH = [
    "上海市浦东新区世纪大道", "北京市朝阳区建国路", "杭州市西湖区文三路", "广州市天河区体育西路",
    "成都市武侯区天府大道", "深圳市南山区科技园路", "南京市鼓楼区中山北路", "武汉市洪山区珞喻路",
    "西安市雁塔区小寨路", "苏州市工业园区星湖街",
]  # fmt: skip
DIALOGUE_PLACES_EN = [
    "Maple Street, Springfield", "Harbor Road, Portland", "Elm Avenue, Austin", "King Street, Toronto",
    "Baker Street, London", "Pine Lane, Denver", "Ocean Drive, Miami", "Lake Road, Chicago", "Hill Street, Boston",
    "Park Avenue, Seattle",
]  # fmt: skip
DIALOGUE_COURIERS_ZH = [("顺丰", "SF"), ("圆通", "YT"), ("中通", "ZT"), ("京东物流", "JD")]
DIALOGUE_COURIERS_EN = [("UPS", "1Z"), ("FedEx", "FX"), ("DHL", "DH"), ("USPS", "US")]


# --- memories ----------------------------------------------------------------------------------------------------


class Gen:
    """Values drawn from ``r``: names, phones, e-mails, addresses, order and tracking numbers, amounts, dates."""

    def __init__(self, rng: random.Random) -> None:
        self.r = rng

    def digits(self, n: int) -> str:
        return "".join(self.r.choice("0123456789") for _ in range(n))

    def name_zh(self) -> str:
        return self.r.choice(SURNAMES) + "".join(self.r.choice(GIVEN) for _ in range(self.r.choice((1, 2))))

    def name_en(self) -> str:
        return f"{self.r.choice(EN_FIRST)} {self.r.choice(EN_LAST)}"

    def phone(self) -> str:
        return "1" + self.r.choice("3456789") + self.digits(9)

    def email(self) -> str:
        user = self.r.choice(EN_FIRST).lower() + self.r.choice(["", ".", "_"]) + self.r.choice(EN_LAST).lower()
        return f"{user}{self.r.randint(1, 99)}@{self.r.choice(['example.com', 'mail.cn', 'qq.com', '163.com'])}"

    def address_zh(self) -> str:
        city, districts = self.r.choice(CITIES)
        return f"{city}{self.r.choice(districts)}{self.r.choice(ROADS)} {self.r.randint(1, 400)} 号" + (
            f" {self.r.randint(1, 12)} 栋 {self.r.randint(1, 30)}0{self.r.randint(1, 6)} 室"
            if self.r.random() < 0.6
            else ""
        )

    def address_en(self) -> str:
        return f"{self.r.randint(1, 999)} {self.r.choice(EN_STREETS)}, {self.r.choice(EN_CITIES)}"

    def order(self) -> str:
        kind = self.r.randrange(5)
        if kind == 0:
            return "JD2024" + self.digits(8)
        if kind == 1:
            return "TB" + self.digits(10)
        if kind == 2:
            return "DD" + self.digits(5)
        if kind == 3:
            return f"PO-2024-{self.digits(4)}"
        return "".join(self.r.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(3)) + self.digits(3)

    def tracking(self) -> tuple[str, str, str]:
        zh, code = self.r.choice(CARRIERS)
        return zh, code, code + self.digits(10 if code != "JDL" else 9)

    def amount(self) -> str:
        return self.r.choice([f"{self.r.randint(9, 3999)}", f"{self.r.randint(9, 999)}.{self.digits(2)}"])

    def date(self) -> str:
        return f"2024-{self.r.randint(1, 12):02d}-{self.r.randint(1, 28):02d}"

    def date_zh(self) -> str:
        return f"{self.r.randint(1, 12)} 月 {self.r.randint(1, 28)} 日"

    def coupon(self) -> str:
        return self.r.choice(["SAVE", "NEWUSER", "WELCOME", "VIP", "DOUBLE11", "SPRING"]) + str(
            self.r.choice([10, 20, 30, 50, 100])
        )


@dataclass
class PoolText:
    """One memory as the product stores it: type, key (``None``: unkeyed), content, data, language."""

    type: str
    key: str | None
    content: str
    data: dict[str, Any]
    lang: str


def one_of(g: Gen, mtype: str, lang: str, contents: list[str]) -> PoolText:
    """An unkeyed memory of ``mtype`` whose content is one of ``contents`` (drawn after they are)."""
    return PoolText(mtype, None, g.r.choice(contents), {}, lang)


def make_text(g: Gen, mtype: str, lang: str, keyed: bool) -> PoolText:
    """One memory content of ``mtype`` in ``lang`` (≤150 characters, as the product writes them)."""
    r = g.r
    zh = lang == "zh"
    if mtype == "user_profile":
        if keyed:
            key = r.choice(["name", "phone", "phone", "email", "address"])
            value = {
                "name": g.name_zh() if zh else g.name_en(),
                "phone": g.phone(),
                "email": g.email(),
                "address": g.address_zh() if zh else g.address_en(),
            }[key]
            label = {
                "name": ("用户姓名", "User's name"),
                "phone": ("用户手机号", "User's phone"),
                "email": ("用户邮箱", "User's e-mail"),
                "address": ("用户地址", "User's address"),
            }[key]
            changed = r.random() < 0.2
            content = (
                (f"{label[0]}已更新为：{value}" if changed else f"{label[0]}：{value}")
                if zh
                else (f"{label[1]} updated to: {value}" if changed else f"{label[1]}: {value}")
            )
            return PoolText(mtype, key, content, {key: value}, lang)
        level = r.choice(LEVELS)
        return one_of(
            g,
            mtype,
            lang,
            [
                f"用户是{level[0]}会员，会员号 VIP{g.digits(8)}，积分 {r.randint(100, 9000)} 分",
                f"用户偏好{r.choice(CARRIERS)[0]}快递，工作日白天不在家，"
                f"快递请放{r.choice(['门卫', '快递柜', '前台'])}",
                f"用户在{g.address_zh()}上班，快递可以送到公司",
            ]
            if zh
            else [
                f"Member level {level[1]}, member no. VIP{g.digits(8)}, {r.randint(100, 9000)} points",
                f"Prefers {r.choice(['weekend', 'evening', 'office-hours'])} delivery to {g.address_en()}",
                f"Works at {g.address_en()}; parcels may go to the office",
            ],
        )
    if mtype == "fact_reference":
        if keyed:
            key = r.choice(["order_id", "order_id", "tracking_number", "product", "coupon"])
            if key == "order_id":
                order = g.order()
                content = (
                    f"订单号：{order}，{r.choice(PRODUCTS_ZH)}，金额 ¥{g.amount()}"
                    if zh
                    else f"Order number: {order}, {r.choice(PRODUCTS_EN)}, ${g.amount()}"
                )
                return PoolText(mtype, key, content, {"order_id": order}, lang)
            if key == "tracking_number":
                carrier, _, number = g.tracking()
                content = f"快递单号：{number}（{carrier}）" if zh else f"Tracking number: {number}"
                return PoolText(mtype, key, content, {"tracking_number": number}, lang)
            if key == "product":
                product = r.choice(PRODUCTS_ZH if zh else PRODUCTS_EN)
                content = f"咨询的产品：{product}" if zh else f"Product asked about: {product}"
                return PoolText(mtype, key, content, {"product": product}, lang)
            coupon = g.coupon()
            content = (
                f"已发放优惠券 {coupon}，满 {r.choice([100, 200, 300])} 减 {r.choice([10, 20, 50])}，"
                f"有效期至 {g.date()}"
                if zh
                else f"Coupon issued: {coupon}, valid until {g.date()}"
            )
            return PoolText(mtype, key, content, {"coupon": coupon}, lang)
        order = g.order()
        return one_of(
            g,
            mtype,
            lang,
            [
                f"用户 {g.date_zh()}购买的 {r.choice(PRODUCTS_ZH)} 在保修期内，保修至 {g.date()}",
                f"发票抬头：{r.choice(COMPANIES)}，税号 91{g.digits(6)}MA01{g.digits(4)}，订单 {order}",
                f"订单 {order} 退款 ¥{g.amount()} 已于 {g.date_zh()}原路退回尾号 {g.digits(4)} 的银行卡",
                f"用户反映 {r.choice(PRODUCTS_ZH)} 制冷不行，要求上门检修",
            ]
            if zh
            else [
                f"The {r.choice(PRODUCTS_EN)} bought on {g.date()} is under warranty until {g.date()}",
                f"Invoice title: {g.name_en()} Ltd, tax no. {g.digits(9)}, order {order}",
                f"Refund of ${g.amount()} for order {order} returned to card ending {g.digits(4)} on {g.date()}",
                f"Customer reports the {r.choice(PRODUCTS_EN)} will not charge; wants a replacement",
            ],
        )
    if mtype == "tool_result":
        order = g.order()
        carrier, _, number = g.tracking()
        content = r.choice(
            [
                f"get_order_status({order}) → 已发货，{carrier} {number}，预计 {g.date_zh()}送达",
                f"refund_status({order}) → 已退款 ¥{g.amount()}，{g.date_zh()}到账",
                f"create_ticket → 投诉单号 TS2024{g.digits(7)}，48 小时内回电 {g.phone()}",
                f"schedule_repair → 工程师{r.choice(SURNAMES)}师傅 {g.date_zh()}上午上门",
                f"pay({order}) → 支付失败，错误码 PAY_{g.digits(4)}，余额不足",
            ]
            if zh
            else [
                f"get_order_status({order}) → shipped, {number}, arriving {g.date()}",
                f"refund_status({order}) → refunded ${g.amount()} on {g.date()}",
                f"create_ticket → complaint ticket TS2024{g.digits(7)}, call back within 48 hours",
                f"schedule_repair → technician visit on {g.date()} 9am-12pm",
                f"pay({order}) → payment failed, code PAY_{g.digits(4)}, insufficient funds",
            ]
        )
        return PoolText(mtype, None, content, {"tool": content.split("(")[0].split(" ")[0]}, lang)
    if mtype == "session_state":
        if keyed:
            key = r.choice(["current_topic", "current_topic", "amount", "date"])
            if key == "current_topic":
                topic = r.choice(TOPICS_ZH if zh else TOPICS_EN)
                return PoolText(
                    mtype, key, f"当前咨询：{topic}" if zh else f"Current topic: {topic}", {"topic": topic}, lang
                )
            if key == "amount":
                amount = g.amount()
                return PoolText(
                    mtype,
                    key,
                    f"涉及金额：¥{amount}" if zh else f"Amount mentioned: ${amount}",
                    {"amount": amount},
                    lang,
                )
            day = g.date()
            return PoolText(mtype, key, f"提到日期：{day}" if zh else f"Date mentioned: {day}", {"date": day}, lang)
        order = g.order()
        return one_of(
            g,
            mtype,
            lang,
            [
                f"用户正在等待订单 {order} 的退款审核结果",
                f"用户要求把 {order} 的收货地址改为 {g.address_zh()}",
                f"用户本次来电询问{r.choice(TOPICS_ZH)}，情绪较急",
            ]
            if zh
            else [
                f"User is waiting for the refund review of order {order}",
                f"User wants order {order} sent to {g.address_en()}",
                f"User is asking about {r.choice(TOPICS_EN)}, upset",
            ],
        )
    # batch_operation: keyed by its task
    task = f"task-{g.digits(6)}"
    total = r.randint(10, 500)
    done = r.randint(0, total)
    op = r.randrange(len(OPS_ZH))
    content = (
        f"批量{OPS_ZH[op]}任务 {task}：已完成 {done}/{total}，失败 {r.randint(0, 5)} 条"
        if zh
        else f"Batch {OPS_EN[op]} {task}: {done}/{total} done, {r.randint(0, 5)} failed"
    )
    data = {"task_id": task, "completed": done, "total": total, "last_success_id": f"item-{done}"}
    return PoolText(mtype, f"batch:{task}", content, data, lang)


TYPE_WEIGHTS = {
    "user_profile": 0.25,
    "fact_reference": 0.35,
    "tool_result": 0.18,
    "session_state": 0.17,
    "batch_operation": 0.05,
}
KEYED_SHARE = {
    "user_profile": 0.6,
    "fact_reference": 0.4,
    "tool_result": 0.0,
    "session_state": 0.5,
    "batch_operation": 1.0,
}


def random_memory(g: Gen) -> PoolText:
    """One memory in the product's mix: its type by :data:`TYPE_WEIGHTS`, Chinese two times in three, keyed
    by :data:`KEYED_SHARE`."""
    r = g.r
    mtype = r.choices(list(TYPE_WEIGHTS), weights=list(TYPE_WEIGHTS.values()))[0]
    lang = "zh" if r.random() < 0.66 else "en"
    return make_text(g, mtype, lang, keyed=r.random() < KEYED_SHARE[mtype])


QUERIES_ZH = [
    "查一下我的订单",
    "我的订单到哪了",
    "我的手机号是多少",
    "发票抬头开的是哪个公司",
    "退款什么时候到账",
    "那个产品还在保修期吗",
    "按上次的方式付款",
    "进度如何",
    "优惠券还能用吗",
    "我的快递单号是多少",
    "送到哪个地址",
    "投诉处理得怎么样了",
    "订单 {order} 的物流",
    "{product} 坏了怎么办",
    "会员积分还有多少",
    "工程师哪天上门",
    "我刚才说的金额是多少",
    "支付失败是什么原因",
]
QUERIES_EN = [
    "where is my order",
    "what's my phone number",
    "when will my refund arrive",
    "is the product still under warranty",
    "pay the same way as last time",
    "how's it going with the batch",
    "what is my delivery address",
    "do I have a coupon",
    "tracking number for {order}",
    "invoice title for my company",
    "status of my complaint ticket",
    "how many points do I have",
    "my {product} stopped working",
    "why did the payment fail",
]


def make_query(g: Gen, lang: str) -> str:
    template = g.r.choice(QUERIES_ZH if lang == "zh" else QUERIES_EN)
    return template.format(order=g.order(), product=g.r.choice(PRODUCTS_ZH if lang == "zh" else PRODUCTS_EN))


# --- dialogues ---------------------------------------------------------------------------------------------------


#: The exchanges' sentences, per language and kind: ``str.format`` templates of a user message, the agent's reply
#: and the questions, over ``code``, ``date``, ``product``, ``amount``, ``place``, ``courier``, ``tracking``, ``phone``.
EXCHANGE_TEMPLATES: dict[str, dict[str, dict[str, Any]]] = json.loads(
    (Path(__file__).resolve().parent / "data" / "synthetic_exchanges.json").read_text(encoding="utf-8")
)
EXCHANGE_KINDS = ("order", "address", "refund", "delivery", "phone", "ticket")


@dataclass
class Exchange:
    """A user message with facts, the agent's reply, and the questions only this exchange answers."""

    code: str  # the order/ticket number the questions name
    kind: str
    language: str
    user: str
    reply: str
    questions: list[str]


def exchange(rng: random.Random, n: int, prefix: str, day0: date) -> Exchange:
    """One synthetic exchange: a user message with facts and the agent's reply, and questions that each
    name it by its number (so exactly this exchange answers them)."""
    zh = rng.random() < 0.5
    product_zh, product_en = rng.choice(DIALOGUE_PRODUCTS)
    amount = rng.randrange(19, 5000) + rng.choice((0, 0.5, 0.9))
    when = day0 + timedelta(days=rng.randrange(0, 700))
    code = f"{prefix}{n:05d}{rng.randrange(10, 99)}"
    kind = rng.choice(EXCHANGE_KINDS)
    phone = f"1{rng.choice('3589')}{rng.randrange(10**8, 10**9)}"
    number = rng.randrange(1, 999)
    if zh:
        place = f"{rng.choice(DIALOGUE_PLACES_ZH)} {number} 号"
        courier, tag = rng.choice(DIALOGUE_COURIERS_ZH)
        product, day = product_zh, f"{when.year} 年 {when.month} 月 {when.day} 日"
    else:
        place = f"{number} {rng.choice(DIALOGUE_PLACES_EN)}"
        courier, tag = rng.choice(DIALOGUE_COURIERS_EN)
        product, day = product_en, f"{when:%B} {when.day}, {when.year}"
    values = {
        "code": code, "date": day, "product": product, "amount": amount, "place": place, "courier": courier,
        "tracking": f"{tag}{rng.randrange(10**9, 10**10)}", "phone": phone,
    }  # fmt: skip
    language = "zh" if zh else "en"
    template = EXCHANGE_TEMPLATES[language][kind]
    return Exchange(
        code,
        kind,
        language,
        template["user"].format(**values),
        template["reply"].format(**values),
        [q.format(**values) for q in template["questions"]],
    )


def exchanges(rng: random.Random, count: int, prefix: str, day0: date = date(2023, 1, 1)) -> list[Exchange]:
    """``count`` exchanges numbered from 0, their codes starting with ``prefix``, dates from ``day0`` on."""
    return [exchange(rng, n, prefix, day0) for n in range(count)]
