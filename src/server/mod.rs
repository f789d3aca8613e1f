//! The server half (issue 33, part 2; not yet exported): one downstream client's session on the
//! session core, serving what a [`session::Handler`] offers. The transports that carry it to a
//! client (stdio, Streamable HTTP, HTTP+SSE) and what it serves (a manager's pool) come next.

// Nothing outside the tests calls into it until serving is exported (`mcplug serve`, next).
#![cfg_attr(not(test), allow(dead_code))]

pub(crate) mod session;
