'use strict';

const { Status, McpError, errorOf, decode, errorFromNative } = require('./errors');
const { EVENT_BATCH, libraryPath, mnative, callAsync, workGate, controlGate, textOut, takeText } = require('./native');
const { formatOption, checkPlainObject, toJson, handlerAnswer, answerText, checkString, optionalObject, timeoutValue, mergeCapabilities, checkBoolean, checkCount, NAMED_NOTIFICATIONS, snakeKeys, checkHandlers, hostToolResult } = require('./values');
const { Op, runOp } = require('./calls');
const { Handle } = require('./handle');

// ---------------------------------------------------------------------------------------------
// Manager: many servers, their tools in one pool (mcplug_manager_*).
//
// Tool calls are started calls, exactly as the Client's (`_start`, `Started`):
// `mcplug_manager_call_tool_start` returns a call number at once and the outcome arrives as a
// `completion` event of the manager's queue, matched by that number; AbortSignal and cancel(tag)
// use `mcplug_manager_cancel_call`, timeouts are the library's (`timeout_ms`). No thread is held
// while a call runs, so any number may be in flight, and a host tool's handler may itself call
// the manager (its own call is only an event waiting for our answer). The manager writes each
// call from a task of its own, so nothing is deferred (`defer`) here.
// The other calls that talk to a server (resources, prompts, request, reconnect) block until the
// answer, so those run on the threadpool through the same gates as the Client's blocking calls.
// What only reads the manager's state (status, listTools, searchTools, the events) is called
// from the JS thread. Events come like the Client's: `mcplug_manager_event_fd` in a net.Socket,
// `mcplug_manager_next_events(m, EVENT_BATCH, 0)` until the queue is empty. `wait()` never holds
// a thread: it re-reads the status after the events of each turn.

/** The manager events that also come under a name of their own (with the event as argument). */
const MANAGER_EVENT_NAMES = Object.freeze({
  __proto__: null,
  state: 'state',
  tools_changed: 'toolsChanged',
  removed: 'removed',
  resources_changed: 'resourcesChanged',
  prompts_changed: 'promptsChanged',
  warning: 'warning',
  overflow: 'overflow',
});

/** How many events one drain dispatches before it lets the event loop run (and goes on after). */
const MANAGER_DRAIN_LIMIT = 1024;

/** The native functions of a manager handle (see Handle). */
const MANAGER_NATIVES = Object.freeze({
  prefix: 'mcplug_manager',
  what: 'manager',
  ended: 'the manager is closed',
  respond: mnative.respond,
  cancelCall: mnative.cancel_call,
  close: mnative.close,
  free: mnative.free,
  eventFd: mnative.event_fd,
});

/** Frees a server handle nobody closed (it was garbage-collected). */
const serverFinalizer = new FinalizationRegistry((handle) => {
  callAsync(mnative.server_free, [handle], false).catch(() => {});
});

/** A manager's pool served as one MCP server (`manager.serve(...)`). */
class Server {
  constructor(handle, info) {
    this._handle = handle;
    /** `http://HOST:PORT/mcp` (Streamable HTTP); null over descriptors. */
    this.url = info && typeof info.url === 'string' ? info.url : null;
    this._closing = null;
    serverFinalizer.register(this, handle, this);
  }

  /** Whether `close()` was called. */
  get closed() {
    return this._closing !== null;
  }

  /**
   * Ends every client's session (their calls in flight are cancelled at the servers), stops
   * listening and frees the server; the manager stays open. Resolves when done; idempotent.
   */
  close() {
    if (this._closing === null) {
      serverFinalizer.unregister(this);
      this._closing = callAsync(mnative.server_free, [this._handle], false).then(() => undefined);
    }
    return this._closing;
  }
}

class Manager extends Handle {
  /** Same as `new Manager(options, opts)`, as a Promise. */
  static async create(options, opts) {
    return new Manager(options, opts);
  }

