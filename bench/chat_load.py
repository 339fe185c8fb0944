"""Chat load: N concurrent WebSocket sessions against a fake Ollama that streams
instantly, so what is measured is memdesk itself (store, extract, recall,
prompt, persist) — plus the seed's comparison (S20): prompt tokens of our
two-channel prompt vs the raw history at turns 10/30/50 of a 50-turn dialogue.

    nice -n 10 .venv/bin/python bench/chat_load.py --sessions 10,100,300 --turns 5

memdesk runs as a real server (uvicorn, one worker process, in a subprocess)
on its own benchmark database; clients are asyncio WebSocket clients in this
process; the fake Ollama is a real HTTP server in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    REPO_ROOT,
    log,
    machine_info,
    now_iso,
    setup_django,
    summarise,
    table,
    write_result,
)

DB = "memdesk_bench_chat"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(ollama_host: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = {
        **os.environ,
        "MEMDESK_DB_NAME": DB,
        "OLLAMA_HOST": ollama_host,
        "OLLAMA_TIMEOUT_S": "30",
        "LOG_LEVEL": "WARNING",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "warning", "--no-access-log"],
        cwd=REPO_ROOT, env=env,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("memdesk did not start")


def make_tenant() -> str:
    from tenants.services import do_create_tenant

    slug = f"load-{random.randrange(10**8)}"
    provisioned = do_create_tenant(slug, slug)
    # The load is one tenant's; lift its per-minute limits so they do not cap the figures.
    limits = {"per_session_per_minute": 10_000, "per_tenant_per_minute": 1_000_000}
    provisioned.tenant.settings = {"rate_limits": limits}
    provisioned.tenant.save(update_fields=["settings"])
    return provisioned.api_key


# Sessions are opened by tenants' back ends over time, not in one burst: at
# most this many at once. (A burst of 100 concurrent HTTP requests takes 100
# threads and 100 database connections under ASGI — see bench/RESULTS.md.)
OPENING_AT_ONCE = 8


async def one_session(
    base: str, key: str, n: int, turns: int, stats: dict[str, list], errors: list, opening: asyncio.Semaphore
) -> None:
    import httpx
    import websockets

    async with opening, httpx.AsyncClient(base_url=base, timeout=60) as http:
        response = await http.post(
            "/api/v1/sessions", json={"end_user_id": f"user-{n}"}, headers={"Authorization": f"Bearer {key}"}
        )
    if response.status_code != 201:
        errors.append({"code": f"http_{response.status_code}", "message": response.text[:200]})
        return
    opened = response.json()
    marker = f"CODE{n:04d}X"
    url = base.replace("http", "ws") + f"/ws/chat/?session_id={opened['session_id']}&token={opened['token']}"
    try:
        async with websockets.connect(url, open_timeout=60, max_size=2**22) as ws:
            for turn in range(turns):
                text = f"我的订单号是 {marker}，第{turn}轮" if turn == 0 else f"帮我查一下订单进度（第{turn}轮）"
                sent = time.perf_counter()
                await ws.send(json.dumps({"type": "message", "text": text, "client_msg_id": f"{n}-{turn}"}))
                ack_at = first_delta = None
                while True:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), timeout=120))
                    now = time.perf_counter()
                    if frame["type"] == "ack":
                        ack_at = now
                    elif frame["type"] == "delta" and first_delta is None:
                        first_delta = now
                    elif frame["type"] == "done":
                        stats["turn_ms"].append((now - sent) * 1000)
                        stats["ack_ms"].append((ack_at - sent) * 1000)
                        stats["ack_to_first_delta_ms"].append((first_delta - ack_at) * 1000)
                        break
                    elif frame["type"] == "error":
                        errors.append(frame)
                        break
    except Exception as exc:  # noqa: BLE001 - a load test counts every failure
        errors.append({"code": type(exc).__name__, "message": str(exc)[:200]})


def leaks(fake: Any, sessions: int) -> int:
    """Prompts that mention another session's order code."""
    import re

    count = 0
    for body in fake.chat_requests:
        text = " ".join(m.get("content", "") for m in body.get("messages", []))
        codes = set(re.findall(r"CODE\d{4}X", text))
        if len(codes) > 1:
            count += 1
    return count


