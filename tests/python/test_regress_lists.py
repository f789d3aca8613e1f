"""Issue 32, items 7 and 8, as a Python host meets them (tests/servers/list_storm_server.py): a
listing a hostile server makes too big stops at ``max_list_bytes`` with DeniedError naming it, the
connection still usable; a storm of tools/list_changed costs a manager a few re-lists, not one
each."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Dict

import pytest

import mcplug
from conftest import text_of

SERVER = Path(__file__).resolve().parents[1] / "servers" / "list_storm_server.py"


def storm_server(*args: str) -> Dict[str, Any]:
    return {"command": sys.executable, "args": [str(SERVER), *args]}


def count_of(text: str, method: str) -> int:
    return int(dict(part.split("=") for part in text.split())[method])


def test_pages_past_max_list_bytes_are_denied_naming_the_option() -> None:
    server = storm_server("--page-kib", "512", "--pages", "300", "--cursor-kib", "16")
    with mcplug.Client.connect(server, options={"max_list_bytes": 4 << 20}) as client:
        with pytest.raises(mcplug.DeniedError, match="max_list_bytes") as caught:
            client.list_tools()
        assert "4194304 bytes" in str(caught.value)
        asked = count_of(text_of(client.call_tool("counts", {})), "tools/list")
        assert 2 <= asked <= 9, f"{asked} pages asked for under a 4 MiB limit of 512 KiB pages"
        assert text_of(client.call_tool("echo", {"message": "still here"})) == "still here"


def test_a_list_changed_storm_makes_a_few_relists() -> None:
    with mcplug.Manager({"reconnect_attempts": 0}) as m:
        m.connect({"mcpServers": {"storm": storm_server("--slow-list-ms", "5")}})
        status = m.wait(60)
        assert status["servers"]["storm"]["state"] == "connected", status

        def lists() -> int:
            return count_of(text_of(m.call_tool("mcp__storm__counts", {})), "tools/list")

        assert lists() == 1
        assert text_of(m.call_tool("mcp__storm__storm", {"n": 2000})) == "sent 2000"
        before, now = -1, lists()
        deadline = time.monotonic() + 20
        while now != before and time.monotonic() < deadline:
            time.sleep(0.5)
            before, now = now, lists()
        assert 2 <= now <= 4, f"2,000 tools/list_changed made {now - 1} re-lists (one in flight, one queued)"
        assert "mcp__storm__echo" in [t["name"] for t in m.list_tools()["tools"]]
