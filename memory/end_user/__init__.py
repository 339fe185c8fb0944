"""What memdesk remembers about an end user, as the end user sees and changes it.

- ``memories`` — the list, "forget this", "this is wrong"; every change's actor is the end user.
- ``forget`` — 「忘掉我的地址」 / "forget my phone number": a forget request said in chat, parsed.
- ``views`` — the REST views under ``/api/v1/me/memories``.
"""

from memory.end_user.forget import ForgetRequest, Kind, parse_forget_request
from memory.end_user.memories import do_forget_matching
from memory.end_user.views import MeMemoriesView, MeMemoryCorrectView, MeMemoryForgetView

__all__ = [
    "ForgetRequest",
    "Kind",
    "MeMemoriesView",
    "MeMemoryCorrectView",
    "MeMemoryForgetView",
    "do_forget_matching",
    "parse_forget_request",
]
