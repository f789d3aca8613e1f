'use strict';
// Client: one MCP server.

const { Status, errorOf, errorFromNative, cancelledError } = require('./errors');
const { EVENT_BATCH, native, callAsync, workGate, textOut, lenOut, stdoutBuf, takeLen, utf8Slice, takeText } = require('./native');
const { authRegister, authUnregister } = require('./auth');
const { toJson, handlerAnswer, answerText, checkString, optionalObject, checkPlainObject, timeoutValue, mergeCapabilities, checkLogLevel, checkBoolean, checkCount, taskAndSchemaOptions, cacheOption, formatOption, NAMED_NOTIFICATIONS, checkHandlers } = require('./values');
const { internalTag, Op, runOp, NO_OPTIONS, openStdoutSocket } = require('./calls');
const { Handle } = require('./handle');

/** The buffer `mcplug_client_take_events` writes events into (grown when an event needs more). */
let eventBuf = Buffer.allocUnsafe(64 << 10);

/**
 * How mcplug_client_take_events writes a completion with a result (fixed by its contract):
 * the call number and the server's result text are taken from the line, only the result is
 * parsed.
 */
const COMPLETION_PREFIX = '{"type":"completion","call":';
const RESULT_KEY = ',"result":';

/** The native functions of a client handle (see Handle). */
const CLIENT_NATIVES = Object.freeze({
  prefix: 'mcplug_client',
  what: 'client',
  ended: 'the connection is closed',
  respond: native.respond,
  cancelCall: native.cancel_call,
  close: native.client_close,
  free: native.client_free,
  eventFd: native.event_fd,
});

class Client extends Handle {
  /**
   * Starts (or reaches) one MCP server and negotiates the protocol.
   * @param {object} server one server entry: `{command, args, env, cwd, name}` for stdio
   * @param {object} [opts]
   */
  static async connect(server, opts = {}) {
    if (server === null || typeof server !== 'object' || Array.isArray(server)) {
      throw errorOf('invalid_argument', '`server` must be an object such as {command, args}');
    }
    const {
      handlers = {},
      connectTimeoutMs,
      requestTimeoutMs,
      toolTimeoutMs,
      hostRequestTimeoutMs,
      clientInfo,
      roots,
      capabilities,
      logLevel,
      tasks,
      maxInputRounds,
      elicitationDefaults,
      validateArguments,
      protocolVersions,
      options = {},
      signal,
      tag,
    } = opts;
    checkHandlers(handlers);
    if (options === null || typeof options !== 'object') throw errorOf('invalid_argument', '`options` must be an object');

    const merged = { ...options };
    const setTimeoutOption = (key, value, what) => {
      const v = timeoutValue(value, what);
      if (v !== undefined) merged[key] = v;
    };
    setTimeoutOption('connect_timeout_ms', connectTimeoutMs, 'connectTimeoutMs');
    setTimeoutOption('request_timeout_ms', requestTimeoutMs, 'requestTimeoutMs');
    setTimeoutOption('tool_timeout_ms', toolTimeoutMs, 'toolTimeoutMs');
    setTimeoutOption('host_request_timeout_ms', hostRequestTimeoutMs, 'hostRequestTimeoutMs');
    if (clientInfo !== undefined) merged.client_info = clientInfo;
    if (roots !== undefined) merged.roots = roots;
    if (logLevel !== undefined) merged.log_level = checkLogLevel(logLevel, 'logLevel');
    if (tasks !== undefined) merged.tasks = checkBoolean(tasks, 'tasks');
    if (maxInputRounds !== undefined) merged.max_input_rounds = checkCount(maxInputRounds, 'maxInputRounds');
    if (elicitationDefaults !== undefined) merged.elicitation_defaults = checkBoolean(elicitationDefaults, 'elicitationDefaults');
    if (validateArguments !== undefined) merged.validate_arguments = checkBoolean(validateArguments, 'validateArguments');
    if (protocolVersions !== undefined) merged.protocol_versions = protocolVersions;
    // The library declares what the handlers imply (`handlers`), with these over it.
    merged.handlers = Object.keys(handlers);
    merged.capabilities = mergeCapabilities([options.capabilities, 'options.capabilities'], [capabilities, 'capabilities']);
    const connectTag = tag === undefined ? internalTag() : checkString(tag, 'tag');
    merged.tag = connectTag;
    const serverJson = toJson(server, 'server');
    const op = new Op(connectTag, 'connect');
    merged.cancel_token = op.token;
    const authChannel = handlers['auth/authorize'] ? authRegister(handlers['auth/authorize'], merged) : undefined;
    let optionsJson;
    try {
      optionsJson = toJson(merged, 'options');
    } catch (e) {
      authUnregister(authChannel);
      op.finish();
      throw e;
    }
    // Raw options are the library's to judge; only a valid limit also bounds the wait for a thread.
    const rawConnectMs = merged.connect_timeout_ms;
    const connectMs = typeof rawConnectMs === 'number' && rawConnectMs >= 1 && Number.isFinite(rawConnectMs) ? rawConnectMs : undefined;

    let handle = null;
    const info = await runOp({
      gate: workGate,
      fn: native.connect,
      op,
      signal,
      timeoutMs: connectMs,
      build: (remaining) => {
        const out = [null];
        handle = out;
        const o = remaining === undefined ? optionsJson : toJson({ ...merged, connect_timeout_ms: remaining }, 'options');
        return [serverJson, o, out];
      },
    }).catch((err) => {
      authUnregister(authChannel);
      // An abort that lost the race with a successful connect still leaves a handle to free.
      if (handle && handle[0]) callAsync(native.client_free, [handle[0]], false).catch(() => {});
      throw err;
    });
    if (op.cancelReason === 'user') {
      authUnregister(authChannel);
      if (handle && handle[0]) callAsync(native.client_free, [handle[0]], false).catch(() => {});
      throw cancelledError('connect');
    }
    try {
      const client = new Client(handle[0], info, handlers);
      client._authChannel = authChannel;
      return client;
    } catch (err) {
      authUnregister(authChannel);
      callAsync(native.client_free, [handle[0]], false).catch(() => {});
      throw err;
    }
  }

