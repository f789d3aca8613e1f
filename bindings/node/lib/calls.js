'use strict';
// Calls in flight: blocking operations (Op, runOp) and started calls (Started), cancellation by
// tag, and the sockets that watch a handle's event descriptor and a stdio server's stdout.

const fs = require('fs');
const net = require('net');
const { Status, McpError, errorOf, decode, errorFromNative, cancelledError } = require('./errors');
const { native, callAsync, textOut, fdOut, tokenOut, stdoutBuf, takeText } = require('./native');
const { checkString } = require('./values');

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

/** A new cancel token of the library's (mcplug_cancel_token_new). */
function newCancelToken() {
  const status = native.cancel_token_new(tokenOut);
  if (status !== Status.OK) throw errorFromNative(status, null);
  return Number(tokenOut[0]);
}

class Op {
  /**
   * A blocking call. One with a tag can be cancelled: it carries a cancel token of the
   * library's (`cancel_token` in its options), which cancels it whether it already runs or
   * still waits in libuv's queue to enter.
   */
  constructor(tag, label) {
    this.tag = tag;
    this.label = label;
    this.token = tag ? newCancelToken() : 0;
    this.queued = null; // the gate ticket while waiting for a slot
    this.inFlight = false;
    this.done = false;
    this.cancelReason = null; // 'user' once cancellation was asked for
    if (tag) {
      let set = opsByTag.get(tag);
      if (!set) opsByTag.set(tag, (set = new Set()));
      set.add(this);
    }
  }

  /** Asks for cancellation: withdraws a queued op, or cancels the native call by its token. */
  cancel(reason, queuedError) {
    if (this.done) return false;
    if (!this.cancelReason) this.cancelReason = reason;
    if (this.queued) {
      this.queued.withdraw(queuedError());
      return true;
    }
    if (this.token !== 0) native.cancel_token_cancel(this.token);
    return true;
  }

  finish() {
    this.done = true;
    this.inFlight = false;
    this.queued = null;
    if (this.token !== 0) {
      native.cancel_token_free(this.token);
      this.token = 0;
    }
    if (this.tag) {
      const set = opsByTag.get(this.tag);
      if (set) {
        set.delete(this);
        if (set.size === 0) opsByTag.delete(this.tag);
      }
    }
  }
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

module.exports = {
  internalTag,
  Op,
  runOp,
  NO_OPTIONS,
  TOOL_LABEL,
  DEFER_OPTIONS,
  Started,
  openEventSocket,
  openStdoutSocket,
  cancel,
};
