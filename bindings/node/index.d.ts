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
  /** The connection is closed: the server exited, or the handle was closed. Also every call in a
   *  process forked after mcplug started (`data.reason` `'forked'`); Node itself never forks a
   *  live process — `child_process.fork` and `cluster` start fresh ones, which work. */
  | 'closed'
  | 'transport'
  | 'protocol'
  | 'rpc'
  | 'needs_auth'
  /** Refused, though everything worked: the host answered the server's input request with an error
   *  (a handler threw: `code`/`data` are the handler's), the server left a subscription out of its
   *  acknowledgement, or a limit of the library (a skill over 512 files or 16 MiB). */
  | 'denied'
  | 'config'
  | 'panic'
  | 'not_found'
  | 'not_implemented'
  /** A tool's structuredContent does not match its outputSchema; `data` has `tool`, `errors`
   *  (`[{message, instance_path, schema_path}]`) and the untouched `result`. */
  | 'invalid_result';

/** `mcplug_status` values of the C ABI (made at load from the library's `mcplug_error_kinds`). */
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

/** The levels of `notifications/message`, lowest first. */
export type LogLevel = 'debug' | 'info' | 'notice' | 'warning' | 'error' | 'critical' | 'alert' | 'emergency';
/** Every log level, lowest first. */
export declare const LOG_LEVELS: readonly LogLevel[];

/** The path of the libmcplug actually loaded. */
export declare const libraryPath: string;
/** The libuv threadpool size this module assumed (UV_THREADPOOL_SIZE; 16 unless the user set it).
 *  Only blocking calls use it (connect, listTools, `allPages` requests, notify, respond, close). */
export declare const threadpoolSize: number;
/** How many long blocking calls (connect, listTools, `allPages` requests; a Manager's resource,
 *  prompt, request and reconnect calls) may occupy threadpool threads at once; more wait in a JS
 *  queue. Tool calls (Client and Manager) and other Client requests hold no thread. */
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

/** CAs and a client certificate (paths, or `ca_pem` the PEM itself); see the README's
 *  "Company networks". */
export interface TlsOptions {
  ca_file?: string;
  ca_pem?: string;
  client_cert?: string;
  client_key?: string;
  client_key_passphrase?: string;
}

/** A transport by its own name (what status and listings show). */
export type Transport = 'stdio' | 'http' | 'sse' | 'ws' | 'sdk';
/** Every `type` a server entry may have: each transport's own name, then the aliases
 *  ('streamable-http' is http; Claude Code's IDE connections 'sse-ide' and 'ws-ide', with an
 *  `ideName`, are sse and ws). The library's one list (`Kind::TYPES`); tests/header.rs holds
 *  this to it. */
export type ServerType = Transport | 'streamable-http' | 'sse-ide' | 'ws-ide';

/** One server entry in the Claude Code format: stdio when `type` is absent. */
export interface ServerConfig {
  command?: string;
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
  name?: string;
  type?: ServerType;
  url?: string;
  headers?: Record<string, string>;
  /** A remote server's TLS: CAs trusted besides the system's store, a client certificate. */
  tls?: TlsOptions;
  /** A remote server's proxy (http://user:password@host:port), or false for none; over the
   *  environment's HTTPS_PROXY / HTTP_PROXY / ALL_PROXY / NO_PROXY. */
  proxy?: string | false;
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
  /** For a server request: aborts (with an McpError of kind 'cancelled' as its reason) when
   *  nobody waits for the answer any more — the host timer expired (`requestExpired`), the call
   *  that needed it was cancelled or the server cancelled its task (`requestCancelled`), or the
   *  connection closed. Whatever the handler returns after that is dropped. */
  signal?: AbortSignal;
}

/** Answers a server request (its return value is the result, which must be an object; a throw
 *  or rejection becomes a JSON-RPC error to the server, with the thrown error's integer `code`
 *  and its `data` if it has them, else -32603), or observes a notification. Sync or async. */
export type Handler<P = JsonObject, R = unknown> = (params: P, context: HandlerContext) => R | Promise<R>;

export type TextContent = { type: 'text'; text: string; [key: string]: unknown };
export type SamplingContent =
  | TextContent
  | { type: 'image' | 'audio'; data: string; mimeType: string; [key: string]: unknown }
  | { type: 'tool_use'; id: string; name: string; input: JsonObject; [key: string]: unknown }
  | { type: 'tool_result'; toolUseId: string; content: unknown[]; [key: string]: unknown };

/** `sampling/createMessage` params (legacy server request or modern input request alike). */
export interface CreateMessageParams {
  messages: Array<{ role: 'user' | 'assistant'; content: SamplingContent | SamplingContent[]; [key: string]: unknown }>;
  maxTokens: number;
  systemPrompt?: string;
  modelPreferences?: JsonObject;
  temperature?: number;
  stopSequences?: string[];
  includeContext?: 'none' | 'thisServer' | 'allServers';
  /** Present only when the connection declared `capabilities.sampling.tools`. */
  tools?: Tool[];
  toolChoice?: JsonObject;
  _meta?: JsonObject;
  [key: string]: unknown;
}

export interface CreateMessageResult {
  role: 'assistant';
  content: SamplingContent | SamplingContent[];
  model: string;
  stopReason?: 'endTurn' | 'stopSequence' | 'maxTokens' | 'toolUse' | string;
  [key: string]: unknown;
}

/** `elicitation/create` params: a form (the default mode) or a URL to send the user to. */
export type ElicitParams =
  | { mode?: 'form'; message: string; requestedSchema: JsonObject; _meta?: JsonObject; [key: string]: unknown }
  | { mode: 'url'; message: string; url: string; elicitationId: string; _meta?: JsonObject; [key: string]: unknown };

export interface ElicitResult {
  action: 'accept' | 'decline' | 'cancel';
  /** The form's answers (accept, form mode). With `elicitationDefaults`, the schema's defaults
   *  fill the fields left out. */
  content?: { [key: string]: string | number | boolean | string[] };
  [key: string]: unknown;
}

