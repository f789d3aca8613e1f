'use strict';
// Interactive OAuth of single clients: the process-wide pump of `auth/authorize` requests.

const { Status } = require('./errors');
const { native, callAsync } = require('./native');

// Interactive OAuth of single clients: the library's `auth/authorize` requests are pulled for the
// whole process (a client's first authorization happens inside its connect, before it has a
// handle) and handed to the `auth/authorize` handler of the connection they name by its
// `auth_channel`. The pump runs while any such connection is registered, one pull at a time on
// the threadpool, so a process without one keeps no thread and no pending work.
const authHandlers = new Map();
let authNext = 1;
let authPumping = false;
// How long one pull waits: also how long a process whose last such connection closed is kept
// alive by the pull still out (a pending threadpool call holds the event loop).
const AUTH_PULL_MS = 200;

function authRegister(handler, merged) {
  const channel = `node-${process.pid}-${authNext++}`;
  merged.auth_interactive = true;
  merged.auth_channel = channel;
  authHandlers.set(channel, handler);
  if (!authPumping) {
    authPumping = true;
    authPump();
  }
  return channel;
}

function authUnregister(channel) {
  if (channel !== undefined) authHandlers.delete(channel);
}

async function authAnswer(id, handler, params) {
  let reply;
  if (!handler) {
    reply = { id, error: { code: -1, message: 'no auth/authorize handler for this connection' } };
  } else {
    try {
      const result = (await handler(params)) ?? {};
      if (typeof result !== 'object' || Array.isArray(result)) {
        throw new TypeError('an auth/authorize handler returns nothing or { callback_url }');
      }
      reply = { id, result };
    } catch (e) {
      reply = { id, error: { code: -1, message: String((e && e.message) || e) } };
    }
  }
  // An answer that came too late (expired) is no error of the handler's.
  await callAsync(native.auth_respond, [JSON.stringify(reply)]).catch(() => {});
}

async function authPump() {
  while (authHandlers.size > 0) {
    const { status, text } = await callAsync(native.auth_next_event, [AUTH_PULL_MS]);
    if (status !== Status.OK || !text) continue;
    const ev = JSON.parse(text);
    if (ev.type !== 'request' || ev.method !== 'auth/authorize') continue;
    const params = ev.params || {};
    authAnswer(ev.id, authHandlers.get(params.channel), params);
  }
  authPumping = false;
}

module.exports = {
  authRegister,
  authUnregister,
};
