"""The prompt (S1, S6, S10, S15, S19). Where the prompt is trimmed: ``build``.

- ``build`` — assembly within an exact token budget; parts cut whole, never mid-sentence.
- ``tokens`` — exact token counts for Qwen2.5 prompts.
- ``summary`` — the summary channel: a keyword-weighted LexRank summary of the last turns.
- ``prepared`` — ``PreparedTurn``, what a turn's model calls need.
"""

# Nothing here is imported by another app: its modules are this app's own.
__all__: list[str] = []
