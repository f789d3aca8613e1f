'use strict';
// Handle: what a Client and a Manager share — one native handle, its events, the calls in
// flight on it, the server requests waiting for the host's answer, and the one way it ends
// (close without freeing, the last events, wait until nothing of ours is inside the library,
// free). Each subclass names its native functions (`natives`) and pulls and dispatches its own
// events (`_drain`, `_dispatch`); the rest is here, once.

const { EventEmitter } = require('events');
const { Status, McpError, errorOf, errorFromNative, cancelledError } = require('./errors');
const { FALLBACK_POLL_MS, callAsync, workGate, controlGate, textOut, callOut, takeCall, takeText, controlGateRun } = require('./native');
const { toJson, checkString, optionalObject, timeoutValue, taskAndSchemaOptions, formatOption } = require('./values');
const { internalTag, Op, runOp, NO_OPTIONS, TOOL_LABEL, DEFER_OPTIONS, Started, openEventSocket } = require('./calls');

/**
 * @typedef {object} Natives the native functions of one kind of handle
 * @property {string} prefix `mcplug_client` or `mcplug_manager`, for warnings
 * @property {string} what `client` or `manager`, for messages
 * @property {string} ended why the server requests still waiting at the end of the events are withdrawn
 * @property {Function} respond answers a server request (control lane)
 * @property {Function} cancelCall cancels a started call (JS thread)
 * @property {Function} close closes without freeing (control lane)
 * @property {Function} free frees (control lane)
 * @property {Function} eventFd a new descriptor of the event queue
 */

class Handle extends EventEmitter {
  /**
   * @param {bigint} handle the native handle, owned from now on
   * @param {object} handlers the host's handlers, by method
   * @param {Natives} natives
   */
  constructor(handle, handlers, natives) {
    super();
    this._handle = handle;
    this._natives = natives;
    this._handlers = { ...handlers };
    this._state = 'open';
    this._ops = new Set(); // blocking calls (threadpool) on this handle
    this._opWaiters = [];
    this._calls = new Map(); // call number -> Started, every started call not yet completed
    this._byTag = new Map(); // tag -> Set<onProgress> of the calls that want progress
    this._pendingRequests = new Map(); // request id -> {controller, server}, not yet answered
    this._closeReason = null;
    this._closedEmitted = false;
    this._shutdownPromise = null;
    this._draining = false;
    this._drainAgain = false;
    this._eventsEnded = false;
    this._pollTimer = null;
    this._eventSocket = null;
  }

  /** Watches the event descriptor: `_drain` runs whenever events wait. */
  _watchEvents() {
    this._eventSocket = openEventSocket(this._handle, () => this._drain(), this._natives.eventFd);
    this._eventSocket.on('error', (e) => {
      // Never seen; but without wake-ups no call would settle: poll instead, until the end.
      process.emitWarning(`mcplug: the ${this._natives.what}'s event descriptor failed (${e && e.message}); polling for events every ${FALLBACK_POLL_MS} ms`, 'McplugWarning');
      if (this._pollTimer === null && !this._eventsEnded) this._pollTimer = setInterval(() => this._drain(), FALLBACK_POLL_MS);
      this._drain();
    });
  }

  /** 'open' until close() (or the end of the connection), then 'closing', then 'closed'. */
  get state() { return this._state; }

  /** Answers a server request event (one without a handler) with a result. */
  async respond(id, result = {}) {
    checkString(id, 'id');
    await this._control('respond', this._natives.respond, [toJson({ id, result }, 'result')]);
    this._pendingRequests.delete(id);
  }

  /** Answers a server request event with a JSON-RPC error `{code, message, data?}`. */
  async respondError(id, error) {
    checkString(id, 'id');
    if (!error || typeof error !== 'object') throw errorOf('invalid_argument', '`error` must be {code, message}');
    const body = { code: Number.isInteger(error.code) ? error.code : -32603, message: String(error.message ?? 'error') };
    if (error.data !== undefined) body.data = error.data;
    await this._control('respond', this._natives.respond, [toJson({ id, error: body }, 'error')]);
    this._pendingRequests.delete(id);
  }

