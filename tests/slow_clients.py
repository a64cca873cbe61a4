#!/usr/bin/env python3
"""Slow clients against the API port, for tests/cli_slowloris.sh.

  slow_clients.py PORT N SECONDS INTERVAL
      opens N connections, sends "G" on each, then one more byte of a
      request header every INTERVAL seconds until the server has closed them
      all or SECONDS have passed; prints how many connections were open at
      the start ("opened N") and how many the server closed
      ("closed_by_server M").
"""
import socket
import sys
import time


def main():
    port, n, seconds, interval = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"G")
        s.setblocking(False)
        socks.append(s)
    print(f"opened {len(socks)}", flush=True)
    header = b"ET / HTTP/1.1\r\nHost: x\r\nX-Slow: "
    closed = set()
    sent = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end and len(closed) < len(socks):
        time.sleep(interval)
        byte = header[sent:sent + 1] or b"a"
        sent += 1
        for i, s in enumerate(socks):
            if i in closed:
                continue
            try:
                s.sendall(byte)
                data = s.recv(4096)
                if data == b"":
                    closed.add(i)
            except BlockingIOError:
                pass
            except OSError:
                closed.add(i)
    print(f"closed_by_server {len(closed)}", flush=True)


main()