export interface Root {
  /** A `file://` URI. */
  uri: string;
  name?: string;
  [key: string]: unknown;
}

export interface ListRootsResult {
  roots: Root[];
  [key: string]: unknown;
}

/** `notifications/message` params (the 'log' event). */
export interface LogMessage {
  level: LogLevel;
  logger?: string;
  data: unknown;
  [key: string]: unknown;
}

/** `notifications/claude/channel` params (the 'channel' event), from a server that declared
 *  `experimental["claude/channel"]`. */
export interface ChannelMessage {
  content: string;
  meta?: Record<string, string>;
  [key: string]: unknown;
}

/** `notifications/claude/channel/permission` params (the 'channelPermission' event): the
 *  server's verdict on a `notifications/claude/channel/permission_request` the host sent with
 *  notify(). */
export interface ChannelPermission {
  request_id: string;
  behavior: 'allow' | 'deny' | string;
  [key: string]: unknown;
}

/** The `auth/authorize` request of an interactive OAuth flow (no token material in it). */
export interface AuthorizeParams {
  url: string;
  redirect_uri: string;
  issuer: string;
  scope?: string;
  server?: string;
  channel?: string;
}

export interface Handlers {
  /** Declares the `sampling` capability. */
  'sampling/createMessage'?: Handler<CreateMessageParams, CreateMessageResult>;
  /** Declares the `elicitation` capability (form mode; `capabilities.elicitation.url` adds URL mode). */
  'elicitation/create'?: Handler<ElicitParams, ElicitResult>;
  /** Declares the `roots` capability (`listChanged`); not called while the library holds roots
   *  (the `roots` option, setRoots()). */
  'roots/list'?: Handler<JsonObject, ListRootsResult>;
  /** OAuth: turns on `auth_interactive`. Called when a remote server needs the user to
   *  authorize: send them to `params.url` and resolve nothing (the library's listener at
   *  `redirect_uri` takes the callback), or resolve `{ callback_url }` with the redirect you
   *  captured; throwing declines (the connect fails with kind `needs_auth`). */
  'auth/authorize'?: (params: AuthorizeParams) => Promise<void | { callback_url: string }> | void | { callback_url: string };
  /** Any other server request or notification method, e.g. 'notifications/message'. */
  [method: string]: Handler<any, any> | undefined;
}

/** What the client declares it serves (merged over what the handlers imply, one level deep:
 *  `elicitation: {url: true}` adds URL mode to a handler's form mode). `true` stands for `{}`,
 *  `false` declares nothing. Tasks are the `tasks` option's, not a capability. */
export interface ClientCapabilities {
  sampling?: boolean | { tools?: boolean | JsonObject; context?: boolean | JsonObject; [key: string]: unknown };
  elicitation?: boolean | { form?: boolean | JsonObject; url?: boolean | JsonObject; [key: string]: unknown };
  roots?: boolean | { listChanged?: boolean };
  experimental?: JsonObject;
  extensions?: JsonObject;
  [key: string]: unknown;
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
  /** Roots answered to `roots/list` by the library (declares the roots capability with
   *  `listChanged`); setRoots() changes them. */
  roots?: Root[];
  /** What the client declares beyond (or instead of) what the handlers imply. */
  capabilities?: ClientCapabilities;
  /** Log messages at this level and above from the start (see setLogLevel()). */
  logLevel?: LogLevel;
  /** Default true: a tool call that becomes a task is awaited, and a legacy server may have the
   *  client run its sampling/elicitation as tasks (the same handlers answer). */
  tasks?: boolean;
  /** How many times one call may be asked for more input (InputRequiredResult, -32042) before
   *  it fails with kind 'protocol'; default 16. */
  maxInputRounds?: number;
  /** Default false: an accepted form elicitation gets the schema's `default`s where the
   *  handler's answer left a field out. */
  elicitationDefaults?: boolean;
  /** Default false: check every tool call's arguments against the tool's inputSchema (once
   *  listed) before sending; see CallToolOptions.validateArguments. */
  validateArguments?: boolean;
  /** Restricts negotiation, e.g. ['2025-11-25']. */
  protocolVersions?: string[];
  /** Raw connection options of the C ABI (snake_case: `capabilities`, `protocol_versions`,
   *  `max_message_bytes`, `max_events`, `max_list_bytes` (64 MiB: one listing of every page
   *  past it is a `denied` McpError), `shutdown_grace_ms`, the OAuth options `auth_store`,
   *  `auth_interactive`, ..., and `xaa_idp` `{issuer, client_id, client_secret?, callback_port?}`:
   *  the enterprise IdP of the servers whose entry says `oauth.xaa: true`); the named options
   *  above win.
   *  Among them `cache` (default true: keep the results a 2026-07-28 server marks cacheable,
   *  `ttlMs`/`cacheScope`, and answer from them while fresh) and `listen` (default "auto": a
   *  2026-07-28 connection opens its `subscriptions/listen` stream of list changes once events
   *  are pulled — always, since the client pumps them; true: at connect; false: never);
   *  `request('resources/subscribe', {uri})` adds to that stream. Its notifications come as
   *  'notification' events; an 'event' of type 'listening' (`{subscription, notifications,
   *  reopened}`) says the server acknowledged a stream (`reopened`: it follows one that ended,
   *  so changes may have been missed). */
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
  /** false: a cacheable request (2026-07-28 lists, `resources/read`) asks the server even when
   *  the connection's cache holds a fresh result (which the new one replaces). */
  cache?: boolean;
}

export interface ProgressParams {
  progress: number;
  total?: number;
  message?: string;
  progressToken: string | number;
  [key: string]: unknown;
}

