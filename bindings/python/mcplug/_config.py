"""Configuration: merge, discovery and editing of MCP server configs the way Claude Code does it
(``mcplug_config_*``). Synchronous: the library only computes and touches a few small files."""
from __future__ import annotations

from . import _ffi
from ._core import dumps

TYPE_CHECKING = False  # not typing's: see _codec
if TYPE_CHECKING:
    from typing import Any, Dict, Optional


def _call(fn: Any, value: Any, what: str) -> Dict[str, Any]:
    if not isinstance(value, dict):
        from ._errors import InvalidArgumentError

        raise InvalidArgumentError(f"`{what}` must be a dict (got {type(value).__name__})")
    status, text = _ffi.invoke(fn, dumps(value, what))
    result: Dict[str, Any] = _ffi.checked(status, text)
    return result


def merge_config(sources: Dict[str, Any]) -> Dict[str, Any]:
    """Merges explicitly given sources: ``{"enterprise", "dynamic", "local", "project", "user",
    "plugin", "claudeai"}`` (each a file's content, or its text as a str), ``"settings"`` and
    ``"env"``. Returns ``{"servers", "excluded", "warnings", "errors"}``; every entry left out is
    in ``excluded`` with its ``reason`` and ``detail``. Raises ConfigError for an unreadable
    policy entry, InvalidArgumentError for a malformed input."""
    return _call(_ffi.lib.mcplug_config_merge, sources, "sources")


def discover_config(options: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Reads and merges the configuration on disk. Options: ``home``, ``cwd``, ``managed_dir``,
    ``hosts`` (any of "vscode", "cursor", "windsurf", "claude_desktop", "zed"), ``env``,
    ``settings``, ``dynamic``, ``plugin``, ``claudeai``, ``strict_mcp_config`` (only the given
    servers and the managed file's, as Claude Code's ``--strict-mcp-config``). The result is ``merge_config``'s plus
    ``files``; a malformed file is an entry of ``errors`` with its line and column."""
    return _call(_ffi.lib.mcplug_config_discover, {} if options is None else options, "options")


def add_config_server(
    scope: str,
    name: str,
    config: Dict[str, Any],
    *,
    home: Optional[str] = None,
    cwd: Optional[str] = None,
    replace: bool = False,
) -> Dict[str, Any]:
    """Adds a server to a scope's file ("user", "local" or "project"), keeping the rest of the
    file. Returns ``{"file", "scope", "name", "created", "replaced"}``."""
    options: Dict[str, Any] = {"scope": scope, "name": name, "config": config, "replace": replace}
    if home is not None:
        options["home"] = home
    if cwd is not None:
        options["cwd"] = cwd
    return _call(_ffi.lib.mcplug_config_add_server, options, "options")


def approve_project_server(name: str, choice: str = "yes", *, cwd: Optional[str] = None) -> Dict[str, Any]:
    """Writes a choice of Claude Code's project-server dialog as the dialog writes it, in
    ``<cwd>/.claude/settings.local.json``: ``"yes"`` (``enabledMcpjsonServers``), ``"yes_all"``
    (also ``enableAllProjectMcpServers``) or ``"no"`` (``disabledMcpjsonServers``). Returns the
    file and the three settings as they now are."""
    options: Dict[str, Any] = {"name": name, "choice": choice}
    if cwd is not None:
        options["cwd"] = cwd
    return _call(_ffi.lib.mcplug_config_approve, options, "options")


def reset_project_choices(*, cwd: Optional[str] = None) -> Dict[str, Any]:
    """Forgets every approval and rejection of the project's servers (Claude Code's
    ``reset-project-choices``). Returns ``{"file", "reset": [keys removed]}``."""
    options: Dict[str, Any] = {} if cwd is None else {"cwd": cwd}
    return _call(_ffi.lib.mcplug_config_reset_project_choices, options, "options")


def remove_config_server(scope: str, name: str, *, home: Optional[str] = None, cwd: Optional[str] = None) -> Dict[str, Any]:
    """Removes a server from a scope's file, keeping the rest of it. Returns ``{"file", "scope",
    "name", "removed"}``; raises NotFoundError if the file has no such server."""
    options: Dict[str, Any] = {"scope": scope, "name": name}
    if home is not None:
        options["home"] = home
    if cwd is not None:
        options["cwd"] = cwd
    return _call(_ffi.lib.mcplug_config_remove_server, options, "options")
