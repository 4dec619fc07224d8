"""The UI guard refuses what a foreign web page could make a browser send, and lets Dagster's own requests through."""
from __future__ import annotations

import asyncio
import urllib.parse

import pytest

from fair_pipeline.platform.ui_guard import ALLOWED_HOSTS_ENV, DagsterGuard, allowed_hosts, allowed_hosts_from_environment

HOSTS = allowed_hosts("127.0.0.1", 3000)
DELETE_RUN = 'mutation{deletePipelineRun(runId:"6a3f"){__typename}}'


def _scope(method="GET", path="/graphql", query="", headers=None, kind="http"):
    headers = {"host": "127.0.0.1:3000", **(headers or {})}
    return {"type": kind, "method": method, "path": path, "query_string": query.encode(),
            "headers": [(k.encode(), v.encode()) for k, v in headers.items() if v is not None]}


def _call(scope):
    """(status or close code, body, whether the wrapped app was reached)."""
    reached, sent = [], []

    async def app(scope, receive, send):
        reached.append(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"dagster"})

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(message):
        sent.append(message)

    asyncio.run(DagsterGuard(app, HOSTS)(scope, receive, send))
    first = sent[0]
    status = first.get("status", first.get("code"))
    body = b"".join(m.get("body", b"") for m in sent)
    return status, body, bool(reached)


def test_a_get_mutation_is_refused_and_never_reaches_dagster():
    status, body, reached = _call(_scope(query="query=" + urllib.parse.quote(DELETE_RUN)))
    assert (status, reached) == (405, False)
    assert b"mutation refused over GET" in body
    # also when hidden behind a query operation, an operationName, or as a subscription
    for document in ["query a{version} " + DELETE_RUN.replace("mutation", "mutation b"), "subscription{x}"]:
        assert _call(_scope(query="operationName=a&query=" + urllib.parse.quote(document)))[:3:2] == (405, False)
    assert _call(_scope(query="query=" + urllib.parse.quote("mutation{")))[::2] == (403, False)  # unparsable


def test_a_get_query_and_the_ui_pages_pass():
    assert _call(_scope(query="query=" + urllib.parse.quote("{version}")))[::2] == (200, True)
    for path in ["/", "/assets", "/server_info", "/static/x.js"]:
        assert _call(_scope(path=path))[::2] == (200, True)


@pytest.mark.parametrize("host", ["evil.example:3000", "evil.example", "127.0.0.1:3001", "", "127.0.0.1.evil.example:3000"])
def test_a_foreign_host_header_is_refused(host):
    post = _scope("POST", headers={"host": host or None, "content-type": "application/json"})
    status, body, reached = _call(post)
    assert (status, reached) == (403, False)
    assert b"is not this server" in body


def test_loopback_names_of_the_same_port_pass():
    for host in ["127.0.0.1:3000", "localhost:3000", "LOCALHOST:3000", "[::1]:3000"]:
        assert _call(_scope("POST", headers={"host": host, "content-type": "application/json"}))[::2] == (200, True)


@pytest.mark.parametrize("origin", ["http://evil.example", "http://127.0.0.1:3001", "null", "file://", "http://localhost:3000.evil.example"])
def test_a_foreign_origin_is_refused_for_posts_and_websockets(origin):
    post = _scope("POST", headers={"origin": origin, "content-type": "application/json"})
    assert _call(post)[::2] == (403, False)
    closed = _call(_scope(headers={"origin": origin}, kind="websocket"))
    assert closed[::2] == (1008, False)


def test_same_origin_posts_and_websockets_pass():
    for origin in ["http://127.0.0.1:3000", "http://localhost:3000"]:
        assert _call(_scope("POST", headers={"origin": origin, "content-type": "application/json"}))[::2] == (200, True)
    assert _call(_scope(headers={"origin": "http://127.0.0.1:3000"}, kind="websocket"))[2]


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                                          "text/plain;charset=UTF-8"])
def test_a_cross_site_form_post_is_refused(content_type):
    # An old browser's form post may carry no Origin; a modern one says cross-site.
    assert _call(_scope("POST", headers={"content-type": content_type}))[::2] == (403, False)
    cross = _scope("POST", headers={"content-type": "application/json", "sec-fetch-site": "cross-site"})
    assert _call(cross)[::2] == (403, False)
    # a link from another site to a UI page is a plain navigation and still works
    assert _call(_scope(path="/runs", headers={"sec-fetch-site": "cross-site"}))[::2] == (200, True)


def test_wildcard_binds_and_the_environment_add_hosts(monkeypatch):
    assert "localhost:3000" in allowed_hosts("0.0.0.0", 3000) and "0.0.0.0:3000" not in allowed_hosts("0.0.0.0", 3000)
    assert allowed_hosts("10.1.2.3", 80) == {"10.1.2.3:80"}
    monkeypatch.setenv(ALLOWED_HOSTS_ENV, "dagster.internal:443, Proxy:8080")
    hosts = allowed_hosts_from_environment("127.0.0.1", 3000)
    assert {"dagster.internal:443", "proxy:8080", "127.0.0.1:3000"} <= hosts
