'use strict';
// The child of regress_fork.test.js (child_process.fork: a fresh Node process, which loads its
// own copy of mcplug): connects its own client to the fault server, calls echo, and reports.
const h = require('./helpers');

(async () => {
  const c = await h.mcplug.Client.connect(h.faultServer('normal'));
  try {
    const r = await c.callTool('echo', { message: 'from the child' });
    process.send({ echo: r.content[0].text, pid: process.pid });
  } finally {
    await c.close();
  }
})().catch((e) => {
  process.send({ error: `${e.kind}: ${e.message}` });
  process.exitCode = 1;
});
