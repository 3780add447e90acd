#!/usr/bin/env python3
"""Pressure on the HTTP transport of the real binary, with figures printed.

1. Holds N event streams (one session each, GET /mcp), M idle keep-alive connections and S slow
   requests (headers never finished) open, then times pings on fresh connections.
2. Sends a 1 GiB chunked POST body and reports the server's peak RSS (VmHWM) before and after,
   and the status it answered.

Usage: tests/bench/http_pressure.py [--binary build/autocomp-mcp] [--streams 200] [--idle 100]
                                    [--slow 100] [--chunked-mib 1024]
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def connect(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_head(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(4096)
        if not piece:
            break
        data += piece
    return data


def post(port, body, session=None, extra=""):
    sock = connect(port)
    payload = json.dumps(body).encode()
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nConnection: close\r\n{extra}"
            f"Content-Length: {len(payload)}\r\n")
    if session:
        head += f"Mcp-Session-Id: {session}\r\n"
    sock.sendall(head.encode() + b"\r\n" + payload)
    data = b""
    while True:
        piece = sock.recv(65536)
        if not piece:
            break
        data += piece
    sock.close()
    status = int(data[9:12]) if data.startswith(b"HTTP/1.1 ") else 0
    session_id = None
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"mcp-session-id:"):
            session_id = line.split(b":", 1)[1].strip().decode()
    return status, session_id


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "bench", "version": "1"}}}
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


def time_pings(port, count=20):
    times = []
    for _ in range(count):
        start = time.perf_counter()
        status, _ = post(port, PING)
        times.append((time.perf_counter() - start) * 1000)
        if status != 200:
            return None, status
    times.sort()
    return times, 200


def held_connections(port, streams, idle, slow):
    held = []
    for _ in range(streams):
        status, session = post(port, INITIALIZE)
        if status != 200:
            print(f"  initialize answered {status} after {len(held)} streams")
            break
        sock = connect(port)
        sock.sendall((f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                      f"Accept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\r\n").encode())
        head = read_head(sock)
        if not head.startswith(b"HTTP/1.1 200"):
            print(f"  stream {len(held)} answered {head[:12]!r}")
            sock.close()
            break
        held.append(sock)
    opened_streams = len(held)
    for _ in range(idle):
        held.append(connect(port))
    for _ in range(slow):
        sock = connect(port)
        sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
        held.append(sock)
    return held, opened_streams


def chunked_flood(port, pid, mib):
    sock = connect(port)
    sock.sendall((f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                  "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode())
    chunk = b"%x\r\n" % (1 << 20) + b" " * (1 << 20) + b"\r\n"
    sent = 0
    peak = vm_hwm_kib(pid)
    sock.setblocking(False)
    answer = b""
    for _ in range(mib):
        view = memoryview(chunk)
        while view:
            try:
                n = sock.send(view)
                view = view[n:]
            except BlockingIOError:
                try:
                    answer += sock.recv(65536)
                except BlockingIOError:
                    pass
                time.sleep(0.001)
            except (BrokenPipeError, ConnectionResetError):
                view = None
                break
        if view is None:
            break
        sent += 1
        try:
            answer += sock.recv(65536)
        except (BlockingIOError, ConnectionResetError):
            pass
        if answer:
            break
        peak = max(peak, vm_hwm_kib(pid))
    sock.setblocking(True)
    sock.settimeout(5)
    try:
        while b"\r\n\r\n" not in answer:
            piece = sock.recv(65536)
            if not piece:
                break
            answer += piece
    except (socket.timeout, ConnectionResetError):
        pass
    sock.close()
    status = int(answer[9:12]) if answer.startswith(b"HTTP/1.1 ") else 0
    return status, sent, max(peak, vm_hwm_kib(pid))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                         "build", "autocomp-mcp"))
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--idle", type=int, default=100)
    parser.add_argument("--slow", type=int, default=100)
    parser.add_argument("--chunked-mib", type=int, default=1024)
    args = parser.parse_args()

    port_file = tempfile.mktemp(prefix="autocomp-bench-port-")
    server = subprocess.Popen([args.binary, "--http", "127.0.0.1:0", "--port-file", port_file,
                               "--log-level", "warn", "--max-connections", "1000"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.01)
        port = int(open(port_file).read())
        base, _ = time_pings(port)
        print(f"ping, nothing held: median {base[len(base) // 2]:.2f} ms, max {base[-1]:.2f} ms")
        held, streams = held_connections(port, args.streams, args.idle, args.slow)
        print(f"held open: {streams} event streams, {args.idle} idle connections, "
              f"{args.slow} slow requests ({len(held)} connections)")
        times, status = time_pings(port)
        if times is None:
            print(f"ping while held: answered {status}")
        else:
            print(f"ping while held: median {times[len(times) // 2]:.2f} ms, "
                  f"max {times[-1]:.2f} ms (goal < 1000 ms)")
        start = time.perf_counter()
        status, session = post(port, INITIALIZE)
        print(f"new session while held: status {status} in "
              f"{(time.perf_counter() - start) * 1000:.2f} ms")
        for sock in held:
            sock.close()
        before = vm_hwm_kib(server.pid)
        status, sent, peak = chunked_flood(port, server.pid, args.chunked_mib)
        print(f"chunked body: answered {status} after {sent} MiB sent of {args.chunked_mib} MiB; "
              f"server peak RSS {before / 1024:.1f} MiB before, {peak / 1024:.1f} MiB after")
        times, status = time_pings(port, 5)
        print(f"ping afterwards: status {status}")
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        if os.path.exists(port_file):
            os.remove(port_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