/** How a tool call that may become a task is made: absent = a legacy tool listed as
 *  `taskSupport: "required"` is called as a task (a modern server decides itself) and awaited;
 *  true/'await' = ask a legacy server for a task, and await it; false = never ask; 'handle' =
 *  ask, and resolve with the task itself (CreateTaskResult) to follow with
 *  `request('tasks/get' | 'tasks/result' | 'tasks/cancel', {taskId})`. */
export type TaskMode = boolean | 'await' | 'handle';

export interface TaskAndSchemaOptions {
  task?: TaskMode;
  /** The task lifetime to ask for. */
  taskTtlMs?: number;
  /** Check the arguments against the tool's inputSchema before sending (kind
   *  'invalid_argument', with `data` `{tool, errors}`, and nothing is sent); default: the
   *  connection's option. Only for a tool seen in a tools/list. */
  validateArguments?: boolean;
}

/** A model API's shape of tools and results: 'mcp' (untouched, the default), 'anthropic'
 *  (Messages API tool definitions; a result as a tool_result block's `{content, is_error}`),
 *  'openai' (Chat Completions function tools; a result as the tool message). */
export type ModelFormat = 'mcp' | 'anthropic' | 'openai';

/** A tool result in the 'anthropic' or 'openai' format. */
export interface ModelToolResult {
  /** 'anthropic': the blocks of a tool_result (text, image, document); 'openai': the text. */
  content: Json[] | string;
  is_error: boolean;
  /** 'openai': 'tool'. */
  role?: 'tool';
}

export interface CallToolOptions extends CallOptions, TaskAndSchemaOptions {
  /** The result as a model API takes it (the checks run on the MCP result first). */
  format?: ModelFormat;
  /** Asks the server for progress; each notification the server sends before its result is
   *  delivered here before the promise settles. */
  onProgress?: (params: ProgressParams) => void;
  /** Restart the timeout on each progress notification. */
  resetTimeoutOnProgress?: boolean;
  /** A hard limit that progress does not extend. */
  maxTotalTimeoutMs?: TimeoutMs;
}

/** For `tools/call` through request(), the task and schema options of callTool() apply. */
export interface RequestOptions extends CallOptions, TaskAndSchemaOptions {
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

/** A `skills/list` / `skills/get` entry (SEP-2640), as the server sent it. */
export interface SkillEntry {
  /** The URI of the skill's SKILL.md. */
  uri: string;
  /** The SKILL.md frontmatter as JSON (`name` and `description` at least). */
  frontmatter: { name: string; description: string; [key: string]: unknown };
  /** Every file of the skill with its digest (`sha256:<hex>`) and size, or 'dynamic'. */
  resources: Array<{ uri: string; digest: string; size: number }> | 'dynamic';
  [key: string]: unknown;
}

/** What loadSkill() resolves with: the verified SKILL.md. */
export interface LoadedSkill {
  uri: string;
  name: string;
  frontmatter: JsonObject;
  /** The SKILL.md text. */
  text: string;
  /** False for a 'dynamic' skill (nothing to verify a digest against). */
  verified: boolean;
  /** The skill's files (from the entry it was loaded from), or 'dynamic'. */
  files: string[] | 'dynamic';
}

/** What readSkillFile() resolves with: one verified file (`text`, or `blob` in base64). */
export interface SkillFile {
  uri: string;
  mimeType?: string;
  text?: string;
  blob?: string;
  verified: boolean;
}

export type ContentBlock =
  | { type: 'text'; text: string; annotations?: JsonObject; [key: string]: unknown }
  | { type: 'image'; data: string; mimeType: string; annotations?: JsonObject; [key: string]: unknown }
  | { type: 'audio'; data: string; mimeType: string; annotations?: JsonObject; [key: string]: unknown }
  | { type: 'resource_link'; uri: string; name: string; description?: string; mimeType?: string; [key: string]: unknown }
  | { type: 'resource'; resource: { uri: string; mimeType?: string; text?: string; blob?: string; [key: string]: unknown }; [key: string]: unknown };

/** The server's CallToolResult, untouched. */
export interface Resource { uri: string; name: string; title?: string; description?: string; mimeType?: string; size?: number; [key: string]: unknown }
export interface ResourceTemplate { uriTemplate: string; name: string; title?: string; description?: string; mimeType?: string; [key: string]: unknown }
export interface ResourceContents { uri: string; mimeType?: string; text?: string; blob?: string; [key: string]: unknown }
export interface ReadResourceResult { contents: ResourceContents[]; [key: string]: unknown }
export interface PromptArgument { name: string; description?: string; required?: boolean; [key: string]: unknown }
export interface Prompt { name: string; title?: string; description?: string; arguments?: PromptArgument[]; [key: string]: unknown }
export interface PromptMessage { role: 'user' | 'assistant'; content: JsonObject; [key: string]: unknown }
export interface GetPromptResult { description?: string; messages: PromptMessage[]; [key: string]: unknown }
export type CompletionRef = { type: 'ref/prompt'; name: string } | { type: 'ref/resource'; uri: string };
export interface Completion { values?: string[]; total?: number; hasMore?: boolean; [key: string]: unknown }

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
  /** Aborts when nobody waits for the answer any more (see HandlerContext.signal). */
  signal: AbortSignal;
}

/** A schema the library cannot use (the 'warning' event). */
export interface Warning {
  reason: 'invalid_schema' | string;
  tool?: string;
  schema?: 'outputSchema' | 'inputSchema';
  message: string;
  [key: string]: unknown;
}

/** A raw event from the library's event queue (the `completion` events of calls settle their
 *  promises and are not emitted). */
