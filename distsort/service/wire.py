"""What client and server say to each other: one JSON object a line over a Unix socket, or
over TCP where asked, every request then carrying the service's shared-secret token.

The standard library does it all (socket, json, hmac): no dependency, and a line-delimited JSON
protocol is what any language's client can speak with a few lines of its own. The token comes
from a file or the environment, never from the command line, where any user of the machine
may read it.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile

from .. import settings
from ..errors import DistsortError

TOKEN_MIN = 16  # characters: a short token is guessed, and TCP opens the service to a network


def tcp_address(text: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets) as (host, port); port 0: any free port."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise DistsortError(f"--tcp {text}: give HOST:PORT, e.g. 127.0.0.1:7373")
    return host.strip("[]"), int(port)


def read_token(path: str | None) -> str:
    """The shared secret: the first line of the file at path where given, else $DISTSORT_TOKEN;
    DistsortError where there is none of TOKEN_MIN characters or more."""
    if path:
        try:
            with open(path) as f:
                token = f.readline().strip()
        except OSError as exc:
            raise DistsortError(f"--token-file {path}: {exc.strerror or exc}") from None
    else:
        token = settings.value("DISTSORT_TOKEN")
    return checked_token(token)


def checked_token(token: str) -> str:
    """The token, where it is long enough to be one (DistsortError otherwise)."""
    if len(token) < TOKEN_MIN:
        raise DistsortError(f"a service on TCP needs a token of {TOKEN_MIN} characters or more, "
                            "in the file --token-file names or in DISTSORT_TOKEN (e.g. "
                            "python -c 'import secrets; print(secrets.token_hex(32))')")
    return token


def default_socket() -> str:
    """The socket a service listens on unless told: in the user's runtime folder where there
    is one ($XDG_RUNTIME_DIR, private to the user), else the temporary folder, named by user."""
    folder = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return os.path.join(folder, f"distsort-{os.getuid()}.sock")


def send(conn: socket.socket, message: dict) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def lines(conn: socket.socket, limit: int | None = None):
    """The JSON objects the peer sends, one a line, until it closes the connection; a line of
    more than `limit` bytes is a ValueError (read no further: a peer may send without end)."""
    with conn.makefile("rb") as stream:
        while line := stream.readline(-1 if limit is None else limit + 1):
            if limit is not None and len(line) > limit:
                raise ValueError(f"a request of more than {limit} bytes")
            yield json.loads(line)
