// Type declarations for mcplug (Node binding of libmcplug). Every method that talks to the server
// returns a Promise; the event loop never waits for the library.

import { EventEmitter } from 'events';

/** A JSON value as it travels over MCP. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** The ABI version this binding was written for; the library must report the same. */
export declare const ABI_VERSION: 1;

/** Every error kind, in the order of the C ABI's status numbers (1..14). */
export declare const ERROR_KINDS: readonly ErrorKind[];

export type ErrorKind =
  | 'invalid_argument'
  | 'timeout'
  | 'cancelled'
  | 'closed'
  | 'transport'
  | 'protocol'
  | 'rpc'
  | 'needs_auth'
  | 'denied'
  | 'config'
  | 'panic'
  | 'not_found'
  | 'not_implemented'
  /** A tool's structuredContent does not match its outputSchema; `data` has `tool`, `errors`, `result`. */
  | 'invalid_result';

/** `mcplug_status` values of the C ABI. */
export declare const Status: Readonly<{
  OK: 0;
  INVALID_ARGUMENT: 1;
  TIMEOUT: 2;
  CANCELLED: 3;
  CLOSED: 4;
  TRANSPORT: 5;
  PROTOCOL: 6;
  RPC: 7;
  NEEDS_AUTH: 8;
  DENIED: 9;
  CONFIG: 10;
  PANIC: 11;
  NOT_FOUND: 12;
  NOT_IMPLEMENTED: 13;
  INVALID_RESULT: 14;
}>;

/** The path of the libmcplug actually loaded. */
export declare const libraryPath: string;
/** The libuv threadpool size this module assumed (UV_THREADPOOL_SIZE; 16 unless the user set it).
 *  Only blocking calls use it (connect, listTools, `allPages` requests, notify, respond, close). */
export declare const threadpoolSize: number;
/** How many long blocking calls (connect, listTools, `allPages` requests) may occupy threadpool threads
 *  at once; more wait in a JS queue. Tool calls and other requests hold no thread. */
export declare const workLimit: number;

/** Every failure of a call: `kind` says what happened; `code`/`data` come from a JSON-RPC error. */
export declare class McpError extends Error {
  constructor(message: string, details?: { kind: ErrorKind; code?: number; data?: unknown; status?: number; cause?: unknown });
  readonly name: 'McpError';
  readonly kind: ErrorKind;
  /** The C status number of the kind. */
  readonly status: number | undefined;
  /** The JSON-RPC error code (kind 'rpc'). */
  readonly code?: number;
  /** The JSON-RPC error data (kind 'rpc'), if the server sent any. */
  readonly data?: unknown;
}

/** One server entry in the Claude Code format: stdio when `type` is absent. */
export interface ServerConfig {
  command?: string;
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
  name?: string;
  type?: 'stdio' | 'http' | 'sse' | 'ws';
  url?: string;
  headers?: Record<string, string>;
  [key: string]: unknown;
}

/** A limit in milliseconds; `null` or `Infinity` means no limit. */
export type TimeoutMs = number | null;

export interface HandlerContext {
  /** The method of the server's message. */
  method: string;
  /** The event id of a server request (absent for notifications). */
  id?: string;
  client: Client;
}

/** Answers a server request (its return value is the result; a throw becomes a JSON-RPC error,
 *  with the thrown error's integer `code` if it has one, else -32603), or observes a notification. */
export type Handler = (params: JsonObject, context: HandlerContext) => unknown | Promise<unknown>;

export interface Handlers {
  'sampling/createMessage'?: Handler;
  'elicitation/create'?: Handler;
  'roots/list'?: Handler;
  /** Any other server request or notification method, e.g. 'notifications/message'. */
  [method: string]: Handler | undefined;
}

