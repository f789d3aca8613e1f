"""What the host hands the model, through the manager against server-everything: every text of
tool results, resources and prompts cleaned and capped alike; base64 media under a limit of their
own; with `output_dir`, what is cut kept whole in a 0600 file the result names; the servers'
`instructions` in the status."""
from __future__ import annotations

import asyncio
import json
import re
import stat
from pathlib import Path
from typing import Any, Dict

import pytest

import mcplug
import mcplug.aio
from conftest import FaultFactory, text_of


def kept_path(text: str) -> Path:
    found = re.search(r"(?:kept whole in|the whole output is in) (\S+?)(?:\]| by mcplug)", text)
    assert found, f"no kept file named in {text!r}"
    return Path(found.group(1))


def private(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.fixture()
def manager(everything_server: Dict[str, Any], fault: FaultFactory, tmp_path: Path) -> Any:
    everything = {k: v for k, v in everything_server.items() if k != "name"}
    fault_entry = {k: v for k, v in fault("normal").items() if k != "name"}
    options = {"max_output_chars": 40, "max_media_bytes": 64, "output_dir": str(tmp_path / "kept")}
    with mcplug.Manager(options) as m:
        m.connect({"mcpServers": {"everything": everything, "fault": fault_entry}})
        status = m.wait(45)
        assert {s["state"] for s in status["servers"].values()} == {"connected"}, status
        yield m


def test_a_tool_image_over_the_media_limit_is_kept_in_a_png_file(manager: Any, tmp_path: Path) -> None:
    result = manager.call_tool("mcp__everything__get-tiny-image", {})
    notes = [c["text"] for c in result["content"] if c["type"] == "text" and "image (image/png" in c["text"]]
    assert len(notes) == 1, result
    assert all(c["type"] != "image" for c in result["content"]), "the image is over 64 bytes of base64"
    path = kept_path(notes[0])
    assert path.parent == tmp_path / "kept" and path.suffix == ".png", path
    assert private(path)
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_tool_text_over_the_limit_is_cut_and_kept_whole(manager: Any) -> None:
    message = "m" * 100
    result = manager.call_tool("mcp__fault__echo", {"message": message})
    text = result["content"][0]["text"]
    assert text.startswith("Echo: " + "m" * 34) and "characters cut; the limit is 40" in text, text
    assert kept_path(text).read_text() == "Echo: " + message


def test_a_resource_read_is_cut_and_its_blob_limited_like_tool_output(manager: Any) -> None:
    read = manager.read_resource("everything", "demo://resource/dynamic/text/1")
    text = read["contents"][0]["text"]
    assert "characters cut; the limit is 40" in text, read
    whole = kept_path(text).read_text()
    assert whole.startswith("Resource 1: This is a plaintext resource") and private(kept_path(text))
    blob = manager.read_resource("everything", "demo://resource/dynamic/blob/1")
    item = blob["contents"][0]
    assert item["uri"] == "demo://resource/dynamic/blob/1" and "blob" not in item, blob
    kept = kept_path(item["text"])
    assert kept.suffix == ".txt" and kept.read_bytes().startswith(b"Resource 1: This is a base64 blob")


def test_a_prompt_is_cut_like_tool_output(manager: Any) -> None:
    got = manager.get_prompt("mcp__everything__resource-prompt", {"resourceType": "Text", "resourceId": "2"})
    texts = [m["content"].get("text") or m["content"].get("resource", {}).get("text", "") for m in got["messages"]]
    assert any("characters cut; the limit is 40" in t for t in texts), got
    assert sum(len(t) for t in texts) < 40 + 300, "cut near the limit (plus the marker)"


def test_status_carries_each_servers_instructions(manager: Any) -> None:
    servers = manager.status()["servers"]
    assert servers["fault"]["instructions"] == "mode normal"
    assert servers["everything"]["instructions"], servers["everything"]


def test_bad_output_options_are_named(tmp_path: Path) -> None:
    with pytest.raises(mcplug.InvalidArgumentError, match="output_dir_max_bytes` without `output_dir"):
        mcplug.Manager({"output_dir_max_bytes": 10})
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(mcplug.InvalidArgumentError, match="output_dir"):
        mcplug.Manager({"output_dir": str(blocker / "sub")})
    with pytest.raises(mcplug.InvalidArgumentError, match="max_media_bytes"):
        mcplug.Manager({"max_media_bytes": 0})


def test_the_asyncio_manager_hands_the_same_view(everything_server: Dict[str, Any], fault: FaultFactory, tmp_path: Path) -> None:
    everything = {k: v for k, v in everything_server.items() if k != "name"}
    fault_entry = {k: v for k, v in fault("normal").items() if k != "name"}
    options = {"max_output_chars": 40, "max_media_bytes": 64, "output_dir": str(tmp_path / "kept")}

    async def main() -> None:
        async with mcplug.aio.Manager(options) as m:
            await m.connect({"mcpServers": {"everything": everything, "fault": fault_entry}})
            status = await m.wait(45)
            assert {s["state"] for s in status["servers"].values()} == {"connected"}, status
            image = await m.call_tool("mcp__everything__get-tiny-image", {})
            note = next(c["text"] for c in image["content"] if "image (image/png" in c.get("text", ""))
            assert private(kept_path(note)) and kept_path(note).suffix == ".png"
            read = await m.read_resource("everything", "demo://resource/dynamic/text/1")
            assert "characters cut; the limit is 40" in read["contents"][0]["text"]
            prompt = await m.get_prompt("mcp__everything__resource-prompt", {"resourceType": "Text", "resourceId": "4"})
            assert "characters cut" in json.dumps(prompt)
            assert (await m.status())["servers"]["fault"]["instructions"] == "mode normal"

    asyncio.run(asyncio.wait_for(main(), 55))


@pytest.fixture()
def plain_manager(everything_server: Dict[str, Any]) -> Any:
    everything = {k: v for k, v in everything_server.items() if k != "name"}
    with mcplug.Manager() as m:
        m.connect({"mcpServers": {"everything": everything}})
        assert m.wait(45)["servers"]["everything"]["state"] == "connected"
        yield m


def test_format_anthropic_maps_tools_and_results_for_the_messages_api(plain_manager: Any) -> None:
    m = plain_manager
    listed = m.list_tools(format="anthropic")["tools"]
    echo = next(t for t in listed if t["name"] == "mcp__everything__echo")
    assert set(echo) == {"name", "description", "input_schema"}, echo
    assert echo["input_schema"]["properties"]["message"]["type"] == "string"
    found = m.search_tools("echo", 1, format="anthropic")["tools"]
    assert set(found[0]) == {"name", "description", "input_schema"}
    image = m.call_tool("mcp__everything__get-tiny-image", {}, format="anthropic")
    assert image["is_error"] is False
    kinds = [b["type"] for b in image["content"]]
    assert "image" in kinds and set(kinds) <= {"text", "image"}, kinds
    block = next(b for b in image["content"] if b["type"] == "image")
    assert block["source"]["type"] == "base64" and block["source"]["media_type"] == "image/png"
    ref = m.call_tool("mcp__everything__get-resource-reference", {"resourceType": "Text", "resourceId": 2}, format="anthropic")
    assert any(b["type"] == "text" and b["text"].startswith("[Resource <demo://resource/dynamic/text/2>]") for b in ref["content"]), ref
    links = m.call_tool("mcp__everything__get-resource-links", {"count": 2}, format="anthropic")
    assert sum(b["text"].startswith("[Resource link: ") for b in links["content"]) == 2, links


def test_format_openai_maps_tools_and_results_for_chat_completions(plain_manager: Any) -> None:
    m = plain_manager
    listed = m.list_tools(format="openai")["tools"]
    assert all(t["type"] == "function" and set(t["function"]) >= {"name", "parameters"} for t in listed), listed[0]
    result = m.call_tool("mcp__everything__echo", {"message": "hi"}, format="openai")
    assert result == {"role": "tool", "content": "Echo: hi", "is_error": False}
    image = m.call_tool("mcp__everything__get-tiny-image", {}, format="openai")
    assert isinstance(image["content"], str) and "image (image/png" in image["content"], image
    assert m.call_tool("mcp__everything__echo", {"message": "hi"}) ["content"][0]["type"] == "text", "mcp stays untouched"


def test_format_through_a_single_client_and_asyncio(everything: mcplug.Client, everything_server: Dict[str, Any]) -> None:
    tools = everything.list_tools(format="openai")
    assert any(t["function"]["name"] == "echo" for t in tools)
    assert everything.call_tool("echo", {"message": "x"}, format="anthropic") == {
        "content": [{"type": "text", "text": "Echo: x"}], "is_error": False}

    async def main() -> None:
        async with await mcplug.aio.Client.connect(everything_server) as c:
            r = await c.call_tool("get-structured-content", {"location": "Chicago"}, format="anthropic")
            assert r["is_error"] is False and r["content"][0]["type"] == "text", r
            listed = await c.list_tools(format="anthropic")
            assert all("input_schema" in t for t in listed)

    asyncio.run(asyncio.wait_for(main(), 55))


def test_a_format_where_none_applies_or_unknown_is_named(plain_manager: Any, everything: mcplug.Client) -> None:
    with pytest.raises(mcplug.InvalidArgumentError, match="format"):
        plain_manager.call_tool("mcp__everything__echo", {"message": "x"}, format="claude")
    with pytest.raises(mcplug.InvalidArgumentError, match="format"):
        everything.list_tools(format="gemini")


def test_a_prompt_takes_a_command_line_as_claude_codes_slash_command(plain_manager: Any) -> None:
    got = plain_manager.get_prompt("mcp__everything__args-prompt", '"New York" NY')
    assert "New York, NY" in json.dumps(got), got
    alone = plain_manager.get_prompt("mcp__everything__args-prompt", "Paris")
    assert "Paris" in json.dumps(alone) and ", " not in alone["messages"][0]["content"]["text"].split("Paris")[1][:2]
    with pytest.raises(mcplug.InvalidArgumentError, match="city"):
        plain_manager.get_prompt("mcp__everything__args-prompt", "")
    with pytest.raises(mcplug.InvalidArgumentError, match="3 words"):
        plain_manager.get_prompt("mcp__everything__args-prompt", "a b c")


def test_resource_tools_offer_the_servers_resources_as_claude_code_does(everything_server: Dict[str, Any], fault: FaultFactory) -> None:
    everything = {k: v for k, v in everything_server.items() if k != "name"}
    fault_entry = {k: v for k, v in fault("normal").items() if k != "name"}
    with mcplug.Manager({"resource_tools": True}) as m:
        m.connect({"mcpServers": {"fault": fault_entry}})
        m.wait(30)
        names = [t["name"] for t in m.list_tools()["tools"]]
        assert "ListMcpResourcesTool" not in names, "no connected server offers resources yet"
        m.connect({"mcpServers": {"fault": fault_entry, "everything": everything}})
        assert m.wait(45)["servers"]["everything"]["state"] == "connected"
        tools = {t["name"]: t for t in m.list_tools()["tools"]}
        assert {"ListMcpResourcesTool", "ReadMcpResourceTool"} <= set(tools), sorted(tools)
        assert tools["ReadMcpResourceTool"]["inputSchema"]["required"] == ["server", "uri"]
        listed = json.loads(text_of(m.call_tool("ListMcpResourcesTool", {})))
        assert listed and all(r["server"] == "everything" for r in listed), listed[:2]
        one = json.loads(text_of(m.call_tool("ListMcpResourcesTool", {"server": "everything"})))
        assert len(one) == len(listed)
        read = m.call_tool("ReadMcpResourceTool", {"server": "everything", "uri": "demo://resource/dynamic/text/1"})
        assert read["content"][0]["type"] == "resource", read
        assert read["content"][0]["resource"]["text"].startswith("Resource 1: This is a plaintext resource")
        missing = m.call_tool("ReadMcpResourceTool", {"uri": "demo://resource/dynamic/text/1"})
        assert missing["isError"] is True and "`server` and `uri`" in text_of(missing)
        unknown = m.call_tool("ReadMcpResourceTool", {"server": "nobody", "uri": "x://y"})
        assert unknown["isError"] is True and "nobody" in text_of(unknown)
        forma = m.call_tool("ReadMcpResourceTool", {"server": "everything", "uri": "demo://resource/dynamic/text/1"}, format="anthropic")
        assert forma["content"][0]["text"].startswith("[Resource <demo://resource/dynamic/text/1>]")
    with mcplug.Manager() as m:
        m.connect({"mcpServers": {"everything": everything}})
        m.wait(45)
        assert "ListMcpResourcesTool" not in [t["name"] for t in m.list_tools()["tools"]], "off unless asked"


def test_a_policy_applies_to_a_raw_mcp_servers_object(fault: FaultFactory) -> None:
    entry = {k: v for k, v in fault("normal").items() if k != "name"}
    policy = {"deniedMcpServers": [{"serverName": "bad"}], "allowedMcpServers": [{"serverName": "good"}, {"serverName": "bad"}]}
    with mcplug.Manager({"policy": policy}) as m:
        out = m.connect({"mcpServers": {"good": entry, "bad": entry, "other": entry}})
        assert sorted(out["servers"]) == ["good"], out
        reasons = {e["name"]: e["reason"] for e in out["excluded"]}
        assert reasons == {"bad": "denied", "other": "not_allowed"}, out["excluded"]
        assert "deniedMcpServers[0]" in next(e["detail"] for e in out["excluded"] if e["name"] == "bad")
        assert m.wait(30)["servers"]["good"]["state"] == "connected"
    with pytest.raises(mcplug.InvalidArgumentError, match="policy"):
        mcplug.Manager({"policy": {"deniedMcpServers": [{"serverNme": "x"}]}})
    with pytest.raises(mcplug.InvalidArgumentError, match="allowedMcpServer"):
        mcplug.Manager({"policy": {"allowedMcpServer": []}})
