"""Benchmark: the floors our parts set under three of the server's targets.

Three targets of the project (first ask ≤ 150 ms after `initialized`, idle RSS ≤ 40 MB, the
server's own time per model call ≤ 2 ms at a 1M-token history) are measured on lsp-agent by
`first_ask.py` and `overhead.py`. This script measures the same figures on the smallest
programs built from the same parts, so the README can say how much of each figure is ours:

- the interpreter alone, with asyncio (which imports ssl), and with our HTTP client too:
  resident memory (and, for the record, with httpx and with pygls' server instead: the HTTP
  client and the LSP library the server used before, both still used by the tests);
- one streamed POST to the scripted endpoint on loopback, bodies of 50 KB and 3.5 MB (10k and
  1M tokens of history), CPU time of the client process per request: through our own client
  (`lsp_agent/model/wire.py`, what the providers use), through httpx's `AsyncClient` (what they
  used before), and the same exchange written by hand on an asyncio socket (a connection per
  request, the head and body joined and sent, the reply read: nothing else).

Each runs in its own process. Usage: .venv/bin/python benchmarks/floors.py [--runs 10]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from tests.fake_model import ScriptedModel, reply

RSS_OF = """
{imports}
for line in open("/proc/self/status"):
    if line.startswith("VmRSS:"):
        print(int(line.split()[1]) / 1024)
"""

HTTP_CLIENT = """
import asyncio, resource, sys

import httpx

URL, SIZE, CALLS, WARM = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), 3
BODY = b'{"model":"m","stream":true,"messages":[{"role":"user","content":"' + b"x" * SIZE + b'"}]}'


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def with_httpx():
    async with httpx.AsyncClient() as client:
        for call in range(WARM + CALLS):
            if call == WARM:
                start = cpu()
            headers = {"content-type": "application/json"}
            async with client.stream("POST", URL, content=BODY, headers=headers) as response:
                async for _ in response.aiter_bytes():
                    pass
    return (cpu() - start) / CALLS


async def with_wire():
    from lsp_agent.model.http import tls_context
    from lsp_agent.model.wire import Client

    client = Client(tls=tls_context())
    try:
        for call in range(WARM + CALLS):
            if call == WARM:
                start = cpu()
            headers = {"content-type": "application/json"}
            async with client.stream("POST", URL, content=BODY, headers=headers) as response:
                async for _ in response.aiter_bytes():
                    pass
    finally:
        await client.aclose()
    return (cpu() - start) / CALLS


async def by_hand():
    host, port = URL.split("//")[1].split("/")[0].split(":")
    path = "/" + URL.split("//")[1].split("/", 1)[1]
    head = (
        f"POST {path} HTTP/1.1\\r\\nHost: {host}:{port}\\r\\nContent-Type: application/json\\r\\n"
        f"Content-Length: {len(BODY)}\\r\\nConnection: close\\r\\n\\r\\n"
    ).encode()
    for call in range(WARM + CALLS):
        if call == WARM:
            start = cpu()
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(head + BODY)
        await writer.drain()
        while await reader.read(65536):
            pass
        writer.close()
        await writer.wait_closed()
    return (cpu() - start) / CALLS


print(asyncio.run(with_httpx()), asyncio.run(with_wire()), asyncio.run(by_hand()))
"""


def rss_of(imports: str) -> float:
    code = RSS_OF.format(imports=imports)
    return float(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )


def http_floor(size: int, calls: int) -> tuple[float, float, float]:
    """CPU per streamed POST of a `size`-byte body: through httpx, through our client, and by
    hand."""
    with ScriptedModel() as model:
        for _ in range(3 * (calls + 3)):
            model.add(reply("hi"))
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                HTTP_CLIENT,
                f"{model.base_url}/chat/completions",
                str(size),
                str(calls),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    return float(out[0]), float(out[1]), float(out[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    print(
        f"resident memory: the interpreter {rss_of('pass'):.1f} MB, with asyncio "
        f"{rss_of('import asyncio'):.1f} MB, with our HTTP client too "
        f"{rss_of('import asyncio, lsp_agent.model.wire'):.1f} MB (with httpx instead: "
        f"{rss_of('import asyncio, httpx'):.1f} MB; with pygls' server: "
        f"{rss_of('import asyncio, pygls.lsp.server'):.1f} MB)"
    )
    for label, size in (("50 KB (10k tokens)", 50_000), ("3.5 MB (1M tokens)", 3_500_000)):
        results = [http_floor(size, 40) for _ in range(max(1, args.runs // 3))]
        httpx_ms, ours_ms, hand_ms = (
            statistics.median(r[column] for r in results) * 1000 for column in range(3)
        )
        print(
            f"one streamed POST of {label}: client CPU through httpx {httpx_ms:.2f} ms, "
            f"through ours (model/wire.py) {ours_ms:.2f} ms, written by hand on an asyncio "
            f"socket (a connection each, head and body joined) {hand_ms:.2f} ms"
        )


if __name__ == "__main__":
    main()