  /** Use Client.connect(). */
  constructor(handle, info, handlers) {
    if (typeof handle !== 'bigint') throw new TypeError('use Client.connect() to create a Client');
    super(handle, handlers, CLIENT_NATIVES);
    this._info = info;
    this._closeReasonFromEvent = null;
    this._flushScheduled = false;
    this._needFlush = false;
    this._flushTick = () => this._flush();
    this._drainGen = 0; // how many times events were taken
    this._burstGen = -1; // the _drainGen of the last call written at once
    this._watchEvents();
    // The server's stdout is read here, by the event loop: an answer settles its call without a
    // library thread reading it and waking us through the event descriptor.
    this._feeding = true;
    this._stdoutSocket = openStdoutSocket(handle, (n) => this._feed(n), () => this._stopFeeding());
  }

  get name() { return this._info.name ?? null; }
  get serverInfo() { return this._info.server_info; }
  get protocolVersion() { return this._info.protocol_version; }
  get era() { return this._info.era; }
  get capabilities() { return this._info.capabilities; }
  get instructions() { return this._info.instructions ?? null; }
  /** Everything mcplug_client_connect returned, including the server's raw `result`. */
  get connectResult() { return this._info; }
  /** Lists every tool (all pages); with `format` ('anthropic', 'openai'), each as that model
   *  API's tool definition. */
  async listTools({ timeoutMs, tag, signal, cache, format } = {}) {
    const extra = formatOption(cacheOption(null, { cache }), { format }) || undefined;
    const res = await this._work('tools/list', native.list_tools, { timeoutMs, tag, signal, extra }, (options) => [options]);
    return res.tools;
  }

  /**
   * The skills extension (SEP-2640): every entry of `skills/list` (`{uri: '.../SKILL.md',
   * frontmatter, resources}`), as the server sent it. Each is held for loadSkill(); no skill file
   * is read. Kind 'not_found' when the server does not declare `io.modelcontextprotocol/skills`.
   */
  async listSkills({ timeoutMs, tag, signal } = {}) {
    const res = await this._work('skills/list', native.list_skills, { timeoutMs, tag, signal }, (options) => [options]);
    return res.skills;
  }

