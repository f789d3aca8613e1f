'use strict';
/*
 * mcplug for Node.js: an MCP client over the libmcplug C ABI (koffi 3, no compiler needed).
 *
 * Two kinds of native calls, and the event loop never waits for the library in either:
 *
 * 1. Started calls, on the JS thread. `callTool` and `request` (without `allPages`) use the
 *    library's non-blocking forms: `mcplug_client_call_tool_start` / `_request_start` write the
 *    request and return its call number at once; the outcome arrives later, exactly once, as a
 *    `completion` event. Each client's events come through a descriptor (`mcplug_client_event_fd`,
 *    a pipe readable while events wait) wrapped in a `net.Socket` whose `onread` callback (no
 *    stream buffers) takes every queued event with `mcplug_client_take_events(..., 0)` (never
 *    blocks; the events are written into a buffer of ours, one per line, and the pull leaves
 *    the descriptor to the socket, which read the wake-up byte) and dispatches them in order, so
 *    a call's progress notifications reach onProgress before its completion settles its promise.
 *    A stdio server's stdout is read by the event loop too: a second socket on a descriptor of it
 *    (`mcplug_client_stdout_fd`) hands each chunk it reads to `mcplug_client_feed`, which delivers
 *    the complete lines and returns the events they made in the same crossing, so an answer
 *    settles its call without a library thread reading it and waking us (the event descriptor
 *    then only carries what other threads queue: timers, stderr, the end). When that socket stops,
 *    or the client closes, the binding feeds 0 bytes and the library reads by itself again.
 *    Neither the calls nor the event pump hold a threadpool thread; the sockets are what keep the
 *    process alive while a client is open. AbortSignal and cancel(tag) use
 *    `mcplug_client_cancel_call`, timeouts are the library's (`timeout_ms`).
 *    Writes: the first call started after the events were taken goes out at once; the calls
 *    started after it in the same turn are deferred (`"defer": true`) and one
 *    `mcplug_client_flush` at the end of the microtask queue writes them together. A caller
 *    making one call at a time pays nothing for this, one refilling 64 calls in one turn pays two
 *    writes instead of 64 (see `_deferNext`).
 *    The Manager's `callTool` is a started call too (`mcplug_manager_call_tool_start`, completions
 *    in the manager's events, pulled with `mcplug_manager_next_events`; see its section below).
 *
 * 2. Blocking calls, on libuv's threadpool through koffi's `.async`: connect, listTools and
 *    `allPages` requests (they loop over pages inside the library), notify and respond (they may
 *    wait for a server that does not read), close and free (they wait for the server to exit).
 *    - The pool. libuv's default is 4 threads, shared with `fs`, `dns` and `zlib`, and a connect
 *      may take seconds. Unless the user chose a size, we set UV_THREADPOOL_SIZE to
 *      DEFAULT_THREADPOOL_SIZE (16: a host may connect a dozen servers at once; it was 64 while
 *      every tool call and each client's event pump held a thread) at require time. It only
 *      takes effect if nothing used the pool before this module was required: require mcplug
 *      early, or set it yourself. The value assumed is exported as `threadpoolSize`.
 *    - Two lanes. Calls that may take long (connect, lists) share a "work" gate of `workLimit`
 *      slots, below the pool size, so that short control calls (answers to server requests,
 *      notifications, close, free) always find a free thread: a server may wait for our answer
 *      to its sampling request before it finishes the list we are blocked on. Work beyond the
 *      gate waits in a JS queue (its timeout and AbortSignal count while it waits); both lanes
 *      together stay below koffi's `max_async_calls`.
 *    - Freeing safely. A call handed to `.async` may sit in libuv's queue before it enters the
 *      library; freeing the handle in that window would be a use after free. So `close()` first
 *      calls `mcplug_client_close` (the connection ends, every call inside returns CLOSED, every
 *      started call gets its completion, and a late call entering finds a closed but valid
 *      handle), drains the events, waits until every blocking call of ours has returned, and
 *      only then calls `mcplug_client_free`. A cancellation of a blocking call retries
 *      `mcplug_cancel` until the call returns: a call not yet inside the library has not
 *      registered its tag.
 *
 * 3. What the server asks of the host. A `request` event (a legacy server's request, or an input
 *    request of a modern call's InputRequiredResult: the same shape) goes to the handler for its
 *    method, sync or async; its value, or the error it threw, is answered with
 *    `mcplug_client_respond` on the control lane (a legacy answer is a write that may wait for
 *    the server). Each waiting request has an AbortController, aborted when the library says
 *    nobody waits any more (`request_expired`, `request_cancelled`, the end of the events); a
 *    handler's answer after that is dropped, not reported. `setRoots` and `setLogLevel` are
 *    control-lane calls too (a legacy `logging/setLevel` waits for the server's answer).
 *
 * Every owned string the library returns is freed exactly once with `mcplug_string_free`: for
 * blocking calls by a koffi disposable type (also after `.async`), for the synchronous ones by
 * `takeText`, which reads the pointer from a typed-array slot (cheaper than koffi's
 * out-parameter conversion, which showed on the per-call path).
 */

const DEFAULT_THREADPOOL_SIZE = 16;
if (!process.env.UV_THREADPOOL_SIZE) {
  process.env.UV_THREADPOOL_SIZE = String(DEFAULT_THREADPOOL_SIZE);
}

const fs = require('fs');
const path = require('path');
const net = require('net');
const { EventEmitter } = require('events');
const koffi = require('koffi');

/** The ABI this binding was written for; a library reporting another one is refused. */
const ABI_VERSION = 1;

/** `mcplug_status` values, fixed by the C ABI. */
const Status = Object.freeze({
  OK: 0,
  INVALID_ARGUMENT: 1,
  TIMEOUT: 2,
  CANCELLED: 3,
  CLOSED: 4,
  TRANSPORT: 5,
  PROTOCOL: 6,
  RPC: 7,
  NEEDS_AUTH: 8,
  DENIED: 9,
  CONFIG: 10,
  PANIC: 11,
  NOT_FOUND: 12,
  NOT_IMPLEMENTED: 13,
  INVALID_RESULT: 14,
});

/** Every error kind, indexed by status number. */
const ERROR_KINDS = Object.freeze([
  'invalid_argument', 'timeout', 'cancelled', 'closed', 'transport', 'protocol', 'rpc',
  'needs_auth', 'denied', 'config', 'panic', 'not_found', 'not_implemented', 'invalid_result',
]);
const KIND_BY_STATUS = ['ok', ...ERROR_KINDS];

/** How many events one `mcplug_client_take_events` (or `mcplug_manager_next_events`) takes. */
const EVENT_BATCH = 256;
/** How often events are pulled if the event descriptor ever fails. */
const FALLBACK_POLL_MS = 10;
/** How often a cancellation retries `mcplug_cancel` for a call not yet inside the library. */
const CANCEL_RETRY_MS = 20;

