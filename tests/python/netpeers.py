"""The company-network tests' real pieces (tests/servers/tls_front.py: a private CA made with
openssl, nginx terminating TLS), with a missing program or a failed start as a test failure."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, Optional

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "servers"))
import tls_front  # noqa: E402

PASSPHRASE = tls_front.PASSPHRASE
free_port = tls_front.free_port


def make_pki(d: Path) -> Dict[str, Path]:
    try:
        return tls_front.make_pki(d)
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)


class Nginx(tls_front.Nginx):
    def __init__(self, d: Path, pki: Dict[str, Path], upstream: str, routes: Optional[Dict[str, str]] = None) -> None:
        try:
            super().__init__(d, pki, upstream, routes)
        except RuntimeError as e:
            pytest.fail(str(e), pytrace=False)



class Tinyproxy(tls_front.Tinyproxy):
    def __init__(self, d: Path, auth: Optional[str] = None) -> None:
        try:
            super().__init__(d, auth)
        except RuntimeError as e:
            pytest.fail(str(e), pytrace=False)
