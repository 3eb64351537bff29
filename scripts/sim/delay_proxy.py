#!/usr/bin/python3
"""A TCP proxy that puts an object store's first-byte latency, and its overload, in front of a local one.

netem is missing on these machines, so a gateway on loopback answers a GET in ~0.5 ms where a real
object store takes 10-200 ms to its first byte. This proxy forwards each connection to the
upstream unchanged (byte for byte: SigV4 signatures, which cover the Host header, still hold) and
holds the first byte of every response until --delay-ms after the request that asked for it: a
request is the client's bytes after the previous response began (HTTP/1.1 as libcurl speaks it,
one request at a time on a connection). The rest of a response flows as fast as the upstream
sends it, so bandwidth is the upstream's and latency the proxy's.

  delay_proxy.py --listen 127.0.0.1:9001 --upstream 127.0.0.1:9000 --delay-ms 30

With --fail-every N it also answers every Nth GET itself, with --fail-status (503 SlowDown, as S3
answers a prefix asked too fast, or 429 Too Many Requests) and "Connection: close", without
asking the upstream: a storm of overload for a client's request-rate governor and retries to ride
out, with nothing else changed.

Prints "listening HOST:PORT" on stdout once it accepts connections (port 0: one is chosen), then
serves until killed. Stdlib only (Debian's python3).
"""
import argparse
import asyncio
import itertools
import sys
import time


def _address(text):
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, int(port)


_REASONS = {503: ("Service Unavailable", "SlowDown", "Please reduce your request rate."),
            429: ("Too Many Requests", "TooManyRequests", "Too many requests.")}


def _refusal(status):
    reason, code, message = _REASONS[status]
    body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
            f"<Message>{message}</Message></Error>").encode()
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    return head + body


class _Faults:
    """Which GETs are refused: every `every`th of all the proxy's connections (0: none)."""

    def __init__(self, every, status):
        self.every, self.status, self.gets = every, status, itertools.count(1)

    def refuse(self, request_start):
        return (self.every > 0 and request_start.startswith(b"GET ")
                and next(self.gets) % self.every == 0)


class _Connection:
    def __init__(self, delay_s, faults, client_writer):
        self.delay_s = delay_s
        self.faults = faults
        self.client_writer = client_writer
        self.asked_at = None  # when the request now waiting for its answer was sent

    async def client_to_upstream(self, reader, writer):
        try:
            while data := await reader.read(1 << 16):
                if self.asked_at is None:
                    if self.faults.refuse(data):
                        await self.refuse(reader, data)
                        return
                    self.asked_at = time.monotonic()
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    async def refuse(self, reader, data):
        # The whole request head first (a GET has no body): a client still sending when the
        # connection closes would see a reset, not the answer.
        while b"\r\n\r\n" not in data and (more := await reader.read(1 << 16)):
            data += more
        self.client_writer.write(_refusal(self.faults.status))
        await self.client_writer.drain()
        self.client_writer.close()

    async def upstream_to_client(self, reader, writer):
        try:
            while data := await reader.read(1 << 16):
                if self.asked_at is not None:
                    wait = self.asked_at + self.delay_s - time.monotonic()
                    self.asked_at = None
                    if wait > 0:
                        await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()


async def _serve(listen, upstream, delay_s, faults):
    async def handle(client_reader, client_writer):
        try:
            up_reader, up_writer = await asyncio.open_connection(*upstream)
        except OSError:
            client_writer.close()
            return
        c = _Connection(delay_s, faults, client_writer)
        await asyncio.gather(c.client_to_upstream(client_reader, up_writer),
                             c.upstream_to_client(up_reader, client_writer),
                             return_exceptions=True)

    server = await asyncio.start_server(handle, *listen, backlog=1024)
    host, port = server.sockets[0].getsockname()[:2]
    print(f"listening {host}:{port}", flush=True)
    async with server:
        await server.serve_forever()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", type=_address, required=True, help="HOST:PORT to accept on (port 0: any)")
    p.add_argument("--upstream", type=_address, required=True, help="HOST:PORT of the store")
    p.add_argument("--delay-ms", type=float, default=0, help="first-byte delay of each response, ms (>= 0; default 0)")
    p.add_argument("--fail-every", type=int, default=0, metavar="N",
                   help="answer every Nth GET with --fail-status instead of forwarding it (default 0: never)")
    p.add_argument("--fail-status", type=int, choices=sorted(_REASONS), default=503,
                   help="the status of a refused GET: 503 SlowDown (default) or 429")
    args = p.parse_args()
    if args.delay_ms < 0:
        p.error("--delay-ms must be >= 0")
    if args.fail_every < 0:
        p.error("--fail-every must be >= 0")
    try:
        asyncio.run(_serve(args.listen, args.upstream, args.delay_ms / 1000,
                           _Faults(args.fail_every, args.fail_status)))
    except KeyboardInterrupt:
        pass
    except OSError as e:
        print(f"delay_proxy: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
