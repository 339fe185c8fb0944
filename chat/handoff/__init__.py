"""Handing a conversation to a person (API.md, "Handoff to a person"). Where a handoff is claimed: ``state``.

- ``state`` — the state machine: request, claim, staff reply, release, rate.
- ``triggers`` — a turn's side: deferring to a person, and the triggers that ask for one.
- ``options`` — a tenant's handoff settings and the model's ``handoff_to_human`` tool.
- ``offline`` — business hours, who is online, the message left for the team.
- ``note`` — what a staff member reads before answering.
- ``frames`` — the end user's side on the chat socket.
- ``consumer`` — the staff console's socket, ``ws/staff/``.
- ``views`` — the REST endpoints and the console page; ``console_text`` the console's words.
"""

from chat.handoff.views import SessionHandoffView, SessionRatingView, SessionReleaseView, staff_console

__all__ = ["SessionHandoffView", "SessionRatingView", "SessionReleaseView", "staff_console"]
