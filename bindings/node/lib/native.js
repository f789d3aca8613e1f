'use strict';
// Loading libmcplug (koffi), its functions, the threadpool hop (callAsync), the gates that bound
// the threadpool's use, and the reused out-parameter slots of the synchronous calls.

const fs = require('fs');
const path = require('path');
const koffi = require('koffi');

/** The ABI this binding was written for; a library reporting another one is refused. */
const ABI_VERSION = 1;

/** How many events one `mcplug_client_take_events` (or `mcplug_manager_next_events`) takes. */
const EVENT_BATCH = 256;
/** How often events are pulled if the event descriptor ever fails. */
const FALLBACK_POLL_MS = 10;

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
  const pkg = path.join(__dirname, '..'); // the package's folder (lib/ is in it)
  const candidates = [
    path.join(pkg, file),
    path.join(pkg, '..', '..', 'target', 'release', file),
    path.join(pkg, '..', '..', 'target', 'debug', file),
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
  error_kinds: lib.func('mcplug_error_kinds', 'str', []),
  cancel: lib.func('mcplug_cancel', 'int', ['str']),
  cancel_token_new: lib.func('mcplug_cancel_token_new', 'int', [RawOut]),
  cancel_token_cancel: lib.func('mcplug_cancel_token_cancel', 'int', ['uint64']),
  cancel_token_free: lib.func('mcplug_cancel_token_free', 'int', ['uint64']),
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
  config_approve: lib.func('mcplug_config_approve', 'int', ['str', OutString]),
  config_reset_project_choices: lib.func('mcplug_config_reset_project_choices', 'int', ['str', OutString]),
};

// The manager (many servers, one tool pool). Tool calls are started calls (call_tool_start,
// cancel_call), made from the JS thread like the Client's. Calls that wait (connect may stop
// servers, the resource and prompt calls, request, respond, reconnect, set_enabled, close, free)
// go to the threadpool with `.async`; those that only read or change the manager's state
// (status, list_tools, search_tools, set_tools, next_events, event_fd) are made from the JS thread.
const ManagerHandle = koffi.pointer(koffi.opaque());
const OutManagerHandle = koffi.out(koffi.pointer(ManagerHandle));
// A manager's pool being served (mcplug_manager_serve, mcplug_server_*).
const ServerHandle = koffi.pointer(koffi.opaque());
const OutServerHandle = koffi.out(koffi.pointer(ServerHandle));

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
  // Serving the pool as one MCP server.
  serve: optionalFunc('mcplug_manager_serve', 'int', [ManagerHandle, 'str', OutServerHandle, OutString]),
  server_close: optionalFunc('mcplug_server_close', 'int', [ServerHandle, OutString]),
  server_free: optionalFunc('mcplug_server_free', 'void', [ServerHandle]),
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
/** Where mcplug_cancel_token_new writes a token. */
const tokenOut = new BigUint64Array(1);

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

/** Runs `fn` holding a slot of the control lane (close and free wait there too). */
async function controlGateRun(fn) {
  const ticket = controlGate.acquire();
  await ticket.ready;
  try {
    return await fn();
  } finally {
    controlGate.release();
  }
}

module.exports = {
  ABI_VERSION,
  EVENT_BATCH,
  FALLBACK_POLL_MS,
  libraryPath,
  native,
  mnative,
  callAsync,
  threadpoolSize,
  workLimit,
  workGate,
  controlGate,
  textOut,
  callOut,
  fdOut,
  tokenOut,
  lenOut,
  stdoutBuf,
  takeCall,
  takeLen,
  utf8Slice,
  takeText,
  controlGateRun,
};
