'use strict';
// The C ABI's statuses and error kinds, McpError, and turning a status and its text into a
// value or an error.


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
  Status,
  ERROR_KINDS,
  McpError,
  errorOf,
  decode,
  errorFromNative,
  cancelledError,
};