async def load(base: str, key: str, sessions: int, turns: int) -> dict[str, Any]:
    stats: dict[str, list] = {"turn_ms": [], "ack_ms": [], "ack_to_first_delta_ms": []}
    errors: list = []
    started = time.perf_counter()
    opening = asyncio.Semaphore(OPENING_AT_ONCE)
    await asyncio.gather(*[one_session(base, key, n, turns, stats, errors, opening) for n in range(sessions)])
    elapsed = time.perf_counter() - started
    return {
        "sessions": sessions,
        "turns_per_session": turns,
        "turns": len(stats["turn_ms"]),
        "turns_per_s": round(len(stats["turn_ms"]) / elapsed, 2),
        "errors": len(errors),
        "error_samples": errors[:3],
        **{name: summarise(values) for name, values in stats.items()},
    }


DIALOGUE = {
    1: "你好，我叫张伟", 5: "我的订单号是 ABC123", 10: "帮我取消这个订单吧", 20: "我换号了，新号是 13912345678",
    30: "订单的事先不说了，我要投诉快递员，他态度很差", 50: "你还记得我叫什么、订单号是多少吗？",
}  # fmt: skip
FILLER = ["好的", "嗯嗯，明白", "还有一个问题", "请稍等一下", "谢谢你", "这个我知道了", "那运费怎么算", "可以开发票吗"]


def seed_comparison(base: str, key: str, fake: Any) -> list[dict[str, Any]]:
    """S20: our prompt vs the raw history, at turns 10, 30 and 50."""
    import httpx

    from chat.tokens import count_messages

    headers = {"Authorization": f"Bearer {key}"}
    sid = httpx.post(base + "/api/v1/sessions", json={"end_user_id": "zhangwei"}, headers=headers).json()["session_id"]
    history: list[dict[str, str]] = []
    rows = []
    for turn in range(1, 51):
        text = DIALOGUE.get(turn, FILLER[turn % len(FILLER)] + f"（第{turn}轮）")
        fake.script(f"好的，已为您处理第{turn}轮的问题，请问还有什么可以帮您？")
        started = time.perf_counter()
        reply = httpx.post(f"{base}/api/v1/sessions/{sid}/messages", json={"text": text}, headers=headers, timeout=60)
        elapsed_ms = (time.perf_counter() - started) * 1000
        body = reply.json()
        ours = fake.chat_requests[-1]["messages"]
        raw = [ours[0]] + history + [{"role": "user", "content": text}]  # same system role, all turns verbatim
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": body["reply"]}]
        if turn in (10, 30, 50):
            ours_tokens, raw_tokens = count_messages(ours), count_messages(raw)
            rows.append({
                "turn": turn, "our_prompt_tokens": ours_tokens, "raw_history_tokens": raw_tokens,
                "ratio": round(ours_tokens / raw_tokens, 3), "platform_ms": round(elapsed_ms, 1),
                "usage_prompt_tokens": body["usage"]["prompt_tokens"],
            })  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", default="10,100,300")
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args()

    setup_django(DB, fresh=True)
    from tests.fake_ollama import FakeOllama, Reply

    results: dict[str, Any] = {"benchmark": "chat_load", "date": now_iso(), "machine": machine_info(), "runs": []}
    with FakeOllama(default_reply=Reply(deltas=["好的，", "已为您", "查询，", "订单", "正在", "配送中。"])) as fake:
        server, base = start_server(fake.host)
        try:
            key = make_tenant()
            asyncio.run(load(base, key, 2, 1))  # warm up: model load, first connections
            for sessions in [int(x) for x in args.sessions.split(",")]:
                fake.requests.clear()
                log(f"{sessions} concurrent sessions × {args.turns} turns …")
                run = asyncio.run(load(base, make_tenant(), sessions, args.turns))
                run["cross_session_leaks"] = leaks(fake, sessions)
                results["runs"].append(run)
            fake.requests.clear()
            results["seed_comparison"] = seed_comparison(base, make_tenant(), fake)
        finally:
            server.terminate()
            server.wait(timeout=30)

    print(table(
        ["sessions", "turns", "turns/s", "turn p50 ms", "turn p95 ms", "ack p95 ms", "ack→delta p95 ms", "errors",
         "leaks"],
        [[r["sessions"], r["turns"], r["turns_per_s"], r["turn_ms"]["p50"], r["turn_ms"]["p95"], r["ack_ms"]["p95"],
          r["ack_to_first_delta_ms"]["p95"], r["errors"], r["cross_session_leaks"]] for r in results["runs"]],
    ))  # fmt: skip
    print(table(
        ["turn", "our prompt tokens", "raw history tokens", "ratio", "platform ms"],
        [[r["turn"], r["our_prompt_tokens"], r["raw_history_tokens"], r["ratio"], r["platform_ms"]]
         for r in results["seed_comparison"]],
    ))  # fmt: skip
    path = write_result("chat_load", results)
    print(f"written to {path}")


if __name__ == "__main__":
    main()