export interface ConnectOptions {
  /** Server requests and notifications by method. A handler for sampling, elicitation or roots
   *  declares the matching client capability. */
  handlers?: Handlers;
  /** Default 30000. */
  connectTimeoutMs?: TimeoutMs;
  /** Default limit of non-tool requests; default 60000. */
  requestTimeoutMs?: TimeoutMs;
  /** Default limit of tool calls; default none. */
  toolTimeoutMs?: TimeoutMs;
  /** How long a server request may wait for the host's answer; default 60000. */
  hostRequestTimeoutMs?: TimeoutMs;
  clientInfo?: { name: string; version: string; [key: string]: unknown };
  /** Roots answered to `roots/list` automatically (declares the roots capability). */
  roots?: Array<{ uri: string; name?: string }>;
  /** Raw connection options of the C ABI (snake_case: `capabilities`, `protocol_versions`,
   *  `max_message_bytes`, `max_events`, `shutdown_grace_ms`, ...); the named options above win. */
  options?: Record<string, unknown>;
  /** Aborts the connect (McpError kind 'cancelled'); no process is left running. */
  signal?: AbortSignal;
  /** A tag for `cancel(tag)`; by default a unique internal one. */
  tag?: string;
}

export interface CallOptions {
  /** This call's limit; by default the connection's. `null`/`Infinity`: none. For a blocking call
   *  (listTools, `allPages`), time spent waiting for a free worker thread counts. */
  timeoutMs?: TimeoutMs;
  /** A tag for `cancel(tag)`; none by default (`signal` needs none). */
  tag?: string;
  /** Aborting rejects the call with kind 'cancelled' and sends notifications/cancelled. */
  signal?: AbortSignal;
}

export interface ProgressParams {
  progress: number;
  total?: number;
  message?: string;
  progressToken: string | number;
  [key: string]: unknown;
}

export interface CallToolOptions extends CallOptions {
  /** Asks the server for progress; each notification the server sends before its result is
   *  delivered here before the promise settles. */
  onProgress?: (params: ProgressParams) => void;
  /** Restart the timeout on each progress notification. */
  resetTimeoutOnProgress?: boolean;
  /** A hard limit that progress does not extend. */
  maxTotalTimeoutMs?: TimeoutMs;
}

export interface RequestOptions extends CallOptions {
  /** For list methods: follow nextCursor and return every item. */
  allPages?: boolean;
  onProgress?: (params: ProgressParams) => void;
}

export interface Tool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: JsonObject;
  outputSchema?: JsonObject;
  annotations?: JsonObject;
  [key: string]: unknown;
}

export type ContentBlock =
  | { type: 'text'; text: string; annotations?: JsonObject; [key: string]: unknown }
  | { type: 'image'; data: string; mimeType: string; annotations?: JsonObject; [key: string]: unknown }
  | { type: 'audio'; data: string; mimeType: string; annotations?: JsonObject; [key: string]: unknown }
  | { type: 'resource_link'; uri: string; name: string; description?: string; mimeType?: string; [key: string]: unknown }
  | { type: 'resource'; resource: { uri: string; mimeType?: string; text?: string; blob?: string; [key: string]: unknown }; [key: string]: unknown };

/** The server's CallToolResult, untouched. */
export interface CallToolResult {
  content: ContentBlock[];
  structuredContent?: JsonObject;
  isError?: boolean;
  _meta?: JsonObject;
  [key: string]: unknown;
}

/** What `mcplug_client_connect` returned. */
export interface ConnectResult {
  name: string | null;
  era: 'modern' | 'legacy';
  protocol_version: string;
  server_info: { name: string; version: string; title?: string; [key: string]: unknown };
  capabilities: JsonObject;
  instructions: string | null;
  /** The server's raw initialize (or discover) result. */
  result: JsonObject;
  supported_versions?: string[];
  [key: string]: unknown;
}

export interface Notification {
  method: string;
  params: JsonObject;
  /** The tag of the call a progress notification belongs to. */
  tag?: string;
}

export interface ServerRequest {
  /** The event id to pass to respond()/respondError(). */
  id: string;
  method: string;
  params: JsonObject;
}

