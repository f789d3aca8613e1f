'use strict';
/*
 * mcplug for Node.js: an MCP client over the libmcplug C ABI (koffi 3, no compiler needed).
 *
 * This file only exports; the parts are in lib/: native.js (loading the library, the threadpool
 * hop, the gates), errors.js, values.js (argument checks), calls.js (Op, Started, cancel(tag),
 * the descriptor sockets), handle.js (what a Client and a Manager share: the handle, its calls,
 * the server requests waiting for an answer, the one way a handle ends), client.js, manager.js,
 * auth.js (the OAuth pump), config.js, logs.js.
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
 *      only then calls `mcplug_client_free`. A blocking call that can be cancelled carries a
 *      cancel token of the library's (`mcplug_cancel_token_new`, `cancel_token` in its
 *      options), made before it is queued: cancelling it is one `mcplug_cancel_token_cancel`,
 *      which reaches the call whether it runs or still waits in libuv's queue to enter.
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

const { McpError, ERROR_KINDS, Status } = require('./lib/errors');
const { ABI_VERSION, native, libraryPath, threadpoolSize, workLimit } = require('./lib/native');
const { LOG_LEVELS } = require('./lib/values');
const { cancel } = require('./lib/calls');
const { Client } = require('./lib/client');
const { Manager, Server } = require('./lib/manager');
const { mergeConfig, discoverConfig, addConfigServer, removeConfigServer, approveProjectServer, resetProjectChoices, authLogout } = require('./lib/config');
const { captureLogs, LogCapture } = require('./lib/logs');

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
  Server,
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
  approveProjectServer,
  resetProjectChoices,
  authLogout,
  captureLogs,
  LogCapture,
  version,
  abiVersion,
  libraryPath,
  threadpoolSize,
  workLimit,
};
