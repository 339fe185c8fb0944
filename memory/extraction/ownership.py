"""Whose is it: decides whether a phone number, e-mail, address, name or birthday in a message is the END USER's.

Profile facts are upserted per end user and the anchor keys (name, phone, email, order_id, address, current_topic)
open every later prompt, so one wrong attribution replaces the customer's real phone with a hotel's for weeks.
The rule is therefore asymmetric:

- the **user's** words are about the user unless they name someone else: 「我老婆的电话是…」, 「寄到我公司」,
  "my wife's number is …", 「酒店电话是…」; a bare value the user types is theirs;
- the **agent's** words are about the user only when they say so: 「您的手机号是…」, 「您留的地址」, 「请您保持手机
  …畅通」, "your phone number is …", "the address on your account"; a number the agent gives without that
  (「您可以打010-…这个号码」, 「我们的客服热线」, "you can call the hotel at …") belongs to someone else.

:func:`whose` reads the words around the value: the nearest possessor marker before it in its clause (the last one
wins, so "my wife's" is the wife's), else in the earlier clauses of its sentence, or a copula right after it
(「13800001111 是我妈的」, "… is not mine", "… on file for you", "… as your contact number"). A venue or a company
owns the value only when the words go on to its contact details (「快递员电话」, 「门店地址」, "the hotel at"):
「我在门店买的，手机号…」 is still the user's number. A courier, a driver or a technician also owns what they gave,
left or sent (「快递小哥给的号码」, "the courier left a note saying to call …"), unless it was given to them
(「我给快递员留的号码」), and a 他/她/"his" whose nearest person is such a courier is the courier. An address
followed by a venue's noun is the venue's ("the 250 Main Street, Cambridge store", 「… 号门店」). A contact's own
verb of living is theirs (「我朋友住在…」), and a denial hands the value to the contact named before it ("my sister's
address, not mine: …"). The agent's 「您登记的…」 carries over to the next bare field it reads back
(「您登记的姓名是刘建国，邮箱 …」). Values inside quotes or after 「例如」/"for example" are nobody's profile.

:func:`disowned_mentions` finds the profile keys the user says are not theirs (「这不是我的电话」, "that email isn't
mine"). Pure; no database access.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Owner",
    "Ownership",
    "designates_contact",
    "disowned_mentions",
    "is_quoted_or_example",
    "owner_of",
    "taken_back",
    "whose",
]

#: ``user``: the end user's own; ``contact``: a person the user names (a relative, a friend, a colleague);
#: ``work``: the user's workplace; ``other``: a venue, a company, a courier, a hotline, an example, or a value the
#: agent states without saying it is the user's.
Owner = Literal["user", "contact", "work", "other"]

_CLAUSE_END = "，。；！？,;!?\n"
# A full stop ends a sentence, not the one of an abbreviation: "the form says 'e.g. john@example.com'" keeps its
# example marker in the value's sentence.
_SENTENCE_END = re.compile(
    r"[。！？!?\n]|(?<![Ee]\.[Gg])(?<![Ii]\.[Ee])(?<!\b[MD]r)(?<!\bMrs)(?<!\bMs)\.(?!(?<=\b[Nn]o\.)\s+(?:is\b|\d|\+))(?:\s|$)"
)

_RELATIVES_ZH = (
    "老婆|老公|媳妇|妻子|丈夫|爱人|太太|对象|男朋友|女朋友|男友|女友|未婚妻|未婚夫|妈妈|爸爸|母亲|父亲|老妈|老爸|爷爷|"
    "奶奶|外公|外婆|姥姥|姥爷|儿子|女儿|孩子|小孩|哥哥|姐姐|弟弟|妹妹|朋友|同事|同学|老板|领导|上司|室友|舍友|邻居|家人|"
    "亲戚|婆婆|公公|岳母|岳父|丈母娘|闺蜜|舅舅|叔叔|表哥|表姐|表弟|表妹|堂哥|堂姐|助理|秘书|房东|父母|爸妈|"
    # people of the household and of the family's services: theirs unless the customer makes them a recipient
    "保姆|月嫂|护工|家政阿姨|阿姨|老师|班主任|医生|大夫|护士|律师|会计|教练|前夫|前妻|(?<=[您你我])先生"
)
#: The nouns of a person's contact details, after a possessive.
_DETAIL = r"(?:号码?|电话|手机|地址|邮箱|(?i:(?:mobile|cell|phone|number|address|e-?mail|details|line)(?![A-Za-z])))"
_CONTACT_WHO = (
    rf"我?(?:{_RELATIVES_ZH})|我的?[妈爸哥姐弟妹](?!妹)|(?<!其)[他她](?!们)的?|"
    r"(?i:(?<![A-Za-z])(?:wife|husband|partner|spouse|fianc[ée]e?|mom|mum|mother|dad|father|parents?|son|daughter|"
    r"kids?|child(?:ren)?|brother|sister|sibling|friend|colleague|co-?worker|boss|neighbou?r|roommate|flatmate|"
    r"assistant|secretary|girlfriend|boyfriend|grand(?:ma|pa|mother|father|parents?)|aunt|uncle|cousin|nephew|niece|"
    r"landlord|landlady|in-laws?|nanny|babysitter|au pair|carer|caregiver|cleaner|teacher|tutor|coach|doctor|"
    r"nurse|lawyer|solicitor|accountant|his|her|him)(?:'s|’s)?(?![A-Za-z]))|"
    # any other person's: a possessive right before the detail ("the teacher's number", 「我前夫的号」)
    rf"(?i:(?<![A-Za-z])(?!(?:my|your|our|it|that|what|there|here|who|he|she|let)(?:'s|’s))[a-z]+(?:'s|’s)(?=\s+{_DETAIL}))|"
    rf"我(?!自己|本人|家|们|这|那|留|填|登|预|绑|注|的|把|给|为|帮|将|替|跟|和|对|向|在|被|让|说|是|用|刚|要|想|以|之|原|现)"
    rf"[\u4e00-\u9fff]{{1,3}}的(?={_DETAIL}|\s*$)"
)
# 「我朋友住在…」: the contact lives there. The verb is part of the marker so that it ends after the user's own
# 「住在」 and wins over it; ``who`` is the contact's name kept in the marker.
_CONTACT = rf"(?P<who>{_CONTACT_WHO})(?:现在|目前|也|就|一直|平时)?(?:住在|家在|住)?"
_CONTACT_NAMED = re.compile(_CONTACT_WHO)
# 他/她, "his"/"her" stand for the person named last: 「快递员说他的电话是…」, "the driver said his number is …"
# are the courier's, not a contact's.
_PRONOUN = re.compile(r"(?<!其)[他她](?!们)|(?i:(?<![A-Za-z])(?:his|her|him)(?![A-Za-z]))")
_ACTS_ON_PRONOUN = re.compile(
    r"[^，。；！？,;!?]{0,6}?(?:给|联系|找|通知|告诉|叫)[他她]|"
    r"(?i:[^,;.!?]{0,12}?(?:call(?:ed)?|text(?:ed)?|told|gave|emailed|contacted)\s+(?:him|her))"
)
_OTHER = (
    r"快递(?:员|小哥|公司|站|点|柜|网点)|快递(?=电话|的电话)|物流(?:公司|电话)|配送(?:员|站)|骑手|外卖(?:员|小哥)|"
    r"送货员|派件员|揽件员|司机|师傅|工程师|技术员|维修员|安装工|商家|卖家|店家|商户|商城|店铺|门店|本店|店里|"
    r"专卖店|旗舰店|分店|体验店|网点|营业厅|服务中心|"
    r"售后(?:中心|网点|点|部|电话)|客服|热线|服务台|前台|总台|酒店|宾馆|民宿|旅馆|景区|景点|博物馆|餐厅|饭店|医院|诊所|"
    r"药店|银行|学校|物业|仓库|驿站|快递柜|代收点|自提点|门卫|机场|航空公司|车站|平台|官方|厂家|厂商|供应商|发件人|"
    r"寄件人|对方|他们|她们|人工|哪家|谁的|(?<![我您])店(?=电话|地址|号码|的电话|的地址)|"
    r"(?:订位|订座|订餐|订房|预订)(?=电话|热线|专线|号码)|"
    r"(?i:(?<![A-Za-z])(?:hotel|motel|hostel|inn|lodge|guesthouse|resort|store|shop|outlet|branch|restaurant|cafe|bar|"
    r"pub|salon|gym|clinic|hospital|pharmacy|bank|"
    r"school|courier|driver|delivery (?:guy|person|driver|man)|mailman|postman|technician|engineer|installer|"
    r"support|hotline|helpline|help ?desk|customer (?:service|care|support)|call cent(?:er|re)|service cent(?:er|re)|"
    r"warehouse|depot|front desk|reception|concierge|seller|merchant|vendor|dealer|venue|museum|airline|airport|"
    r"station|sender|agency|department|their|toll-free)(?:'s|’s)?(?![A-Za-z]))"
)
_WORK_BY_ROLE = {
    # The user's workplace: 「寄到我公司」, 「单位地址」, "my office address".
    "user": r"我(?:们)?(?:的)?(?:公司|单位)|公司|单位|办公室|上班的地方|工作地点|工位|写字楼|"
    r"(?i:(?<![A-Za-z])(?:office|workplace|employer|company|business address|work(?=\s+(?:address|phone|number|"
    r"e-?mail))|at work|to work|(?<=my\s)work)(?![A-Za-z]))|"
    # "I work at the clinic on 45 Harbour Road", "I work at Unit 6, …": where the customer works is their workplace
    r"(?i:(?<![A-Za-z])i\s+work\s+(?:at|in)(?=\s*$))|"
    r"(?i:(?<![A-Za-z])i\s+work\s+(?:at|in|for)\s+(?:the\s+|a\s+)?[\w' -]{1,30}?(?=\s+(?:on|at|in)\s+\d))",
    # The agent means the user's workplace only with 「您」/"your"; its own office is the company's (_OTHER).
    "assistant": r"您(?:的)?(?:公司|单位|办公(?:地址|室|地点)?)|"
    r"[为帮给]您\S{0,8}?(?:寄到|送到|改为|设为|改成)\S{0,4}?(?:公司|单位|办公)|"
    r"(?i:(?<![A-Za-z])your\s+(?:office|workplace|employer|company|work)(?![A-Za-z]))",
}
#: Right after an address, the customer works there: 「我在…6008号上班」, 「我自己是在…1000号上班」.
_WORKS_THERE = re.compile(r"\s*(?:那边|这边)?(?:上班|工作|办公)")
#: A person the customer names, then their workplace: 「我老公公司在…」, "my wife's office is …" — theirs, not the
#: customer's.
_CONTACTS_WORKPLACE = re.compile(
    r"(?:" + _CONTACT_WHO + r")\s*的?\s*(?:公司|单位|办公室|(?i:office|workplace|company))"
)
# A self marker that is negated says the value is NOT the user's: 「这不是我的电话 138…」, "that's not my number".
_NEGATED_SELF = re.compile(
    r"不是[我您](?:本人)?的?|并非[我您]的?|不属于[我您]|"
    r"(?i:(?<![A-Za-z])(?:not my|isn't mine|is not mine|not mine|not me|isn't you(?:rs?)?|is not you(?:rs?)?|"
    r"not yours?)(?![A-Za-z]))"
)
#: A value said to be old or out of use: 「是我以前的号」, 「那个地址是旧的」, 「已停机」, "my old number", "no
#: longer in use" — not the customer's detail now.
_OLD = re.compile(
    r"(?:我|您)?(?:以前|之前|原来|旧)的(?:号码?|手机号?|电话|地址|邮箱)?|旧(?:号|手机|地址|邮箱)|停机|停用|不用了|"
    r"(?i:(?<![A-Za-z])(?:my old|your old|old (?:number|phone|address|e-?mail)|previous|former|no longer in use|"
    r"disconnected|out of service)(?![A-Za-z]))"
)
#: Right before a number: who calls or writes *from* it — the caller's, not the customer's (「有个 131… 打电话」,
#: "a call from 07700 …", "our technician will call you from 020 …").
_CALLER = re.compile(
    r"有个|有一个|陌生(?:号码|电话|人)?|不认识的(?:号码|电话)?|"
    r"(?i:(?<![A-Za-z])(?:unknown|strange|random|withheld)\s+(?:number|caller)s?(?![A-Za-z]))|"
    r"有人(?:用|拿)?|冒充|假冒|自称|"
    # a relative clause about someone else: "a guy who lives at …", 「一个住在…的同事」 is theirs
    r"(?i:(?<![A-Za-z])(?:who|that)\s+(?:lives|is living|is staying|works|stays)\s+(?:at|in|on)\s*$)|"
    r"(?i:(?<![A-Za-z])(?:(?:call|text|ring|phone|contact|reach|message)(?:s|ed|ing)?\s+(?:you|me)\s+(?:back\s+)?from|"
    r"(?:calls?|texts?|messages?|sms|voicemails?|e-?mails?)\s+from|"
    r"(?:called|calling|rang|texted|e-?mailed|messaged|wrote)\s+(?:to\s+)?(?:me\s+|us\s+)?from|"
    r"(?:call|ring|phone|text|contact|reach)\s+them\s+(?:on|at))"
    r"(?![A-Za-z]))"
)
#: A pasted or forwarded text (a signature, an e-mail thread): its details are its sender's, unless the customer
#: says they are their own (「我的邮件签名」).
_FORWARDED = re.compile(
    r"转发(?:的|一下|了)?(?:邮件|消息|短信|信息)|(?<!我的)(?<!我的邮件)签名(?:档|栏)?|"
    r"(?i:(?<![A-Za-z])(?:forwarded (?:message|e-?mail|mail)|(?:e-?mail|message|mail|text)s? (?:you|they|he|she|I) "
    r"(?:forwarded|pasted|passed on)|(?<!my )(?<!my e-mail )(?<!my email )signature|"
    r"-{2,}\s*original message)(?![A-Za-z]))"
)
#: Right after a number: it calls or writes *to* the customer (「用 135… 打过来」, 「186… 打来」,
#: 「用虚拟号 170… 联系您」, "… called me") — the caller's. Towards the company
#: (「我用 138… 给你们打过电话」) it stays the customer's.
_CALLS_IN = re.compile(
    r"\s*(?:(?:给|向|跟)(?:我|您)(?:打|发|拨)|打来|打过来|打给(?:我|您)|联系(?:我|您)|加(?:我|您)|来电|发来|"
    r"(?i:(?:called|rang|texted|phoned|messaged|contacted)\s+me(?![A-Za-z])|"
    r"(?:keeps?|kept)\s+(?:calling|ringing|texting|messaging)|is\s+(?:calling|texting)\s+me))"
)
_OTHER_BY_ROLE = {
    # The agent's own company: 「我们的客服热线」, "our support line", 「我司」.
    "assistant": r"我们的|我们(?=公司|门店|店|客服|热线|官方|售后|仓库|总部|这边的)|我司|本公司|本平台|"
    r"公司|单位|办公室|"
    r"(?i:(?<![A-Za-z])(?:our|we're located|we are located|office|company|head office)(?![A-Za-z]))",
    # The company the user is talking to: 「你们客服电话」, "your hotline".
    # 「你们售后邮箱」, "your support email": the company's detail named through it (before the bare 你们/your,
    # which alone owns nothing that follows)
    "user": r"(?:你们|您们|贵司)(?:(?![我他她您你打拨给找叫让联发寄送])[\u4e00-\u9fff]){0,4}?"
    r"(?=邮箱|电话|地址|热线|号码)|"
    r"(?i:(?<![A-Za-z])your\s+(?:[a-z-]+\s+){1,2}?(?=(?:e-?mail|phone|number|line|address)(?![A-Za-z])))|"
    r"你们|您们|贵司|贵公司|贵店|(?i:(?<![A-Za-z])(?:your|you guys)(?![A-Za-z]))|"
    # "the number on your website", "the address from your e-mail": the company's own
    r"(?i:(?<![A-Za-z])(?:number|phone|line|address|e-?mail)\s+(?:on|from|in|at)\s+your\s+[\w-]+)",
}
_SELF_BY_ROLE = {
    "user": r"我(?:的|本人|自己的?)|我(?:留|填|登记|预留|绑定|注册)的|本人|我叫|我是|叫我|住在|我住|家在|家里|"
    r"我(?=手机|电话|号码|邮箱|地址|住址|家|名字|姓名|生日|微信|联系方式)|"
    r"[打联系找呼]我|[打发]给我(?=吧|呗|就|好)|给我(?:打|回)|寄到我(?=这|家|那)|我\s(?=手机|电话|号码|邮箱|地址)|"
    r"(?:现在|目前)用的|"
    r"(?i:(?<![A-Za-z])(?:my|mine|me|i'm|i’m|i am|i live|i'm living|i am living|i'm staying|i am staying|home)"
    r"(?![A-Za-z]))",
    "assistant": r"您(?:在\S{1,6}?)?(?:登记|预留|留|填写|绑定|注册)的|您(?:之前|以前|原来|原)的|"
    r"家庭(?:地址|住址)|(?i:(?<![A-Za-z])(?:as|your) home(?![A-Za-z]))|"
    r"您(?:这边|本人)?(?:的|留的|预留的|登记的|绑定的|注册的|提供的|填写的|填的|下单时?(?:填写|留|预留)的|"
    r"账[户号]上?(?:绑定)?的)|您(?:本人|自己)?(?:保持|确认|核对|核实|注册|登记|预留|绑定|留)?(?:一下)?"
    r"(?=手机|电话|号码|邮箱|地址|收货)|您家|您府上|您(?:是)?住|"
    r"(?:联系|致电|通知|回电给?|打给|发送?到|寄到|送到|发到|寄给|发给)您(?!可以|能|需要|也)|"
    r"[为帮给]您(?:把|在|寄到|送到|发到|登记|绑定|更新|修改|更改|变更|保存|记录|查询到|查到|核实|确认)|"
    # the account's own default (「默认收货地址已更新为…」): the customer's, whoever set it
    r"默认(?=收货|收件|配送|地址|联系|手机|电话|邮箱)|(?:跟|与|向|和)您(?:确认|核对|核实)|"
    # "I've corrected the address to …", "switched the account email to …"
    r"(?i:(?<![A-Za-z])(?:corrected|updated|changed|switched|set|amended)\s+(?:the\s+|your\s+)?(?:account\s+|delivery\s+|"
    r"shipping\s+|contact\s+)?(?:address|phone|number|mobile|e-?mail)(?:\s+on\s+\w+)?(?:\s+from\s+\S+)?\s+to(?![A-Za-z]))|"
    # the agent sending to a value, recording a new one, confirming a list or a delivery the customer wants
    r"(?i:(?<![A-Za-z])(?:texted|e-?mailed|messaged|sent|send)(?![A-Za-z])[^,;.!?]{0,30}?(?<![A-Za-z])to\s*$)|"
    r"(?i:(?<![A-Za-z])(?:just\s+)?(?:to\s+confirm|confirming)(?=\s*[:：,]))|"
    r"(?i:(?<![A-Za-z])(?:you'?d|you\s+would|you\s+want)\s+(?:like\s+)?(?:it|them|this|the\s+\w+)\s+(?:delivered|sent|"
    r"shipped|posted))|"
    r"(?:记下|记录|登记|更新|保存|备注)了?(?:您的)?新?的?(?:收货|联系)?(?:地址|手机号?|电话|号码|邮箱)|"
    # 「已把联系电话改成…」, 「已将收货地址更新为…」: the agent changing a field of the account, said without 您
    r"(?:已|已经)?(?:把|将)(?:您的?)?(?:联系|收货|收件|默认|预留|登记的?)?(?:电话|手机号?|号码|地址|邮箱)"
    r"(?:改成|改为|更正为|更新为|修改为|变更为)|"
    r"(?i:(?<![A-Za-z])(?:yours?|on file|you (?:gave|provided|registered|left|used|entered|put|listed|signed up with)|"
    r"we have you|on (?:the|your) account|"
    # the agent reaching the customer ("the driver will ring you on …"); "the email you forwarded" is a noun and
    # the customer's act on it, not the agent e-mailing them
    r"(?:call|text|reach|contact|e-?mail|message|ring|phone) you(?!\s+(?:[a-z]+ed|sent|got|forwarded|pasted)\b))"
    r"(?![A-Za-z]))",
}
#: Right after a value: it is only a stand-in ("(555) 555-0100 as a placeholder").
_PLACEHOLDER = re.compile(r"\s*(?i:as\s+(?:a|an)\s+)?(?i:placeholder|dummy|example|sample)(?![A-Za-z])")
_EXAMPLE = re.compile(
    r"例如|比如|譬如|举个?例|示例|样例|例子|范例|格式(?:如|为|是|:|：)|比方说|假设|"
    r"(?i:e\.g\.|for example|for instance|such as|(?<![A-Za-z'’])(?<!I )(?<!d )(?<!would )(?<!we )(?<!you )"
    r"(?<!looks )(?<!sounds )like\s*:?\s*$|"
    r"(?<![A-Za-z])(?:sample|dummy|format)(?![A-Za-z]))"
)
# After the value, a copula or a demonstrative hands the value to the possessor that follows:
# 「13800001111 是我妈的」, 「这个号码联系您」, "… is my wife's", "… isn't mine".
_TAIL_LINK = re.compile(
    # another value joined to this one comes first: "We have 0491 570 156 and mia@… on file for you"
    r"(?:\s*(?:and|&|和|及|、|,)\s*[^\s,，;；]+(?=\s+(?i:on\s+file)))?"
    # a relative clause hands it on too: "0491 570 411, which you said is yours"
    r"(?:\s*,?\s*(?i:which|that)\s+(?:[\w']+\s+){0,3}?(?=(?i:is|was)\s))?"
    r"\s*(?:这个|那个|这|那|该)?\s*(?:号码|手机号?|电话|地址|邮箱)?\s*(?:根本|并|也|都|早就|真的?)?(?:不是|并非|是|为|属于|"
    r"(?i:is\s*n[o']t|isn't|is|was|belongs to)(?![A-Za-z])|=|[—-]+\s*(?=mine|my own|我的|是我的))|"
    r"\s*(?:这个|该)?(?:号码|电话)?\s*(?:联系|通知|回电给?|致电|打给)您|"
    # "We have (415) 555-0143 on file for you", "I've saved … as your contact number"
    r"\s*(?i:on\s+file|as)(?![A-Za-z])"
)
#: The value is removed from the account, before it (「已删除号码139…」, "I've removed your brother ((718) …)")
#: or after it (「…的电话13500008817已从订单备注中删除」, "… has been deleted"): it is no longer anybody's detail
#: here.
_REMOVED_BEFORE = re.compile(
    r"(?:删除|删掉|删去|解绑|移除|去掉|注销)(?:了)?[^，。；,;！？!?]{0,12}$|"
    r"(?i:(?<![A-Za-z])(?:removed|deleted|unlinked|taken off|dropped)(?![A-Za-z])[^,;.!?]{0,30}$)"
)
_REMOVED_AFTER = re.compile(
    r"[\s)）]*(?:已|已经|将|会)?(?:从[^，。；,;]{0,12})?(?:删除|删掉|移除|解绑)|"
    r"(?i:[\s)]*(?:has been|was|will be|is|have been)\s+(?:removed|deleted|unlinked)(?![A-Za-z]))"
)
#: The agent introducing themself: the details in the rest of its sentence are the agent's (「我是您的专属客户经理周婷，
#: 座机 …，手机 …」, "I'm Dana, your account manager, direct line …").
_AGENT_INTRODUCES = re.compile(
    r"我是|我叫|本人是|(?i:(?<![A-Za-z])my name is)|"
    r"(?<![A-Za-z])(?:I'm|I am|This is|this is)\s+[A-Z][a-z]+(?=,|\s+(?:from|your))"
)
#: Delivery there is refused around the value: 「不寄您先生单位（…）」, "… 2 Station Rd if that matters but dont send
#: it there".
_NOT_SENT_BEFORE = re.compile(r"(?:不|别|不要|不用)(?:再)?(?:寄|送|发)(?:到|给|往)?[^，。；！？]{0,10}[（(]?\s*$")
_NOT_SENT_AFTER = re.compile(
    r"^[^.;!?。；！？]{0,30}?(?i:(?<![A-Za-z])(?:do\s*n[o']?t|never|won't|will not)\s+(?:send|deliver|ship)\s+"
    r"(?:it\s+|them\s+|anything\s+)?(?:there|to it|to that))|^[^。；！？，]{0,8}?(?:别|不要)(?:寄|送)(?:到)?(?:那|这)"
)
_WORK_PATTERN = {role: re.compile(pattern) for role, pattern in _WORK_BY_ROLE.items()}
_HOME = re.compile(r"家|住|(?i:home|live)")
_FOR_YOU = re.compile(r"\s+(?i:(?:on\s+file\s+)?for\s+you)(?![A-Za-z])")
_PRIORITY: dict[Owner, int] = {"other": 3, "contact": 2, "work": 1, "user": 0}


@dataclass(frozen=True)
class Ownership:
    """Whose a value is, and the words that said so (「老婆」, "hotel"; empty when nothing did)."""

    owner: Owner
    marker: str = ""


# A venue, a company or a courier owns the value only when the words go on to name its contact details
# (「快递员电话」, 「门店地址」, 「酒店的」, "the hotel's", "the hotel at", "front desk is"), or the value follows it
# directly: 「我在门店买的，手机号…」 mentions a shop but gives the user's own number.
_VENUE_FOLLOWER = re.compile(
    r"\s*(?:的|电话|地址|号码|手机|邮箱|热线|座机|联系方式|是|在|为|叫|名叫|打(?:过|了)?的?电话|[:：]\s*$|\s*$)|"
    r"(?i:(?:'s|’s)|,\s*$|\s+(?:directly\s+)?(?:number|phone|line|address|e-?mail|is|at|on|can be reached|"
    r"can be called)(?![A-Za-z]))|"
    # its name, address and number listed after it: "the Lakeview Hotel, 300 N State St, Chicago IL 60654, …"
    r"(?:\s+[A-Z][\w'’&-]*)*(?:,\s*(?:[^,;.!?]*\d[^,;.!?]*|[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*))+,\s*$"
)
# A courier, a driver or a technician also owns the number they gave, left or sent: 「快递小哥给的号码」,
# 「师傅留的电话」, "the courier left a note saying to call …" — unless they are the one it was given to:
# 「我给快递员留的号码」 is the user's own number.
_PERSON_OTHER = re.compile(
    r"快递(?:员|小哥)|外卖(?:员|小哥)|配送员|送货员|派件员|揽件员|骑手|司机|师傅|工程师|技术员|维修员|安装工|"
    r"(?i:courier|driver|delivery (?:guy|person|driver|man)|mailman|postman|technician|engineer|installer)"
)
# The verb takes its recipient with it (「给我的」, "gave me"), so the 「我的」/"me" in it is not the owner.
_GAVE = re.compile(
    r"\s*(?:刚才|刚刚|之前|上次|昨天|今天)?(?:给|留|发|报|说|提供|告诉|打来|打过来)(?:了|过)?(?:给)?(?:我|您)?"
    r"(?:的|过来的|来的)?|"
    r"(?i:\s+(?:left|gave|sent|texted|wrote|said|told|mentioned|called|rang)(?:\s+(?:me|us|you))?(?![A-Za-z]))"
)
_GIVEN_TO = re.compile(
    r"(?:给|向|跟|和|让|告诉|问|帮|替|在)\s*$|"
    r"(?i:(?<![A-Za-z])(?:to|told|asked|gave|give|tell|ask|for)\s+(?:the\s+|my\s+|our\s+)?$)"
)
# An address followed by a venue's noun is the venue's: "the 250 Main Street, Cambridge store", 「… 号门店」.
_VENUE_AFTER = re.compile(
    r"\s*(?P<noun>门店|分店|专卖店|旗舰店|体验店|营业厅|网点|仓库|酒店|宾馆|诊所|医院|药店|店(?:里|内|铺)|店(?=[，。；！？,;!?\s]|$)|"
    r"(?i:(?:store|shop|branch|office|hotel|clinic|warehouse|location|outlet|depot|showroom|pharmacy|"
    r"restaurant)(?![A-Za-z])))"
)
# After the agent's words to the customer, a bare field read back in a later clause: 「跟您确认一下：收件手机 …，
# 邮箱 …」, "I've updated your account: phone …, email …". The field's clause must hold nothing else: 「…，邮箱
# support@shop.com 可以联系我们」 is the company's.
_BARE_FIELD = re.compile(
    r"\s*(?:(?:登记|预留|注册|绑定|留|填写)的?|联系|收件|收货|注册|常用|家里|家庭|预订人|下单人|订购人|购买人)?"
    r"(?:手机号码|手机号|手机|电话号码|电话|座机|固话|联系方式|电子邮箱|邮箱|邮件地址|收货地址|地址)"
    r"\s*(?:是|为|:|：|(?:已)?(?:改成|改为|更新为|修改为|变更为)了?)?\s*|"
    r"\s*(?:现|已|现已)?(?:更新|修改|更正|变更|改)(?:为|成)\s*|"
    r"(?i:\s*(?:and\s+)?(?:the\s+|your\s+)?(?:shipping\s+|delivery\s+|billing\s+|contact\s+|home\s+|account\s+)?"
    r"(?:(?:phone|mobile|cell)(?: number)?|e-?mail(?: address)?|address)\s*(?:is|:|stays as|is now|now)?\s*)"
)


def _patterns(role: str) -> tuple[tuple[Owner, re.Pattern[str], bool], ...]:
    return _COMPILED["user" if role == "user" else "assistant"]


_COMPILED: dict[str, tuple[tuple[Owner, re.Pattern[str], bool], ...]] = {
    role: (
        ("other", _NEGATED_SELF, False),
        ("other", _CALLER, False),
        ("other", re.compile(_OTHER), True),
        ("other", re.compile(_OTHER_BY_ROLE[role]), True),
        ("contact", re.compile(_CONTACT), False),
        ("work", re.compile(_WORK_BY_ROLE[role]), False),
        ("user", re.compile(_SELF_BY_ROLE[role]), False),
    )
    for role in ("user", "assistant")
}


def _last_marker(segment: str, role: str, *, tail: bool = False) -> Ownership | None:
    """The possessor marker that ends last in ``segment``; of two ending together the longer wins (「您公司」 over
    「公司」, 「不是我的」 over 「我的」), then the more cautious owner. After the value (``tail``) a venue counts
    without naming its contact details: 「… 是哪家店的」, "… is the hotel's"."""
    best: tuple[int, int, int, Ownership] | None = None
    for owner, pattern, needs_follower in _patterns(role):
        for match in pattern.finditer(segment):
            if not match.group(0):
                continue
            end = _owner_end(segment, match) if needs_follower and not tail else match.end()
            if end is None:
                continue
            rank = (end, end - match.start(), _PRIORITY[owner])
            if best is None or rank > best[:3]:
                best = (*rank, Ownership(owner, (match.groupdict().get("who") or match.group(0)).strip()))
    return best[3] if best else None


def _owner_end(segment: str, match: re.Match[str]) -> int | None:
    """Where the venue or person at ``match`` ends as an owner, or None when it owns nothing that follows: it must go
    on to its contact details (its own end), or to what it gave (the end of the giving: 「快递员给我的」)."""
    if _VENUE_FOLLOWER.match(segment, match.end()):
        return match.end()
    gave = _GAVE.match(segment, match.end()) if _PERSON_OTHER.fullmatch(match.group(0)) else None
    if gave is None or _GIVEN_TO.search(segment, 0, match.start()):
        return None
    return gave.end()


def _sentence_start(text: str, position: int) -> int:
    start = 0
    for match in _SENTENCE_END.finditer(text, 0, position):
        start = match.end()
    return start


def _sentence_end(text: str, position: int) -> int:
    after = _SENTENCE_END.search(text, position)
    return after.start() if after else len(text)


def _clause_bounds(text: str, start: int, end: int, *, spaces: bool = False) -> tuple[int, int]:
    """The clause around ``text[start:end]``; with ``spaces``, a space between two Chinese characters ends a clause
    too, as customers type (「0571-8888 0000 是我们公司前台 别打那个 我本人手机 157…」)."""
    left = max(text.rfind(char, 0, start) for char in _CLAUSE_END) + 1
    rights = [i for i in (text.find(char, end) for char in _CLAUSE_END) if i >= 0]
    right = min(rights) if rights else len(text)
    if spaces:
        for match in _CJK_SPACE.finditer(text, left, right):
            if match.end() <= start:
                left = match.end()
            elif match.start() >= end:
                return left, match.start()
    return left, right


_SINGLE_OPENS = re.compile(r"(?:^|(?<=[\s:(\[=]))'(?=\S)")
_SINGLE_CLOSES = re.compile(r"(?<=\S)'(?=$|[\s.,;:!?)\]])")


_CJK_SPACE = re.compile(r"(?<=[\u4e00-\u9fff])\s+(?=[\u4e00-\u9fff])(?!手机|电话|号码|邮箱|地址|座机)")


def _quoted(text: str, start: int, end: int) -> bool:
    before, after = text[:start], text[end:]
    for opening, closing in (("「", "」"), ("“", "”"), ("『", "』"), ("‘", "’")):
        if before.rfind(opening) > before.rfind(closing) and closing in after:
            return True
    line = before[before.rfind("\n") + 1 :]
    rest = after.split("\n", 1)[0]
    if line.count('"') % 2 == 1 and '"' in rest:
        return True
    # Single ASCII quotes, told from apostrophes by what is beside them: one opens after a space, a colon or a
    # bracket and closes before one ("the receipt says 'Tel (303) 555-0170'"); "don't", "O'Donnell" and
    # "parents' place" open nothing.
    opening = max((m.end() for m in _SINGLE_OPENS.finditer(line)), default=-1)
    closing = max((m.end() for m in _SINGLE_CLOSES.finditer(line)), default=-1)
    return opening > closing and bool(_SINGLE_CLOSES.search(rest))


def is_quoted_or_example(text: str, start: int, end: int) -> bool:
    """The value at ``text[start:end]`` sits inside quotes or follows 「例如」/"for example," in its sentence."""
    if _quoted(text, start, end) or _PLACEHOLDER.match(text, end):
        return True
    sentence = _sentence_start(text, start)
    closed = max((text.rfind(mark, sentence, start) for mark in '」”』’"'), default=-1)
    # 「示例“广东省…XX路1号”我没改就提交了 真实地址是…」: the example is what was quoted, not what follows it
    return bool(_EXAMPLE.search(text, max(sentence, closed + 1), start))


_RELATIVE = re.compile(r"\s*,\s*(?i:which|that)(?![A-Za-z])")


def _example_after(text: str, left: int, start: int, marker: str) -> bool:
    """An example marker ("in the format", 「例如」) after the last ``marker`` in ``text[left:start]``."""
    found = text.rfind(marker, left, start)
    return found >= 0 and bool(_EXAMPLE.search(text, found + len(marker), start))


def whose(text: str, start: int, end: int, *, role: str) -> Ownership:
    """Whose the profile value at ``text[start:end]`` is, said by ``role`` (``"user"``, else the agent's side).

    Examples and quoted values are ``other`` unless the clause also says they are the user's own; a hotline is
    judged by the caller (:mod:`memory.text.phones`), not here.
    """
    left, right = _clause_bounds(text, start, end, spaces=role == "user")
    sentence, sentence_end = _sentence_start(text, left), _sentence_end(text, end)
    if _REMOVED_BEFORE.search(text, left, start) or _REMOVED_AFTER.match(text, end):
        return Ownership("other", "removed")
    venue = _VENUE_AFTER.match(text, end)
    if venue:
        return _last_marker(venue.group(0), role, tail=True) or Ownership("other", venue.group("noun"))
    relative = _RELATIVE.match(text, end)
    if relative is not None:  # the relative clause after a comma is the value's tail: "…, which is yours"
        right = _clause_bounds(text, relative.end(), relative.end())[1]
    link = _TAIL_LINK.match(text[end:right][:48])
    tail = text[end : min(right, sentence_end)][: max(24, link.end() + 36 if link else 0)]
    found = _last_marker(tail, role, tail=True) if link else None
    lead = _last_marker(text[left:start], role)
    if (
        lead is not None
        and lead.owner == "user"
        and not _HOME.search(lead.marker)
        and _WORK_PATTERN[role].search(text, left, start)
    ):
        # "Your office address on file is …": the read-back names whose field it is, the workplace
        lead = Ownership("work", "workplace read back")
    if _OLD.search(text, max(left, start - 12), start) or (link and _OLD.search(tail)):
        return Ownership("other", "old")  # only its own clause says so: "no wait that's my old line, it's …" is new
    if _NOT_SENT_BEFORE.search(text, left, start) or _NOT_SENT_AFTER.search(text, end, min(len(text), end + 60)):
        return Ownership("other", "not sent there")
    found = found or lead
    if found is None:
        # Earlier clauses of the sentence: 「收件人是我妈，电话…」, 「寄到我公司，地址是…」. The agent's 「您的」 there
        # confirms nothing about this value (「您的订单已发货，如有问题请拨打…」), so only third parties count.
        earlier = _last_marker(text[sentence:left], role)
        if (
            role != "user"
            and earlier is not None
            and earlier.owner == "user"
            and _AGENT_INTRODUCES.search(text, sentence, left)
        ):
            earlier = Ownership("other", "the agent's own")
        if earlier is not None and (
            role == "user"
            or earlier.owner != "user"
            or (_BARE_FIELD.fullmatch(text[left:start]) and not tail.strip(" .。…"))
        ):
            found = earlier
    if found is None and role == "user" and _DISOWN.search(text, sentence, sentence_end):
        # "The receipt went to tomk@example.org, which isn't my account": a bare value in a sentence that denies
        # being the customer's
        found = Ownership("other", "disowned")
    if found is None and role == "user" and not text[sentence:start].strip():
        # The value opens its sentence: the sentence before says whose it is ("Can you send it to my office
        # instead? Suite 410, 1 Market Plaza …", "Not my address! 14 Harbour View, Cork …").
        found = _last_marker(text[_sentence_start(text, max(0, sentence - 1)) : sentence], role, tail=True)
    if found is not None and found.owner == "other" and _NEGATED_SELF.fullmatch(found.marker):
        found = _contact_before_denial(text, start, role) or found
    if found is None and role != "user" and _FOR_YOU.match(text, end):
        found = Ownership("user", "for you")  # "I'll use (202) 555-0144 for you"
    if found is not None and found.owner == "contact":
        found = _pronoun_for_a_courier(text, start, found)
    pasted = _pasted_block(text, start)
    if pasted is not None:
        return pasted
    if found is not None and found.owner == "work" and _CONTACTS_WORKPLACE.search(text, left, start):
        return Ownership("other", "a contact's workplace")
    if _WORKS_THERE.match(text, end) and (found is None or found.owner == "user"):
        found = Ownership("work", "works there")
    if found is None and _APPOSITIVE.search(text, sentence, start):
        found = Ownership("user", "appositive")
    if _CALLS_IN.match(text, end) and not (lead and lead.owner == "user"):
        return Ownership("other", "caller")
    if lead and lead.owner == "user" and _quoted(text, start, end):
        mark = text.rfind(lead.marker, left, start)
        if mark >= 0 and _quoted(text, mark, mark + len(lead.marker)):
            # the words that make it someone's own are quoted with it: a template's "Hi, my name is John Smith"
            return Ownership("other", "quoted")
    if is_quoted_or_example(text, start, end) and not (
        lead and lead.owner == "user" and not _example_after(text, left, start, lead.marker)
    ):
        # an example between the customer's field and the value is the field's format, not its value: "please
        # give your mobile in the format 07700 900000"
        return Ownership("other", "example")
    if found is not None:
        return found
    if role == "user" and _FORWARDED.search(text, 0, start):
        return Ownership("other", "forwarded")
    if role == "user":
        recipient = _recipient_in_sentence(text, start, end)
        if recipient is not None:
            return recipient
    return Ownership("user") if role == "user" else Ownership("other")


#: A line that announces a pasted or forwarded text below it (「转发一下供应商的邮件：」, "my accountant's details are
#: below", "Pasting my own signature so you have everything:"), a quoted line ("> T: 020 …") or a separator line
#: ("--", "-----") before the value.
_ANNOUNCES = re.compile(
    r"转发|转给|粘贴|复制|截图|签名|以下|如下|下面|原文|"
    r"(?i:(?<![A-Za-z])(?:forward(?:ed|ing)?|fwd|pasting|pasted|paste|copied|copying|below|signature|screenshot|"
    r"quoted?|original message|from:)(?![A-Za-z]))"
)
_OTHER_NAMED = re.compile(_OTHER + r"|供应商|(?i:supplier|vendor)")
_SEPARATOR_LINE = re.compile(r"^\s*(?:-{2,}|_{3,}|={3,})\s*$")
#: The announcement says the pasted text is the customer's own: 「我的签名」, "my own signature", "mine".
_OWN_PASTE = re.compile(r"(?<![给发转])我(?:自己)?的|(?i:(?<![A-Za-z])(?:my own|my|mine)(?![A-Za-z]))")
#: The agent's "your mobile, 07700 …", 「您的手机，138…」: the value stands beside the customer's own field.
_APPOSITIVE = re.compile(
    r"(?:您的?|(?i:your))\s*(?:own\s+)?(?:手机号?|电话|号码|邮箱|地址|"
    r"(?i:(?:mobile|phone|number|cell|e-?mail|address)(?![A-Za-z])))[\s,，:：]*$"
)


def _pasted_block(text: str, start: int) -> Ownership | None:
    """The value sits in a pasted or forwarded text: a quoted line, or a line below a separator or below a line
    that announces it. It is its sender's, unless the announcement says the text is the customer's own."""
    line_start = text.rfind("\n", 0, start) + 1
    if line_start == 0:
        return None  # one line: no block
    if text[line_start:start].lstrip().startswith(">"):
        return Ownership("other", "forwarded")
    for line in reversed(text[: line_start - 1].split("\n")):
        if _SEPARATOR_LINE.match(line) or (_ANNOUNCES.search(line) and line.rstrip().endswith((":", "：", "below"))):
            own = _OWN_PASTE.search(line) and not _CONTACT_NAMED.search(line) and not _OTHER_NAMED.search(line)
            return Ownership("user", "own paste") if own else Ownership("other", "forwarded")
    return None


#: 「收件人周桂芳」, 「使用人是王子豪」: the sentence names who receives or uses what is sent.
_RECIPIENT = re.compile(
    # 「收件人写我自己」 names the customer: no one else
    r"(?:收件人|收货人|使用人|联系人)(?:是|为|叫|写|填|:|：)?\s*(?P<who>(?![我是为叫写填])[\u4e00-\u9fff]{2,4})"
)
#: 「…，他电话 186…」: the value's sentence goes on to a third person's own contact details.
_THIRD_PERSONS_OWN = re.compile(r"(?<!其)(?P<who>[他她])(?!们)的?(?:电话|手机|号码|地址|邮箱|微信)")


def _recipient_in_sentence(text: str, start: int, end: int) -> Ownership | None:
    """A bare value in the user's sentence that names a recipient (「寄到…，收件人周桂芳，电话…」) or goes on to
    a third person's details (「王子豪，寄到…，他电话…」) is that person's: the user is telling where to send it
    and whom to call, not where they live."""
    sentence = _sentence_start(text, start)
    stop = _sentence_end(text, end)
    named = _RECIPIENT.search(text, sentence, stop)
    if named is not None and not (named.start() <= start < named.end()):
        return Ownership("contact", named.group("who"))
    own = _THIRD_PERSONS_OWN.search(text, end, stop)
    if own is not None and not _ACTS_ON_PRONOUN.match(text, max(sentence, own.start() - 6)):
        return Ownership("contact", own.group("who"))
    return None


def _contact_before_denial(text: str, start: int, role: str) -> Ownership | None:
    """「这是我姐的地址，不是我的：…」, "my sister's address, not mine: …": the denial hands the value to the contact
    named before it in the sentence."""
    sentence = _sentence_start(text, start)
    denials = list(_NEGATED_SELF.finditer(text, sentence, start))
    if not denials:
        return None
    before = _last_marker(text[sentence : denials[-1].start()], role)
    return before if before is not None and before.owner == "contact" else None


def _bare(marker: str) -> str:
    return re.sub(r"(?:'s|’s|的)$", "", marker)


def _pronoun_for_a_courier(text: str, start: int, found: Ownership) -> Ownership:
    """A pronoun (他/她, "his") whose nearest person before it is a courier, a driver or a technician is theirs."""
    if not _PRONOUN.fullmatch(_bare(found.marker)):
        return found
    pronouns = list(_PRONOUN.finditer(text, 0, start))
    if not pronouns:
        return found
    before = text[: pronouns[-1].start()]
    # 「快递员给她打过电话」: a pronoun the courier acts on is someone else, so that courier is no antecedent.
    person = max(
        (m.end() for m in _PERSON_OTHER.finditer(before) if not _ACTS_ON_PRONOUN.match(before, m.end())),
        default=-1,
    )
    named = (m.end() for m in _CONTACT_NAMED.finditer(before) if not _PRONOUN.fullmatch(_bare(m.group(0))))
    if person > max(named, default=-1):
        return Ownership("other", "courier")
    return found


# --------------------------------------------------------------------------------------------------------------
# A contact's details are kept only for a part in the service
# --------------------------------------------------------------------------------------------------------------

#: Someone takes a part in the service: receives, collects or signs for what is sent, or is to be called instead.
_DESIGNATION = re.compile(
    r"寄给|寄到|寄往|寄出|送给|送到|发给|发到|邮寄|配送|派送|转交|收件|收货|代收|代签|代取|签收|取件|取货|提货|自提|领取|"
    r"接收|接听|联系人|在家|(?:电话|号码)留|留(?:他|她)|"
    r"(?:联系|打给?|找|通知|call|contact|text|ring|reach)\s*"
    r"(?:他|她|him|her|我的?(?:" + _RELATIVES_ZH + r"|[妈爸哥姐弟妹]))|"
    r"(?i:(?<![A-Za-z])(?:deliver(?:s|ed|y|ing)?|send(?:s|ing)?|sent|ship(?:s|ped|ping)?|post(?:ed)?|mail(?:ed)?|"
    r"sign(?:s|ed|ing)? for|collect(?:s|ed|ing)?|pick(?:s|ed|ing)? (?:it |them |the \w+ )?up|recipient|"
    r"receiv(?:e|es|ed|ing)|leave (?:it|them) with|(?:be|is|'ll be|will be) (?:at )?home|emergency contact|"
    r"instead|on my behalf|(?:go|goes|come|comes) to (?:him|her|them)|call (?:my|him|her)|contact (?:my|him|her))"
    r"(?![A-Za-z]))"
)
#: The part is taken back or refused: 「本来想寄给我姐…算了」, "I was going to send it to my sister, but forget
#: that", 「你们别再打了」, "don't call him".
_WITHDRAWN = re.compile(
    r"算了|不用了|不寄了|(?:别|不要)(?:再)?(?:打|联系|寄|找)(?!我)|(?:不能|无法)(?:代为|帮您|为您)?(?:联系|打|寄|送)|"
    r"本来想|原本想|"
    # the part itself said with a negation: 「不想让她签收」, 「不让您室友代收了」, 「后续不会联系她」
    r"(?:不让|不想让|不要让|别让|不用|不会|不再|无需)[^，。；,;!?！？]{0,8}?(?:代收|代签|签收|收货|收件|代取|寄给|送给|"
    r"联系(?!我)|打给(?!我))|"
    r"(?i:(?<![A-Za-z])(?:forget (?:that|it|about it)|never ?mind|scratch that|was going to|"
    r"(?:do not|don't|never|stop) (?:call|contact|text|ring|send|deliver)|"
    r"(?:won't|will not|isn't|is not|aren't|are not|no longer|can't|cannot)\s+(?:[\w']+\s+){0,2}?"
    r"(?:send|deliver|sign|collect|receive|call|contact|authori[sz]ed|allowed))(?![A-Za-z]))"
)


#: The message corrects a detail given before: 「说错了」, 「写错了」, 「更正为」, "sorry, I mean", "typo" (not
#: 「改成」, which also asks for something new: 「能不能直接改成我的名字」).
_CORRECTS = re.compile(
    r"[说写记填打输]错|更正|不对|"
    r"(?i:(?<![A-Za-z])(?:wrong|typo|i mean|correction|corrected)(?![A-Za-z]))"
)


#: Between two values of one key, words that take the first back: 「邮箱 a@… 哦不是 是 b@…」, 「订单号 DD…841 是我
#: 打错了，正确的是 DD…814」, "21 Ashgrove Avenue... wait no, that's my old place… 8 Beech Terrace".
_TAKEN_BACK = re.compile(
    r"[说写记填打输弄]错|更正|不对|[哦噢啊呃]不|不是(?![^，。；,;]{0,12}[我您])|应该是|正确的是|"
    r"(?i:(?<![A-Za-z])(?:no wait|wait,? no|correction|i mean|i meant|oh sorry|actually|should (?:read|be)|"
    r"scratch that|typo|autocorrect|old (?:place|address|number|email)|moved|not that one)(?![A-Za-z]))"
)


def taken_back(text: str, first_end: int, second_start: int) -> bool:
    """The words between a value ending at ``first_end`` and another of its key starting at ``second_start``
    correct the first: the second replaces it, however unlike the two are."""
    return bool(_TAKEN_BACK.search(text, first_end, second_start))


def designates_contact(text: str) -> bool:
    """The message gives someone a part in the service: they receive, collect or sign for what is sent, or are
    to be called instead (「寄给我妈，她电话…」, "my neighbour will sign for it, he's on …", 「要是我电话没接就打我
    女儿的」), and the part is not taken back. A correction
    (「昨天我弟的电话说错了，是…」) corrects a part given before. A child's teacher's, a landlord's or a
    colleague's number mentioned for another reason gives the customer's memory nothing to act on, so no contact
    is kept for it."""
    return bool(_DESIGNATION.search(text) or _CORRECTS.search(text)) and not _WITHDRAWN.search(text)


def owner_of(text: str, start: int, end: int, *, role: str) -> Owner:
    """Shorthand for ``whose(...).owner``."""
    return whose(text, start, end, role=role).owner


# --------------------------------------------------------------------------------------------------------------
# "That is not mine"
# --------------------------------------------------------------------------------------------------------------

_KEY_NOUNS: tuple[tuple[str, str], ...] = (
    ("email", r"邮件地址|电子邮箱|邮箱|电子邮件|(?i:e-?mail(?:\s+address)?)"),
    (
        "phone",
        r"手机号码|手机号|手机|电话号码|电话|联系方式|(?<![单订码])号码|(?i:phone(?:\s+number)?|mobile|cell|number)",
    ),
    ("address", r"收货地址|收件地址|住址|地址|(?i:address)"),
    ("name", r"姓名|名字|(?i:name)"),
)
_NOT_PHONE_NUMBER = re.compile(r"(?i:order|tracking|account|case|ticket|reference|card|invoice)\s+$")
_DISOWN = re.compile(
    r"(?:不是|并不是|并非|不属于|不再是)\s*我(?:本人)?(?:的)?|"
    r"(?i:(?<![A-Za-z])(?:is\s*n['o]t|isn't|is not|'s not|’s not|are not|aren't|not)\s+(?:my|mine)(?![A-Za-z])|"
    r"(?:does\s*n['o]t|doesn't|does not|do not|don't)\s+belong\s+to\s+me)"
)


def _noun_key(segment: str, *, last: bool) -> str | None:
    hits: list[tuple[int, str]] = []
    for key, pattern in _KEY_NOUNS:
        for match in re.finditer(pattern, segment):
            if key == "phone" and _NOT_PHONE_NUMBER.search(segment[: match.start()]):
                continue  # "order number" is no phone
            hits.append((match.start(), key))
    if not hits:
        return None
    return (max if last else min)(hits)[1]


def disowned_mentions(text: str) -> list[str]:
    """The profile keys (phone, email, address, name) the speaker says are not theirs, in the order said.

    「这不是我的电话」→ ``["phone"]``; 「邮箱不对，那不是我的」→ ``["email"]``; "that email isn't mine" →
    ``["email"]``. The key noun is the first one after the denial in its clause (「不是我的地址」, "not my address"),
    else the last one before it in the same sentence. No profile noun, no key ("that's not my fault").
    """
    keys: list[str] = []
    for match in _DISOWN.finditer(text):
        after = re.split(r"[，。；！？,;!?\n]", text[match.end() : match.end() + 20], maxsplit=1)[0]
        key = _noun_key(after, last=False) or _noun_key(
            text[_sentence_start(text, match.start()) : match.start()], last=True
        )
        if key is not None and key not in keys:
            keys.append(key)
    return keys
