'use strict';
// Configuration (synchronous: the library only computes and reads or writes a few small files,
// so a threadpool hop would cost more than the call), and logging out of a remote server.

const { errorOf, decode } = require('./errors');
const { native, callAsync } = require('./native');
const { toJson } = require('./values');

// ---------------------------------------------------------------------------------------------
// Configuration (synchronous: the library only computes and reads or writes a few small files,
// so a threadpool hop would cost more than the call).

function configCall(fn, value, what) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw errorOf('invalid_argument', `\`${what}\` must be an object (got ${Array.isArray(value) ? 'an array' : value === null ? 'null' : typeof value})`);
  }
  const out = [null];
  const status = fn(toJson(value, what), out);
  return decode(status, out[0]);
}

/**
 * Merges explicitly given MCP server configurations the way Claude Code does: `sources` holds
 * `enterprise`, `dynamic`, `local`, `project`, `user`, `plugin`, `claudeai` (each a file's
 * content, or its text as a string), `settings` and `env`. Returns `{servers, excluded, warnings,
 * errors}`.
 */
function mergeConfig(sources) {
  return configCall(native.config_merge, sources, 'sources');
}

/**
 * Reads and merges the configuration on disk. Options: `home`, `cwd`, `managed_dir`, `hosts`
 * (`'vscode'`, `'cursor'`, `'windsurf'`, `'claude_desktop'`, `'zed'`), `env`, `settings`,
 * `dynamic`, `plugin`, `claudeai`, `strict_mcp_config` (only the given servers and the managed
 * file's, as Claude Code's `--strict-mcp-config`). The result is mergeConfig's plus `files`.
 */
function discoverConfig(options = {}) {
  return configCall(native.config_discover, options, 'options');
}

/** Adds a server to a scope's file (`'user'`, `'local'`, `'project'`), keeping the rest of it. */
function addConfigServer(scope, name, config, { home, cwd, replace = false } = {}) {
  return configCall(native.config_add_server, { scope, name, config, replace, home, cwd }, 'options');
}

/** Removes a server from a scope's file, keeping the rest of it (kind `not_found` if absent). */
function removeConfigServer(scope, name, { home, cwd } = {}) {
  return configCall(native.config_remove_server, { scope, name, home, cwd }, 'options');
}

/**
 * Writes a choice of Claude Code's project-server dialog as the dialog writes it, in
 * `<cwd>/.claude/settings.local.json`: `choice` 'yes' (default: `enabledMcpjsonServers`),
 * 'yes_all' (also `enableAllProjectMcpServers`) or 'no' (`disabledMcpjsonServers`).
 */
function approveProjectServer(name, { choice, cwd } = {}) {
  return configCall(native.config_approve, { name, choice, cwd }, 'options');
}

/** Forgets every approval and rejection of the project's servers (Claude Code's `reset-project-choices`). */
function resetProjectChoices({ cwd } = {}) {
  return configCall(native.config_reset_project_choices, { cwd }, 'options');
}

/**
 * Logs out of a remote server: forgets every credential the auth store holds for it (tokens,
 * registrations, the needs-auth mark). `server` is its entry (`{type, url}`); `authStore` the
 * store (default: the library's default directory). Resolves to `{forgotten: boolean}`.
 */
async function authLogout(server, { authStore } = {}) {
  const options = authStore === undefined ? null : JSON.stringify({ auth_store: authStore });
  const { status, text } = await callAsync(native.auth_logout, [toJson(server, 'server'), options]);
  return decode(status, text);
}

module.exports = {
  mergeConfig,
  discoverConfig,
  addConfigServer,
  removeConfigServer,
  approveProjectServer,
  resetProjectChoices,
  authLogout,
};
