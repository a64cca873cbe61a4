#!/usr/bin/env python3
"""A bare NATS client (the text protocol over TLS) for the bus security tests:
it does what someone holding a NATS credential could do by hand.

  nats_raw.py publish  URL CA CERT KEY USER PASSWORD SUBJECT DATA_HEX
      publishes once; prints "ok" or the server's -ERR line
  nats_raw.py replay   URL CA CERT KEY USER PASSWORD STREAM SUBJECT
      reads the stream's last message on SUBJECT ($JS.API.STREAM.MSG.GET)
      and publishes its bytes again without its headers (no signature);
      prints the JetStream acknowledgement or the -ERR line
"""
import base64
import json
import socket
import ssl
import sys


class Conn:
    def __init__(self, url, ca, cert, key, user, password):
        host, port = url.split("://", 1)[1].rsplit(":", 1)
        raw = socket.create_connection((host, int(port)), timeout=5)
        self.buf = b""
        self.pending = []  # payloads that arrived while waiting for a PONG
        self.sock = raw
        info = self.line()  # INFO {...}: the server asks for TLS first
        if not info.startswith(b"INFO"):
            raise SystemExit(f"no INFO: {info!r}")
        ctx = ssl.create_default_context(cafile=ca)
        ctx.load_cert_chain(cert, key)
        self.sock = ctx.wrap_socket(raw, server_hostname=host)
        connect = {"verbose": False, "pedantic": False, "headers": True, "user": user,
                   "pass": password, "name": "nats_raw", "lang": "python", "version": "0"}
        self.send(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        while True:
            got = self.line()
            if got.startswith(b"-ERR"):
                print(got.decode())
                sys.exit(0)
            if got == b"PONG":
                break

    def send(self, data):
        self.sock.sendall(data)

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SystemExit("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SystemExit("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def reply(self):
        """The next MSG's payload, or the -ERR line (skipping +OK, PING)."""
        if self.pending:
            return self.pending.pop(0)
        while True:
            got = self.line()
            if got.startswith(b"-ERR"):
                return got.decode()
            if got == b"PING":
                self.send(b"PONG\r\n")
                continue
            if got.startswith(b"MSG"):
                return self.exact(int(got.split()[-1])).decode()
            if got.startswith(b"HMSG"):
                return self.exact(int(got.split()[-1])).decode(errors="replace")

    def publish(self, subject, data, reply=None):
        self.send(b"SUB _INBOX.raw 1\r\n")
        head = f"PUB {subject} {reply} {len(data)}" if reply else f"PUB {subject} {len(data)}"
        self.send(head.encode() + b"\r\n" + data + b"\r\nPING\r\n")
        errors = []
        while True:
            got = self.line()
            if got.startswith(b"-ERR"):
                errors.append(got.decode())
            if got.startswith(b"MSG") or got.startswith(b"HMSG"):
                self.pending.append(self.exact(int(got.split()[-1])).decode(errors="replace"))
            if got == b"PONG":
                return errors


def main():
    cmd, url, ca, cert, key, user, password = sys.argv[1:8]
    c = Conn(url, ca, cert, key, user, password)
    if cmd == "publish":
        subject, data = sys.argv[8], bytes.fromhex(sys.argv[9])
        errors = c.publish(subject, data)
        print(errors[0] if errors else "ok")
    elif cmd == "replay":
        stream, subject = sys.argv[8], sys.argv[9]
        req = json.dumps({"last_by_subj": subject}).encode()
        errors = c.publish(f"$JS.API.STREAM.MSG.GET.{stream}", req, reply="_INBOX.raw")
        if errors:
            print(errors[0])
            return
        msg = json.loads(c.reply())["message"]
        data = base64.b64decode(msg["data"])
        errors = c.publish(subject, data, reply="_INBOX.raw")
        print(errors[0] if errors else c.reply())
    else:
        raise SystemExit(f"unknown command {cmd}")


main()
