"""The httpx client a provider talks to its endpoint through, set up as the README promises.

httpx speaks HTTP: connections kept and reused, TLS, a proxy's tunnel, timeouts. What is ours,
beside it, is where httpx does something other than what lsp-agent promises its users:

- Certificates: the system's store and certifi's bundle, or only `SSL_CERT_FILE` /
  `SSL_CERT_DIR` when set. httpx trusts certifi's bundle alone, which refuses a company's own
  authority installed in the system (the one its inspecting proxy signs with).
- The route: a model on this machine (localhost, 127.0.0.0/8, ::1) is reached directly whatever
  the proxy variables say; otherwise `HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY` and `NO_PROXY`
  as Python's `urllib` reads them. httpx never exempts loopback, and reads `NO_PROXY` its own
  way. A provider talks to one origin, so the route is decided once, when its client is made.
- Header values are checked before anything is sent: h11 refuses one with a line break with an
  error that quotes it, and an API key must never be shown.
- A request body goes as the parts the encoder made, its length said, never joined into one
  string (`content`).

Reading the answer's body is `body.py`'s job.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import ipaddress
import os
import re
import ssl
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Mapping, Sequence

import httpx

from lsp_agent.model import ProviderError, body

DEFAULT_PORTS = {"http": 80, "https": 443}
PORT_RANGE = "the URL's port is not a number from 1 to 65535"
UNPRINTABLE = re.compile(r"[^\t\x20-\x7e]")
"""What a header value may not hold: anything but tabs and printable ASCII."""


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The certificates every endpoint (and an https proxy) is checked against, loaded once per
    process: reading them takes tens of milliseconds, and the server does it while it starts.

    `SSL_CERT_FILE` / `SSL_CERT_DIR`, when set, name the only ones trusted. Otherwise the
    system's store (where a company installs its own authority, for the proxy that inspects its
    traffic) and certifi's bundle (for systems whose store Python cannot find).
    """
    cafile = os.environ.get("SSL_CERT_FILE") or None
    capath = os.environ.get("SSL_CERT_DIR") or None
    try:
        if cafile or capath:
            context = ssl.create_default_context(cafile=cafile, capath=capath)
        else:
            context = ssl.create_default_context()
            with contextlib.suppress(ImportError):
                import certifi

                context.load_verify_locations(certifi.where())
    except (OSError, ssl.SSLError) as error:
        named = " and ".join(
            f"{name}={value}"
            for name, value in (("SSL_CERT_FILE", cafile), ("SSL_CERT_DIR", capath))
            if value
        )
        raise ProviderError(
            f"the certificates {named or 'of this system'} cannot be read ({error}): point "
            "SSL_CERT_FILE at a readable bundle of certificates, or unset it"
        ) from None
    context.set_alpn_protocols(["http/1.1"])
    return context


@dataclasses.dataclass(frozen=True)
class Route:
    """How a provider's requests reach its endpoint."""

    address: str
    """The endpoint's `host:port`, as messages name it."""
    host: str = ""
    """The endpoint's host, as its certificate must name it."""
    proxy: httpx.Proxy | None = None
    """The proxy from the environment the requests go through; None: directly."""
    proxy_shown: str = ""
    """The proxy as messages name it: scheme, host and port, never its credentials."""
    variables: str = "HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and NO_PROXY"
    """The environment variables that chose the proxy, for a sentence about it."""
    url_problem: str | None = None
    """Why the endpoint's URL cannot be used, or None."""
    proxy_problem: str | None = None
    """Why the proxy the environment names cannot be used, or None."""


