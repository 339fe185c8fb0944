"""One chat turn, the same for the WebSocket consumer and the REST endpoint.

- ``run`` — ``run_turn``: store, prepare, generate with tool rounds, finish, in named steps.
- ``prepare`` — the stored message becomes the prompt: extraction, feedback, recall, the two channels.
- ``tool_rounds`` — the model's tool calls inside a turn, the prompt rebuilt around their results.
- ``finish`` — the reply stored, what the agent stated extracted, feedback.
- ``forget`` — 「忘掉我的地址」 said in chat: forgotten at once, answered without the model.
- ``warmup`` — what the first turn of a worker would otherwise load, loaded at start.
- ``knowledge`` — the tenant's articles searched beside recall; citations and grounded mode.
"""

from chat.turn.warmup import start as start_warmup

__all__ = ["start_warmup"]