  /** Closes and frees the handle; every server process of it is gone when this resolves. */
  close() {
    return this._shutdown(`the ${this._natives.what} was closed by the host`);
  }

  // -- internals -------------------------------------------------------------------------------

  _closedError(label) {
    const why = this._closeReason || `the ${this._natives.what} is closed`;
    return errorOf('closed', label ? `${label}: ${why}` : why);
  }

  _checkOpen(label) {
    if (this._state !== 'open') throw this._closedError(label);
  }

  /** Whether the next started call is deferred (see Client); never, unless a subclass says so. */
  _deferNext() {
    return false;
  }

  /**
   * Starts a call (synchronously: the library only writes, or queues the write) and returns the
   * promise its completion event settles. `fn` is a call_tool_start or request_start.
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

  /**
   * A tool call as a started call (Client.callTool, Manager.callTool; `fn` is the handle's
   * call_tool_start, `what` the name's argument name). Not `async`: a bad argument still
   * rejects (never throws), and the hot path saves the wrapper promise.
   */
  _callTool(fn, what, name, args, options) {
    try {
      checkString(name, what);
      const argsJson = args === undefined ? '{}' : optionalObject(args, 'arguments');
      if (options === undefined || options === null) return this._start(fn, TOOL_LABEL, name, argsJson, NO_OPTIONS, null);
      const { timeoutMs, tag, signal, onProgress, resetTimeoutOnProgress, maxTotalTimeoutMs } = options;
      let extra = null;
      if (resetTimeoutOnProgress) extra = { reset_timeout_on_progress: true };
      const maxTotal = timeoutValue(maxTotalTimeoutMs, 'maxTotalTimeoutMs');
      if (maxTotal !== undefined) (extra || (extra = {})).max_total_timeout_ms = maxTotal;
      extra = formatOption(taskAndSchemaOptions(extra, options), options);
      return this._start(fn, TOOL_LABEL, name, argsJson, { timeoutMs, tag, signal, onProgress }, extra);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Cancels a started call of ours (see Started.cancel). */
  _cancelStarted(call) {
    const status = this._natives.cancelCall(this._handle, call, textOut);
    const text = takeText();
    if (status !== Status.OK && status !== Status.CLOSED) {
      process.emitWarning(`mcplug: ${this._natives.prefix}_cancel_call failed: ${errorFromNative(status, text).message}`, 'McplugWarning');
    }
  }

  /** A blocking call on the work lane, cancellable by its tag; `buildArgs(optionsJson)` gives the arguments after the handle. */
  async _work(label, fn, { timeoutMs, tag, signal, onProgress, extra = {} }, buildArgs) {
    this._checkOpen(label);
    const limit = timeoutValue(timeoutMs, 'timeoutMs');
    const callTag = tag === undefined ? internalTag() : checkString(tag, 'tag');
    if (onProgress !== undefined && typeof onProgress !== 'function') throw errorOf('invalid_argument', '`onProgress` must be a function');
    const op = new Op(callTag, label);
    const base = { ...extra, tag: callTag, cancel_token: op.token };
    if (limit !== undefined) base.timeout_ms = limit;
    if (onProgress) base.progress = true;
    if (onProgress) {
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

  /** A short blocking call on the control lane (it cannot be cancelled, only closed). */
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

  /** Progress of a call of ours: to its onProgress callbacks (`args` after the params). */
  _progress(tag, params, ...args) {
    const set = this._byTag.get(tag);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        fn(params, ...args);
      } catch (e) {
        this._reportHandlerError(e, 'onProgress');
      }
    }
  }

  /** A notification's handler, sync or async; what it throws is reported, never raised. */
  _notifyHandler(method, ...args) {
    const handler = this._handlers[method];
    if (!handler) return;
    try {
      const r = handler(...args);
      if (r && typeof r.then === 'function') r.then(undefined, (e) => this._reportHandlerError(e, method));
    } catch (e) {
      this._reportHandlerError(e, method);
    }
  }

  _emitClosed(info) {
    if (this._closedEmitted) return;
    this._closedEmitted = true;
    this._emitSafe('closed', info);
  }

  /**
   * A server request the host need not answer any more (expired, cancelled, its connection
   * closed): its handler's signal aborts, and whatever the handler returns later is dropped.
   */
  _withdrawRequest(id, why) {
    const pending = this._pendingRequests.get(id);
    if (pending === undefined) return;
    this._pendingRequests.delete(id);
    pending.controller.abort(errorOf('cancelled', why));
  }

  /** Whether a failed answer only says that nobody waits for it (the connection is gone). */
  _answerGone(e) {
    return e instanceof McpError && e.kind === 'closed';
  }

  /** Sends the answer to a server request; an answer nobody waits for any more is dropped. */
  async _answer(id, method, text) {
    if (this._state !== 'open') return;
    try {
      await this._control('respond', this._natives.respond, [text]);
    } catch (e) {
      const withdrawn = !this._pendingRequests.has(id);
      if (this._state === 'open' && !withdrawn && !this._answerGone(e)) {
        this._reportHandlerError(e, `${method} (answering the server)`);
      }
    } finally {
      this._pendingRequests.delete(id);
    }
  }

  /**
   * Every event was delivered and the queue is closed: no more events will come. The server
   * requests waiting are withdrawn, `_eventsEnding` lets a subclass finish its own, a started
   * call whose completion never came still settles (exactly once), and a handle whose end came
   * by itself (the server exited) is released now.
   */
  _endOfEvents() {
    if (this._eventsEnded) return;
    this._eventsEnded = true;
    for (const id of [...this._pendingRequests.keys()]) this._withdrawRequest(id, this._natives.ended);
    this._eventsEnding();
    if (this._calls.size > 0) {
      const err = this._closedError();
      for (const rec of [...this._calls.values()]) rec.settle(undefined, err);
    }
    if (this._eventSocket !== null) this._eventSocket.destroy(); // our own dup: the process may exit once nothing else runs
    if (this._pollTimer !== null) clearInterval(this._pollTimer);
    this._pollTimer = null;
    if (!this._shutdownPromise) this._shutdown(this._endReason()).catch(() => {});
  }

  /** Why the events ended, for the shutdown that starts then. */
  _endReason() {
    return this._natives.ended;
  }

  /** A subclass's part of the end of the events (see _endOfEvents). */
  _eventsEnding() {}

  /** A subclass's part of the start of a shutdown, before anything waits. */
  _shutdownStarting() {}

  /**
   * 1. Blocking calls still waiting in the JS queue never reach the library. 2. Close without
   * freeing (off the loop: it waits for every server process to go); calls inside the library
   * return CLOSED at once, one entering late finds a closed but valid handle, and every started
   * call gets its completion event, queued before the final `closed` one. 3. Those events, now.
   * 4. Free only once nothing of ours is inside the library for this handle.
   */
  _shutdown(reason) {
    if (this._shutdownPromise) return this._shutdownPromise;
    this._state = 'closing';
    this._closeReason = reason;
    this._shutdownStarting();
    this._shutdownPromise = (async () => {
      const handle = this._handle;
      for (const op of this._ops) {
        if (op.queued) op.queued.withdraw(this._closedError(op.label));
      }
      if (handle) {
        try {
          await controlGateRun(() => callAsync(this._natives.close, [handle]));
        } catch (e) {
          process.emitWarning(`mcplug: ${this._natives.prefix}_close failed: ${e && e.message}`, 'McplugWarning');
        }
        this._drain();
      }
      this._endOfEvents();
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
      if (handle) await controlGateRun(() => callAsync(this._natives.free, [handle], false));
      this._state = 'closed';
      this._emitClosed({ reason });
    })();
    return this._shutdownPromise;
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  Handle.prototype[Symbol.asyncDispose] = function asyncDispose() {
    return this.close();
  };
}

module.exports = { Handle };