def route(url: str) -> Route:
    """The route to the endpoint at `url`: its address, and the proxy the environment names for
    it unless it is on this machine or in `NO_PROXY`."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as error:  # "Invalid IPv6 URL", a port out of range or not a number
        return Route(url, url_problem=PORT_RANGE if "port" in str(error).lower() else str(error))
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        return Route(url, url_problem=_scheme_problem(parts))
    host = parts.hostname
    if not host:
        return Route(url, url_problem="the URL has no host")
    if port == 0:
        return Route(url, url_problem=PORT_RANGE)
    port = port or DEFAULT_PORTS[scheme]
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    proxies = urllib.request.getproxies_environment()
    value = proxies.get(scheme) or proxies.get("all")
    # Public in urllib.request (requests uses it too), missing from typeshed.
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if not value or on_this_machine(host) or bypass(host if ":" in host else address, proxies):
        return Route(address, host)
    named = "HTTPS_PROXY" if scheme == "https" else "HTTP_PROXY"
    variables = f"{named} or ALL_PROXY" if proxies.get(scheme) else "ALL_PROXY"
    return _through(Route(address, host, variables=variables), value)


def on_this_machine(host: str) -> bool:
    """True for this machine's own addresses: a local model server never goes through a proxy,
    whatever the environment says."""
    host = host.rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _through(direct: Route, value: str) -> Route:
    """`direct`, through the proxy URL `value` (a bare `host:port` means http://)."""
    if "://" not in value:
        value = f"http://{value}"
    try:
        parts = urllib.parse.urlsplit(value)
        port = parts.port
    except ValueError:
        problem = "the proxy URL in the environment has an invalid port"
        return dataclasses.replace(direct, proxy_problem=problem)
    scheme = parts.scheme.lower()
    if scheme.startswith("socks"):
        problem = "socks proxies are not supported; set HTTPS_PROXY to an http:// proxy"
        return dataclasses.replace(direct, proxy_problem=problem)
    if scheme not in DEFAULT_PORTS:
        problem = f"the proxy URL in the environment has the scheme {scheme}://; use an http:// one"
        return dataclasses.replace(direct, proxy_problem=problem)
    if not parts.hostname:
        problem = "the proxy URL in the environment has no host"
        return dataclasses.replace(direct, proxy_problem=problem)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    shown = f"{scheme}://{host}:{port or DEFAULT_PORTS[scheme]}"
    try:
        # The proxy's own certificate is checked as the endpoint's is (httpx would use certifi's
        # bundle alone).
        proxy = httpx.Proxy(value, ssl_context=tls_context() if scheme == "https" else None)
    except (httpx.InvalidURL, ValueError):
        problem = f"the proxy URL in the environment ({shown}) cannot be used"
        return dataclasses.replace(direct, proxy_problem=problem)
    return dataclasses.replace(direct, proxy=proxy, proxy_shown=shown)


def _scheme_problem(parts: urllib.parse.SplitResult) -> str:
    """Why a URL whose scheme is not http or https cannot be used, in the user's words."""
    if not parts.scheme:
        return "the URL has no scheme: begin it with http:// or https://"
    if not parts.netloc:  # "localhost:11434/v1" reads as the scheme "localhost"
        return f"the URL begins with '{parts.scheme}:', not http:// or https://"
    return f"the URL's scheme {parts.scheme.lower()}:// is not http:// or https://"


def new_client(
    route: Route,
    *,
    user_agent: str,
    connect_timeout: float = 10.0,
    read_timeout: float = 300.0,
    write_timeout: float = 60.0,
) -> httpx.AsyncClient:
    """An httpx client for one endpoint, through `route`.

    It reads nothing of the environment itself (`trust_env=False`): the route and the
    certificates are decided above. It follows no redirect (a POST redirected would be sent
    again), and a request it has begun to send is never sent again by httpx: which fault is
    worth another request is the provider's decision.
    """
    return httpx.AsyncClient(
        verify=tls_context(),
        proxy=route.proxy,
        trust_env=False,
        timeout=httpx.Timeout(
            connect=connect_timeout, read=read_timeout, write=write_timeout, pool=None
        ),
        headers={"user-agent": user_agent, "accept-encoding": body.ACCEPTED_CODINGS},
        follow_redirects=False,
    )


def header_problem(headers: Mapping[str, str]) -> str | None:
    """What makes a request header impossible to send, naming the header, never its value (it
    may be a key); None when every one can go."""
    for name, value in headers.items():
        if "\r" in value or "\n" in value:
            return f"the request header '{name}' has a line break in it"
        if UNPRINTABLE.search(value):
            return f"the request header '{name}' has a character that is not printable ASCII in it"
    return None


def content(parts: Sequence[bytes]) -> AsyncIterator[bytes]:
    """A request body given in parts, as httpx sends it: one after the other, each from where
    its bytes already are (the caller says `Content-Length`, so nothing is chunked)."""

    async def parts_in_order() -> AsyncIterator[bytes]:
        for part in parts:
            yield part

    return parts_in_order()


@functools.cache
def warm_up() -> None:
    """What the first model request would otherwise wait for, done once per process ahead of
    it: the certificates loaded, and one request sent and answered through an httpx client on
    loopback, which imports what httpx imports only then (its event-loop backend, a tenth of a
    second on a busy machine) and runs every part of our path once."""
    tls_context()
    asyncio.run(_one_exchange())


async def _one_exchange() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    async with server, new_client(route(url), user_agent="lsp-agent") as http:
        parts = [b"{", b"}"]
        headers = {"content-type": "application/json", "content-length": "2"}
        async with http.stream("POST", url, content=content(parts), headers=headers) as response:
            if await body.read(response) != b"{}":
                raise RuntimeError("the warm-up exchange on loopback did not come back whole")