class McpError extends Error {
  /**
   * @param {string} message
   * @param {{kind: string, code?: number, data?: unknown, status?: number, cause?: unknown}} details
   */
  constructor(message, { kind, code, data, status, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'McpError';
    this.kind = kind || 'panic';
    this.status = status === undefined ? statusOfKind(this.kind) : status;
    if (code !== undefined) this.code = code;
    if (data !== undefined) this.data = data;
  }
}

function statusOfKind(kind) {
  const i = KIND_BY_STATUS.indexOf(kind);
  return i < 0 ? undefined : i;
}

function errorOf(kind, message, extra) {
  return new McpError(message, { kind, ...extra });
}

// ---------------------------------------------------------------------------------------------
// Loading the library

// The library is built for Linux only (pidfds, PR_SET_PDEATHSIG, /proc/self/fd); on another
// system only a library named by MCPLUG_LIBRARY (a port of one's own) is tried.
const LIBRARY_FILE = 'libmcplug.so';

function findLibrary() {
  const fromEnv = process.env.MCPLUG_LIBRARY;
  if (fromEnv) {
    if (!fs.existsSync(fromEnv)) {
      throw new Error(`mcplug: MCPLUG_LIBRARY is set to ${fromEnv}, which does not exist`);
    }
    return fromEnv;
  }
  if (process.platform !== 'linux') {
    throw new Error(`mcplug: libmcplug supports Linux only (this is ${process.platform}); ` +
      'set MCPLUG_LIBRARY to a library built for this system if you have one');
  }
  const file = LIBRARY_FILE;
  const candidates = [
    path.join(__dirname, file),
    path.join(__dirname, '..', '..', 'target', 'release', file),
    path.join(__dirname, '..', '..', 'target', 'debug', file),
  ];
  for (const candidate of candidates) {
    if (fs.existsSync(candidate)) return candidate;
  }
  throw new Error(
    `mcplug: cannot find ${file}; looked at ${candidates.join(', ')}. ` +
      'Build it with `cargo build --release` in the mcplug checkout, or set MCPLUG_LIBRARY to its path.',
  );
}

const libraryPath = findLibrary();
const lib = koffi.load(libraryPath);

// The ABI check comes before any other symbol is looked up, so that a library of another ABI is
// refused with this message rather than with "cannot find function".
const loadedAbi = lib.func('mcplug_abi_version', 'uint32', [])();
if (loadedAbi !== ABI_VERSION) {
  throw new Error(
    `mcplug: ${libraryPath} has ABI version ${loadedAbi}, but this binding needs ABI version ${ABI_VERSION}; ` +
      'use a library built from the same mcplug release as this package',
  );
}

// Declared with anonymous types (array syntax): koffi's type names are process-wide, and a second
// copy of this module (another version, or a test runner's fresh module registry) must still load.
const mcplug_string_free = lib.func('mcplug_string_free', 'void', ['void *']);
const OwnedString = koffi.disposable('str', (ptr) => mcplug_string_free(ptr));
const OutString = koffi.out(koffi.pointer(OwnedString));
const ClientHandle = koffi.pointer(koffi.opaque());
const OutHandle = koffi.out(koffi.pointer(ClientHandle));
// The synchronous calls write their out-parameters into typed-array slots of ours (`textOut`,
// `callOut`, `fdOut` below): cheaper than koffi's out-parameter conversion, on the per-call path.
const RawOut = 'void *';

const native = {
  version: lib.func('mcplug_version', 'str', []),
  abi_version: lib.func('mcplug_abi_version', 'uint32', []),
  cancel: lib.func('mcplug_cancel', 'int', ['str']),
  connect: lib.func('mcplug_client_connect', 'int', ['str', 'str', OutHandle, OutString]),
  list_tools: lib.func('mcplug_client_list_tools', 'int', [ClientHandle, 'str', OutString]),
  call_tool: lib.func('mcplug_client_call_tool', 'int', [ClientHandle, 'str', 'str', 'str', OutString]),
  request: lib.func('mcplug_client_request', 'int', [ClientHandle, 'str', 'str', 'str', OutString]),
  notify: lib.func('mcplug_client_notify', 'int', [ClientHandle, 'str', 'str', OutString]),
  call_tool_start: lib.func('mcplug_client_call_tool_start', 'int', [ClientHandle, 'str', 'str', 'str', RawOut, RawOut]),
  request_start: lib.func('mcplug_client_request_start', 'int', [ClientHandle, 'str', 'str', 'str', RawOut, RawOut]),
  flush: lib.func('mcplug_client_flush', 'int', [ClientHandle, RawOut]),
  cancel_call: lib.func('mcplug_client_cancel_call', 'int', [ClientHandle, 'uint64', RawOut]),
  event_fd: lib.func('mcplug_client_event_fd', 'int', [ClientHandle, RawOut, RawOut]),
  take_events: lib.func('mcplug_client_take_events', 'int', [ClientHandle, 'uint32', 'int32', RawOut, 'size_t', RawOut, RawOut]),
  stdout_fd: lib.func('mcplug_client_stdout_fd', 'int', [ClientHandle, RawOut, RawOut]),
  feed: lib.func('mcplug_client_feed', 'int', [ClientHandle, RawOut, 'size_t', 'uint32', RawOut, 'size_t', RawOut, RawOut]),
  respond: lib.func('mcplug_client_respond', 'int', [ClientHandle, 'str', OutString]),
  set_roots: lib.func('mcplug_client_set_roots', 'int', [ClientHandle, 'str', OutString]),
  set_log_level: lib.func('mcplug_client_set_log_level', 'int', [ClientHandle, 'str', OutString]),
  list_skills: lib.func('mcplug_client_list_skills', 'int', [ClientHandle, 'str', OutString]),
  get_skill: lib.func('mcplug_client_get_skill', 'int', [ClientHandle, 'str', 'str', OutString]),
  load_skill: lib.func('mcplug_client_load_skill', 'int', [ClientHandle, 'str', 'str', OutString]),
  read_skill_file: lib.func('mcplug_client_read_skill_file', 'int', [ClientHandle, 'str', 'str', 'str', OutString]),
  client_close: lib.func('mcplug_client_close', 'int', [ClientHandle, OutString]),
  client_free: lib.func('mcplug_client_free', 'void', [ClientHandle]),
  auth_next_event: lib.func('mcplug_auth_next_event', 'int', ['int32', OutString]),
  auth_respond: lib.func('mcplug_auth_respond', 'int', ['str', OutString]),
  auth_logout: lib.func('mcplug_auth_logout', 'int', ['str', 'str', OutString]),
  log_capture: lib.func('mcplug_log_capture', 'int', ['str', OutString]),
  log_release: lib.func('mcplug_log_release', 'int', [OutString]),
  log_next_events: lib.func('mcplug_log_next_events', 'int', ['uint32', 'int32', OutString]),
  log_event_fd: lib.func('mcplug_log_event_fd', 'int', [RawOut, RawOut]),
  config_merge: lib.func('mcplug_config_merge', 'int', ['str', OutString]),
  config_discover: lib.func('mcplug_config_discover', 'int', ['str', OutString]),
  config_add_server: lib.func('mcplug_config_add_server', 'int', ['str', OutString]),
  config_remove_server: lib.func('mcplug_config_remove_server', 'int', ['str', OutString]),
};

// The manager (many servers, one tool pool). Tool calls are started calls (call_tool_start,
// cancel_call), made from the JS thread like the Client's. Calls that wait (connect may stop
// servers, the resource and prompt calls, request, respond, reconnect, set_enabled, close, free)
// go to the threadpool with `.async`; those that only read or change the manager's state
// (status, list_tools, search_tools, set_tools, next_events, event_fd) are made from the JS thread.
const ManagerHandle = koffi.pointer(koffi.opaque());
const OutManagerHandle = koffi.out(koffi.pointer(ManagerHandle));

/** A function the loaded library may lack (added after ABI 1 was fixed): null if absent. */
function optionalFunc(name, result, params) {
  try {
    return lib.func(name, result, params);
  } catch {
    return null;
  }
}

const mnative = {
  create: lib.func('mcplug_manager_new', 'int', ['str', OutManagerHandle, RawOut]),
  connect: lib.func('mcplug_manager_connect', 'int', [ManagerHandle, 'str', OutString]),
  wait: lib.func('mcplug_manager_wait', 'int', [ManagerHandle, 'str', OutString]),
  status: lib.func('mcplug_manager_status', 'int', [ManagerHandle, RawOut]),
  list_tools: lib.func('mcplug_manager_list_tools', 'int', [ManagerHandle, 'str', RawOut]),
  call_tool_start: lib.func('mcplug_manager_call_tool_start', 'int', [ManagerHandle, 'str', 'str', 'str', RawOut, RawOut]),
  cancel_call: lib.func('mcplug_manager_cancel_call', 'int', [ManagerHandle, 'uint64', RawOut]),
  next_events: lib.func('mcplug_manager_next_events', 'int', [ManagerHandle, 'uint32', 'int32', RawOut]),
  respond: lib.func('mcplug_manager_respond', 'int', [ManagerHandle, 'str', OutString]),
  reconnect: lib.func('mcplug_manager_reconnect', 'int', [ManagerHandle, 'str', OutString]),
  authenticate: lib.func('mcplug_manager_authenticate', 'int', [ManagerHandle, 'str', 'str', OutString]),
  logout: lib.func('mcplug_manager_logout', 'int', [ManagerHandle, 'str', OutString]),
  set_enabled: lib.func('mcplug_manager_set_enabled', 'int', [ManagerHandle, 'str', 'int32', OutString]),
  event_fd: lib.func('mcplug_manager_event_fd', 'int', [ManagerHandle, RawOut, RawOut]),
  close: lib.func('mcplug_manager_close', 'int', [ManagerHandle, OutString]),
  free: lib.func('mcplug_manager_free', 'void', [ManagerHandle]),
  // Deferred tool loading, resources, prompts, any request, in-process servers.
  search_tools: optionalFunc('mcplug_manager_search_tools', 'int', [ManagerHandle, 'str', 'str', RawOut]),
  list_resources: optionalFunc('mcplug_manager_list_resources', 'int', [ManagerHandle, 'str', OutString]),
  read_resource: optionalFunc('mcplug_manager_read_resource', 'int', [ManagerHandle, 'str', 'str', 'str', OutString]),
  list_prompts: optionalFunc('mcplug_manager_list_prompts', 'int', [ManagerHandle, 'str', OutString]),
  get_prompt: optionalFunc('mcplug_manager_get_prompt', 'int', [ManagerHandle, 'str', 'str', 'str', OutString]),
  request: optionalFunc('mcplug_manager_request', 'int', [ManagerHandle, 'str', 'str', 'str', 'str', OutString]),
  set_tools: optionalFunc('mcplug_manager_set_tools', 'int', [ManagerHandle, 'str', 'str', RawOut]),
};

/** Runs a native function on the threadpool; resolves with its return value and `out` string. */
function callAsync(fn, args, wantsOut = true) {
  return new Promise((resolve, reject) => {
    const out = [null];
    const all = wantsOut ? [...args, out] : args;
    fn.async(...all, (err, status) => {
      if (err) reject(err);
      else resolve({ status, text: out[0] });
    });
  });
}

// Interactive OAuth of single clients: the library's `auth/authorize` requests are pulled for the
// whole process (a client's first authorization happens inside its connect, before it has a
// handle) and handed to the `auth/authorize` handler of the connection they name by its
// `auth_channel`. The pump runs while any such connection is registered, one pull at a time on
// the threadpool, so a process without one keeps no thread and no pending work.
const authHandlers = new Map();
let authNext = 1;
let authPumping = false;
// How long one pull waits: also how long a process whose last such connection closed is kept
// alive by the pull still out (a pending threadpool call holds the event loop).
const AUTH_PULL_MS = 200;

function authRegister(handler, merged) {
  const channel = `node-${process.pid}-${authNext++}`;
  merged.auth_interactive = true;
  merged.auth_channel = channel;
  authHandlers.set(channel, handler);
  if (!authPumping) {
    authPumping = true;
    authPump();
  }
  return channel;
}

function authUnregister(channel) {
  if (channel !== undefined) authHandlers.delete(channel);
}

async function authAnswer(id, handler, params) {
  let reply;
  if (!handler) {
    reply = { id, error: { code: -1, message: 'no auth/authorize handler for this connection' } };
  } else {
    try {
      const result = (await handler(params)) ?? {};
      if (typeof result !== 'object' || Array.isArray(result)) {
        throw new TypeError('an auth/authorize handler returns nothing or { callback_url }');
      }
      reply = { id, result };
    } catch (e) {
      reply = { id, error: { code: -1, message: String((e && e.message) || e) } };
    }
  }
  // An answer that came too late (expired) is no error of the handler's.
  await callAsync(native.auth_respond, [JSON.stringify(reply)]).catch(() => {});
}

async function authPump() {
  while (authHandlers.size > 0) {
    const { status, text } = await callAsync(native.auth_next_event, [AUTH_PULL_MS]);
    if (status !== Status.OK || !text) continue;
    const ev = JSON.parse(text);
    if (ev.type !== 'request' || ev.method !== 'auth/authorize') continue;
    const params = ev.params || {};
    authAnswer(ev.id, authHandlers.get(params.channel), params);
  }
  authPumping = false;
}

/** Turns a status and its `out` text into a value or an McpError. */
function decode(status, text) {
  if (status === Status.OK) {
    try {
      return JSON.parse(text);
    } catch (e) {
      throw errorOf('protocol', `mcplug returned a result that is not JSON: ${String(text).slice(0, 200)}`, { cause: e });
    }
  }
  throw errorFromNative(status, text);
}

function errorFromNative(status, text) {
  let body = null;
  try {
    body = text == null ? null : JSON.parse(text).error;
  } catch {
    body = null;
  }
  const kind = (body && body.kind) || KIND_BY_STATUS[status] || 'panic';
  const message = (body && body.message) || `mcplug call failed with status ${status} (${kind})`;
  return new McpError(message, { kind, code: body ? body.code : undefined, data: body ? body.data : undefined, status });
}

// ---------------------------------------------------------------------------------------------
// Gates: bounded concurrency with a FIFO queue whose entries can be withdrawn.

class Gate {
  constructor(limit) {
    this.limit = Math.max(1, limit);
    this.active = 0;
    this.queue = [];
  }

