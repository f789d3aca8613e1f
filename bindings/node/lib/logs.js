'use strict';
// The library's log records, taken by the host.

const { EventEmitter } = require('events');
const { Status, errorOf, decode } = require('./errors');
const { native } = require('./native');
const { openEventSocket } = require('./calls');

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

module.exports = {
  LogCapture,
  captureLogs,
};