  /**
   * A manager with no server yet (see `connect`). `options`: `localConcurrency`,
   * `remoteConcurrency`, `connection` (Client.connect's options for every server, e.g.
   * `{connectTimeoutMs, toolTimeoutMs}`), `maxDescriptionChars`, `maxOutputTokens` or
   * `maxOutputChars`, `terminalErrors`, `reconnectInitialMs`, `reconnectMaxMs`,
   * `reconnectAttempts`, `disabled`, `maxEvents`, `registry` (snake_case names work too). `handlers`: as
   * the Client's, called with `(params, server, ctx)`; each declares its capability.
   */
  constructor(options, { handlers = {} } = {}) {
    checkHandlers(handlers);
    const merged = snakeKeys(options === undefined || options === null ? {} : options, 'options');
    const connection = merged.connection === undefined ? {} : snakeKeys(merged.connection, 'options.connection');
    // The library declares, to every server, what the handlers imply.
    const handled = Object.keys(handlers);
    if (handled.length > 0) connection.handlers = handled;
    if (connection.capabilities !== undefined) {
      connection.capabilities = mergeCapabilities([connection.capabilities, 'options.connection.capabilities']);
    }
    if (merged.connection !== undefined || Object.keys(connection).length > 0) merged.connection = connection;
    const out = [null];
    const status = mnative.create(toJson(merged, 'options'), out, textOut);
    const text = takeText();
    if (status !== Status.OK) throw errorFromNative(status, text);
    const handle = out[0];
    super(handle, handlers, MANAGER_NATIVES);
    // name -> {handlers: Map<tool, fn>, tools: [its tools now, without handlers], entry: its config entry}
    this._hostServers = new Map();
    this._config = null; // the last configuration given to connect (without the host servers)
    // connect() calls apply in the order they were made (the control lane runs several native
    // calls at once: two configurations must not overtake each other).
    this._connects = Promise.resolve();
    this._waiters = new Set(); // wait() calls: re-checked after each drain
    this._drainLater = null;
    this._completing = []; // [Started, completion event] of calls with onProgress, settled after one more pull
    this._settleLater = null;
    try {
      this._watchEvents();
    } catch (e) {
      this._handle = null;
      this._state = 'closed';
      callAsync(mnative.free, [handle], false).catch(() => {});
      throw e;
    }
  }


  /**
   * Takes a configuration (`{mcpServers: {...}}`, the result of mergeConfig/discoverConfig, or
   * VS Code's `{servers: {...}}`) and starts connecting every server in it; resolves at once
   * (before any server is up) with the status, new servers `pending`. Again with another
   * configuration: unchanged servers stay, changed ones reconnect, missing ones are closed.
   * The host servers (addHostServer) are added to every configuration.
   */
  async connect(config) {
    if (config === null || typeof config !== 'object' || Array.isArray(config)) {
      throw errorOf('invalid_argument', '`config` must be an object such as {mcpServers: {name: {command, args}}}');
    }
    const json = toJson(this._withHostServers(config), 'config');
    return this._apply(() => ({ config, json }));
  }

  /**
   * Gives the library a configuration, after every one given before (`make` says which, when its
   * turn comes). It returns at once (servers connect in the background), but may first close
   * the servers the configuration drops: a short wait, on the control lane.
   */
  _apply(make) {
    const applied = this._connects.then(async () => {
      const { config, json } = make();
      const status = await this._blocking('connect', controlGate, mnative.connect, [json]);
      this._config = config;
      return status;
    });
    this._connects = applied.then(() => undefined, () => undefined);
    return applied;
  }

  /** The last configuration given to connect() (or none), with the host servers as they are now. */
  _again() {
    return this._apply(() => {
      const config = this._config || { mcpServers: {} };
      return { config, json: toJson(this._withHostServers(config), 'config') };
    });
  }

