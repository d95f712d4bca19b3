"""Benchmark: the floors our parts set under three of the server's targets.

Three targets of the project (first ask ≤ 150 ms after `initialized`, idle RSS, the server's own
time per model call at a 1M-token history) are measured on lsp-agent by `first_ask.py` and
`overhead.py`. This script measures the same figures on the smallest programs built from the
same parts, so the README can say how much of each figure is theirs:

- the interpreter alone, with asyncio (which imports ssl), and with the model's HTTP client too
  (httpx, with `model/client.py` and `model/body.py` beside it): resident memory (and, for the
  record, with pygls' server instead, the LSP library the server used before, which the tests
  still use);
- one streamed POST to the scripted endpoint on loopback, bodies of 50 KB and 3.5 MB (10k and
  1M tokens of history), CPU time of the client process per request: the providers' way
  (httpx's `AsyncClient` made by `client.new_client`, the body handed over in the parts the
  encoder makes, the answer read raw and capped by `body.pieces`), httpx as its documentation
  shows it (the body whole, `aiter_bytes`),
  and the same exchange written by hand on an asyncio socket (a connection per request, the
  head and body joined and sent, the reply read: nothing else).

`--before DIR` adds the HTTP client of another checkout that has one of its own
(`lsp_agent/model/wire.py`, which the providers used until httpx came back), measured in the
same runs. Each client runs in its own process.

Usage: .venv/bin/python benchmarks/floors.py [--runs 10] [--before DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from tests.fake_model import ScriptedModel, reply

ROOT = Path(__file__).resolve().parents[1]

RSS_OF = """
{imports}
for line in open("/proc/self/status"):
    if line.startswith("VmRSS:"):
        print(int(line.split()[1]) / 1024)
"""

HTTP_CLIENT = """
import asyncio, resource, sys

from lsp_agent.model.encoding import json_parts

URL, SIZE, CALLS, WARM, WAY = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), 3, sys.argv[4]
# In the parts the encoder gives the providers: a history's run of 64 KiB or more on its own.
MESSAGES = [b'[{"role":"user","content":"', b"x" * SIZE, b'"}]']
PARTS = json_parts([("model", b'"m"'), ("stream", b"true"), ("messages", MESSAGES)])
BODY = b"".join(PARTS)


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def ours():
    from lsp_agent.model import body, client

    http = client.new_client(client.route(URL), user_agent="lsp-agent")
    try:
        for call in range(WARM + CALLS):
            if call == WARM:
                start = cpu()
            headers = {"content-type": "application/json", "content-length": str(len(BODY))}
            async with http.stream(
                "POST", URL, content=client.content(PARTS), headers=headers
            ) as response:
                async for _ in body.pieces(response):
                    pass
    finally:
        await http.aclose()
    return (cpu() - start) / CALLS


async def httpx_plain():
    import httpx

    async with httpx.AsyncClient() as http:
        for call in range(WARM + CALLS):
            if call == WARM:
                start = cpu()
            headers = {"content-type": "application/json"}
            async with http.stream("POST", URL, content=BODY, headers=headers) as response:
                async for _ in response.aiter_bytes():
                    pass
    return (cpu() - start) / CALLS


async def wire():
    from lsp_agent.model.http import tls_context
    from lsp_agent.model.wire import Client

    http = Client(tls=tls_context())
    try:
        for call in range(WARM + CALLS):
            if call == WARM:
                start = cpu()
            headers = {"content-type": "application/json"}
            async with http.stream("POST", URL, content=PARTS, headers=headers) as response:
                async for _ in response.aiter_bytes():
                    pass
    finally:
        await http.aclose()
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


WAYS = {"ours": ours, "httpx": httpx_plain, "wire": wire, "hand": by_hand}
print(asyncio.run(WAYS[WAY]()))
"""

WAYS = {
    "ours": "the providers' way (httpx, parts in, raw and capped out)",
    "httpx": "httpx as documented (aiter_bytes)",
    "wire": "the hand-written client of --before (model/wire.py)",
    "hand": "by hand on an asyncio socket (a connection each, head and body joined)",
}


def run(code: list[str], code_from: Path) -> str:
    """What `python -c` prints, run with the package of `code_from` (its folder first on the
    path, before the installed one)."""
    environment = {**os.environ, "PYTHONPATH": str(code_from)}
    return subprocess.run(
        [sys.executable, *code],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
        cwd=code_from,
    ).stdout


def rss_of(imports: str, code_from: Path = ROOT) -> float:
    return float(run(["-c", RSS_OF.format(imports=imports)], code_from))


def http_floor(size: int, calls: int, way: str, code_from: Path) -> float:
    """CPU per streamed POST of a `size`-byte body, the `way` named."""
    with ScriptedModel() as model:
        for _ in range(calls + 3):
            model.add(reply("hi"))
        url = f"{model.base_url}/chat/completions"
        return float(run(["-c", HTTP_CLIENT, url, str(size), str(calls), way], code_from))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--before", type=Path, default=None, help="a checkout with model/wire.py")
    args = parser.parse_args()
    before = args.before.resolve() if args.before is not None else None
    ways = {way: ROOT for way in ("ours", "httpx", "hand")}
    if before is not None:
        ways["wire"] = before
    clients = "import asyncio, lsp_agent.model.client, lsp_agent.model.body"
    line = (
        f"resident memory: the interpreter {rss_of('pass'):.1f} MB, with asyncio "
        f"{rss_of('import asyncio'):.1f} MB, with the model's HTTP client too "
        f"{rss_of(clients):.1f} MB"
    )
    if before is not None:
        wire = rss_of("import asyncio, lsp_agent.model.wire", before)
        line += f" (the hand-written one of --before: {wire:.1f} MB"
    else:
        line += " ("
    print(f"{line}; with pygls' server: {rss_of('import asyncio, pygls.lsp.server'):.1f} MB)")
    for label, size in (("50 KB (10k tokens)", 50_000), ("3.5 MB (1M tokens)", 3_500_000)):
        figures: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(max(1, args.runs // 3)):
            for way, code_from in ways.items():  # interleaved: a busy moment hits all alike
                figures[way].append(http_floor(size, 40, way, code_from))
        print(f"one streamed POST of {label}, client CPU:")
        for way, values in figures.items():
            print(f"  {WAYS[way]}: {statistics.median(values) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
