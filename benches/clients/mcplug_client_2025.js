// mcplug_client.js held to the 2025-11-25 revision (the revision the TS SDK speaks here), for
// run.sh's "2025-11-25" row: the options are set here rather than by an `env` wrapper, whose exec
// would count in the cold start. MCPB_MCPLUG_OPTIONS, when set, still wins.
'use strict';
process.env.MCPB_MCPLUG_OPTIONS ??= '{"protocol_versions":["2025-11-25"]}';
require('./mcplug_client.js');