  /** `skills/get`: the entry of the skill at `uri` (listed or not), held from now on. */
  async getSkill(uri, { timeoutMs, tag, signal } = {}) {
    checkString(uri, 'uri');
    return this._work('skills/get', native.get_skill, { timeoutMs, tag, signal }, (options) => [uri, options]);
  }

  /**
   * Loads a skill: its SKILL.md is read now and verified against the held entry (size, SHA-256
   * digest, frontmatter field by field; `skills/get` first when no entry is held). Resolves with
   * `{uri, name, frontmatter, text, verified, files}`; a mismatch rejects with kind
   * 'invalid_result' (`data.check`: 'size' | 'digest' | 'frontmatter') and nothing unverified.
   */
  async loadSkill(uri, { timeoutMs, tag, signal } = {}) {
    checkString(uri, 'uri');
    return this._work('load skill', native.load_skill, { timeoutMs, tag, signal }, (options) => [uri, options]);
  }

  /**
   * Reads one file of a loaded skill (`file`: its URI, or a path relative to the skill's
   * directory), verified against the entry the skill was loaded from: `{uri, mimeType, text |
   * blob, verified}`. A file that entry does not list is refused unread ('invalid_result',
   * `data.check` 'unlisted'); kind 'not_found' when the skill is not loaded.
   */
  async readSkillFile(skill, file, { timeoutMs, tag, signal } = {}) {
    checkString(skill, 'skill');
    checkString(file, 'file');
    return this._work('read skill file', native.read_skill_file, { timeoutMs, tag, signal }, (options) => [skill, file, options]);
  }

  /** Calls a tool; resolves with the CallToolResult (an `isError: true` result still resolves). */
  callTool(name, args, options) {
    return this._callTool(native.call_tool_start, 'name', name, args, options);
  }