  /**
   * Resolves with the status once no server is `pending`; with `timeoutMs` (a number, or
   * `{timeoutMs}`), rejects with kind `timeout` naming the servers still pending. Holds no thread.
   */
  wait(timeoutMs) {
    try {
      const limit = timeoutValue(timeoutMs !== null && typeof timeoutMs === 'object' ? timeoutMs.timeoutMs : timeoutMs, 'timeoutMs');
      this._checkOpen('wait');
      return new Promise((resolve, reject) => {
        let timer = null;
        let pending = [];
        const waiter = {
          check: () => {
            let status;
            try {
              this._checkOpen('wait');
              status = this._sync(mnative.status, []);
            } catch (e) {
              waiter.done();
              reject(e);
              return;
            }
            pending = Object.keys(status.servers).filter((name) => status.servers[name].state === 'pending');
            if (pending.length === 0) {
              waiter.done();
              resolve(status);
            }
          },
          done: () => {
            this._waiters.delete(waiter);
            if (timer !== null) clearTimeout(timer);
          },
        };
        this._waiters.add(waiter);
        if (typeof limit === 'number') {
          timer = setTimeout(() => {
            waiter.done();
            reject(errorOf('timeout', `servers still pending after ${limit} ms: ${pending.join(', ')}`));
          }, limit);
        }
        waiter.check();
      });
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** `{servers: {<name>: {state, transport, tools, error?, attempt?, server_info?, ...}}, tools: N}`. */
  async status() {
    return this._sync(mnative.status, []);
  }

  /**
   * The tool pool (one server's tools with `server`): pool entries `{name: 'mcp__<server>__<tool>',
   * server, tool, description, inputSchema, read_only, destructive, ...}`; the array's `dropped`
   * lists the tools left out for a name clash.
   */
  async listTools(server, { format } = {}) {
    const opts = formatOption(server === undefined || server === null ? null : { server: checkString(server, 'server') }, { format });
    const res = this._sync(mnative.list_tools, [opts === null ? null : JSON.stringify(opts)]);
    return { tools: res.tools, dropped: res.dropped || [] };
  }

  /**
   * Ranks the pool by `query` (words matched against names, search hints and descriptions;
   * `+word` must match; `select:a,b` picks by name). Resolves `{tools: [entry + score], total}`.
   */
  async searchTools(query, { maxResults, server, format } = {}) {
    const fn = this._need(mnative.search_tools, 'mcplug_manager_search_tools');
    checkString(query, 'query');
    const options = formatOption({}, { format });
    if (maxResults !== undefined) options.max_results = checkCount(maxResults, 'maxResults');
    if (server !== undefined && server !== null) options.server = checkString(server, 'server');
    return this._sync(fn, [query, JSON.stringify(options)]);
  }

  /**
   * Calls a tool of the pool by its pool name (`mcp__<server>__<tool>`); resolves with the
   * CallToolResult (text cleaned and capped). Options as Client.callTool's (`timeoutMs`, `tag`,
   * `signal`, `onProgress`, `task`, ...). Kind `not_found` for a name not in the pool.
   */
  callTool(poolName, args, options) {
    return this._callTool(mnative.call_tool_start, 'poolName', poolName, args, options);
  }


  /**
   * Resources of every connected server with the resources capability (or `server`'s):
   * `{resources: [... + server], templates: [... + server], errors: {<server>: {kind, message}}}`.
   */
  listResources({ server, timeoutMs, tag, signal } = {}) {
    return this._listing('resources/list', mnative.list_resources, 'mcplug_manager_list_resources', { server, timeoutMs, tag, signal });
  }

  /** `resources/read` of `uri` on `server`; resolves with the ReadResourceResult. */
  readResource(server, uri, { timeoutMs, tag, signal } = {}) {
    try {
      const fn = this._need(mnative.read_resource, 'mcplug_manager_read_resource');
      checkString(server, 'server');
      checkString(uri, 'uri');
      return this._work(`resources/read ${uri}`, fn, { timeoutMs, tag, signal }, (opts) => [server, uri, opts]);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Prompts of every connected server with the prompts capability (or `server`'s):
   * `{prompts: [... + server, prompt (its own name), name 'mcp__<server>__<prompt>'], errors}`.
   */
  listPrompts({ server, timeoutMs, tag, signal } = {}) {
    return this._listing('prompts/list', mnative.list_prompts, 'mcplug_manager_list_prompts', { server, timeoutMs, tag, signal });
  }

  /** `prompts/get` by qualified name (`mcp__<server>__<prompt>`); resolves with the GetPromptResult. */
  getPrompt(qualifiedName, args, { timeoutMs, tag, signal } = {}) {
    try {
      const fn = this._need(mnative.get_prompt, 'mcplug_manager_get_prompt');
      checkString(qualifiedName, 'qualifiedName');
      // A string is a command line (`a "b c"`), mapped by the library onto the declared arguments.
      const argsJson = typeof args === 'string' ? JSON.stringify(args) : optionalObject(args, 'arguments');
      return this._work(`prompts/get ${qualifiedName}`, fn, { timeoutMs, tag, signal }, (opts) => [qualifiedName, argsJson, opts]);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Any request to one named server (`resources/subscribe`, `completion/complete`, ...); resolves with its result. */
  request(server, method, params, { timeoutMs, tag, signal } = {}) {
    try {
      const fn = this._need(mnative.request, 'mcplug_manager_request');
      checkString(server, 'server');
      checkString(method, 'method');
      const paramsJson = optionalObject(params, 'params');
      return this._work(method, fn, { timeoutMs, tag, signal }, (opts) => [server, method, paramsJson, opts]);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Serves the pool as one MCP server, for other agents (any MCP host): over Streamable HTTP at
   * `http` (default '127.0.0.1:0': a port of its own; both protocol eras; requests whose Host or
   * Origin is not this machine's are refused), or to one client over `fds: [readFd, writeFd]`
   * (newline-delimited, as stdio). `names`: 'prefixed' (mcp__<server>__<tool>, the default) or
   * 'unprefixed' (the servers' own names; the first server in configuration order wins a
   * collision). Host servers are served too: their calls come to this manager's tools as ever.
   * Results pass as the servers sent them; what a server asks during a client's call (sampling,
   * elicitation, roots) is asked of that client. Resolves with a `Server`: `url`, `close()`.
   */
  async serve(options = {}) {
    const o = options === undefined || options === null ? {} : checkPlainObject(options, 'options');
    for (const k of Object.keys(o)) {
      if (!['http', 'names', 'fds'].includes(k)) {
        throw errorOf('invalid_argument', `serve: unknown option \`${k}\` (the options are http, names, fds)`);
      }
    }
    const names = o.names === undefined ? 'prefixed' : o.names;
    if (names !== 'prefixed' && names !== 'unprefixed') {
      throw errorOf('invalid_argument', `\`names\` must be 'prefixed' or 'unprefixed' (got ${JSON.stringify(names)})`);
    }
    let native;
    if (o.fds !== undefined) {
      if (o.http !== undefined) throw errorOf('invalid_argument', 'give `http` or `fds`, not both');
      const ok = Array.isArray(o.fds) && o.fds.length === 2 && o.fds.every((f) => Number.isInteger(f) && f >= 0);
      if (!ok) throw errorOf('invalid_argument', `\`fds\` must be [readFd, writeFd] (got ${JSON.stringify(o.fds)})`);
      native = { transport: 'fds', read_fd: o.fds[0], write_fd: o.fds[1], names };
    } else {
      const listen = o.http === undefined ? '127.0.0.1:0' : o.http;
      checkString(listen, 'http');
      native = { transport: 'http', listen, names };
    }
    if (mnative.serve === null) {
      throw errorOf('not_implemented', 'this libmcplug cannot serve (mcplug_manager_serve is missing)');
    }
    const handle = [null];
    const info = await this._blocking('serve', controlGate, mnative.serve, [toJson(native, 'options'), handle]);
    return new Server(handle[0], info);
  }

  /** Closes `server`'s connection and connects it again (one attempt, awaited); resolves with its status entry. */
  async reconnect(server) {
    checkString(server, 'server');
    return this._blocking(`reconnect ${server}`, workGate, mnative.reconnect, [server]);
  }

  /**
   * Authorizes a remote server (OAuth). The manager never starts an authorization on its own:
   * a server without a usable token is `needs-auth` (its status has `auth`: `{reason, issuer?,
   * scope?, resource_metadata?}`) and its only pool tool is `mcp__<server>__authenticate`. This
   * connects it again, allowed to authorize, and resolves as soon as the authorization's URL is
   * known: its status entry with `state: 'pending'` and `authorization: {url, redirect_uri,
   * issuer, scope?}` — send the user to `url`; the library's loopback listener takes the
   * browser's callback and the server connects, its tools replacing the pseudo-tool (a `state`
   * event). When no user is needed it resolves with the connected server's status. Options:
   * `wait` (true: resolve only when the authorization has ended — the connected status, or a
   * NeedsAuthError), `timeoutMs` (of that wait), `callbackUrl` (the redirect the host captured
   * itself, completing the authorization under way). A connected server is left as it is.
   */
  async authenticate(server, options = {}) {
    try {
      checkString(server, 'server');
      const o = snakeKeys(options ?? {}, 'options');
      return this._blocking(`authenticate ${server}`, workGate, mnative.authenticate, [server, toJson(o, 'options')]);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Forgets `server`'s stored credentials (tokens, registrations), closes its connection and
   * connects it once more without authorizing (a server that needs authorization ends
   * `needs-auth`); resolves with its status entry and `forgotten: true|false`.
   */
  async logout(server) {
    checkString(server, 'server');
    return this._blocking(`logout ${server}`, workGate, mnative.logout, [server]);
  }

  /** Disables `server` (its connection closes, its tools leave the pool) or enables it again (not awaited); resolves with its status entry. */
  async setEnabled(server, enabled) {
    checkString(server, 'server');
    checkBoolean(enabled, 'enabled');
    return this._control(`setEnabled ${server}`, mnative.set_enabled, [server, enabled ? 1 : 0]);
  }

  /**
   * Adds (or replaces) an in-process server whose tools run in this process: `tools` is
   * `[{name, description?, inputSchema?, annotations?, title?, outputSchema?, _meta?, handler}]`,
   * `handler(arguments, {server, tool, id, signal, manager})` returning a CallToolResult or a
   * string (sync or async); a throw becomes an `isError: true` result with its message. Its
   * tools join the pool as `mcp__<name>__<tool>`. Resolves with the server's status entry.
   */
  async addHostServer(name, tools) {
    checkString(name, 'name');
    if (!Array.isArray(tools)) throw errorOf('invalid_argument', '`tools` must be an array of {name, description, inputSchema, handler}');
    const handlers = new Map();
    const entries = [];
    tools.forEach((tool, i) => {
      if (tool === null || typeof tool !== 'object' || Array.isArray(tool)) throw errorOf('invalid_argument', `\`tools[${i}]\` must be an object`);
      const { handler, ...entry } = tool;
      checkString(entry.name, `tools[${i}].name`);
      if (typeof handler !== 'function') throw errorOf('invalid_argument', `\`tools[${i}].handler\` (${entry.name}) must be a function`);
      if (handlers.has(entry.name)) throw errorOf('invalid_argument', `two tools named ${entry.name} in \`tools\``);
      handlers.set(entry.name, handler);
      entries.push(entry);
    });
    const toolsJson = toJson(entries, 'tools');
    this._checkOpen('addHostServer');
    const before = this._hostServers.get(name);
    if (before === undefined && this._config !== null && this._configNames(this._config).includes(name)) {
      throw errorOf('invalid_argument', `a server named ${name} is already in the configuration`);
    }
    try {
      if (before !== undefined && this._sync(mnative.status, []).servers[name] !== undefined) {
        // Known to the library: its tools are replaced in place. Its configuration entry stays
        // the one the library made it from (set_tools does not change that entry): a later
        // connect() then finds it unchanged, rather than closing it and its calls in flight.
        this._hostServers.set(name, { handlers, tools: entries, entry: before.entry });
        return this._sync(this._need(mnative.set_tools, 'mcplug_manager_set_tools'), [name, toolsJson]);
      }
      this._hostServers.set(name, { handlers, tools: entries, entry: { type: 'sdk', tools: entries } });
      const status = await this._again();
      return status.servers[name];
    } catch (e) {
      if (before === undefined) this._hostServers.delete(name);
      else this._hostServers.set(name, before);
      throw e;
    }
  }

  /** Removes a host server (its tools leave the pool). Kind `not_found` if there is none of that name. */
  async removeHostServer(name) {
    checkString(name, 'name');
    const before = this._hostServers.get(name);
    if (before === undefined) throw errorOf('not_found', `no host server named ${name}`);
    this._checkOpen('removeHostServer');
    this._hostServers.delete(name);
    try {
      await this._again();
    } catch (e) {
      this._hostServers.set(name, before);
      throw e;
    }
  }

  /** The names of the host servers. */
  get hostServers() {
    return [...this._hostServers.keys()];
  }

  // -- internals -------------------------------------------------------------------------------

  _need(fn, name) {
    if (fn === null) throw errorOf('not_implemented', `${libraryPath} has no ${name}; use a newer libmcplug`);
    return fn;
  }

  /** listResources / listPrompts: every server's list (or `server`'s), on the work lane. */
  _listing(label, fn, name, { server, timeoutMs, tag, signal }) {
    try {
      this._need(fn, name);
      const extra = {};
      if (server !== undefined && server !== null) extra.server = checkString(server, 'server');
      return this._work(label, fn, { timeoutMs, tag, signal, extra }, (opts) => [opts]);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** A call that only reads the manager's state, from the JS thread. */
  _sync(fn, args) {
    this._checkOpen();
    const status = fn(this._handle, ...args, textOut);
    return decode(status, takeText());
  }

  /** A blocking call through a gate, without a tag (it cannot be cancelled, only closed). */
  _blocking(label, gate, fn, args) {
    this._checkOpen(label);
    return runOp({ gate, fn, op: new Op(null, label), owner: this, build: () => [this._handle, ...args] });
  }

  /** The server names of a configuration (either shape). */
  _configNames(config) {
    const servers = config.mcpServers !== undefined ? config.mcpServers : config.servers;
    return servers !== null && typeof servers === 'object' ? Object.keys(servers) : [];
  }

  /** The configuration with an `sdk` entry for every host server (their handlers stay here). */
  _withHostServers(config) {
    if (this._hostServers.size === 0) return config;
    const key = config.mcpServers !== undefined ? 'mcpServers' : config.servers !== undefined ? 'servers' : null;
    if (key === null) return config; // the library names what is missing
    const given = config[key];
    if (given === null || typeof given !== 'object' || Array.isArray(given)) return config;
    const servers = { ...given };
    for (const [name, host] of this._hostServers) {
      if (Object.prototype.hasOwnProperty.call(servers, name)) {
        throw errorOf('invalid_argument', `\`${key}.${name}\` has the name of a host server (addHostServer)`);
      }
      servers[name] = host.entry;
    }
    return { ...config, [key]: servers };
  }

  /**
   * Takes every queued event (never waits), EVENT_BATCH at a time with
   * `mcplug_manager_next_events`, and dispatches them in order: completions settle their calls,
   * the rest go to handlers and listeners. After MANAGER_DRAIN_LIMIT events it lets the loop run
   * and goes on in the next turn (the descriptor stays readable while the queue is not emptied,
   * so nothing waits for a wake-up).
   */
  _drain() {
    if (this._draining) {
      this._drainAgain = true;
      return;
    }
    this._draining = true;
    if (this._drainLater !== null) {
      clearImmediate(this._drainLater);
      this._drainLater = null;
    }
    let n = 0;
    try {
      do {
        this._drainAgain = false;
        while (this._handle !== null && !this._eventsEnded) {
          if (n >= MANAGER_DRAIN_LIMIT) {
            this._drainLater = setImmediate(() => {
              this._drainLater = null;
              this._drain();
            });
            return;
          }
          const status = mnative.next_events(this._handle, EVENT_BATCH, 0, textOut);
          const text = takeText();
          if (status === Status.TIMEOUT) break;
          if (status === Status.CLOSED) {
            this._endOfEvents();
            break;
          }
          if (status !== Status.OK) {
            process.emitWarning(`mcplug: mcplug_manager_next_events failed: ${errorFromNative(status, text).message}`, 'McplugWarning');
            break;
          }
          let events;
          try {
            events = JSON.parse(text);
          } catch {
            process.emitWarning(`mcplug: manager events that are not JSON: ${String(text).slice(0, 200)}`, 'McplugWarning');
            break;
          }
          n += events.length;
          for (let i = 0; i < events.length; i++) this._dispatch(events[i]);
          // A short batch emptied the queue, unless its last event was the final `closed`: then
          // the next pull says CLOSED, and no byte will wake us for it.
          const last = events[events.length - 1];
          if (events.length < EVENT_BATCH && !(last && last.type === 'closed')) break;
        }
      } while (this._drainAgain);
    } finally {
      this._draining = false;
      if (this._waiters.size > 0) for (const w of [...this._waiters]) w.check();
    }
  }

  _dispatch(ev) {
    if (!ev || typeof ev !== 'object') return;
    if (ev.type === 'completion') {
      // The binding's own event: it settles a started call, no listener sees it.
      const rec = this._calls.get(ev.call);
      if (rec === undefined) return;
      if (rec.onProgress !== null && !this._eventsEnded) {
        // A server's progress notifications reach the manager's queue through that server's
        // own event pump, which may run just after the call's completion was queued: settle
        // once the events of one more pull (in the check phase, after this turn) were
        // dispatched, so that they still reach onProgress.
        this._completing.push([rec, ev]);
        if (this._settleLater === null) this._settleLater = setImmediate(() => this._settleCompleted(true));
        return;
      }
      rec.settle(ev.result, ev.error);
      return;
    }
    this._emitSafe('event', ev);
    const named = MANAGER_EVENT_NAMES[ev.type];
    if (named !== undefined) this._emitSafe(named, ev);
    switch (ev.type) {
      case 'state':
        // A request of a connection that is gone will not be answered.
        if (ev.state !== 'connected') this._withdrawServer(ev.server, `server ${ev.server} is ${ev.state}`);
        break;
      case 'removed':
        this._withdrawServer(ev.server, `server ${ev.server} was removed`);
        break;
      case 'notification': {
        const params = ev.params || {};
        if (ev.method === 'notifications/progress' && ev.tag) this._progress(ev.tag, params, ev.server);
        this._notifyHandler(ev.method, params, ev.server, { method: ev.method, server: ev.server, manager: this });
        const n = { server: ev.server, method: ev.method, params };
        if (ev.tag) n.tag = ev.tag;
        this._emitSafe('notification', n);
        const name = NAMED_NOTIFICATIONS[ev.method];
        if (name !== undefined) this._emitSafe(name, { ...params, server: ev.server });
        break;
      }
      case 'request':
        this._handleRequest(ev);
        break;
      case 'stderr':
        this._emitSafe('stderr', { server: ev.server, line: ev.line });
        break;
      case 'invalid_message':
        this._emitSafe('invalidMessage', { server: ev.server, error: ev.error, line: ev.line });
        break;
      case 'request_expired':
        this._withdrawRequest(ev.id, `the host did not answer ${ev.method} in time`);
        this._emitSafe('requestExpired', { server: ev.server, id: ev.id, method: ev.method });
        break;
      case 'request_cancelled':
        this._withdrawRequest(ev.id, `${ev.method || 'the request'} is no longer needed${ev.reason ? `: ${ev.reason}` : ''}`);
        this._emitSafe('requestCancelled', { server: ev.server, id: ev.id, method: ev.method, reason: ev.reason });
        break;
      default:
        break;
    }
  }

  /** Settles the calls whose completions were held back for their progress (see _dispatch). */
  _settleCompleted(pull) {
    if (this._settleLater !== null) clearImmediate(this._settleLater);
    this._settleLater = null;
    if (pull) this._drain();
    const ready = this._completing;
    this._completing = [];
    for (const [rec, ev] of ready) rec.settle(ev.result, ev.error);
  }

  _withdrawServer(server, why) {
    for (const [id, pending] of [...this._pendingRequests]) {
      if (pending.server === server) this._withdrawRequest(id, why);
    }
  }

  async _handleRequest(ev) {
    if (this._state !== 'open') return;
    const controller = new AbortController();
    const pending = { controller, server: ev.server };
    this._pendingRequests.set(ev.id, pending);
    const params = ev.params || {};
    const host = this._hostServers.get(ev.server);
    const handler = this._handlers[ev.method];
    let answer;
    if (host !== undefined && ev.method === 'tools/call') {
      answer = await this._callHostTool(host, ev, params, controller.signal);
    } else if (!handler && this.listenerCount('request') > 0) {
      this._emitSafe('request', { server: ev.server, id: ev.id, method: ev.method, params, signal: controller.signal });
      return;
    } else if (!handler) {
      answer = { id: ev.id, error: { code: -32601, message: `Method not found: ${ev.method} (no handler for it in this manager)` } };
    } else {
      answer = await handlerAnswer(ev, () => handler(params, ev.server, { id: ev.id, method: ev.method, server: ev.server, manager: this, signal: controller.signal }));
    }
    // Withdrawn while the handler ran: nobody waits for the answer.
    if (this._pendingRequests.get(ev.id) !== pending) return;
    await this._answer(ev.id, ev.method, answerText(ev, answer));
  }

  /** A tools/call of a host server: its tool's handler, a throw becoming an isError result. */
  async _callHostTool(host, ev, params, signal) {
    const tool = params.name;
    const fn = host.handlers.get(tool);
    if (fn === undefined) {
      return { id: ev.id, error: { code: -32602, message: `Unknown tool: ${tool} (host server ${ev.server} has no such tool)` } };
    }
    try {
      const value = await fn(params.arguments || {}, { server: ev.server, tool, id: ev.id, signal, manager: this });
      return { id: ev.id, result: hostToolResult(value, tool) };
    } catch (e) {
      return { id: ev.id, result: { content: [{ type: 'text', text: e && e.message ? String(e.message) : String(e) }], isError: true } };
    }
  }

  /** An answer whose server is gone (not_found) is dropped too. */
  _answerGone(e) {
    return super._answerGone(e) || (e instanceof McpError && e.kind === 'not_found');
  }

  /** The end of the events: the completions held back for progress settle with their own outcomes. */
  _eventsEnding() {
    if (this._completing.length > 0 || this._settleLater !== null) this._settleCompleted(false);
    if (this._drainLater !== null) clearImmediate(this._drainLater);
    this._drainLater = null;
  }

  /** wait() calls reject now (kind closed). */
  _shutdownStarting() {
    for (const w of [...this._waiters]) w.check();
  }

}

module.exports = {
  Manager,
  Server,
};
