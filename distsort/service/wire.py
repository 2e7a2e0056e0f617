"""What client and server say to each other: one JSON object a line over a Unix socket.

The standard library does it all (socket, json): no dependency, and a line-delimited JSON
protocol is what any language's client can speak with a few lines of its own.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile


def default_socket() -> str:
    """The socket a service listens on unless told: in the user's runtime folder where there
    is one ($XDG_RUNTIME_DIR, private to the user), else the temporary folder, named by user."""
    folder = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return os.path.join(folder, f"distsort-{os.getuid()}.sock")


def send(conn: socket.socket, message: dict) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def lines(conn: socket.socket):
    """The JSON objects the peer sends, one a line, until it closes the connection."""
    with conn.makefile("rb") as stream:
        for line in stream:
            yield json.loads(line)
