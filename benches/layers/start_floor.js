// The floor of a Node client's S1: Node's own start-up, nothing else. Prints {"ttl_ms"} (ms since
// MCPB_T0, the launcher's clock, as peer-bench's clients do) as the script's first act: no module
// loaded, no server spawned. benches/run.sh runs it beside the TS SDK's client and mcplug's Node
// client in rotated order, so that the report can say how much of a Node client's cold start is
// Node's before any client code runs.
//   MCPB_T0=$(date +%s%N) node benches/layers/start_floor.js [ignored arguments]
'use strict';
const ms = (performance.timeOrigin + performance.now()) - Number(BigInt(process.env.MCPB_T0 ?? '0') / 1000n) / 1e3;
console.log(JSON.stringify({ client: 'node-start-up', scenario: 's1', ttl_ms: ms }));
