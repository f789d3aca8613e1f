#!/usr/bin/env python3
"""tests/servers/modern_server.py (the Python SDK 2.3 server of the 2026-07-28 era) served over
Streamable HTTP instead of stdio, for mcplug's remote transport tests: the same tools, on
http://127.0.0.1:<port>/mcp.

    .deps/venv/bin/python tests/servers/modern_http_server.py <port> [--json]

--json: the server answers requests with JSON bodies instead of SSE streams.
Prints "listening <port>" on stdout once the port accepts connections.
"""
import importlib.util
import logging
import socket
import sys
import threading
import time
from pathlib import Path

port = int(sys.argv[1])
json_response = "--json" in sys.argv

spec = importlib.util.spec_from_file_location("modern_server", Path(__file__).with_name("modern_server.py"))
modern = importlib.util.module_from_spec(spec)
spec.loader.exec_module(modern)

logging.disable(logging.WARNING)


def announce() -> None:
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            print(f"listening {port}", flush=True)
            return
        except OSError:
            time.sleep(0.05)


threading.Thread(target=announce, daemon=True).start()
modern.server.run("streamable-http", host="127.0.0.1", port=port, json_response=json_response)