  /** Returns `{ready, withdraw}`; `ready` resolves once a slot is held (release it after). */
  acquire() {
    if (this.active < this.limit && this.queue.length === 0) {
      this.active++;
      return { ready: Promise.resolve(), withdraw: () => false, queued: false };
    }
    let entry;
    const ready = new Promise((resolve, reject) => {
      entry = { resolve, reject };
      this.queue.push(entry);
    });
    const withdraw = (err) => {
      const i = this.queue.indexOf(entry);
      if (i < 0) return false;
      this.queue.splice(i, 1);
      entry.reject(err);
      return true;
    };
    return { ready, withdraw, queued: true };
  }

  release() {
    const next = this.queue.shift();
    if (next) next.resolve(); // the slot passes straight on
    else this.active--;
  }
}

const threadpoolSize = Math.min(1024, Math.max(1, parseInt(process.env.UV_THREADPOOL_SIZE, 10) || 4));
const koffiAsyncLimit = koffi.config().max_async_calls || 256;
// Keep a quarter of the pool (at least 2 threads) for control calls.
const workLimit = Math.max(1, Math.min(threadpoolSize - Math.max(2, Math.floor(threadpoolSize / 4)), Math.floor(koffiAsyncLimit * 0.6)));
const controlLimit = Math.max(4, Math.min(64, Math.floor(koffiAsyncLimit * 0.3)));
const workGate = new Gate(workLimit);
const controlGate = new Gate(controlLimit);

// ---------------------------------------------------------------------------------------------
// Arguments

function hasLoneSurrogate(s) {
  if (typeof s.isWellFormed === 'function') return !s.isWellFormed();
  return /[\ud800-\udbff](?![\udc00-\udfff])|(?:[^\ud800-\udbff]|^)[\udc00-\udfff]/.test(s);
}

/** Where in `value` a string (or key) with a lone surrogate sits, e.g. `.a[2]`; null if none. */
function findLoneSurrogate(value, at, seen) {
  if (typeof value === 'string') return hasLoneSurrogate(value) ? at || '(the value itself)' : null;
  if (value === null || typeof value !== 'object' || seen.has(value)) return null;
  seen.add(value);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findLoneSurrogate(value[i], `${at}[${i}]`, seen);
      if (found) return found;
    }
    return null;
  }
  for (const key of Object.keys(value)) {
    if (hasLoneSurrogate(key)) return `${at} (a key)`;
    const found = findLoneSurrogate(value[key], `${at}.${key}`, seen);
    if (found) return found;
  }
  return null;
}

/**
 * JSON text for a value the library will parse, or an McpError (invalid_argument) before any
 * native call: BigInt, cycles and lone UTF-16 surrogates cannot travel as UTF-8 JSON.
 */
function toJson(value, what) {
  let text;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw errorOf('invalid_argument', `\`${what}\` is not JSON-serialisable: ${e.message}`, { cause: e });
  }
  if (text === undefined) {
    throw errorOf('invalid_argument', `\`${what}\` is not JSON-serialisable (got ${typeof value})`);
  }
  // JSON.stringify writes a lone surrogate as a \udXXX escape; serde (and UTF-8) refuse those.
  if (text.includes('\\u') && /(?:^|[^\\])(?:\\\\)*\\ud[89a-f][0-9a-f]{2}/i.test(text)) {
    const where = findLoneSurrogate(value, '', new Set()) || '(somewhere)';
    throw errorOf(
      'invalid_argument',
      `\`${what}\` contains a string with a lone UTF-16 surrogate at ${where}, which UTF-8 JSON cannot carry; ` +
        'fix the string (e.g. with String.prototype.toWellFormed())',
    );
  }
  return text;
}

/**
 * Runs the handler of a server's request (`call`) and makes the JSON-RPC answer: its result
 * object (`{}` for nothing), or an error for a throw (its code, message and data) or a value that
 * is not a result object. Shared by Client and Manager.
 */
async function handlerAnswer(ev, call) {
  try {
    const result = await call();
    if (result === undefined || result === null) return { id: ev.id, result: {} };
    if (typeof result !== 'object' || Array.isArray(result)) {
      return {
        id: ev.id,
        error: { code: -32603, message: `the ${ev.method} handler returned ${Array.isArray(result) ? 'an array' : typeof result}, not a result object` },
      };
    }
    return { id: ev.id, result };
  } catch (e) {
    const error = {
      code: e && Number.isInteger(e.code) ? e.code : -32603,
      message: e && e.message ? String(e.message) : String(e),
    };
    if (e && e.data !== undefined) error.data = e.data;
    return { id: ev.id, error };
  }
}

/** An answer as JSON text; a result that cannot be JSON becomes an error answer saying so. */
function answerText(ev, answer) {
  try {
    return toJson(answer, 'handler result');
  } catch (e) {
    return JSON.stringify({ id: ev.id, error: { code: -32603, message: `the ${ev.method} handler returned a value that is not JSON: ${e.message}` } });
  }
}

function checkString(value, what) {
  if (typeof value !== 'string') {
    throw errorOf('invalid_argument', `\`${what}\` must be a string (got ${value === null ? 'null' : typeof value})`);
  }
  if (hasLoneSurrogate(value)) {
    throw errorOf('invalid_argument', `\`${what}\` contains a lone UTF-16 surrogate, which UTF-8 cannot carry`);
  }
  return value;
}

function optionalObject(value, what) {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw errorOf('invalid_argument', `\`${what}\` must be an object (got ${Array.isArray(value) ? 'an array' : typeof value})`);
  }
  return toJson(value, what);
}

/** A plain object argument, as given (not serialized). */
function checkPlainObject(value, what) {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw errorOf('invalid_argument', `\`${what}\` must be an object (got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value})`);
  }
  return value;
}

/** A timeout option: undefined = the default, null/Infinity = no limit, else positive ms. */
function timeoutValue(value, what) {
  if (value === undefined) return undefined;
  if (value === null || value === Infinity) return null;
  if (typeof value !== 'number' || !(value > 0) || !Number.isFinite(value)) {
    throw errorOf('invalid_argument', `\`${what}\` must be a positive number of milliseconds, null or Infinity (got ${String(value)})`);
  }
  return Math.max(1, Math.ceil(value));
}

// Unique per module copy in this process (tags are process-wide in the library); not a secret,
// so no need to load crypto (a few ms of cold start).
const tagPrefix = `mcplug-node-${process.pid}-${Math.random().toString(36).slice(2, 10)}-`;
let tagCounter = 0;
function internalTag() {
  tagCounter += 1;
  return tagPrefix + tagCounter;
}

// ---------------------------------------------------------------------------------------------
// Operations: one record per blocking call, so that cancel(tag), AbortSignal and close() reach
// calls still waiting in the JS queue as well as calls inside the library.

/** tag -> Set<Op | Started>, every live call carrying a tag (queued, in flight, or started) of every client. */
const opsByTag = new Map();

class Op {
  constructor(tag, label) {
    this.tag = tag;
    this.label = label;
    this.queued = null; // the gate ticket while waiting for a slot
    this.inFlight = false;
    this.done = false;
    this.cancelReason = null; // 'user' once cancellation was asked for
    this.retry = null;
    if (tag) {
      let set = opsByTag.get(tag);
      if (!set) opsByTag.set(tag, (set = new Set()));
      set.add(this);
    }
  }