export type RawEvent =
  | { type: 'request'; id: string; method: string; params?: JsonObject }
  | { type: 'notification'; method: string; params?: JsonObject; tag?: string }
  | { type: 'stderr'; line: string }
  | { type: 'invalid_message'; error: string; line: string }
  | { type: 'request_expired'; id: string; method: string }
  | { type: 'request_cancelled'; id: string; method: string; reason: string }
  | { type: 'warning'; reason: string; message: string; [key: string]: unknown }
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
  /** A server request the host did not answer in time (`hostRequestTimeoutMs`): the server (or
   *  the call) got an error; the handler's signal aborted. */
  requestExpired: [info: { id: string; method: string }];
  /** A server request nobody waits for any more (the call was cancelled, the server cancelled
   *  its task): close whatever was shown to the user; the handler's signal aborted. */
  requestCancelled: [info: { id: string; method: string; reason: string }];
  /** Something the library could not use, e.g. a tool's schema that does not compile. */
  warning: [warning: Warning];
  /** A `notifications/message` (after the 'notification' event). */
  log: [message: LogMessage];
  /** A `notifications/claude/channel` from a server that declared the channel. */
  channel: [message: ChannelMessage];
  /** A `notifications/claude/channel/permission`. */
  channelPermission: [verdict: ChannelPermission];
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
  listTools(options?: CallOptions & { format?: 'mcp' }): Promise<Tool[]>;
  /** Each tool as that model API's tool definition. */
  listTools(options: CallOptions & { format: ModelFormat }): Promise<JsonObject[]>;
  /** The skills extension (SEP-2640): every `skills/list` entry, as the server sent it; each is
   *  held for loadSkill() and no skill file is read. Kind 'not_found' when the server does not
   *  declare `io.modelcontextprotocol/skills`. */
  listSkills(options?: CallOptions): Promise<SkillEntry[]>;
  /** `skills/get`: the entry of the skill at `uri` (listed or not), held from now on. */
  getSkill(uri: string, options?: CallOptions): Promise<SkillEntry>;
  /** Loads a skill: its SKILL.md is read now and verified against the held entry (size, SHA-256
   *  digest, frontmatter field by field; `skills/get` first when none is held). A mismatch
   *  rejects with kind 'invalid_result' (`data.check`: 'size' | 'digest' | 'frontmatter');
   *  'protocol' for an invalid entry, 'denied' for one over the limits (512 files, 16 MiB). */
  loadSkill(uri: string, options?: CallOptions): Promise<LoadedSkill>;
  /** Reads one file of a loaded skill (its URI, or a path relative to the skill's directory),
   *  verified against the entry the skill was loaded from; a file that entry does not list is
   *  refused unread ('invalid_result', `data.check` 'unlisted'); 'not_found' when not loaded. */
  readSkillFile(skill: string, file: string, options?: CallOptions): Promise<SkillFile>;
  /** Calls a tool; an `isError: true` result resolves (it is the tool's answer). */
  callTool(name: string, args?: JsonObject | null, options?: CallToolOptions & { format?: 'mcp' }): Promise<CallToolResult>;
  callTool(name: string, args: JsonObject | null | undefined, options: CallToolOptions & { format: ModelFormat }): Promise<ModelToolResult | CallToolResult>;
  /** Every resource (`resources/list`, all pages followed). */
  listResources(options?: CallOptions): Promise<Resource[]>;
  /** Every resource template (`resources/templates/list`, all pages followed). */
  listResourceTemplates(options?: CallOptions): Promise<ResourceTemplate[]>;
  /** `resources/read`: the raw result. */
  readResource(uri: string, options?: CallOptions): Promise<ReadResourceResult>;
  /** Every prompt (`prompts/list`, all pages followed). */
  listPrompts(options?: CallOptions): Promise<Prompt[]>;
  /** `prompts/get`: the raw result. */
  getPrompt(name: string, args?: { [name: string]: string } | null, options?: CallOptions): Promise<GetPromptResult>;
  /** `completion/complete` for one argument of a prompt or a resource template; `context`: the
   *  arguments already given. Resolves the result's `completion`. Kind 'invalid_argument' for a
   *  malformed ref or argument. */
  complete(ref: CompletionRef, argument: { name: string; value: string },
    options?: CallOptions & { context?: { [name: string]: string } | null }): Promise<Completion>;
  /** `ping`: resolves once the server answered. */
  ping(options?: CallOptions): Promise<void>;
  /** Asks for `notifications/resources/updated` of `uri` ('notification' events). */
  subscribe(uri: string, options?: CallOptions): Promise<void>;
  /** Undoes subscribe(). */
  unsubscribe(uri: string, options?: CallOptions): Promise<void>;
  /** Any request (`resources/read`, `prompts/get`, `completion/complete`, ...); resolves with the raw result. */
  request<T = JsonObject>(method: string, params?: JsonObject | null, options?: RequestOptions): Promise<T>;
  /** Sends a notification. */
  notify(method: string, params?: JsonObject | null): Promise<void>;
  /** Answers a server request (from a 'request' event) with a result. */
  respond(id: string, result?: unknown): Promise<void>;
  /** Answers a server request with a JSON-RPC error. */
  respondError(id: string, error: { code: number; message: string; data?: unknown }): Promise<void>;
  /** Sets the roots the library answers `roots/list` with from now on (`null`: hand it back to the
   *  'roots/list' handler or 'request' listener). A legacy server whose connection declared
   *  `roots.listChanged` is notified; a modern one asks per request. Needs the roots capability. */
  setRoots(roots: Root[] | { roots: Root[] } | null): Promise<{ notified: boolean }>;
  /** Asks for log messages at `level` and above ('log' events). Legacy: `logging/setLevel`, awaited;
   *  modern: the level rides every later request. */
  setLogLevel(level: LogLevel): Promise<{ level: LogLevel; sent: 'logging/setLevel' | 'per request' }>;
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

/** One of the library's log records (see captureLogs). */
export interface LogRecord {
  type: 'log';
  level: 'trace' | 'debug' | 'info' | 'warn' | 'error';
  /** `mcplug::client` (connects, requests, ends), `mcplug::wire` (every message), or a module's path. */
  target: string;
  message: string;
  fields: { [name: string]: Json };
  /** When it was logged, in ms since the epoch. */
  timeMs: number;
  thread: string;
}
/** Said when the capture's queue overflowed: this many records were dropped (the oldest). */
export interface LogOverflow { type: 'overflow'; dropped: number }

