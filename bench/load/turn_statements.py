"""Every SQL statement of the in-process chat turn, timed from the client: which statements a turn makes,
how often, and how long each takes with its round trip (PostgreSQL's work included).

    nice -n 5 .venv/bin/python bench/load/turn_statements.py --sessions 30 --turns 4

It runs ``bench/load/turn_profile.py`` with the same arguments (its tables are printed too) with a Django
``execute_wrapper`` on the connection the turns use (they run on one thread), timing each statement, grouped
by its first 100 characters. The warm-up turns are included, and so is turn_profile's own
``SELECT pg_backend_pid()`` (how it finds the backend whose CPU it reads); the tenant and sessions are set up
before the wrapper is on, and the pool's own checks are not Django statements: neither appears.
"""

from __future__ import annotations

import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import bench.load.turn_profile as turn_profile  # noqa: E402

_timings: dict[str, list[float]] = defaultdict(list)


def timed(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
    """Django's ``execute_wrapper`` protocol: time the statement, grouped by its first 100 characters."""
    started = time.perf_counter()
    try:
        return execute(sql, params, many, context)
    finally:
        _timings[re.sub(r"\s+", " ", sql.strip())[:100]].append((time.perf_counter() - started) * 1000)


def main() -> None:
    turn_profile.main(execute_wrapper=timed)
    total = sum(sum(times) for times in _timings.values())
    print("\n| total ms | count | mean ms | statement |\n| --- | --- | --- | --- |")
    for sql, times in sorted(_timings.items(), key=lambda item: -sum(item[1]))[:30]:
        print(f"| {sum(times):.1f} | {len(times)} | {sum(times) / len(times):.2f} | `{sql}` |")
    print(f"\n{total:.0f} ms in {sum(len(t) for t in _timings.values())} statements")


if __name__ == "__main__":
    main()
