"""Issue 32, items 5 and 6, as a Python host meets them (tests/servers/names_server.py).

6: servers "x" (tool and prompt ``y__z``) and "x__y" (``z``) both make ``mcp__x__y__z``: neither is
   given the name, the collision is reported for both, and a call or prompt by it is refused.
5: a skill whose entry lists ``skill://srv/demo/../other/secret.md`` does not load."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import mcplug

NAMES_SERVER = Path(__file__).resolve().parents[1] / "servers" / "names_server.py"


def server(role: str) -> dict:
    return {"command": sys.executable, "args": [str(NAMES_SERVER), role]}


def test_a_name_two_servers_make_goes_to_neither() -> None:
    with mcplug.Manager() as m:
        m.connect({"mcpServers": {"x": server("x"), "x__y": server("x__y")}})
        m.wait(20)
        pool = m.list_tools()
        names = [t["name"] for t in pool["tools"]]
        assert "mcp__x__y__z" not in names
        assert {"mcp__x__own", "mcp__x__y__own"} <= set(names)
        collided = sorted((d["server"], d["tool"]) for d in pool["dropped"] if d["reason"] == "collision")
        assert collided == [("x", "y__z"), ("x__y", "z")]
        with pytest.raises(mcplug.NotFoundError) as e:
            m.call_tool("mcp__x__y__z", {})
        assert '"x"' in e.value.message and '"x__y"' in e.value.message
        prompts = m.list_prompts()
        assert "mcp__x__y__z" not in [p["name"] for p in prompts["prompts"]]
        assert sorted(d["server"] for d in prompts["dropped"]) == ["x", "x__y"]
        with pytest.raises(mcplug.NotFoundError):
            m.get_prompt("mcp__x__y__z")
        assert "x:own" in str(m.get_prompt("mcp__x__own"))


def test_a_skill_cannot_list_a_file_outside_its_folder() -> None:
    with mcplug.Client.connect(server("skills"), connect_timeout=20) as c:
        with pytest.raises(mcplug.ProtocolError) as e:
            c.load_skill("skill://srv/demo/SKILL.md")
        assert "dot segment" in e.value.message
        assert "skill://srv/demo/../other/secret.md" in e.value.message
        assert c.call_tool("escapes", {})["content"][0]["text"] == "0"