export interface LogCaptureEvents {
  record: [record: LogRecord | LogOverflow];
  /** The capture ended (stop(), or another part of the process released it). */
  end: [];
}

/** A running capture of the library's log records (one per process). */
export declare class LogCapture extends EventEmitter {
  private constructor();
  readonly filter: string;
  readonly maxRecords: number;
  readonly stopped: boolean;
  /** Ends the capture: the records already queued are emitted first, then 'end'. Idempotent. */
  stop(): void;
  on<E extends keyof LogCaptureEvents>(event: E, listener: (...args: LogCaptureEvents[E]) => void): this;
  once<E extends keyof LogCaptureEvents>(event: E, listener: (...args: LogCaptureEvents[E]) => void): this;
  off<E extends keyof LogCaptureEvents>(event: E, listener: (...args: LogCaptureEvents[E]) => void): this;
}

/** Takes the library's log records instead of stderr (`MCPLUG_LOG`): those matching `filter`
 *  (tracing's EnvFilter syntax, 'debug' by default; 'warn,mcplug::wire=trace') come as 'record'
 *  events; at most `maxRecords` (10000) wait. Kind 'invalid_argument' for a filter it cannot read.
 *  The capture does not keep the process alive. */
export declare function captureLogs(options?: { filter?: string; maxRecords?: number },
  listener?: (record: LogRecord | LogOverflow) => void): LogCapture;

/** Cancels every in-flight (or queued) call carrying `tag`; true if one was found. */
export declare function cancel(tag: string): boolean;
/** The library's version, e.g. "0.1.0". */
export declare function version(): string;
/** The loaded library's ABI version (equals ABI_VERSION). */
export declare function abiVersion(): number;

// ---------------------------------------------------------------------------------------------
// Configuration (synchronous)

export type ConfigScope = 'enterprise' | 'dynamic' | 'local' | 'project' | 'user' | 'plugin' | 'claudeai' | ConfigHost;
export type ConfigHost = 'vscode' | 'cursor' | 'windsurf' | 'claude_desktop' | 'zed';
export type ExclusionReason =
  | 'shadowed' | 'duplicate' | 'denied' | 'not_allowed' | 'pending_approval' | 'rejected' | 'enterprise_exclusive' | 'invalid';

export interface ConfigSettings {
  allowedMcpServers?: Array<{ serverName: string } | { serverCommand: string[] } | { serverUrl: string }>;
  deniedMcpServers?: Array<{ serverName: string } | { serverCommand: string[] } | { serverUrl: string }>;
  enabledMcpjsonServers?: string[];
  disabledMcpjsonServers?: string[];
  enableAllProjectMcpServers?: boolean;
}

/** A file's content (`{mcpServers: {...}}`) or its text. */
export type ConfigSource = { mcpServers?: { [name: string]: JsonObject }; [key: string]: unknown } | string;

export interface ConfigSources {
  enterprise?: ConfigSource; dynamic?: ConfigSource; local?: ConfigSource; project?: ConfigSource;
  user?: ConfigSource; plugin?: ConfigSource; claudeai?: ConfigSource;
  settings?: ConfigSettings;
  /** Variables for `${VAR}` expansion; absent: the process environment. */
  env?: { [name: string]: string };
}

export interface MergedServer { scope: ConfigScope; signature: string | null; config: JsonObject; file?: string }
export interface ExcludedServer {
  name: string; scope: ConfigScope; reason: ExclusionReason; detail: string; file?: string;
  by?: { scope: ConfigScope; file?: string }; duplicate_of?: string; signature?: string;
  path?: string; line?: number; column?: number;
}
export interface ConfigFileError { scope: ConfigScope; file: string; line?: number; column?: number; message: string }
export interface MergeResult {
  servers: { [name: string]: MergedServer };
  excluded: ExcludedServer[];
  warnings: string[];
  errors: ConfigFileError[];
}
export interface DiscoverOptions {
  home?: string; cwd?: string; managed_dir?: string; hosts?: ConfigHost[];
  env?: { [name: string]: string }; settings?: ConfigSettings;
  dynamic?: JsonObject; plugin?: JsonObject; claudeai?: JsonObject;
  /** Only the given servers (and the managed file's), as Claude Code's `--strict-mcp-config`. */
  strict_mcp_config?: boolean;
}
export interface DiscoverResult extends MergeResult {
  files: Array<{ file: string; scope: ConfigScope; role: 'servers' | 'settings' }>;
}

/** Merges explicitly given sources the way Claude Code does. Throws McpError (invalid_argument, config). */
export declare function mergeConfig(sources: ConfigSources): MergeResult;
/** Forgets every OAuth credential the auth store holds for a remote server (logout); also removes
 *  a record the store cannot use (corrupt, not a regular file, a symlink — the link itself), which
 *  otherwise fails every connect to the server with kind `config`. */
export declare function authLogout(server: { url: string; [key: string]: unknown }, options?: { authStore?: string }): Promise<{ forgotten: boolean }>;
/** Reads and merges the configuration on disk (Claude Code's files, and other hosts' on request). */
export declare function discoverConfig(options?: DiscoverOptions): DiscoverResult;
/** Adds a server to a scope's file, keeping the rest of the file. */
export declare function addConfigServer(
  scope: 'user' | 'local' | 'project', name: string, config: JsonObject,
  options?: { home?: string; cwd?: string; replace?: boolean },
): { file: string; scope: string; name: string; created: boolean; replaced: boolean };
/** Removes a server from a scope's file (McpError kind `not_found` if absent). */
export declare function removeConfigServer(
  scope: 'user' | 'local' | 'project', name: string, options?: { home?: string; cwd?: string },
): { file: string; scope: string; name: string; removed: JsonObject };
/** Writes a choice of Claude Code's project-server dialog in `<cwd>/.claude/settings.local.json`:
 *  'yes' (default) → `enabledMcpjsonServers`, 'yes_all' → also `enableAllProjectMcpServers`,
 *  'no' → `disabledMcpjsonServers`. */
