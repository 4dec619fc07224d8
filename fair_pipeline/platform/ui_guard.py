"""A guard in front of the Dagster webserver: requests a web page in a browser could forge never reach it.

Dagster's webserver answers GraphQL mutations sent with GET (`<img src="http://127.0.0.1:3000/graphql?query=
mutation{...}">` on any page deletes a run), accepts any `Host` header (a DNS-rebinding page becomes same-origin)
and any `Origin`. The guard is plain ASGI middleware, so it covers HTTP and the GraphQL websocket alike, and refuses:

- a `Host` header that is not this server's address (DNS rebinding);
- an `Origin` that is not this server (a cross-site `fetch`, form post or websocket), and a browser's
  `Sec-Fetch-Site: cross-site` on anything but a plain page load;
- a GraphQL document sent with GET or HEAD that contains a mutation or subscription (or that does not parse);
- a form-encoded, multipart or text/plain body (what an HTML form can send without CORS) with no Origin to check.

Dagster's own UI sends same-origin JSON POSTs and GETs, so it works as before. Allowed addresses are the bound host
and, on a loopback or wildcard bind, `localhost`, `127.0.0.1` and `[::1]`, each with the port; more (for a reverse
proxy) come from the environment variable `FAIR_PIPELINE_UI_ALLOWED_HOSTS` (comma-separated `host:port`).
"""
from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterable

ALLOWED_HOSTS_ENV = "FAIR_PIPELINE_UI_ALLOWED_HOSTS"
_LOOPBACK = ("localhost", "127.0.0.1", "[::1]")
_WILDCARD = ("0.0.0.0", "::", "")
_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data", "text/plain")


def allowed_hosts(host: str, port: int, extra: Iterable[str] = ()) -> frozenset[str]:
    """The `host:port` values a request's Host (and Origin) may name, lower case."""
    bound = f"[{host}]" if ":" in host and not host.startswith("[") else host
    names = {bound}
    if host in _WILDCARD or host.startswith("127.") or host in ("localhost", "::1"):
        names.update(_LOOPBACK)
    found = {f"{name}:{port}".lower() for name in names if name not in ("0.0.0.0", "[::]", "")}
    found.update(h.strip().lower() for h in extra if h.strip())
    return frozenset(found)


def allowed_hosts_from_environment(host: str, port: int) -> frozenset[str]:
    return allowed_hosts(host, port, os.environ.get(ALLOWED_HOSTS_ENV, "").split(","))


def _with_port(netloc: str, scheme: str) -> str:
    netloc = netloc.lower()
    if netloc.endswith("]") or ":" not in netloc.rsplit("]", 1)[-1]:
        netloc += ":443" if scheme in ("https", "wss") else ":80"
    return netloc


def _graphql_operations(query: str) -> set[str] | None:
    """The operation types of a GraphQL document ('query', 'mutation', 'subscription'); None if it does not parse."""
    from graphql import OperationDefinitionNode, parse
    from graphql.error import GraphQLError

    try:
        document = parse(query)
    except GraphQLError:
        return None
    return {d.operation.value for d in document.definitions if isinstance(d, OperationDefinitionNode)}


def refusal(method: str, path: str, query_string: bytes, headers: dict[str, str], hosts: frozenset[str],
            websocket: bool = False) -> str | None:
    """Why a request must not reach Dagster (None: let it through). `headers` has lower-case names."""
    scheme = "ws" if websocket else "http"
    host = headers.get("host", "")
    if not host or _with_port(host, scheme) not in hosts:
        return f"Host {host!r} is not this server ({', '.join(sorted(hosts))}); set {ALLOWED_HOSTS_ENV} to add one"
    origin = headers.get("origin")
    if origin is not None:
        parsed = urllib.parse.urlsplit(origin)
        if parsed.scheme not in ("http", "https") or _with_port(parsed.netloc, parsed.scheme) not in hosts:
            return f"cross-origin request from {origin!r} refused"
    unsafe = websocket or method not in _SAFE_METHODS
    if headers.get("sec-fetch-site") == "cross-site" and unsafe:
        return "cross-site request refused"
    if not websocket and method in ("GET", "HEAD") and path.rstrip("/").endswith("/graphql"):
        for name, value in urllib.parse.parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
            if name == "query":
                operations = _graphql_operations(value)
                if operations is None:
                    return "a GraphQL document sent with GET must parse"
                if operations - {"query"}:
                    return f"GraphQL {', '.join(sorted(operations - {'query'}))} refused over GET (use POST)"
    if not websocket and unsafe and origin is None:
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type in _FORM_TYPES:
            return f"a {content_type} body without an Origin header refused (what a cross-site form sends)"
    return None


class DagsterGuard:
    """ASGI middleware: `refusal` decides; a refused HTTP request gets 403 (405 for a GET mutation) with the
    reason as plain text, a refused websocket is closed before it is accepted (the client sees 403)."""

    def __init__(self, app, hosts: frozenset[str]):
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        websocket = scope["type"] == "websocket"
        reason = refusal(scope.get("method", "GET"), scope.get("path", ""), scope.get("query_string", b""),
                         headers, self.hosts, websocket=websocket)
        if reason is None:
            return await self.app(scope, receive, send)
        if websocket:
            return await send({"type": "websocket.close", "code": 1008, "reason": reason[:120]})
        body = f"refused by fair-pipeline's UI guard: {reason}\n".encode()
        status = 405 if "over GET" in reason else 403
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
