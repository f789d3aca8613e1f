"""Issue 32's regressions of the credential store and the listing options, through the Python
binding: a token record the store cannot use (the connect says to log out instead of asking the
user to log in for a token it cannot keep; logout removes it), and unknown listing keys."""
from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any, Dict, List

import pytest

import mcplug
from mcplug import _ffi

from test_oauth import follow, peers  # noqa: F401  (the fixture is used by name)


def record_of(store: Path, url: str) -> Path:
    """The store's file for the server at ``url``: the first 32 hex digits of SHA-256 of its key."""
    return store / (hashlib.sha256(f"server {url}".encode()).hexdigest()[:32] + ".json")


def plant(kind: str, record: Path, outside: Path) -> None:
    if record.is_dir() and not record.is_symlink():
        for p in record.iterdir():
            p.unlink()
        record.rmdir()
    elif record.exists() or record.is_symlink():
        record.unlink()
    if kind == "not JSON":
        record.write_text('{"key": "server ')
    elif kind == "not an object":
        record.write_text("[1, 2]")
    elif kind == "a FIFO":
        os.mkfifo(record, 0o600)
    elif kind == "a symlink":
        outside.write_text('{"key": "elsewhere", "record": {}}')
        outside.chmod(0o600)
        record.symlink_to(outside)
    elif kind == "a directory":
        record.mkdir()
        (record / "inside").write_text("x")
    if record.is_file() and not record.is_symlink():
        record.chmod(0o600)


@pytest.mark.parametrize("kind", ["not JSON", "not an object", "a FIFO", "a symlink", "a directory"])
def test_an_unusable_record_is_named_by_the_connect_and_removed_by_logout(peers: Any, tmp_path: Path, kind: str) -> None:
    peer = peers()
    store = tmp_path / "auth"
    entry = {"type": "http", "url": peer.url, "name": "srv"}
    asked: List[Dict[str, Any]] = []

    def handler(params: Dict[str, Any]) -> Dict[str, Any]:
        asked.append(params)
        return follow(params)

    def connect() -> mcplug.Client:
        return mcplug.Client.connect(entry, handlers={"auth/authorize": handler}, connect_timeout=20,
                                     options={"auth_store": str(store)})

    with connect() as c:
        assert c.call_tool("whoami", {})["content"][0]["text"] == "ok"
    assert len(asked) == 1
    record = record_of(store, peer.url)
    assert record.is_file()

    outside = tmp_path / "outside.json"
    plant(kind, record, outside)
    with pytest.raises(mcplug.ConfigError) as e:
        connect()
    message = str(e.value)
    for way in ("mcplug logout srv", "mcplug_auth_logout", "mcplug.auth_logout", "authLogout", 'Manager.logout("srv")'):
        assert way in message, message
    assert len(asked) == 1, "the user was asked to log in for a token that could not be kept"

    assert mcplug.auth_logout(entry, auth_store=str(store)) is True
    assert not os.path.lexists(record)
    if kind == "a symlink":
        assert outside.is_file(), "logout followed the link"
    assert mcplug.auth_logout(entry, auth_store=str(store)) is False

    with connect() as c:
        assert c.call_tool("whoami", {})["content"][0]["text"] == "ok"
    assert len(asked) == 2
    assert stat.S_IMODE(record.stat().st_mode) == 0o600


def test_the_manager_s_logout_removes_an_unusable_record(peers: Any, tmp_path: Path) -> None:
    peer = peers()
    store = tmp_path / "auth"
    entry = {"type": "http", "url": peer.url}
    assert mcplug.auth_logout(entry, auth_store=str(store)) is False
    store.mkdir(mode=0o700)
    record = record_of(store, peer.url)
    plant("not JSON", record, tmp_path / "unused")
    with mcplug.Manager({"connection": {"auth_store": str(store), "connect_timeout_ms": 20000}}) as m:
        m.connect({"mcpServers": {"srv": entry}})
        status = m.wait(timeout=20)["servers"]["srv"]
        assert status["state"] == "failed", status
        assert "mcplug logout srv" in status["error"]["message"], status
        out = m.logout("srv")
        assert out["forgotten"] is True and out["state"] == "needs-auth", out
    # What is there now is the needs-auth mark of the reconnect after logout: a usable record.
    assert not os.path.lexists(record) or "needs_auth_at" in record.read_text()


@pytest.mark.parametrize("name", ["list_tools", "search_tools", "list_resources", "list_prompts"])
def test_every_listing_of_the_manager_refuses_an_unknown_key(name: str) -> None:
    # The binding's own methods build their options; what a host passing its own JSON meets is
    # the C call underneath, reached here through the binding's handle.
    with mcplug.Manager() as m:
        fn = getattr(_ffi.lib, f"mcplug_manager_{name}")
        args = [b"echo"] if name == "search_tools" else []
        with pytest.raises(mcplug.InvalidArgumentError) as e:
            m._core._checked(fn, *args, b'{"sever": "x"}')
        assert "unknown option `sever`" in str(e.value) and "server" in str(e.value)