export declare function approveProjectServer(
  name: string, options?: { choice?: 'yes' | 'yes_all' | 'no'; cwd?: string },
): { file: string; name: string; choice: string; enabledMcpjsonServers: string[]; disabledMcpjsonServers: string[]; enableAllProjectMcpServers: boolean | null };
/** Forgets every approval and rejection of the project's servers (Claude Code's `reset-project-choices`). */
export declare function resetProjectChoices(options?: { cwd?: string }): { file: string; reset: string[] };

// ---------------------------------------------------------------------------------------------
// Manager: many servers, their tools in one pool

export type ServerState = 'pending' | 'connected' | 'failed' | 'needs-auth' | 'disabled';

/** The library's options for one manager (camelCase here; snake_case names work too). */
export interface ManagerOptions {
  /** stdio servers connecting at once; default 3. */
  localConcurrency?: number;
  /** http/sse/ws servers connecting at once; default 20. */
  remoteConcurrency?: number;
  /** Connection options for every server, as Client.connect's (`connectTimeoutMs`,
   *  `toolTimeoutMs`, `capabilities`, `clientInfo`, `logLevel`, ...; camelCase or snake_case).
   *  The handlers' capabilities are merged under `capabilities`. */
  connection?: Record<string, unknown>;
  /** Longer tool descriptions are cut, ending with "… [truncated]"; default 2048. */
  maxDescriptionChars?: number;
  /** Tool output text beyond this (4 characters each) is cut with a line saying how much; default 25000, null: no cap. */
  maxOutputTokens?: number | null;
  /** The same cap in characters. */
  maxOutputChars?: number | null;
  /** That many consecutive connection failures (not HTTP error statuses) of one server's calls reconnect it; default 3. */
  terminalErrors?: number;
  /** Reconnect backoff: the first retry at once, then this, doubling; default 1000. */
  reconnectInitialMs?: number;
  /** Default 30000. */
  reconnectMaxMs?: number;
  /** Attempts before a lost server is left `failed`; default 5, 0: never. */
  reconnectAttempts?: number;
  /** Server names that start `disabled`. */
  disabled?: string[];
  /** Default 10000. */
  maxEvents?: number;
  /** Base64 bytes of one result's images, audio and blobs; beyond it an item is replaced by a
   *  text saying what was there. Default 5242880, null: no limit. */
  maxMediaBytes?: number | null;
  /** A directory: an output over its limit is written there whole (0600) and the result names the file. */
  outputDir?: string;
  /** The size cap of `outputDir` (the oldest kept outputs go first); default 1 GiB. */
  outputDirMaxBytes?: number;
  /** Claude Code's ListMcpResourcesTool and ReadMcpResourceTool in the pool while a connected
   *  server offers resources; default false. */
  resourceTools?: boolean;
  /** Allow/deny lists (entries as in managed-settings.json) applied to every configuration
   *  connect() is given; what they refuse is left out and listed in the result's `excluded`. */
  policy?: { allowedMcpServers?: JsonObject[]; deniedMcpServers?: JsonObject[] };
  /** The registry whose marks servers get (status and pool entries): true for the official
   *  registry, or a (sub-)registry's base URL; fetched in the background at the first connect. */
  registry?: boolean | string;
  [key: string]: unknown;
}

export interface ManagerHandlerContext {
  method: string;
  /** The server that sent the request or notification (also the handler's second argument). */
  server: string;
  /** The manager's id of a server request (absent for notifications). */
  id?: string;
  manager: Manager;
  /** For a request: aborts when nobody waits for the answer any more (expired, cancelled, its
   *  server's connection went); a later answer is dropped. */
  signal?: AbortSignal;
}

/** A handler of the Manager: as the Client's, with the server's name as second argument. */
export type ManagerHandler<P = JsonObject, R = unknown> = (params: P, server: string, context: ManagerHandlerContext) => R | Promise<R>;

export interface ManagerHandlers {
  'sampling/createMessage'?: ManagerHandler<CreateMessageParams, CreateMessageResult>;
  'elicitation/create'?: ManagerHandler<ElicitParams, ElicitResult>;
  'roots/list'?: ManagerHandler<JsonObject, ListRootsResult>;
  [method: string]: ManagerHandler<any, any> | undefined;
}

/** A manager configuration: a config file's content, mergeConfig/discoverConfig's result, or VS Code's. */
export type ManagerConfig =
  | { mcpServers: { [name: string]: ServerConfig & { disabled?: boolean } }; [key: string]: unknown }
  | { servers: { [name: string]: (ServerConfig & { disabled?: boolean }) | MergedServer }; [key: string]: unknown }
  | MergeResult;

export interface ServerStatus {
  state: ServerState;
  transport: Transport;
  /** Its pool names. */
  tools: string[];
  error?: { kind: ErrorKind; message: string };
  /** The reconnect attempt under way. */
  attempt?: number;
  /** A `needs-auth` server's details (never a token). */
  auth?: { reason: string; issuer?: string; scope?: string; resource_metadata?: string };
  /** While an authorization started by `authenticate` waits for the user. */
  authorization?: { url: string; redirect_uri: string; issuer: string; scope?: string; server?: string };
  server_info?: ConnectResult['server_info'];
  protocol_version?: string;
  era?: 'modern' | 'legacy';
  /** When the option `registry` is set and the registry knows this server. */
  registry?: RegistryMark;
  [key: string]: unknown;
}

/** What a registry says of a server: its entry's name, its status, and how it was matched
 *  ('url', 'url_template', or 'package' for a stdio command's npm, PyPI or OCI package). */
export interface RegistryMark {
  name: string;
  status: 'active' | 'deprecated' | 'deleted' | string;
  match: 'url' | 'url_template' | 'package';
  version?: string;
  statusMessage?: string;
}

