#!/usr/bin/env python3
"""A WebSocket client for the capture test (tests/cli_capture.sh): opens
URL (ws:// or wss://, CA file for wss), reads one message or waits SECONDS,
closes. Prints "open" once the handshake is done.

  ws_client.py URL CA_FILE SECONDS
"""
import base64
import os
import socket
import ssl
import sys
from urllib.parse import urlparse


def main():
    url, ca, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    u = urlparse(url)
    sock = socket.create_connection((u.hostname, u.port), timeout=seconds)
    if u.scheme == "wss":
        sock = ssl.create_default_context(cafile=ca).wrap_socket(sock, server_hostname=u.hostname)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            raise SystemExit("closed during the handshake")
        head += chunk
    if not head.startswith(b"HTTP/1.1 101"):
        raise SystemExit(f"refused: {head.splitlines()[0]!r}")
    print("open", flush=True)
    try:
        sock.recv(4096)
    except (socket.timeout, TimeoutError):
        pass
    sock.close()


main()