  /** Asks for cancellation: withdraws a queued op, or cancels the native call until it returns. */
  cancel(reason, queuedError) {
    if (this.done) return false;
    if (!this.cancelReason) this.cancelReason = reason;
    if (this.queued) {
      this.queued.withdraw(queuedError());
      return true;
    }
    if (this.inFlight && this.tag && !this.retry) {
      // The call may still sit in libuv's queue, not yet registered under its tag: retry until
      // it returns.
      const attempt = () => {
        if (this.done) return;
        native.cancel(this.tag);
        this.retry = setTimeout(attempt, CANCEL_RETRY_MS);
      };
      attempt();
    }
    return true;
  }

  finish() {
    this.done = true;
    this.inFlight = false;
    this.queued = null;
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    if (this.tag) {
      const set = opsByTag.get(this.tag);
      if (set) {
        set.delete(this);
        if (set.size === 0) opsByTag.delete(this.tag);
      }
    }
  }
}

function cancelledError(label) {
  return errorOf('cancelled', `${label} was cancelled by the host`);
}

/**
 * Runs one native call through a gate. `build(remainingMs)` returns the argument list (without
 * `out`); `remainingMs` is the call's timeout minus the time it waited in the queue.
 */
async function runOp({ gate, fn, build, op, timeoutMs, signal, owner }) {
  const started = Date.now();
  const onAbort = () => op.cancel('user', () => cancelledError(op.label));
  if (signal) {
    if (signal.aborted) {
      op.finish();
      throw cancelledError(op.label);
    }
    signal.addEventListener('abort', onAbort, { once: true });
  }
  if (owner) owner._ops.add(op);
  let queueTimer = null;
  try {
    const ticket = gate.acquire();
    op.queued = ticket;
    if (typeof timeoutMs === 'number' && ticket.queued) {
      queueTimer = setTimeout(() => {
        ticket.withdraw(errorOf('timeout', `${op.label} timed out after ${timeoutMs} ms waiting for a free worker thread`));
      }, timeoutMs);
    }
    await ticket.ready;
    op.queued = null;
    if (queueTimer) clearTimeout(queueTimer);
    queueTimer = null;
    let status;
    let text;
    try {
      if (owner && owner._state !== 'open') throw owner._closedError(op.label);
      if (op.cancelReason) throw cancelledError(op.label);
      // Only a call that really queued has its limit shortened (the library's error message
      // then names the shortened limit).
      let remaining = timeoutMs;
      if (typeof timeoutMs === 'number' && ticket.queued) {
        remaining = timeoutMs - (Date.now() - started);
        if (remaining < 1) throw errorOf('timeout', `${op.label} timed out after ${timeoutMs} ms waiting for a free worker thread`);
      }
      const args = build(remaining);
      op.inFlight = true;
      ({ status, text } = await callAsync(fn, args));
    } finally {
      op.inFlight = false;
      gate.release();
    }
    if (status === Status.CANCELLED && op.cancelReason === 'user') throw cancelledError(op.label);
    return decode(status, text);
  } finally {
    if (queueTimer) clearTimeout(queueTimer);
    if (signal) signal.removeEventListener('abort', onAbort);
    op.finish();
    if (owner) owner._opFinished(op);
  }
}

// ---------------------------------------------------------------------------------------------
// Started calls: written from the JS thread, settled by their completion events.

/**
 * Out-parameters of the synchronous native calls, reused: only the JS thread makes those.
 * `textOut` receives an owned `char *` (0 when none), which `takeText` decodes and frees;
 * `callOut` a call number, `fdOut` a descriptor.
 */
const textOut = new BigUint64Array(1);
const textOut32 = new Uint32Array(textOut.buffer); // read without making a BigInt
const callOut = new BigUint64Array(1);
const callOut32 = new Uint32Array(callOut.buffer);
const fdOut = new Int32Array(2);
/** The buffer `mcplug_client_take_events` writes events into (grown when an event needs more). */
let eventBuf = Buffer.allocUnsafe(64 << 10);
const lenOut = new BigUint64Array(1);
/** What a stdout socket read, handed to mcplug_client_feed at once (so one buffer serves all). */
const stdoutBuf = Buffer.allocUnsafe(64 << 10);
const lenOut32 = new Uint32Array(lenOut.buffer);

/** The call number a start left in `callOut` (little- or big-endian, without a BigInt). */
function takeCall() {
  return LITTLE_ENDIAN ? callOut32[0] + callOut32[1] * 4294967296 : callOut32[1] + callOut32[0] * 4294967296;
}
/** The length `mcplug_client_take_events` left in `lenOut`. */
function takeLen() {
  return LITTLE_ENDIAN ? lenOut32[0] + lenOut32[1] * 4294967296 : lenOut32[1] + lenOut32[0] * 4294967296;
}
const utf8Slice = typeof Buffer.prototype.utf8Slice === 'function'
  ? (buf, end) => buf.utf8Slice(0, end)
  : (buf, end) => buf.toString('utf8', 0, end);

/**
 * How mcplug_client_take_events writes a completion with a result (fixed by its contract):
 * the call number and the server's result text are taken from the line, only the result is
 * parsed.
 */
const COMPLETION_PREFIX = '{"type":"completion","call":';
const RESULT_KEY = ',"result":';
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** The string a synchronous call left in `textOut` (null if none), freed exactly once. */
function takeText() {
  if (textOut32[0] === 0 && textOut32[1] === 0) return null;
  const ptr = textOut[0];
  textOut[0] = 0n;
  try {
    return koffi.decode(ptr, 'char', -1);
  } finally {
    mcplug_string_free(ptr);
  }
}

const NO_OPTIONS = Object.freeze({});
const TOOL_LABEL = 'tools/call ';
const DEFER_OPTIONS = '{"defer":true}';

/** One started call (of a Client or a Manager, its `owner`) until its completion event. */
class Started {
  constructor(owner, call, labelPrefix, name, tag, resolve, reject) {
    this.owner = owner;
    this.call = call;
    this.labelPrefix = labelPrefix; // 'tools/call ' for a tool, '' for a request
    this.name = name; // the tool or the method
    this.tag = tag;
    this.resolve = resolve;
    this.reject = reject;
    this.onProgress = null;
    this.signal = null;
    this.onAbort = null;
    this.cancelRequested = false;
    this.done = false;
    if (tag !== null) {
      let set = opsByTag.get(tag);
      if (!set) opsByTag.set(tag, (set = new Set()));
      set.add(this);
    }
  }

  /** Asks the library to cancel the call; its completion (cancelled, or the answer that won the race) settles it. */
  cancel() {
    if (this.done) return false;
    this.cancelRequested = true;
    const owner = this.owner;
    if (owner._handle === null || owner._state !== 'open') return true; // closing: it completes `closed`
    owner._cancelStarted(this.call);
    return true;
  }

  /** Settles with the completion's `result` or `error` (an event's error object, or an McpError). */
  settle(result, error) {
    if (this.done) return;
    this.done = true;
    const owner = this.owner;
    owner._calls.delete(this.call);
    if (this.signal !== null) this.signal.removeEventListener('abort', this.onAbort);
    if (this.onProgress !== null) owner._dropProgress(this.tag, this.onProgress);
    if (this.tag !== null) {
      const set = opsByTag.get(this.tag);
      if (set) {
        set.delete(this);
        if (set.size === 0) opsByTag.delete(this.tag);
      }
    }
    if (error === undefined) {
      this.resolve(result);
    } else if (error instanceof McpError) {
      this.reject(error);
    } else if (error.kind === 'cancelled' && this.cancelRequested) {
      // The library's details after "; " (e.g. that the call's task was sent tasks/cancel) are kept.
      const err = cancelledError(this.labelPrefix + this.name);
      const details = typeof error.message === 'string' ? error.message.indexOf('; ') : -1;
      if (details >= 0) err.message += error.message.slice(details);
      this.reject(err);
    } else {
      this.reject(new McpError(error.message || `${this.labelPrefix}${this.name} failed (${error.kind})`, { kind: error.kind, code: error.code, data: error.data }));
    }
  }
}

/**
 * A socket on a new descriptor of a client's (or, with `eventFd` = mcplug_manager_event_fd, a
 * manager's) event queue: readable while events wait.
 */
function openEventSocket(handle, onReadable, eventFd = native.event_fd) {
  fdOut[0] = -1;
  const status = eventFd(handle, fdOut, textOut);
  const text = takeText();
  if (status !== Status.OK) throw errorFromNative(status, text);
  const fd = fdOut[0];
  try {
    // The library may write while we read; Node reads and discards the wake-up bytes.
    // `onread`: libuv reads into one small buffer of ours and calls back, without the stream
    // machinery (no buffer allocated, no 'data' event per wake-up).
    return new net.Socket({
      fd,
      readable: true,
      writable: false,
      onread: { buffer: Buffer.alloc(64), callback: () => { onReadable(); } },
    });
  } catch (e) {
    fs.closeSync(fd);
    throw errorOf('transport', `cannot watch the event descriptor: ${e.message}`, { cause: e });
  }
}

/**
 * A socket reading a stdio server's stdout (mcplug_client_stdout_fd): every chunk goes to
 * `onChunk(n)` (which feeds it to the library at once), and `onEnd()` runs when it stops reading
 * for any reason. Null when the connection has no stdout for the host (a remote server) or the
 * library cannot hand it over: the library then reads it by itself.
 */