export interface ManagerStatus {
  /** In configuration order. */
  servers: { [name: string]: ServerStatus };
  /** The pool's size. */
  tools: number;
  /** With the option `registry`: its fetch ('idle' before the first connect). */
  registry?: {
    url: string;
    state: 'idle' | 'loading' | 'ready' | 'failed' | 'skipped';
    /** Entries known (from the fetch and the cache). */
    servers: number;
    fetched_at?: string;
    error?: string;
  };
}

/** A tool of the pool. */
export interface PoolTool {
  /** `mcp__<server>__<tool>` (characters outside [a-zA-Z0-9_-] become `_`; capped at 64 with a hash). */
  name: string;
  server: string;
  /** The server's own name for it. */
  tool: string;
  /** Cleaned (no bidi controls or zero-width characters) and capped. */
  description: string;
  /** How many characters were cut from the description. */
  description_cut?: number;
  inputSchema: JsonObject;
  outputSchema?: JsonObject;
  annotations?: JsonObject;
  title?: string;
  _meta?: JsonObject;
  read_only: boolean;
  destructive: boolean;
  always_load: boolean;
  search_hint: string | null;
  /** searchTools() only. */
  score?: number;
  /** Its server's registry mark (option `registry`). */
  registry?: RegistryMark;
  [key: string]: unknown;
}

/** A tool left out of the pool: `reason` 'duplicate' (another tool of its server has the name) or
 *  'collision' (tools of two servers make the name, e.g. mcp__x__y__z from x's y__z and x__y's z:
 *  it goes to neither, and a call by it fails 'not_found' naming both). */
export interface DroppedTool { name: string; server: string; tool: string; reason: string; detail: string }

/** A prompt left out of listPrompts(), by the same rule as DroppedTool. */
export interface DroppedPrompt { name: string; server: string; prompt: string; reason: string; detail: string }

/** A tool of a host (in-process) server. */
export interface HostTool {
  name: string;
  description?: string;
  inputSchema?: JsonObject;
  outputSchema?: JsonObject;
  annotations?: JsonObject;
  title?: string;
  _meta?: JsonObject;
  /** Runs the tool: a CallToolResult, or a string (one text item). A throw becomes an
   *  `isError: true` result with its message. `signal` aborts when the caller gave up. */
  handler: (args: JsonObject, context: { server: string; tool: string; id: string; signal: AbortSignal; manager: Manager }) =>
    CallToolResult | string | void | Promise<CallToolResult | string | void>;
}

export interface ListOptions extends CallOptions {
  /** One server only (asked whatever its capabilities; its error is the call's error). */
  server?: string;
}

export type ManagerEvent =
  | { type: 'state'; server: string; state: ServerState; transport: string; tools: string[]; error?: { kind: ErrorKind; message: string }; attempt?: number; [key: string]: unknown }
  | { type: 'tools_changed'; server: string; tools: string[]; pool: string[] }
  | { type: 'removed'; server: string }
  | { type: 'resources_changed'; server: string }
  | { type: 'prompts_changed'; server: string }
  | { type: 'closed'; reason: string }
  | (RawEvent & { server?: string });

export interface ManagerEvents {
  /** Every event, with its `server`, before the specific ones below. */
  event: [event: ManagerEvent];
  /** A server's state changed. */
  state: [event: Extract<ManagerEvent, { type: 'state' }>];
  /** A server's tools changed (it said so, or set_tools): its pool names and the whole pool's. */
  toolsChanged: [event: { type: 'tools_changed'; server: string; tools: string[]; pool: string[] }];
  /** A server left the configuration (a new connect() without it). */
  removed: [event: { type: 'removed'; server: string }];
  resourcesChanged: [event: { type: 'resources_changed'; server: string }];
  promptsChanged: [event: { type: 'prompts_changed'; server: string }];
  notification: [notification: Notification & { server: string }];
  /** A server request with no handler: answer it with respond()/respondError(). */
  request: [request: ServerRequest & { server: string }];
  stderr: [info: { server: string; line: string }];
  invalidMessage: [info: { server: string; error: string; line: string }];
  overflow: [event: { type: 'overflow'; dropped: number; server?: string }];
  requestExpired: [info: { server: string; id: string; method: string }];
  requestCancelled: [info: { server: string; id: string; method?: string; reason?: string }];
  warning: [warning: Warning & { server?: string }];
  log: [message: LogMessage & { server: string }];
  channel: [message: ChannelMessage & { server: string }];
  channelPermission: [verdict: ChannelPermission & { server: string }];
  /** Once, when close() is done. */
  closed: [info: { reason: string }];
  handlerError: [error: unknown, where: string];
}

/**
 * Many MCP servers and their tools in one pool. Tool calls are started calls settled by events
 * (no thread held, any number in flight; a host tool's handler may call the manager); blocking
 * library calls (resources, prompts, request, reconnect, close) run on libuv's threadpool
 * (`workLimit` at once, more wait in JS); events arrive through a descriptor the event loop
 * watches. An open manager keeps the process alive.
 */
/** `manager.serve(options)`. */
export interface ServeOptions {
  /** Where to listen for Streamable HTTP (at /mcp), like '127.0.0.1:8808'; port 0 picks one. */
  http?: string;
  /** One client over two descriptors (newline-delimited, as stdio): `[readFd, writeFd]`. */
  fds?: [number, number];
  /** 'prefixed' (mcp__<server>__<tool>, the default) or 'unprefixed' (the servers' own names). */
  names?: 'prefixed' | 'unprefixed';
}

/** A manager's pool served as one MCP server (`manager.serve(...)`). */
export declare class Server {
  private constructor();
  /** `http://HOST:PORT/mcp` (Streamable HTTP); null over descriptors. */
  readonly url: string | null;
  /** Whether `close()` was called. */
  readonly closed: boolean;
  /** Ends every client's session and stops listening; the manager stays open. */
  close(): Promise<void>;
}