/** A raw event from the library's event queue (the `completion` events of calls settle their
 *  promises and are not emitted). */
export type RawEvent =
  | { type: 'request'; id: string; method: string; params?: JsonObject }
  | { type: 'notification'; method: string; params?: JsonObject; tag?: string }
  | { type: 'stderr'; line: string }
  | { type: 'invalid_message'; error: string; line: string }
  | { type: 'request_expired'; id: string; method: string }
  | { type: 'overflow'; dropped: number }
  | { type: 'closed'; reason: string; kind?: ErrorKind }
  | { type: string; [key: string]: unknown };

export interface ClientEvents {
  /** Every raw event, before the specific ones below. */
  event: [event: RawEvent];
  notification: [notification: Notification];
  /** A server request with no handler: answer it with respond()/respondError(). Without a
   *  listener (and without a handler) it is answered -32601. */
  request: [request: ServerRequest];
  stderr: [line: string];
  invalidMessage: [info: { error: string; line: string }];
  overflow: [dropped: number];
  requestExpired: [info: { id: string; method: string }];
  /** Once, when the connection ends (server exit or close()). */
  closed: [info: { reason: string; kind?: ErrorKind }];
  /** A notification handler, listener or onProgress threw (else a process warning is emitted). */
  handlerError: [error: unknown, where: string];
}

export declare class Client extends EventEmitter {
  /** Starts (or reaches) one MCP server and negotiates the protocol. */
  static connect(server: ServerConfig, options?: ConnectOptions): Promise<Client>;
  private constructor();

  readonly name: string | null;
  readonly serverInfo: ConnectResult['server_info'];
  readonly protocolVersion: string;
  readonly era: 'modern' | 'legacy';
  readonly capabilities: JsonObject;
  readonly instructions: string | null;
  readonly connectResult: ConnectResult;
  /** 'open' until close() or the end of the connection, then 'closing', then 'closed'. */
  readonly state: 'open' | 'closing' | 'closed';

  /** Every tool, all pages followed. */
  listTools(options?: CallOptions): Promise<Tool[]>;
  /** Calls a tool; an `isError: true` result resolves (it is the tool's answer). */
  callTool(name: string, args?: JsonObject | null, options?: CallToolOptions): Promise<CallToolResult>;
  /** Any request (`resources/read`, `prompts/get`, `completion/complete`, ...); resolves with the raw result. */
  request<T = JsonObject>(method: string, params?: JsonObject | null, options?: RequestOptions): Promise<T>;
  /** Sends a notification. */
  notify(method: string, params?: JsonObject | null): Promise<void>;
  /** Answers a server request (from a 'request' event) with a result. */
  respond(id: string, result?: unknown): Promise<void>;
  /** Answers a server request with a JSON-RPC error. */
  respondError(id: string, error: { code: number; message: string; data?: unknown }): Promise<void>;
  /** Closes the connection and frees the handle; calls in flight fail with kind 'closed'. When it
   *  resolves the server and its children are gone. Idempotent. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;

  on<E extends keyof ClientEvents>(event: E, listener: (...args: ClientEvents[E]) => void): this;
  once<E extends keyof ClientEvents>(event: E, listener: (...args: ClientEvents[E]) => void): this;
  off<E extends keyof ClientEvents>(event: E, listener: (...args: ClientEvents[E]) => void): this;
  addListener<E extends keyof ClientEvents>(event: E, listener: (...args: ClientEvents[E]) => void): this;
  removeListener<E extends keyof ClientEvents>(event: E, listener: (...args: ClientEvents[E]) => void): this;
  emit<E extends keyof ClientEvents>(event: E, ...args: ClientEvents[E]): boolean;
}

/** Cancels every in-flight (or queued) call carrying `tag`; true if one was found. */
export declare function cancel(tag: string): boolean;
/** The library's version, e.g. "0.1.0". */
export declare function version(): string;
/** The loaded library's ABI version (equals ABI_VERSION). */
export declare function abiVersion(): number;