function openStdoutSocket(handle, onChunk, onEnd) {
  fdOut[0] = -1;
  const status = native.stdout_fd(handle, fdOut, textOut);
  const text = takeText();
  if (status !== Status.OK) {
    if (status !== Status.NOT_IMPLEMENTED && status !== Status.CLOSED) {
      process.emitWarning(`mcplug: the library keeps reading the server itself: ${errorFromNative(status, text).message}`, 'McplugWarning');
    }
    return null;
  }
  const fd = fdOut[0];
  let socket;
  try {
    socket = new net.Socket({
      fd,
      readable: true,
      writable: false,
      onread: { buffer: stdoutBuf, callback: (n) => { onChunk(n); } },
    });
  } catch (e) {
    fs.closeSync(fd);
    onEnd();
    return null;
  }
  socket.on('error', () => {}); // 'close' follows, and ends the feeding
  socket.on('close', onEnd);
  return socket;
}

// ---------------------------------------------------------------------------------------------
// Client

/** The capability a handler for a server request implies, declared at connect. */
const CAPABILITY_OF_HANDLER = {
  'sampling/createMessage': ['sampling', {}],
  'elicitation/create': ['elicitation', { form: {} }],
  'roots/list': ['roots', { listChanged: true }],
};

/** The capabilities whose members merge one level deep (`elicitation: {url: true}` adds URL mode
 *  to the form mode an elicitation handler declared). */
const NESTED_CAPABILITIES = new Set(['sampling', 'elicitation', 'roots']);

/**
 * The capabilities declared at connect: those implied by the handlers, then each explicit
 * source in order (later wins). `true` stands for `{}` and `false` declares nothing, at the
 * top level and one level down (the library normalizes both and checks the spec shapes).
 */
function mergeCapabilities(fromHandlers, ...explicit) {
  const out = { ...fromHandlers };
  for (const [source, what] of explicit) {
    if (source === undefined || source === null) continue;
    if (typeof source !== 'object' || Array.isArray(source)) {
      throw errorOf('invalid_argument', `\`${what}\` must be an object such as {sampling: {tools: true}, elicitation: {url: true}}`);
    }
    for (const [key, value] of Object.entries(source)) {
      const before = out[key];
      if (NESTED_CAPABILITIES.has(key) && value !== null && typeof value === 'object' && !Array.isArray(value) &&
          before !== null && typeof before === 'object' && !Array.isArray(before)) {
        out[key] = { ...before, ...value };
      } else {
        out[key] = value;
      }
    }
  }
  return out;
}

/** The levels of `notifications/message`, lowest first (RFC 5424, as the spec names them). */
const LOG_LEVELS = Object.freeze(['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency']);

function checkLogLevel(value, what) {
  if (!LOG_LEVELS.includes(value)) {
    throw errorOf('invalid_argument', `\`${what}\` must be one of ${LOG_LEVELS.join(', ')} (got ${JSON.stringify(value)})`);
  }
  return value;
}

function checkBoolean(value, what) {
  if (typeof value !== 'boolean') throw errorOf('invalid_argument', `\`${what}\` must be true or false (got ${JSON.stringify(value)})`);
  return value;
}

function checkCount(value, what) {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw errorOf('invalid_argument', `\`${what}\` must be a positive integer (got ${JSON.stringify(value)})`);
  }
  return value;
}

/** The per-call options of the tasks and schema checks, added to `extra` (created if null). */
function taskAndSchemaOptions(extra, { task, taskTtlMs, validateArguments }) {
  if (task !== undefined) {
    if (task !== true && task !== false && task !== 'handle' && task !== 'await') {
      throw errorOf('invalid_argument', `\`task\` must be true, false, 'await' or 'handle' (got ${JSON.stringify(task)})`);
    }
    (extra || (extra = {})).task = task;
  }
  if (taskTtlMs !== undefined) (extra || (extra = {})).task_ttl_ms = checkCount(taskTtlMs, 'taskTtlMs');
  if (validateArguments !== undefined) (extra || (extra = {})).validate_arguments = checkBoolean(validateArguments, 'validateArguments');
  return extra;
}

/** The per-call option `cache` (false: a cacheable request asks the server even when the
 *  connection's cache holds a fresh result), added to `extra` (created if null). */
function cacheOption(extra, { cache }) {
  if (cache !== undefined) (extra || (extra = {})).cache = checkBoolean(cache, 'cache');
  return extra;
}

/** Notifications that also come as an event of their own name, with their params. */
const NAMED_NOTIFICATIONS = Object.freeze({
  __proto__: null,
  'notifications/message': 'log',
  'notifications/claude/channel': 'channel',
  'notifications/claude/channel/permission': 'channelPermission',
});

class Client extends EventEmitter {
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
    if (handlers === null || typeof handlers !== 'object') throw errorOf('invalid_argument', '`handlers` must be an object');
    for (const [method, fn] of Object.entries(handlers)) {
      if (typeof fn !== 'function') throw errorOf('invalid_argument', `handler for ${method} is not a function`);
    }
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
    const fromHandlers = {};
    for (const method of Object.keys(handlers)) {
      const cap = CAPABILITY_OF_HANDLER[method];
      if (cap) fromHandlers[cap[0]] = cap[1];
    }
    merged.capabilities = mergeCapabilities(fromHandlers, [options.capabilities, 'options.capabilities'], [capabilities, 'capabilities']);
    const connectTag = tag === undefined ? internalTag() : checkString(tag, 'tag');
    merged.tag = connectTag;
    const authChannel = handlers['auth/authorize'] ? authRegister(handlers['auth/authorize'], merged) : undefined;
    const serverJson = toJson(server, 'server');
    const optionsJson = toJson(merged, 'options');
    // Raw options are the library's to judge; only a valid limit also bounds the wait for a thread.
    const rawConnectMs = merged.connect_timeout_ms;
    const connectMs = typeof rawConnectMs === 'number' && rawConnectMs >= 1 && Number.isFinite(rawConnectMs) ? rawConnectMs : undefined;

