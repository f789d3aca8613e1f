#!/usr/bin/env python3
"""A WebSocket front for a stdio MCP server, for mcplug's WebSocket transport tests (no MCP
revision defines WebSocket and no test peer here speaks it). Standard library only.

    python3 tests/servers/ws_bridge.py <port> <command> [args...]

Each WebSocket connection (subprotocol `mcp` required) starts its own `<command>`: every text
frame goes to the server's stdin as one line, every line of its stdout comes back as one text
frame. The handshake's X-Test header reaches the server as its environment variable
WS_BRIDGE_X_TEST (server-everything's get-env tool shows it). Prints "listening <port>".
"""
import asyncio
import base64
import hashlib
import os
import struct
import sys

PORT = int(sys.argv[1])
COMMAND = sys.argv[2:]
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


async def read_frame(reader):
    head = await reader.readexactly(2)
    opcode = head[0] & 0x0F
    masked = head[1] & 0x80
    length = head[1] & 0x7F
    if length == 126:
        length = struct.unpack(">H", await reader.readexactly(2))[0]
    elif length == 127:
        length = struct.unpack(">Q", await reader.readexactly(8))[0]
    mask = await reader.readexactly(4) if masked else b"\0\0\0\0"
    data = bytearray(await reader.readexactly(length))
    for i in range(length):
        data[i] ^= mask[i % 4]
    return opcode, bytes(data)


def frame(opcode, data):
    n = len(data)
    if n < 126:
        head = bytes([0x80 | opcode, n])
    elif n < 65536:
        head = bytes([0x80 | opcode, 126]) + struct.pack(">H", n)
    else:
        head = bytes([0x80 | opcode, 127]) + struct.pack(">Q", n)
    return head + data


async def handle(reader, writer):
    request = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    headers = {}
    for line in request[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    protocols = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")]
    if "mcp" not in protocols:
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()
        return
    accept = base64.b64encode(hashlib.sha1((headers["sec-websocket-key"] + GUID).encode()).digest()).decode()
    writer.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: mcp\r\n\r\n").encode())
    await writer.drain()
    env = dict(os.environ, WS_BRIDGE_X_TEST=headers.get("x-test", ""))
    child = await asyncio.create_subprocess_exec(*COMMAND, stdin=asyncio.subprocess.PIPE,
                                                 stdout=asyncio.subprocess.PIPE, limit=64 << 20, env=env)

    async def to_client():
        while True:
            line = await child.stdout.readline()
            if not line:
                break
            writer.write(frame(1, line.rstrip(b"\n")))
            await writer.drain()
        writer.write(frame(8, b"\x03\xe8"))
        await writer.drain()

    pump = asyncio.create_task(to_client())
    try:
        while True:
            opcode, data = await read_frame(reader)
            if opcode == 8:
                writer.write(frame(8, data[:2]))
                await writer.drain()
                break
            if opcode == 9:
                writer.write(frame(10, data))
            elif opcode in (1, 2):
                child.stdin.write(data + b"\n")
                await child.stdin.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        pump.cancel()
        if child.returncode is None:
            child.kill()
        await child.wait()
        writer.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", PORT)
    print(f"listening {PORT}", flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
