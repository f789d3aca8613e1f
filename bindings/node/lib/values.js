'use strict';
// Checking arguments and options, and turning them into the JSON the library reads.

const { errorOf } = require('./errors');

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

/** The capabilities whose members merge one level deep (`elicitation: {url: true}` adds URL mode
 *  to the form mode an elicitation handler declared). */
const NESTED_CAPABILITIES = new Set(['sampling', 'elicitation', 'roots']);

/**
 * The host's capabilities from each explicit source in order (later wins), one object for the
 * library, which declares what the handlers imply and merges these over it. `true` stands for
 * `{}` and `false` declares nothing, at the top level and one level down (the library
 * normalizes both and checks the spec shapes).
 */
function mergeCapabilities(...explicit) {
  const out = {};
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

const FORMATS = ['mcp', 'anthropic', 'openai'];

/** The option `format` of tool calls and tool listings ('mcp', 'anthropic', 'openai'), added to
 *  `extra` (created if null). */
function formatOption(extra, { format }) {
  if (format !== undefined && format !== null) {
    if (!FORMATS.includes(format)) {
      throw errorOf('invalid_argument', `\`format\` must be 'mcp', 'anthropic' or 'openai' (got ${JSON.stringify(format)})`);
    }
    (extra || (extra = {})).format = format;
  }
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

module.exports = {
  formatOption,
  toJson,
  handlerAnswer,
  answerText,
  checkString,
  optionalObject,
  checkPlainObject,
  timeoutValue,
  mergeCapabilities,
  LOG_LEVELS,
  checkLogLevel,
  checkBoolean,
  checkCount,
  taskAndSchemaOptions,
  cacheOption,
  NAMED_NOTIFICATIONS,
  snakeKeys,
  checkHandlers,
  hostToolResult,
};
