//! `mcplug_config_*`: configuration merge, discovery and editing. Pure or filesystem-only calls:
//! they never start a server and need no handle.

use super::boundary::{ffi_boundary, json_arg, json_required};
use super::mcplug_status;
use crate::config;
use std::ffi::c_char;

/// Merges MCP server configurations given explicitly, the way Claude Code does.
///
/// `sources_json`: `{"enterprise", "dynamic", "local", "project", "user", "plugin", "claudeai"}`
/// — each a config file's content (`{"mcpServers": {...}}`) or its text as a JSON string (then a
/// malformed one is reported with line and column) — plus `"settings"` (`allowedMcpServers`,
/// `deniedMcpServers`, `enabledMcpjsonServers`, `disabledMcpjsonServers`,
/// `enableAllProjectMcpServers`) and `"env"` (the variables for `${VAR}` expansion; absent: the
/// process environment). Every key may be absent; an absent `enterprise` means no managed file.
///
/// On `MCPLUG_OK`, `out` is `{"servers": {"<name>": {"scope", "signature", "config"}},
/// "excluded": [{"name", "scope", "reason", "detail", ...}], "warnings": [...], "errors": [...]}`:
/// `reason` is `shadowed` (with `by`), `duplicate` (with `duplicate_of`), `denied`,
/// `not_allowed`, `pending_approval`, `rejected`, `enterprise_exclusive` or `invalid` (with
/// `path`, and `line`/`column` for a source given as text); `errors` lists the sources that could
/// not be read (`scope`, `file`, `line`, `column`, `message`) — the other sources still merged —
/// and the field at which the values of `${...}` variables passed 8 MiB in all (the limit of one
/// merge; that entry and any later one that would add more are `invalid`, naming the field).
/// Free `out` with `mcplug_string_free`.
/// Errors: `invalid_argument` (NULL, malformed JSON, a key or value of the wrong shape),
/// `config` (a policy entry that cannot be read — policy fails closed — or malformed settings).
#[no_mangle]
pub unsafe extern "C" fn mcplug_config_merge(
    sources_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let sources = json_required(sources_json, "sources_json")?;
        Ok(config::merge(&sources)?.to_string())
    })
}

/// Finds and merges the MCP server configuration on disk: `managed-mcp.json` and
/// `managed-settings.json` in the managed directory, `~/.claude.json` (user, and local under
/// `projects[<cwd>]`), `.claude/settings.local.json`, every `.mcp.json` from the working
/// directory up, and the settings files for policy and project approval.
///
/// `options_json` (`{}` for defaults): `home` ($HOME when it is an absolute path, else the user
/// database's home; an empty or relative HOME is ignored), `cwd` (the current directory),
/// `managed_dir` (`/etc/claude-code` on Linux), `hosts` (other hosts' files to read too, each its
/// own scope: `"vscode"`, `"cursor"`, `"windsurf"`, `"claude_desktop"`, `"zed"`), `env`,
/// `settings` (more policy/approval settings from the host), `dynamic`, `plugin`, `claudeai`
/// (contents given by the host), `strict_mcp_config` (`true`: the servers of `dynamic`,
/// `plugin` and `claudeai` only — and the managed file's, which excludes them as always — as
/// Claude Code's `--strict-mcp-config`; the allow/deny policy of the settings files applies).
///
/// On `MCPLUG_OK`, `out` is the result of `mcplug_config_merge` plus `"files"` (`[{"file",
/// "scope", "role": "servers"|"settings"}]`, every file found). A malformed file is an entry of
/// `errors` naming its file, line and column; the other files still merge. Free `out` with
/// `mcplug_string_free`. Errors: `invalid_argument` (bad options), `config` (unreadable policy:
/// a malformed `managed-settings.json` or policy entry).
#[no_mangle]
pub unsafe extern "C" fn mcplug_config_discover(
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let options = json_required(options_json, "options_json")?;
        Ok(config::discover(&options)?.to_string())
    })
}

/// Adds a server to one scope's file, keeping everything else in the file (key order and
/// unknown content); the file is replaced atomically and keeps its permissions.
///
/// `options_json`: `scope` (`"user"`: `~/.claude.json`; `"local"`: `~/.claude.json`
/// `projects[<cwd>]`; `"project"`: `<cwd>/.mcp.json`), `name`, `config` (the entry, checked as
/// the merge checks entries), `home`, `cwd`, `replace` (false: an existing name is an error).
/// On `MCPLUG_OK`, `out` is `{"file", "scope", "name", "created", "replaced"}`; free it with
/// `mcplug_string_free`. Errors: `invalid_argument` (bad options, an invalid entry or name),
/// `config` (the name exists, or the file is not valid JSON — it is then left untouched — or
/// cannot be written).
#[no_mangle]
pub unsafe extern "C" fn mcplug_config_add_server(
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let options = json_required(options_json, "options_json")?;
        Ok(config::add_server(&options)?.to_string())
    })
}

/// Writes a choice of Claude Code's dialog for a project (`.mcp.json`) server as the dialog writes
/// it, in `<cwd>/.claude/settings.local.json` (keeping the rest of the file): `choice` `"yes"`
/// (the default) adds `name` to `enabledMcpjsonServers`, `"yes_all"` also sets
/// `enableAllProjectMcpServers`, `"no"` adds it to `disabledMcpjsonServers`; the name leaves the
/// other list. The merge then reads the server as approved or rejected.
///
/// `options_json`: `name`, `choice`, `cwd` (default: the current directory). On `MCPLUG_OK`,
/// `out` is `{"file", "name", "choice", "enabledMcpjsonServers", "disabledMcpjsonServers",
/// "enableAllProjectMcpServers"}` as the file now has them. Errors: `invalid_argument` (a bad
/// name, choice or option), `config` (the file is not a JSON object, one of the keys is not what
/// Claude Code writes there, or it cannot be written).
#[no_mangle]
pub unsafe extern "C" fn mcplug_config_approve(
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let options = json_required(options_json, "options_json")?;
        Ok(config::approve_project_server(&options)?.to_string())
    })
}

/// Forgets every approval and rejection of the project's servers, as Claude Code's
/// `reset-project-choices`: `enabledMcpjsonServers`, `disabledMcpjsonServers` and
/// `enableAllProjectMcpServers` leave `<cwd>/.claude/settings.local.json`; the rest stays.
///
/// `options_json` (NULL: the current directory): `cwd`. On `MCPLUG_OK`, `out` is `{"file",
/// "reset": [the keys removed]}`. Errors: `invalid_argument`, `config`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_config_reset_project_choices(
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let options =
            json_arg(options_json, "options_json")?.unwrap_or_else(|| serde_json::json!({}));
        Ok(config::reset_project_choices(&options)?.to_string())
    })
}

/// Removes a server from one scope's file, keeping everything else in the file.
///
/// `options_json`: `scope`, `name`, `home`, `cwd` (as for `mcplug_config_add_server`).
/// On `MCPLUG_OK`, `out` is `{"file", "scope", "name", "removed": <the entry>}`; free it with
/// `mcplug_string_free`. Errors: `invalid_argument`, `not_found` (no such server in that file),
/// `config` (the file is not valid JSON, or cannot be written).
#[no_mangle]
pub unsafe extern "C" fn mcplug_config_remove_server(
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let options = json_required(options_json, "options_json")?;
        Ok(config::remove_server(&options)?.to_string())
    })
}
