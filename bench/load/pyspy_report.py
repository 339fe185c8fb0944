"""Summarise a py-spy ``--format raw`` profile (collapsed stacks): where a process's time went.

Record a worker under load first (py-spy is not a dependency: ``.venv/bin/pip install py-spy``)::

    nice -n 5 .venv/bin/python bench/load/chat_load.py --sessions 30 --mode paced --duration-s 90 --workers 1 \\
        --redis-url redis://127.0.0.1:6379/13 --no-seed-comparison &
    sleep 60; .venv/bin/py-spy record -p "$(pgrep -f 'uvicorn config.asgi' | head -1)" --gil -r 250 -d 45 \\
        -f raw -o /tmp/worker.raw --nonblocking

then::

    .venv/bin/python bench/load/pyspy_report.py /tmp/worker.raw                 # top functions, inclusive share
    .venv/bin/python bench/load/pyspy_report.py /tmp/worker.raw --match recall  # only functions matching
    .venv/bin/python bench/load/pyspy_report.py /tmp/worker.raw --under '^extract_and_store ' --depth 2

``--gil`` samples only the thread holding the GIL: the shares are of the worker's Python time, which is
what overlapping turns compete for. A function's share is inclusive (it and everything it called); with
``--under``, the time spent below the first frame matching the pattern is split by the next ``--depth``
frames. Line numbers are dropped, so one function is one row.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

_LINE = re.compile(r":\d+\)")


def read_stacks(path: Path) -> Iterator[tuple[list[str], int]]:
    """Each sample line of a raw py-spy file as (frames outermost first, without line numbers; count)."""
    for line in path.read_text().splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and count.isdigit():
            yield [_LINE.sub(")", frame) for frame in stack.split(";")], int(count)


def inclusive(path: Path) -> tuple[Counter[str], int]:
    """Samples per function, counting a function once per stack however often it recurs; and the total."""
    shares: Counter[str] = Counter()
    total = 0
    for frames, count in read_stacks(path):
        total += count
        for frame in set(frames):
            shares[frame] += count
    return shares, total


def under(path: Path, pattern: str, depth: int) -> tuple[Counter[str], int, int]:
    """Samples below the first frame matching ``pattern``, by the next ``depth`` frames (``<self>`` for
    time in the frame itself); the samples under it; the total."""
    wanted = re.compile(pattern)
    children: Counter[str] = Counter()
    inside = total = 0
    for frames, count in read_stacks(path):
        total += count
        at = next((i for i, frame in enumerate(frames) if wanted.search(frame)), None)
        if at is None:
            continue
        inside += count
        children[";".join(frames[at + 1 : at + 1 + depth]) or "<self>"] += count
    return children, inside, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw", type=Path, help="a py-spy record --format raw output")
    parser.add_argument("--top", type=int, default=40, help="rows to print")
    parser.add_argument("--match", default="", help="only functions whose row matches this regular expression")
    parser.add_argument("--under", default="", help="split the time below the first frame matching this")
    parser.add_argument("--depth", type=int, default=1, help="frames below --under that name a row")
    args = parser.parse_args()
    if args.under:
        children, inside, total = under(args.raw, args.under, args.depth)
        print(f"under {args.under!r}: {inside} of {total} samples ({100 * inside / max(total, 1):.1f}%)")
        rows = children.most_common(args.top)
    else:
        shares, total = inclusive(args.raw)
        print(f"{total} samples")
        match = re.compile(args.match)
        rows = [(name, n) for name, n in shares.most_common() if match.search(name)][: args.top]
    for name, count in rows:
        print(f"{100 * count / max(total, 1):5.1f}%  {name[:180]}")


if __name__ == "__main__":
    main()