  /** Sends any request and resolves with its raw result. `allPages` follows nextCursor. */
  request(method, params, options) {
    try {
      checkString(method, 'method');
      const paramsJson = optionalObject(params, 'params');
      if (options === undefined || options === null) return this._start(native.request_start, '', method, paramsJson, NO_OPTIONS, null);
      const { timeoutMs, tag, signal, allPages, onProgress } = options;
      // tools/call through request() takes the task and schema options of callTool().
      const extra = cacheOption(taskAndSchemaOptions(null, options), options);
      if (allPages) {
        // Many requests, looped inside the library: a blocking call.
        return this._work(method, native.request, { timeoutMs, tag, signal, onProgress, extra: { ...extra, all_pages: true } },
          (opts) => [method, paramsJson, opts]);
      }
      return this._start(native.request_start, '', method, paramsJson, { timeoutMs, tag, signal, onProgress }, extra);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Every resource (`resources/list`, all pages followed). */
  async listResources({ timeoutMs, tag, signal, cache } = {}) {
    return (await this.request('resources/list', null, { timeoutMs, tag, signal, cache, allPages: true })).resources || [];
  }

  /** Every resource template (`resources/templates/list`, all pages followed). */
  async listResourceTemplates({ timeoutMs, tag, signal, cache } = {}) {
    return (await this.request('resources/templates/list', null, { timeoutMs, tag, signal, cache, allPages: true })).resourceTemplates || [];
  }

  /** `resources/read`: the raw result (`{contents: [{uri, text | blob, ...}]}`). */
  readResource(uri, options) {
    try {
      return this.request('resources/read', { uri: checkString(uri, 'uri') }, options);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Every prompt (`prompts/list`, all pages followed). */
  async listPrompts({ timeoutMs, tag, signal, cache } = {}) {
    return (await this.request('prompts/list', null, { timeoutMs, tag, signal, cache, allPages: true })).prompts || [];
  }

  /** `prompts/get`: the raw result (`{description?, messages}`). */
  getPrompt(name, args, options) {
    try {
      const params = { name: checkString(name, 'name') };
      if (args !== undefined && args !== null) params.arguments = checkPlainObject(args, 'args');
      return this.request('prompts/get', params, options);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * `completion/complete`: suggestions for one argument of a prompt (`ref: {type: 'ref/prompt',
   * name}`) or a resource template (`{type: 'ref/resource', uri}`); `argument: {name, value}`,
   * `context`: the arguments already given. Resolves the result's `completion` (`{values, total?, hasMore?}`).
   */
  async complete(ref, argument, { context, ...options } = {}) {
    if (!ref || typeof ref !== 'object' || (ref.type !== 'ref/prompt' && ref.type !== 'ref/resource')) {
      throw errorOf('invalid_argument', `\`ref\` must be {type: 'ref/prompt', name} or {type: 'ref/resource', uri} (got ${JSON.stringify(ref)})`);
    }
    if (!argument || typeof argument.name !== 'string' || typeof argument.value !== 'string') {
      throw errorOf('invalid_argument', `\`argument\` must be {name: string, value: string} (got ${JSON.stringify(argument)})`);
    }
    const params = { ref, argument };
    if (context !== undefined && context !== null) params.context = { arguments: checkPlainObject(context, 'context') };
    const result = await this.request('completion/complete', params, options);
    return result.completion || {};
  }

  /** `ping`: resolves once the server answered. */
  async ping(options) {
    await this.request('ping', null, options);
  }

  /** Asks for `notifications/resources/updated` of `uri` (a 2026-07-28 connection adds it to its
   *  `subscriptions/listen` stream); they arrive as 'notification' events. */
  async subscribe(uri, options) {
    await this.request('resources/subscribe', { uri: checkString(uri, 'uri') }, options);
  }

  /** Undoes subscribe(). */
  async unsubscribe(uri, options) {
    await this.request('resources/unsubscribe', { uri: checkString(uri, 'uri') }, options);
  }

  /** Sends a notification. */
  async notify(method, params) {
    checkString(method, 'method');
    const paramsJson = optionalObject(params, 'params');
    await this._control(`notification ${method}`, native.notify, [method, paramsJson]);
  }

  /**
   * Sets the roots the library answers `roots/list` with from now on (`[{uri: 'file:///...',
   * name}]`, or `null` to hand `roots/list` back to a handler or 'request' listener). A legacy
   * server whose connection declared `roots.listChanged` is sent
   * `notifications/roots/list_changed`; a modern one asks per request. Resolves with
   * `{notified}`. Needs the roots capability (`roots` at connect, a 'roots/list' handler, or
   * `capabilities.roots`).
   */
  async setRoots(roots) {
    if (roots !== null && !Array.isArray(roots) && !(roots && typeof roots === 'object' && Array.isArray(roots.roots))) {
      throw errorOf('invalid_argument', '`roots` must be an array of {uri, name}, {roots: [...]} or null');
    }
    return this._control('setRoots', native.set_roots, [toJson(roots, 'roots')]);
  }

  /**
   * Asks the server for log messages at `level` and above; they arrive as 'log' events (and
   * 'notification' events, and the 'notifications/message' handler). Legacy: sends
   * `logging/setLevel` and waits for the answer; modern (2026-07-28): the level rides every
   * later request. Resolves with `{level, sent: 'logging/setLevel' | 'per request'}`.
   */
  async setLogLevel(level) {
    checkLogLevel(level, 'level');
    return this._control('setLogLevel', native.set_log_level, [level]);
  }

  // -- internals -------------------------------------------------------------------------------

  /** mcplug_client_cancel_call for a started call of ours (see Started.cancel). */
  _cancelStarted(call) {
    // A call still deferred in this turn goes out first, so that the server never sees the
    // cancellation before the request it names.
    if (this._needFlush) this._flush();
    super._cancelStarted(call);
  }

  /**
   * Whether the next started call is deferred. The first call started after events were taken
   * is written at once (a caller making one call at a time pays no flush); the calls started
   * after it in the same turn are deferred, and one flush at the end of the microtask queue
   * writes them together (a caller refilling a window of calls pays one write per turn).
   */
  _deferNext() {
    if (this._burstGen !== this._drainGen) {
      this._burstGen = this._drainGen;
      return false;
    }
    if (!this._flushScheduled) {
      this._flushScheduled = true;
      queueMicrotask(this._flushTick);
    }
    return true;
  }

  /** End of a turn: writes the calls deferred in it. */
  _flush() {
    this._flushScheduled = false;
    if (!this._needFlush) return;
    this._needFlush = false;
    // Closing: the deferred calls complete with `closed` anyway.
    if (this._state !== 'open' || !this._handle) return;
    const status = native.flush(this._handle, textOut);
    const text = takeText();
    // A failed write completes the deferred calls with its error: nothing else to do here.
    if (status !== Status.OK && status !== Status.CLOSED) {
      process.emitWarning(`mcplug: mcplug_client_flush failed: ${errorFromNative(status, text).message}`, 'McplugWarning');
    }
  }

  /**
   * Takes every queued event (never waits) and dispatches them in order: completions settle
   * their calls, the rest go to handlers and listeners. Pulls until a pull returns fewer than
   * it asked for (the queue was empty after it) or the queue is closed. Events come one per
   * line in `eventBuf` (mcplug_client_take_events: no string to free, and a completion's result
   * is parsed without the event around it).
   */
  _drain() {
    if (this._draining) {
      this._drainAgain = true; // a listener reached us from inside a dispatch
      return;
    }
    this._draining = true;
    this._drainGen++;
    try {
      do {
        this._drainAgain = false;
        while (this._handle !== null && !this._eventsEnded) {
          const status = native.take_events(this._handle, EVENT_BATCH, 0, eventBuf, eventBuf.length, lenOut, textOut);
          if (status !== Status.OK) {
            const text = takeText();
            if (status === Status.TIMEOUT) break;
            if (status === Status.CLOSED) {
              this._endOfEvents();
              break;
            }
            process.emitWarning(`mcplug: mcplug_client_take_events failed: ${errorFromNative(status, text).message}`, 'McplugWarning');
            break;
          }
          const count = this._dispatchLines(takeLen());
          // A short batch emptied the queue, unless the last event was the final one: then the
          // next pull says CLOSED, and no byte will wake us for it. (-1: the buffer grew.)
          if (count >= 0 && count < EVENT_BATCH && this._closeReasonFromEvent === null) break;
        }
      } while (this._drainAgain);
    } finally {
      this._draining = false;
    }
  }

  /**
   * Dispatches the `len` bytes of event lines a pull left in `eventBuf`; returns how many, or -1
   * when the next event needed a bigger buffer (nothing was taken: the buffer grew, pull again).
   */
  _dispatchLines(len) {
    if (len > eventBuf.length) {
      eventBuf = Buffer.allocUnsafe(Math.max(len, eventBuf.length * 2));
      return -1;
    }
    const text = utf8Slice(eventBuf, len);
    let count = 0;
    for (let pos = 0; pos < text.length; count++) {
      const end = text.indexOf('\n', pos);
      this._dispatchLine(text, pos, end);
      pos = end + 1;
    }
    return count;
  }

  /** `n` bytes the stdout socket read: to the library, then the events they made. */
  _feed(n) {
    if (this._handle === null || !this._feeding) return;
    const status = native.feed(this._handle, stdoutBuf, n, EVENT_BATCH, eventBuf, eventBuf.length, lenOut, textOut);
    if (status !== Status.OK) {
      process.emitWarning(`mcplug: mcplug_client_feed failed: ${errorFromNative(status, takeText()).message}`, 'McplugWarning');
      return;
    }
    this._drainGen++; // events were taken: the next call started goes out at once
    const count = this._dispatchLines(takeLen());
    // More than one batch, or one too big: the rest is not signalled on the event descriptor.
    if (count < 0 || count >= EVENT_BATCH) this._drain();
  }

  /** The stdout socket stopped (end of stream, error, closing): the library reads by itself. */
  _stopFeeding() {
    if (!this._feeding) return;
    this._feeding = false;
    if (this._handle === null) return;
    const status = native.feed(this._handle, null, 0, EVENT_BATCH, eventBuf, eventBuf.length, lenOut, textOut);
    if (status !== Status.OK) {
      takeText();
      return;
    }
    const count = this._dispatchLines(takeLen());
    if (count !== 0) this._drain();
  }

  /** One event line of take_events: a completion with a result settles its call directly. */
  _dispatchLine(text, pos, end) {
    let call = -1;
    let ev;
    try {
      if (text.startsWith(COMPLETION_PREFIX, pos)) {
        let i = pos + COMPLETION_PREFIX.length;
        let n = 0;
        for (let c = text.charCodeAt(i); c >= 48 && c <= 57; c = text.charCodeAt(++i)) n = n * 10 + (c - 48);
        if (text.startsWith(RESULT_KEY, i)) {
          call = n;
          ev = JSON.parse(text.slice(i + RESULT_KEY.length, end - 1)); // the result
        }
      }
      if (call < 0) ev = JSON.parse(text.slice(pos, end));
    } catch (e) {
      process.emitWarning(`mcplug: an event that is not JSON: ${text.slice(pos, Math.min(end, pos + 200))}`, 'McplugWarning');
      return;
    }
    if (call < 0) {
      this._dispatch(ev);
    } else {
      const rec = this._calls.get(call);
      if (rec !== undefined) rec.settle(ev, undefined);
    }
  }

  /** The end of the events: the library reads the server's stdout by itself again (see Handle). */
  _eventsEnding() {
    if (this._stdoutSocket !== null) {
      // The library reads by itself again (and finds the end of the stream): said while the
      // handle is still valid, not from the socket's 'close', which may come after the free.
      this._stopFeeding();
      this._stdoutSocket.destroy();
    }
  }

  /** The connection ended by itself (the server exited): its reason. */
  _endReason() {
    return this._closeReasonFromEvent || this._natives.ended;
  }

  _dispatch(ev) {
    if (!ev || typeof ev !== 'object') return;
    if (ev.type === 'completion') {
      // The binding's own event: it settles a call, no listener sees it.
      const rec = this._calls.get(ev.call);
      if (rec !== undefined) rec.settle(ev.result, ev.error);
      return;
    }
    this._emitSafe('event', ev);
    switch (ev.type) {
      case 'notification': {
        const params = ev.params || {};
        if (ev.method === 'notifications/progress' && ev.tag) this._progress(ev.tag, params);
        this._notifyHandler(ev.method, params, { method: ev.method, client: this });
        const n = { method: ev.method, params };
        if (ev.tag) n.tag = ev.tag;
        this._emitSafe('notification', n);
        const named = NAMED_NOTIFICATIONS[ev.method];
        if (named !== undefined) this._emitSafe(named, params);
        break;
      }
      case 'request':
        this._handleRequest(ev);
        break;
      case 'stderr':
        this._emitSafe('stderr', ev.line);
        break;
      case 'closed':
        this._closeReasonFromEvent = ev.reason || 'the connection is closed';
        this._emitClosed({ reason: this._closeReasonFromEvent, kind: ev.kind });
        break;
      case 'invalid_message':
        this._emitSafe('invalidMessage', { error: ev.error, line: ev.line });
        break;
      case 'overflow':
        this._emitSafe('overflow', ev.dropped);
        break;
      case 'request_expired':
        this._withdrawRequest(ev.id, `the host did not answer ${ev.method} in time`);
        this._emitSafe('requestExpired', { id: ev.id, method: ev.method });
        break;
      case 'request_cancelled':
        this._withdrawRequest(ev.id, `${ev.method} is no longer needed: ${ev.reason}`);
        this._emitSafe('requestCancelled', { id: ev.id, method: ev.method, reason: ev.reason });
        break;
      case 'warning': {
        const { type, ...warning } = ev;
        this._emitSafe('warning', warning);
        break;
      }
      default:
        break;
    }
  }

  async _handleRequest(ev) {
    const controller = new AbortController();
    const pending = { controller, server: null };
    this._pendingRequests.set(ev.id, pending);
    const params = ev.params || {};
    const handler = this._handlers[ev.method];
    if (!handler && this.listenerCount('request') > 0) {
      // The listener answers with respond()/respondError().
      this._emitSafe('request', { id: ev.id, method: ev.method, params, signal: controller.signal });
      return;
    }
    let answer;
    if (!handler) {
      answer = { id: ev.id, error: { code: -32601, message: `Method not found: ${ev.method} (no handler for it in this client)` } };
    } else {
      answer = await handlerAnswer(ev, () => handler(params, { id: ev.id, method: ev.method, client: this, signal: controller.signal }));
    }
    // Expired or cancelled while the handler ran: nobody waits for the answer.
    if (this._pendingRequests.get(ev.id) !== pending) return;
    await this._answer(ev.id, ev.method, answerText(ev, answer));
  }

  _shutdownStarting() {
    authUnregister(this._authChannel);
  }

}


module.exports = {
  Client,
};
