"""What the long benchmark scripts (soak.py, scale.py) read about this host process and its
servers: a free port, this process's RSS and fd count, the processes carrying a marker."""
from __future__ import annotations

import os
import socket
from typing import List


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def pids_with(marker: str) -> List[int]:
    """The live (not zombie) processes one of whose arguments is exactly ``marker``."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in args and state != "Z":
            found.append(int(entry))
    return found
