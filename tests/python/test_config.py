"""Configuration through the C ABI from Python: the corpus of tests/config/cases replayed (the same
files the Rust test runs), discovery on real files, editing, and errors."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict

import pytest

import mcplug

CASES = sorted((Path(__file__).resolve().parents[1] / "config" / "cases").glob("*.json"))


def test_corpus_is_there() -> None:
    assert len(CASES) >= 20


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_corpus_case(path: Path) -> None:
    case = json.loads(path.read_text())
    if "expected_error" in case:
        want = case["expected_error"]
        with pytest.raises(mcplug.McpError) as info:
            mcplug.merge_config(case["sources"])
        assert info.value.kind == want["kind"]
        assert want["message_contains"] in info.value.message
        if want["kind"] == "config":
            assert isinstance(info.value, mcplug.ConfigError)
    else:
        assert mcplug.merge_config(case["sources"]) == case["expected"], case["description"]


def write(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value if isinstance(value, str) else json.dumps(value, indent=2))


def options(tmp: Path, **extra: Any) -> Dict[str, Any]:
    o: Dict[str, Any] = {"home": str(tmp / "home"), "cwd": str(tmp / "repo"), "managed_dir": str(tmp / "managed"), "env": {"T": "v"}}
    o.update(extra)
    return o


def test_discover_real_files_with_a_malformed_one(tmp_path: Path) -> None:
    write(tmp_path / "home/.claude.json", {"mcpServers": {"u": {"command": "u", "args": ["${T}"]}},
                                           "projects": {str(tmp_path / "repo"): {"mcpServers": {"l": {"command": "l"}}}}})
    write(tmp_path / "repo/.mcp.json", '{\n  "mcpServers": {\n    "p": {"command": "p"},,\n  }\n}\n')
    write(tmp_path / "home/.cursor/mcp.json", {"mcpServers": {"c": {"url": "https://c.example/mcp"}}})
    r = mcplug.discover_config(options(tmp_path, hosts=["cursor"]))
    assert sorted(r["servers"]) == ["c", "l", "u"]
    assert r["servers"]["u"]["config"]["args"] == ["v"]
    assert r["servers"]["c"]["scope"] == "cursor"
    assert r["servers"]["c"]["config"]["type"] == "http"
    [err] = r["errors"]
    assert (err["file"], err["line"], err["column"]) == (str(tmp_path / "repo/.mcp.json"), 3, 27)
    assert err["scope"] == "project"


def test_managed_file_is_exclusive(tmp_path: Path) -> None:
    write(tmp_path / "home/.claude.json", {"mcpServers": {"u": {"command": "u"}}})
    write(tmp_path / "managed/managed-mcp.json", {"mcpServers": {}})
    r = mcplug.discover_config(options(tmp_path))
    assert r["servers"] == {}
    assert [(e["name"], e["reason"]) for e in r["excluded"]] == [("u", "enterprise_exclusive")]


def test_strict_mcp_config_takes_the_given_servers_under_the_policy(tmp_path: Path) -> None:
    write(tmp_path / "home/.claude.json", {"mcpServers": {"u": {"command": "u"}}})
    write(tmp_path / "home/.claude/settings.json", {"deniedMcpServers": [{"serverName": "b"}]})
    given = {"mcpServers": {"g": {"command": "g"}, "b": {"command": "b"}}}
    r = mcplug.discover_config(options(tmp_path, dynamic=given, strict_mcp_config=True))
    assert sorted(r["servers"]) == ["g"]
    assert [(e["name"], e["reason"]) for e in r["excluded"]] == [("b", "denied")]
    assert sorted(mcplug.discover_config(options(tmp_path, dynamic=given))["servers"]) == ["g", "u"]


def test_edit_keeps_the_rest(tmp_path: Path) -> None:
    write(tmp_path / "home/.claude.json", '{"b": 1, "mcpServers": {"z": {"command": "z", "x": [1]}}, "a": 2}')
    home = str(tmp_path / "home")
    r = mcplug.add_config_server("user", "y", {"type": "sse", "url": "https://y/sse"}, home=home, cwd=str(tmp_path))
    assert r["created"] is False and r["replaced"] is False
    text = (tmp_path / "home/.claude.json").read_text()
    assert list(json.loads(text)) == ["b", "mcpServers", "a"]
    assert list(json.loads(text)["mcpServers"]) == ["z", "y"]
    with pytest.raises(mcplug.ConfigError, match="already has a server named"):
        mcplug.add_config_server("user", "y", {"command": "q"}, home=home)
    mcplug.add_config_server("user", "y", {"command": "q"}, home=home, replace=True)
    assert mcplug.remove_config_server("user", "z", home=home)["removed"] == {"command": "z", "x": [1]}
    with pytest.raises(mcplug.NotFoundError):
        mcplug.remove_config_server("user", "z", home=home)
    with pytest.raises(mcplug.InvalidArgumentError, match="unknown type"):
        mcplug.add_config_server("project", "n", {"type": "tcp"}, home=home, cwd=str(tmp_path))
    assert not (tmp_path / ".mcp.json").exists()


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(mcplug.InvalidArgumentError, match="unknown key \"projects\""):
        mcplug.merge_config({"projects": {}})
    with pytest.raises(mcplug.InvalidArgumentError, match="must be a dict"):
        mcplug.merge_config([])  # type: ignore[arg-type]
    with pytest.raises(mcplug.InvalidArgumentError, match="unknown host"):
        mcplug.discover_config({"hosts": ["emacs"], "home": os.getcwd()})


def test_project_choices_are_written_as_claude_codes_dialog_writes_them(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"p": {"command": "node", "args": ["p.js"]}, "q": {"command": "q"}}}))
    where = {"home": str(home), "cwd": str(project), "managed_dir": str(tmp_path / "managed")}

    def reason(name: str) -> str:
        found = mcplug.discover_config(dict(where))
        if name in found["servers"]:
            return "approved"
        return next(e["reason"] for e in found["excluded"] if e["name"] == name)

    assert reason("p") == "pending_approval"
    out = mcplug.approve_project_server("p", cwd=str(project))
    assert out["enabledMcpjsonServers"] == ["p"] and out["file"] == str(project / ".claude" / "settings.local.json")
    assert reason("p") == "approved"
    mcplug.approve_project_server("q", "no", cwd=str(project))
    assert reason("q") == "rejected"
    mcplug.approve_project_server("q", "yes_all", cwd=str(project))
    assert reason("q") == "approved"
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert settings == {"enabledMcpjsonServers": ["p", "q"], "disabledMcpjsonServers": [], "enableAllProjectMcpServers": True}
    assert mcplug.reset_project_choices(cwd=str(project))["reset"] == ["enabledMcpjsonServers", "disabledMcpjsonServers", "enableAllProjectMcpServers"]
    assert reason("p") == "pending_approval" and reason("q") == "pending_approval"
    with pytest.raises(mcplug.InvalidArgumentError, match="choice"):
        mcplug.approve_project_server("p", "maybe", cwd=str(project))
