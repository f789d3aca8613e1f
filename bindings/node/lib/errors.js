'use strict';
// The C ABI's statuses and error kinds, McpError, and turning a status and its text into a
// value or an error.

const { native } = require('./native');

/**
 * The library's one table of error kinds (`mcplug_error_kinds`): `[{kind, status, meaning}]`, in
 * status order. Status, ERROR_KINDS and the kind of a status are made from it, not kept by hand.
 */
const ERROR_TABLE = Object.freeze(JSON.parse(native.error_kinds()).map((e) => Object.freeze(e)));

/** `mcplug_status` values, fixed by the C ABI: `Status.TIMEOUT === 2`. */
const Status = Object.freeze(Object.fromEntries([['OK', 0], ...ERROR_TABLE.map((e) => [e.kind.toUpperCase(), e.status])]));

/** Every error kind, in status order. */
const ERROR_KINDS = Object.freeze(ERROR_TABLE.map((e) => e.kind));
const KIND_BY_STATUS = ['ok'];
for (const e of ERROR_TABLE) KIND_BY_STATUS[e.status] = e.kind;

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

function cancelledError(label) {
  return errorOf('cancelled', `${label} was cancelled by the host`);
}

module.exports = {
  ERROR_TABLE,
  Status,
  ERROR_KINDS,
  McpError,
  errorOf,
  decode,
  errorFromNative,
  cancelledError,
};
