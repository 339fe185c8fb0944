"""Every SQL statement of the in-process chat turn, timed from the client: which statements a turn makes,
how often, and how long each takes with its round trip (PostgreSQL's work included).

    nice -n 5 .venv/bin/python bench/turn_statements.py --sessions 30 --turns 4

It runs ``bench/turn_profile.py`` with the same arguments (its stage table is printed too) while timing
each ``execute`` of Django's cursors, grouped by the statement's first 100 characters. Session and tenant
set-up statements are included (they run once per session), and so is turn_profile's own
``SELECT pg_backend_pid()`` (how it finds the backend whose CPU it reads); the pool's own checks are not
Django statements and do not appear.
"""

from __future__ import annotations

import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench.turn_profile as turn_profile  # noqa: E402

_timings: dict[str, list[float]] = defaultdict(list)


def _timed_setup(*args: Any, **kwargs: Any) -> Any:
    """turn_profile's database set-up, then Django's cursors timed from here on."""
    result = _setup_django(*args, **kwargs)
    from django.db.backends import utils

    execute = utils.CursorWrapper.execute

    def timed(self: Any, sql: str, params: Any = None) -> Any:
        started = time.perf_counter()
        try:
            return execute(self, sql, params)
        finally:
            _timings[re.sub(r"\s+", " ", sql.strip())[:100]].append((time.perf_counter() - started) * 1000)

    utils.CursorWrapper.execute = timed  # type: ignore[method-assign]
    return result


_setup_django = turn_profile.setup_django


def main() -> None:
    turn_profile.setup_django = _timed_setup  # type: ignore[assignment]
    turn_profile.main()
    total = sum(sum(times) for times in _timings.values())
    print("\n| total ms | count | mean ms | statement |\n| --- | --- | --- | --- |")
    for sql, times in sorted(_timings.items(), key=lambda item: -sum(item[1]))[:30]:
        print(f"| {sum(times):.1f} | {len(times)} | {sum(times) / len(times):.2f} | `{sql}` |")
    print(f"\n{total:.0f} ms in {sum(len(t) for t in _timings.values())} statements")


if __name__ == "__main__":
    main()