export declare class Manager extends EventEmitter {
  constructor(options?: ManagerOptions | null, opts?: { handlers?: ManagerHandlers });
  static create(options?: ManagerOptions | null, opts?: { handlers?: ManagerHandlers }): Promise<Manager>;

  /** 'open' until close(), then 'closing', then 'closed'. */
  readonly state: 'open' | 'closing' | 'closed';
  /** The names of the host servers (addHostServer). */
  readonly hostServers: string[];

  /** Starts connecting every server of the configuration (plus the host servers); resolves at
   *  once, new servers `pending`. Again: unchanged servers stay, changed ones reconnect, missing ones go. */
  connect(config: ManagerConfig): Promise<ManagerStatus>;
  /** Resolves once no server is `pending`; kind 'timeout' (naming the pending ones) after `timeoutMs`. */
  wait(timeoutMs?: TimeoutMs | { timeoutMs?: TimeoutMs }): Promise<ManagerStatus>;
  status(): Promise<ManagerStatus>;
  /** The pool (or one server's tools); `dropped`: tools left out for a name clash. */
  listTools(server?: string | null, options?: { format?: 'mcp' }): Promise<{ tools: PoolTool[]; dropped: DroppedTool[] }>;
  /** Each tool as that model API's tool definition. */
  listTools(server: string | null | undefined, options: { format: ModelFormat }): Promise<{ tools: JsonObject[]; dropped: DroppedTool[] }>;
  /** Ranks the pool by a query: words against names, search hints and descriptions; `+word` must
   *  match; `select:a,b` picks by name. */
  searchTools(query: string, options?: { maxResults?: number; server?: string; format?: 'mcp' }): Promise<{ tools: PoolTool[]; total: number }>;
  searchTools(query: string, options: { maxResults?: number; server?: string; format: ModelFormat }): Promise<{ tools: JsonObject[]; total: number }>;
  /** Calls a tool by pool name; the result's text is cleaned and capped. Kind 'not_found' for a
   *  name not in the pool (the message says when its server is not connected). */
  callTool(poolName: string, args?: JsonObject | null, options?: CallToolOptions & { format?: 'mcp' }): Promise<CallToolResult>;
  callTool(poolName: string, args: JsonObject | null | undefined, options: CallToolOptions & { format: ModelFormat }): Promise<ModelToolResult | CallToolResult>;
  /** Resources and templates of every server with the resources capability (each with `server`);
   *  `errors` by server. */
  listResources(options?: ListOptions): Promise<{ resources: JsonObject[]; templates: JsonObject[]; errors: { [server: string]: { kind: ErrorKind; message: string } } }>;
  readResource(server: string, uri: string, options?: CallOptions): Promise<JsonObject>;
  /** Prompts of every server with the prompts capability: `name` is `mcp__<server>__<prompt>`,
   *  `prompt` the server's own name. */
  listPrompts(options?: ListOptions): Promise<{ prompts: JsonObject[]; errors: { [server: string]: { kind: ErrorKind; message: string } }; dropped: DroppedPrompt[] }>;
  /** `args`: an object, or a command line as typed after `/mcp__server__prompt` (`'a "b c"'`),
   *  split as a shell splits words and mapped onto the prompt's declared arguments in order. */
  getPrompt(qualifiedName: string, args?: { [name: string]: string } | string | null, options?: CallOptions): Promise<JsonObject>;
  /** Any request to one server (`resources/subscribe`, `completion/complete`, ...). */
  request<T = JsonObject>(server: string, method: string, params?: JsonObject | null, options?: CallOptions): Promise<T>;
  /** Closes the server's connection and connects it again (awaited); resolves with its status. */
  reconnect(server: string): Promise<ServerStatus>;
  /**
   * Serves the pool as one MCP server for other agents: Streamable HTTP at `http` (default
   * '127.0.0.1:0'), or one client over `fds`. Host servers are served too; results pass as the
   * servers sent them; what a server asks during a client's call is asked of that client.
   */
  serve(options?: ServeOptions): Promise<Server>;
  /** false: its connection closes and its tools leave the pool; true: it connects again (not awaited). */
  setEnabled(server: string, enabled: boolean): Promise<ServerStatus>;
  /** Authorizes a remote server (OAuth): resolves once the URL for the user is known (status with
   *  `authorization`), or, with `wait`, once the server is connected. `callbackUrl`: the redirect the
   *  host captured itself. The manager never starts an authorization on its own. */
  authenticate(server: string, options?: { wait?: boolean; timeoutMs?: number; callbackUrl?: string }): Promise<ServerStatus & { server: string }>;
  /** Forgets the server's stored credentials and connects it again without authorizing. */
  logout(server: string): Promise<ServerStatus & { server: string; forgotten: boolean }>;
  /** Adds (or replaces the tools of) an in-process server answered by the handlers here. */
  addHostServer(name: string, tools: HostTool[]): Promise<ServerStatus>;
  removeHostServer(name: string): Promise<void>;
  respond(id: string, result?: unknown): Promise<void>;
  respondError(id: string, error: { code: number; message: string; data?: unknown }): Promise<void>;
  /** Closes every connection and frees the manager; every server process is gone when it resolves. Idempotent. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;

  on<E extends keyof ManagerEvents>(event: E, listener: (...args: ManagerEvents[E]) => void): this;
  once<E extends keyof ManagerEvents>(event: E, listener: (...args: ManagerEvents[E]) => void): this;
  off<E extends keyof ManagerEvents>(event: E, listener: (...args: ManagerEvents[E]) => void): this;
  addListener<E extends keyof ManagerEvents>(event: E, listener: (...args: ManagerEvents[E]) => void): this;
  removeListener<E extends keyof ManagerEvents>(event: E, listener: (...args: ManagerEvents[E]) => void): this;
  emit<E extends keyof ManagerEvents>(event: E, ...args: ManagerEvents[E]): boolean;
}