    const op = new Op(connectTag, 'connect');
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
    super();
    if (typeof handle !== 'bigint') throw new TypeError('use Client.connect() to create a Client');
    this._handle = handle;
    this._info = info;
    this._handlers = { ...handlers };
    this._state = 'open';
    this._ops = new Set(); // blocking calls (threadpool) of this client
    this._opWaiters = [];
    this._calls = new Map(); // call number -> Started, every started call not yet completed
    this._byTag = new Map(); // tag -> Set<onProgress> of this client's calls that want progress
    this._pendingRequests = new Map(); // event id -> AbortController, server requests not yet answered
    this._closeReason = null;
    this._closeReasonFromEvent = null;
    this._closedEmitted = false;
    this._shutdownPromise = null;
    this._flushScheduled = false;
    this._needFlush = false;
    this._flushTick = () => this._flush();
    this._draining = false;
    this._drainAgain = false;
    this._drainGen = 0; // how many times events were taken
    this._burstGen = -1; // the _drainGen of the last call written at once
    this._eventsEnded = false;
    this._eventSocket = openEventSocket(handle, () => this._drain());
    // The server's stdout is read here, by the event loop: an answer settles its call without a
    // library thread reading it and waking us through the event descriptor.
    this._feeding = true;
    this._stdoutSocket = openStdoutSocket(handle, (n) => this._feed(n), () => this._stopFeeding());
    this._pollTimer = null;
    this._eventSocket.on('error', (e) => {
      // Never seen; but without wake-ups no call would settle: poll instead, until the end.
      process.emitWarning(`mcplug: the event descriptor failed (${e && e.message}); polling for events every ${FALLBACK_POLL_MS} ms`, 'McplugWarning');
      if (this._pollTimer === null && !this._eventsEnded) this._pollTimer = setInterval(() => this._drain(), FALLBACK_POLL_MS);
      this._drain();
    });
  }

  get name() { return this._info.name ?? null; }
  get serverInfo() { return this._info.server_info; }
  get protocolVersion() { return this._info.protocol_version; }
  get era() { return this._info.era; }
  get capabilities() { return this._info.capabilities; }
  get instructions() { return this._info.instructions ?? null; }
  /** Everything mcplug_client_connect returned, including the server's raw `result`. */
  get connectResult() { return this._info; }
  /** 'open' until close() (or the end of the connection), then 'closing', then 'closed'. */
  get state() { return this._state; }

  /** Lists every tool (all pages). */
  async listTools({ timeoutMs, tag, signal, cache } = {}) {
    const extra = cacheOption(null, { cache }) || undefined;
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
    // Not `async`: a bad argument still rejects (never throws), and the hot path saves the
    // wrapper promise.
    try {
      checkString(name, 'name');
      const argsJson = args === undefined ? '{}' : optionalObject(args, 'arguments');
      if (options === undefined || options === null) return this._start(native.call_tool_start, TOOL_LABEL, name, argsJson, NO_OPTIONS, null);
      const { timeoutMs, tag, signal, onProgress, resetTimeoutOnProgress, maxTotalTimeoutMs } = options;
      let extra = null;
      if (resetTimeoutOnProgress) extra = { reset_timeout_on_progress: true };
      const maxTotal = timeoutValue(maxTotalTimeoutMs, 'maxTotalTimeoutMs');
      if (maxTotal !== undefined) (extra || (extra = {})).max_total_timeout_ms = maxTotal;
      extra = taskAndSchemaOptions(extra, options);
      return this._start(native.call_tool_start, TOOL_LABEL, name, argsJson, { timeoutMs, tag, signal, onProgress }, extra);
    } catch (e) {
      return Promise.reject(e);
    }
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

  /** Answers a server request event (one without a handler) with a result. */
  async respond(id, result = {}) {
    checkString(id, 'id');
    await this._control('respond', native.respond, [toJson({ id, result }, 'result')]);
    this._pendingRequests.delete(id);
  }

  /** Answers a server request event with a JSON-RPC error `{code, message, data?}`. */
  async respondError(id, error) {
    checkString(id, 'id');
    if (!error || typeof error !== 'object') throw errorOf('invalid_argument', '`error` must be {code, message}');
    const body = { code: Number.isInteger(error.code) ? error.code : -32603, message: String(error.message ?? 'error') };
    if (error.data !== undefined) body.data = error.data;
    await this._control('respond', native.respond, [toJson({ id, error: body }, 'error')]);
    this._pendingRequests.delete(id);
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

  /** Closes the connection and frees the handle; the server and its children are gone after. */
  close() {
    return this._shutdown('the client was closed by the host');
  }

  // -- internals -------------------------------------------------------------------------------

  _closedError(label) {
    const why = this._closeReason || 'the client is closed';
    return errorOf('closed', label ? `${label}: ${why}` : why);
  }

  _checkOpen(label) {
    if (this._state !== 'open') throw this._closedError(label);
  }

  /**
   * Starts a call (synchronously: the library only writes, or queues the write) and returns the
   * promise its completion event settles. `fn` is call_tool_start or request_start.
   */
  _start(fn, labelPrefix, first, json, { timeoutMs, tag, signal, onProgress }, extra) {
    if (this._state !== 'open') throw this._closedError(labelPrefix + first);
    if (onProgress !== undefined && typeof onProgress !== 'function') throw errorOf('invalid_argument', '`onProgress` must be a function');
    if (signal !== undefined && signal !== null && signal.aborted) throw cancelledError(labelPrefix + first);
    const defer = this._deferNext();
    let options;
    let callTag = null;
    if (timeoutMs === undefined && tag === undefined && !onProgress && extra === null) {
      options = defer ? DEFER_OPTIONS : null; // the common case: no object, no stringify
    } else {
      const o = extra === null ? {} : extra;
      const limit = timeoutValue(timeoutMs, 'timeoutMs');
      if (limit !== undefined) o.timeout_ms = limit;
      // A tag only when one is needed: the library runs an untagged call without a task.
      if (tag !== undefined) callTag = checkString(tag, 'tag');
      else if (onProgress) callTag = internalTag();
      if (callTag !== null) o.tag = callTag;
      if (onProgress) o.progress = true;
      if (defer) o.defer = true;
      options = JSON.stringify(o);
    }
    const status = fn(this._handle, first, json, options, callOut, textOut);
    if (status !== Status.OK) throw errorFromNative(status, takeText());
    const call = takeCall();
    if (defer) this._needFlush = true;
    return new Promise((resolve, reject) => {
      const rec = new Started(this, call, labelPrefix, first, callTag, resolve, reject);
      this._calls.set(rec.call, rec);
      if (onProgress) {
        rec.onProgress = onProgress;
        let set = this._byTag.get(callTag);
        if (!set) this._byTag.set(callTag, (set = new Set()));
        set.add(onProgress);
      }
      if (signal !== undefined && signal !== null) {
        rec.signal = signal;
        rec.onAbort = () => rec.cancel();
        signal.addEventListener('abort', rec.onAbort, { once: true });
      }
    });
  }

  /** mcplug_client_cancel_call for a started call of ours (see Started.cancel). */
  _cancelStarted(call) {
    // A call still deferred in this turn goes out first, so that the server never sees the
    // cancellation before the request it names.
    if (this._needFlush) this._flush();
    const status = native.cancel_call(this._handle, call, textOut);
    const text = takeText();
    if (status !== Status.OK && status !== Status.CLOSED) {
      process.emitWarning(`mcplug: mcplug_client_cancel_call failed: ${errorFromNative(status, text).message}`, 'McplugWarning');
    }
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

  /** Every event was delivered and the queue is closed: no more events will come. */
  _endOfEvents() {
    if (this._eventsEnded) return;
    this._eventsEnded = true;
    // No server request will be answered any more: their handlers' signals abort.
    for (const id of [...this._pendingRequests.keys()]) this._withdrawRequest(id, 'the connection is closed');
    this._eventSocket.destroy(); // closes our own dup; the process may exit once nothing else runs
    if (this._stdoutSocket !== null) {
      // The library reads by itself again (and finds the end of the stream): said while the
      // handle is still valid, not from the socket's 'close', which may come after the free.
      this._stopFeeding();
      this._stdoutSocket.destroy();
    }
    if (this._pollTimer !== null) clearInterval(this._pollTimer);
    this._pollTimer = null;
    // Safety net: a started call whose completion never came still settles (exactly once).
    if (this._calls.size > 0) {
      const err = this._closedError();
      for (const rec of [...this._calls.values()]) rec.settle(undefined, err);
    }
    // The connection ended by itself (the server exited): release the handle now.
    if (!this._shutdownPromise) {
      this._shutdown(this._closeReasonFromEvent || 'the connection is closed').catch(() => {});
    }
  }

  async _work(label, fn, { timeoutMs, tag, signal, onProgress, extra = {} }, buildArgs) {
    this._checkOpen(label);
    const limit = timeoutValue(timeoutMs, 'timeoutMs');
    const callTag = tag === undefined ? internalTag() : checkString(tag, 'tag');
    const base = { ...extra, tag: callTag };
    if (limit !== undefined) base.timeout_ms = limit;
    if (onProgress) base.progress = true;
    const op = new Op(callTag, label);
    if (onProgress) {
      if (typeof onProgress !== 'function') throw errorOf('invalid_argument', '`onProgress` must be a function');
      let set = this._byTag.get(callTag);
      if (!set) this._byTag.set(callTag, (set = new Set()));
      set.add(onProgress);
    }
    try {
      const result = await runOp({
        gate: workGate,
        fn,
        op,
        signal,
        owner: this,
        timeoutMs: limit === null ? undefined : limit,
        build: (remaining) => {
          const options = remaining === undefined || remaining === limit ? base : { ...base, timeout_ms: remaining };
          return [this._handle, ...buildArgs(JSON.stringify(options))];
        },
      });
      // Every progress notification the server sent before its result is in the event queue by
      // now: hand them to onProgress before the promise settles.
      if (onProgress) this._drain();
      return result;
    } finally {
      if (onProgress) this._dropProgress(callTag, onProgress);
    }
  }

  _dropProgress(tag, onProgress) {
    const set = this._byTag.get(tag);
    if (set) {
      set.delete(onProgress);
      if (set.size === 0) this._byTag.delete(tag);
    }
  }

  async _control(label, fn, args) {
    this._checkOpen(label);
    const op = new Op(null, label);
    return runOp({ gate: controlGate, fn, op, owner: this, build: () => [this._handle, ...args] });
  }

  _opFinished(op) {
    this._ops.delete(op);
    const waiters = this._opWaiters;
    this._opWaiters = [];
    for (const w of waiters) w();
  }

  /** Like emit(), but a listener that throws neither stops the event pump nor the other listeners. */
  _emitSafe(name, ...args) {
    for (const listener of this.rawListeners(name)) {
      try {
        Reflect.apply(listener, this, args); // a once() wrapper removes itself here
      } catch (e) {
        this._reportHandlerError(e, `'${name}' listener`);
      }
    }
  }

  _reportHandlerError(err, where) {
    if (this.listenerCount('handlerError') > 0) {
      try {
        this.emit('handlerError', err, where);
        return;
      } catch {
        // fall through to the warning
      }
    }
    process.emitWarning(`mcplug: a ${where} handler threw: ${err && err.stack ? err.stack : err}`, 'McplugHandlerWarning');
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
        if (ev.method === 'notifications/progress' && ev.tag) {
          const set = this._byTag.get(ev.tag);
          if (set) {
            for (const fn of [...set]) {
              try {
                fn(params);
              } catch (e) {
                this._reportHandlerError(e, 'onProgress');
              }
            }
          }
        }
        const handler = this._handlers[ev.method];
        if (handler) {
          try {
            const r = handler(params, { method: ev.method, client: this });
            if (r && typeof r.then === 'function') r.then(undefined, (e) => this._reportHandlerError(e, ev.method));
          } catch (e) {
            this._reportHandlerError(e, ev.method);
          }
        }
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

  _emitClosed(info) {
    if (this._closedEmitted) return;
    this._closedEmitted = true;
    this._emitSafe('closed', info);
  }

  /**
   * A server request the host need not answer any more (expired, cancelled, connection closed):
   * its handler's signal aborts, and whatever the handler returns later is dropped.
   */
  _withdrawRequest(id, why) {
    const controller = this._pendingRequests.get(id);
    if (controller === undefined) return;
    this._pendingRequests.delete(id);
    controller.abort(errorOf('cancelled', why));
  }

  async _handleRequest(ev) {
    const controller = new AbortController();
    this._pendingRequests.set(ev.id, controller);
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
    if (this._pendingRequests.get(ev.id) !== controller) return;
    await this._answer(ev.id, ev.method, answerText(ev, answer));
  }

  /** Sends the answer to a server request; an answer nobody waits for any more is dropped. */
  async _answer(id, method, text) {
    if (this._state !== 'open') return;
    try {
      await this._control('respond', native.respond, [text]);
    } catch (e) {
      const withdrawn = !this._pendingRequests.has(id);
      if (this._state === 'open' && !withdrawn && !(e instanceof McpError && e.kind === 'closed')) {
        this._reportHandlerError(e, `${method} (answering the server)`);
      }
    } finally {
      this._pendingRequests.delete(id);
    }
  }

  _shutdown(reason) {
    authUnregister(this._authChannel);
    if (this._shutdownPromise) return this._shutdownPromise;
    this._state = 'closing';
    this._closeReason = reason;
    this._shutdownPromise = (async () => {
      const handle = this._handle;
      // 1. Blocking calls still waiting in the JS queue never reach the library.
      for (const op of this._ops) {
        if (op.queued) op.queued.withdraw(this._closedError(op.label));
      }
      // 2. Close without freeing (blocks until the server is gone: off the loop). Blocking calls
      //    inside the library return CLOSED at once, and one that sat in libuv's queue and enters
      //    only now finds the handle closed but still valid: it returns CLOSED too. Every started
      //    call gets its completion event, queued before the final `closed` event.
      if (handle) {
        try {
          await controlGateRun(() => callAsync(native.client_close, [handle]));
        } catch (e) {
          process.emitWarning(`mcplug: mcplug_client_close failed: ${e && e.message}`, 'McplugWarning');
        }
        // 3. Those completions reject their calls (kind `closed`), now.
        this._drain();
      }
      this._endOfEvents();
      // 4. Free only once nothing of ours is inside the library for this handle.
      while (this._ops.size > 0) {
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, 100);
          this._opWaiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
      this._handle = null;
      if (handle) await controlGateRun(() => callAsync(native.client_free, [handle], false));
      this._state = 'closed';
      this._emitClosed({ reason });
    })();
    return this._shutdownPromise;
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  Client.prototype[Symbol.asyncDispose] = function asyncDispose() {
    return this.close();
  };
}

async function controlGateRun(fn) {
  const ticket = controlGate.acquire();
  await ticket.ready;
  try {
    return await fn();
  } finally {
    controlGate.release();
  }
}

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

/** `localConcurrency` -> `local_concurrency` (snake_case names pass unchanged). */
function snakeKey(key) {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** An options object with snake_case keys (one level; the values are untouched). */
function snakeKeys(obj, what) {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
    throw errorOf('invalid_argument', `\`${what}\` must be an object (got ${obj === null ? 'null' : Array.isArray(obj) ? 'an array' : typeof obj})`);
  }
  const out = {};
  for (const [key, value] of Object.entries(obj)) {
    if (value !== undefined) out[snakeKey(key)] = value;
  }
  return out;
}

function checkHandlers(handlers) {
  if (handlers === null || typeof handlers !== 'object' || Array.isArray(handlers)) throw errorOf('invalid_argument', '`handlers` must be an object');
  for (const [method, fn] of Object.entries(handlers)) {
    if (typeof fn !== 'function') throw errorOf('invalid_argument', `handler for ${method} is not a function`);
  }
  return handlers;
}

/** What a host tool's handler returned, as a CallToolResult. */
function hostToolResult(value, tool) {
  if (value === undefined || value === null) return { content: [] };
  if (typeof value === 'string') return { content: [{ type: 'text', text: value }] };
  if (typeof value === 'object' && !Array.isArray(value)) return value;
  return {
    content: [{ type: 'text', text: `the handler of ${tool} returned ${Array.isArray(value) ? 'an array' : typeof value}, not a CallToolResult or a string` }],
    isError: true,
  };
}

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

class Manager extends EventEmitter {
  /** Same as `new Manager(options, opts)`, as a Promise. */
  static async create(options, opts) {
    return new Manager(options, opts);
  }

  /**
   * A manager with no server yet (see `connect`). `options`: `localConcurrency`,
   * `remoteConcurrency`, `connection` (Client.connect's options for every server, e.g.
   * `{connectTimeoutMs, toolTimeoutMs}`), `maxDescriptionChars`, `maxOutputTokens` or
   * `maxOutputChars`, `terminalErrors`, `reconnectInitialMs`, `reconnectMaxMs`,
   * `reconnectAttempts`, `disabled`, `maxEvents` (snake_case names work too). `handlers`: as
   * the Client's, called with `(params, server, ctx)`; each declares its capability.
   */
  constructor(options, { handlers = {} } = {}) {
    super();
    checkHandlers(handlers);
    const merged = snakeKeys(options === undefined || options === null ? {} : options, 'options');
    const connection = merged.connection === undefined ? {} : snakeKeys(merged.connection, 'options.connection');
    const fromHandlers = {};
    for (const method of Object.keys(handlers)) {
      const cap = CAPABILITY_OF_HANDLER[method];
      if (cap) fromHandlers[cap[0]] = cap[1];
    }
    if (Object.keys(fromHandlers).length > 0 || connection.capabilities !== undefined) {
      connection.capabilities = mergeCapabilities(fromHandlers, [connection.capabilities, 'options.connection.capabilities']);
    }
    if (merged.connection !== undefined || Object.keys(connection).length > 0) merged.connection = connection;
    const out = [null];
    const status = mnative.create(toJson(merged, 'options'), out, textOut);
    const text = takeText();
    if (status !== Status.OK) throw errorFromNative(status, text);
    const handle = out[0];
    this._handle = handle;
    this._handlers = { ...handlers };
    this._state = 'open';
    this._ops = new Set(); // blocking calls (threadpool) of this manager
    this._opWaiters = [];
    this._calls = new Map(); // call number -> Started, every started tool call not yet completed
    this._byTag = new Map(); // tag -> Set<onProgress>
    this._pendingRequests = new Map(); // manager request id -> {controller, server}
    // name -> {handlers: Map<tool, fn>, tools: [its tools now, without handlers], entry: its config entry}
    this._hostServers = new Map();
    this._config = null; // the last configuration given to connect (without the host servers)
    this._waiters = new Set(); // wait() calls: re-checked after each drain
    this._closeReason = null;
    this._closedEmitted = false;
    this._shutdownPromise = null;
    this._draining = false;
    this._drainAgain = false;
    this._drainLater = null;
    this._completing = []; // [Started, completion event] of calls with onProgress, settled after one more pull
    this._settleLater = null;
    this._eventsEnded = false;
    this._pollTimer = null;
    try {
      this._eventSocket = openEventSocket(handle, () => this._drain(), mnative.event_fd);
    } catch (e) {
      this._handle = null;
      this._state = 'closed';
      callAsync(mnative.free, [handle], false).catch(() => {});
      throw e;
    }
    this._eventSocket.on('error', (e) => {
      process.emitWarning(`mcplug: the manager's event descriptor failed (${e && e.message}); polling for events every ${FALLBACK_POLL_MS} ms`, 'McplugWarning');
      if (this._pollTimer === null && !this._eventsEnded) this._pollTimer = setInterval(() => this._drain(), FALLBACK_POLL_MS);
      this._drain();
    });
  }

  /** 'open' until close(), then 'closing', then 'closed'. */
  get state() { return this._state; }

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
    // It returns at once (servers connect in the background), but may first close the servers
    // the new configuration drops: a short wait, on the control lane.
    const status = await this._blocking('connect', controlGate, mnative.connect, [json]);
    this._config = config;
    return status;
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
  async listTools(server) {
    const options = server === undefined || server === null ? null : JSON.stringify({ server: checkString(server, 'server') });
    const res = this._sync(mnative.list_tools, [options]);
    return { tools: res.tools, dropped: res.dropped || [] };
  }

  /**
   * Ranks the pool by `query` (words matched against names, search hints and descriptions;
   * `+word` must match; `select:a,b` picks by name). Resolves `{tools: [entry + score], total}`.
   */
  async searchTools(query, { maxResults, server } = {}) {
    const fn = this._need(mnative.search_tools, 'mcplug_manager_search_tools');
    checkString(query, 'query');
    const options = {};
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
    // A started call, as the Client's: it holds no thread while it runs (a host tool's handler
    // may itself call the manager, with any number of calls in flight).
    try {
      checkString(poolName, 'poolName');
      const argsJson = args === undefined ? '{}' : optionalObject(args, 'arguments');
      if (options === undefined || options === null) return this._start(mnative.call_tool_start, TOOL_LABEL, poolName, argsJson, NO_OPTIONS, null);
      const { timeoutMs, tag, signal, onProgress, resetTimeoutOnProgress, maxTotalTimeoutMs } = options;
      let extra = null;
      if (resetTimeoutOnProgress) extra = { reset_timeout_on_progress: true };
      const maxTotal = timeoutValue(maxTotalTimeoutMs, 'maxTotalTimeoutMs');
      if (maxTotal !== undefined) (extra || (extra = {})).max_total_timeout_ms = maxTotal;
      extra = taskAndSchemaOptions(extra, options);
      return this._start(mnative.call_tool_start, TOOL_LABEL, poolName, argsJson, { timeoutMs, tag, signal, onProgress }, extra);
    } catch (e) {
      return Promise.reject(e);
    }
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
      const argsJson = optionalObject(args, 'arguments');
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
      const status = await this.connect(this._config || { mcpServers: {} });
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
      await this.connect(this._config || { mcpServers: {} });
    } catch (e) {
      this._hostServers.set(name, before);
      throw e;
    }
  }

  /** The names of the host servers. */
  get hostServers() {
    return [...this._hostServers.keys()];
  }

  /** Answers a server request event (one without a handler) with a result. */
  async respond(id, result = {}) {
    checkString(id, 'id');
    await this._control('respond', mnative.respond, [toJson({ id, result }, 'result')]);
    this._pendingRequests.delete(id);
  }

  /** Answers a server request event with a JSON-RPC error `{code, message, data?}`. */
  async respondError(id, error) {
    checkString(id, 'id');
    if (!error || typeof error !== 'object') throw errorOf('invalid_argument', '`error` must be {code, message}');
    const body = { code: Number.isInteger(error.code) ? error.code : -32603, message: String(error.message ?? 'error') };
    if (error.data !== undefined) body.data = error.data;
    await this._control('respond', mnative.respond, [toJson({ id, error: body }, 'error')]);
    this._pendingRequests.delete(id);
  }

  /** Closes every connection and frees the manager; every server process is gone when this resolves. */
  close() {
    return this._shutdown('the manager was closed by the host');
  }

  // -- internals -------------------------------------------------------------------------------

  /** Started calls are never deferred: the manager writes each call from its own task. */
  _deferNext() {
    return false;
  }

  /** mcplug_manager_cancel_call for a started call of ours (see Started.cancel). */
  _cancelStarted(call) {
    const status = mnative.cancel_call(this._handle, call, textOut);
    const text = takeText();
    if (status !== Status.OK && status !== Status.CLOSED) {
      process.emitWarning(`mcplug: mcplug_manager_cancel_call failed: ${errorFromNative(status, text).message}`, 'McplugWarning');
    }
  }

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
        if (ev.method === 'notifications/progress' && ev.tag) {
          const set = this._byTag.get(ev.tag);
          if (set) {
            for (const fn of [...set]) {
              try {
                fn(params, ev.server);
              } catch (e) {
                this._reportHandlerError(e, 'onProgress');
              }
            }
          }
        }
        const handler = this._handlers[ev.method];
        if (handler) {
          try {
            const r = handler(params, ev.server, { method: ev.method, server: ev.server, manager: this });
            if (r && typeof r.then === 'function') r.then(undefined, (e) => this._reportHandlerError(e, ev.method));
          } catch (e) {
            this._reportHandlerError(e, ev.method);
          }
        }
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

  _withdrawRequest(id, why) {
    const pending = this._pendingRequests.get(id);
    if (pending === undefined) return;
    this._pendingRequests.delete(id);
    pending.controller.abort(errorOf('cancelled', why));
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

  /** Sends an answer; one nobody waits for any more (withdrawn, its server gone) is dropped. */
  async _answer(id, method, text) {
    if (this._state !== 'open') return;
    try {
      await this._control('respond', mnative.respond, [text]);
    } catch (e) {
      const withdrawn = !this._pendingRequests.has(id);
      const gone = e instanceof McpError && (e.kind === 'closed' || e.kind === 'not_found');
      if (this._state === 'open' && !withdrawn && !gone) this._reportHandlerError(e, `${method} (answering the server)`);
    } finally {
      this._pendingRequests.delete(id);
    }
  }

  _endOfEvents() {
    if (this._eventsEnded) return;
    this._eventsEnded = true;
    for (const id of [...this._pendingRequests.keys()]) this._withdrawRequest(id, 'the manager is closed');
    // The completions held back for progress settle with their own outcomes, now.
    if (this._completing.length > 0 || this._settleLater !== null) this._settleCompleted(false);
    // Safety net: a started call whose completion never came still settles (exactly once).
    if (this._calls.size > 0) {
      const err = this._closedError();
      for (const rec of [...this._calls.values()]) rec.settle(undefined, err);
    }
    this._eventSocket.destroy();
    if (this._pollTimer !== null) clearInterval(this._pollTimer);
    this._pollTimer = null;
    if (this._drainLater !== null) clearImmediate(this._drainLater);
    this._drainLater = null;
    if (!this._shutdownPromise) this._shutdown('the manager is closed').catch(() => {});
  }

  _shutdown(reason) {
    if (this._shutdownPromise) return this._shutdownPromise;
    this._state = 'closing';
    this._closeReason = reason;
    // wait() calls reject now (kind closed).
    for (const w of [...this._waiters]) w.check();
    this._shutdownPromise = (async () => {
      const handle = this._handle;
      // 1. Blocking calls still waiting in the JS queue never reach the library.
      for (const op of this._ops) {
        if (op.queued) op.queued.withdraw(this._closedError(op.label));
      }
      // 2. Close without freeing (off the loop: it waits for every server process to go). Calls
      //    inside the library return CLOSED; one entering late finds a closed but valid handle.
      try {
        await controlGateRun(() => callAsync(mnative.close, [handle]));
      } catch (e) {
        process.emitWarning(`mcplug: mcplug_manager_close failed: ${e && e.message}`, 'McplugWarning');
      }
      // 3. The events left, then the end.
      this._drain();
      this._endOfEvents();
      // 4. Free only once nothing of ours is inside the library for this handle.
      while (this._ops.size > 0) {
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, 100);
          this._opWaiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
      this._handle = null;
      await controlGateRun(() => callAsync(mnative.free, [handle], false));
      this._state = 'closed';
      this._emitClosed({ reason });
    })();
    return this._shutdownPromise;
  }
}

// The parts of the Client's machinery that are the same for a manager.
for (const name of ['_emitSafe', '_reportHandlerError', '_opFinished', '_dropProgress', '_closedError', '_checkOpen', '_emitClosed', '_work', '_control', '_start']) {
  Manager.prototype[name] = Client.prototype[name];
}

if (typeof Symbol.asyncDispose === 'symbol') {
  Manager.prototype[Symbol.asyncDispose] = function asyncDispose() {
    return this.close();
  };
}

// ---------------------------------------------------------------------------------------------
// Module functions

/**
 * Cancels every in-flight call carrying `tag` (in this module, and any other mcplug host in the
 * process). Returns true if one was found.
 */
function cancel(tag) {
  checkString(tag, 'tag');
  let found = false;
  const set = opsByTag.get(tag);
  if (set) {
    for (const op of [...set]) {
      if (op.cancel('user', () => cancelledError(op.label))) found = true;
    }
  }
  const status = native.cancel(tag);
  if (status === Status.OK) return true;
  if (status === Status.NOT_FOUND) return found;
  throw errorFromNative(status, null);
}

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
 * `dynamic`, `plugin`, `claudeai`. The result is mergeConfig's plus `files`.
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
 * Logs out of a remote server: forgets every credential the auth store holds for it (tokens,
 * registrations, the needs-auth mark). `server` is its entry (`{type, url}`); `authStore` the
 * store (default: the library's default directory). Resolves to `{forgotten: boolean}`.
 */
async function authLogout(server, { authStore } = {}) {
  const options = authStore === undefined ? null : JSON.stringify({ auth_store: authStore });
  const { status, text } = await callAsync(native.auth_logout, [toJson(server, 'server'), options]);
  return decode(status, text);
}

/**
 * The library's log records, taken by the host instead of going to stderr (`MCPLUG_LOG`): one
 * capture per process. Each record comes as a 'record' event (`{type: 'log', level, target,
 * message, fields, timeMs, thread}`; an `{type: 'overflow', dropped}` one when the queue of
 * `maxRecords` overflowed). Records wait on a descriptor this loop watches (no thread is held,
 * and the capture does not keep the process alive).
 */
class LogCapture extends EventEmitter {
  constructor(filter, maxRecords) {
    super();
    const options = { filter };
    if (maxRecords !== undefined) options.max_records = maxRecords;
    const out = [null];
    const started = decode(native.log_capture(JSON.stringify(options), out), out[0]);
    this.filter = started.filter;
    this.maxRecords = started.max_records;
    this.stopped = false;
    this._socket = openEventSocket(null, () => this._drain(), (_h, fd, text) => native.log_event_fd(fd, text));
    this._socket.on('error', () => {});
    this._socket.unref();
  }

  _drain() {
    for (;;) {
      const out = [null];
      const status = native.log_next_events(256, 0, out);
      if (status === Status.TIMEOUT) return;
      if (status !== Status.OK) {
        this._end();
        return;
      }
      for (const r of JSON.parse(out[0])) {
        const record = r.type === 'log'
          ? { type: 'log', level: r.level, target: r.target, message: r.message, fields: r.fields, timeMs: r.time_ms, thread: r.thread }
          : r;
        try {
          this.emit('record', record);
        } catch (e) {
          process.emitWarning(`mcplug: a 'record' listener threw: ${e && e.stack ? e.stack : e}`);
        }
      }
    }
  }

  _end() {
    if (this._socket) {
      this._socket.destroy();
      this._socket = null;
      this.emit('end');
    }
  }

  /** Ends the capture: the records already queued are emitted first, then 'end'. Idempotent. */
  stop() {
    if (!this.stopped) {
      this.stopped = true;
      const out = [null];
      decode(native.log_release(out), out[0]);
      this._drain();
    }
    this._end();
  }
}

/**
 * Starts taking the library's log records matching `filter` (tracing's EnvFilter syntax:
 * 'debug', 'warn,mcplug::wire=trace'); `listener` (optional) gets each record. A second capture
 * while one runs changes its filter: stop the first, or use its LogCapture.
 */
function captureLogs({ filter = 'debug', maxRecords } = {}, listener) {
  if (typeof filter !== 'string') throw errorOf('invalid_argument', `\`filter\` must be a string (got ${typeof filter})`);
  if (maxRecords !== undefined && !(Number.isInteger(maxRecords) && maxRecords > 0)) {
    throw errorOf('invalid_argument', `\`maxRecords\` must be a positive integer (got ${maxRecords})`);
  }
  if (listener !== undefined && typeof listener !== 'function') {
    throw errorOf('invalid_argument', '`listener` must be a function');
  }
  const capture = new LogCapture(filter, maxRecords);
  if (listener) capture.on('record', listener);
  return capture;
}

/** The library's version string, e.g. "0.1.0". */
function version() {
  return native.version();
}

/** The ABI version of the loaded library (equal to ABI_VERSION, or loading would have failed). */
function abiVersion() {
  return native.abi_version();
}

module.exports = {
  Client,
  Manager,
  McpError,
  ERROR_KINDS,
  LOG_LEVELS,
  Status,
  ABI_VERSION,
  cancel,
  mergeConfig,
  discoverConfig,
  addConfigServer,
  removeConfigServer,
  authLogout,
  captureLogs,
  LogCapture,
  version,
  abiVersion,
  libraryPath,
  threadpoolSize,
  workLimit,
};
