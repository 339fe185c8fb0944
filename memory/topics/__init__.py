"""A session's topics (S10).

- ``detect`` — when a message switches topic (the runtime then inserts ``<|context_reset|>``).
- ``domains`` — what matter a message is about, by its nearest examples (``data/``).
- ``freeze`` — the topic a session is on, the ones it left frozen, and the switch and return between them.
- ``values`` — which attribute a word is a value of (a cuisine, a kind of attraction, a hotel facility), from the
  labelled dialogue states' values (``data/woz_values.json``).
"""

from memory.topics.detect import TopicSwitch
from memory.topics.domains import warm_up as warm_up_domains
from memory.topics.freeze import attach_tool_context

__all__ = ["TopicSwitch", "attach_tool_context", "warm_up_domains"]
