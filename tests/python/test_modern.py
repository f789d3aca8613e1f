"""The modern era (2026-07-28) against the Python SDK's server: negotiated without initialize, and
tools work."""
from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, Dict

import pytest

import mcplug
import mcplug.aio
from conftest import text_of


def test_negotiates_2026_07_28_and_tools_work(modern_server: Dict[str, Any]) -> None:
    with mcplug.Client.connect(modern_server, connect_timeout=30) as client:
        assert client.era == "modern"
        assert client.protocol_version == "2026-07-28"
        assert client.server_info["name"] == "modern-test-server"
        assert "2026-07-28" in client.connect_result["supported_versions"]
        assert client.instructions == "mcplug modern-era test server"
        assert {"add", "echo"} <= {t["name"] for t in client.list_tools()}
        echo = client.call_tool("echo", {"message": "hi"})
        assert echo["content"] == [{"type": "text", "text": "Echo: hi"}]
        assert echo["isError"] is False
        add = client.call_tool("add", {"a": 2, "b": 3})
        assert text_of(add) == "5"
        assert add["structuredContent"] == {"result": 5}


def test_restricting_to_a_legacy_version_uses_initialize(modern_server: Dict[str, Any]) -> None:
    with mcplug.Client.connect(modern_server, options={"protocol_versions": ["2025-11-25"]}) as client:
        assert client.era == "legacy"
        assert client.protocol_version == "2025-11-25"
        assert client.call_tool("add", {"a": 40, "b": 2})["structuredContent"] == {"result": 42}


def test_unknown_tool_on_the_modern_server(modern_server: Dict[str, Any]) -> None:
    with mcplug.Client.connect(modern_server) as client:
        try:
            result = client.call_tool("no-such-tool", {})
        except mcplug.RpcError as e:  # either form is allowed by the spec; both must be clear
            assert "no-such-tool" in e.message
        else:
            assert result["isError"] is True and "no-such-tool" in text_of(result)
        assert text_of(client.call_tool("echo", {"message": "still"})) == "Echo: still"


SKILL = "skill://git-workflow/SKILL.md"


def test_skills_are_listed_then_loaded_and_read_verified(modern_server: Dict[str, Any]) -> None:
    """SEP-2640: listing reads nothing; loading reads and verifies SKILL.md; a supporting file is
    read when asked, verified; a file changed after the listing is refused."""
    with mcplug.Client.connect(modern_server, connect_timeout=30) as client:
        reads = lambda: json.loads(text_of(client.call_tool("skill_reads", {})))  # noqa: E731
        skills = client.list_skills()
        assert [s["uri"] for s in skills] == [SKILL, "skill://acme/billing/refunds/SKILL.md"]
        assert reads() == []
        loaded = client.load_skill(SKILL)
        assert loaded["verified"] is True and loaded["name"] == "git-workflow"
        assert loaded["text"].startswith("---\nname: git-workflow\n")
        guide = client.read_skill_file(SKILL, "references/GUIDE.md")
        assert guide["verified"] is True and guide["text"] == "Rebase, never merge \u2014 caf\u00e9 rules.\n"
        with pytest.raises(mcplug.InvalidResultError) as e:
            client.read_skill_file(SKILL, "scripts/unlisted.sh")
        assert e.value.data["check"] == "unlisted"
        client.call_tool("tamper_skill", {})
        with pytest.raises(mcplug.InvalidResultError) as e:
            client.read_skill_file(SKILL, "references/GUIDE.md")
        assert e.value.data["check"] == "size"
        guide_uri = "skill://git-workflow/references/GUIDE.md"
        assert reads() == [SKILL, guide_uri, guide_uri], "the unlisted file was never read"
        # Refreshed and loaded again: the changed file verifies against the new entry.
        assert client.get_skill(SKILL)["uri"] == SKILL
        client.load_skill(SKILL)
        assert client.read_skill_file(SKILL, "references/GUIDE.md")["text"].endswith("One more rule.\n")
        with pytest.raises(mcplug.NotFoundError):
            client.read_skill_file("skill://acme/billing/refunds/SKILL.md", "x.md")


def test_skills_through_asyncio(modern_server: Dict[str, Any]) -> None:
    async def main() -> None:
        async with await mcplug.aio.Client.connect(modern_server, connect_timeout=30) as client:
            assert len(await client.list_skills()) == 2
            loaded = await client.load_skill("skill://acme/billing/refunds/SKILL.md")
            assert loaded["verified"] is False and loaded["files"] == "dynamic"
            assert (await client.get_skill(SKILL))["frontmatter"]["metadata"]["version"] == 2
            assert (await client.load_skill(SKILL))["verified"] is True
            guide = await client.read_skill_file(SKILL, "skill://git-workflow/references/GUIDE.md")
            assert guide["verified"] is True

    asyncio.run(asyncio.wait_for(main(), 45))


def test_cached_results_and_list_changes(modern_server: Dict[str, Any]) -> None:
    """A server that marks its results cacheable (--cache-ttl-ms): lists come from the
    connection's cache until cache=False asks the server, and a list change the server tells of
    (on the subscriptions/listen stream, opened once the pump pulls events) reaches the handler
    and makes the cache forget."""
    server = dict(modern_server, args=modern_server["args"] + ["--cache-ttl-ms", "60000"])
    changed = threading.Event()
    acknowledged = threading.Event()
    handlers = {
        "notifications/tools/list_changed": lambda params: changed.set(),
        "listening": lambda event: acknowledged.set(),
    }
    with mcplug.Client.connect(server, handlers=handlers, options={"listen": True}) as client:
        assert acknowledged.wait(10)
        names = lambda **kw: {t["name"] for t in client.list_tools(**kw)}  # noqa: E731
        assert "py_quiet" not in names()
        client.call_tool("add_tool", {"name": "py_quiet"})
        assert "py_quiet" not in names(), "served from the cache"
        assert "py_quiet" in names(cache=False)
        client.call_tool("add_tool", {"name": "py_loud", "notify": True})
        assert changed.wait(10)
        assert "py_loud" in names()
        read = lambda **kw: client.request("resources/read", {"uri": "note://current"}, **kw)  # noqa: E731
        first = read()["contents"][0]["text"]
        client.call_tool("set_note", {"text": "py changed"})
        assert read()["contents"][0]["text"] == first
        assert read(cache=False)["contents"][0]["text"] == "py changed"
        with pytest.raises(mcplug.InvalidArgumentError):
            client.list_tools(cache="no")  # type: ignore[arg-type]
