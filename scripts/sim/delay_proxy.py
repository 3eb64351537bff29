#!/usr/bin/python3
"""A TCP proxy that puts an object store's first-byte latency in front of a local one.

netem is missing on these machines, so a gateway on loopback answers a GET in ~0.5 ms where a real
object store takes 10-200 ms to its first byte. This proxy forwards each connection to the
upstream unchanged (byte for byte: SigV4 signatures, which cover the Host header, still hold) and
holds the first byte of every response until --delay-ms after the request that asked for it: a
request is the client's bytes after the previous response began (HTTP/1.1 as libcurl speaks it,
one request at a time on a connection). The rest of a response flows as fast as the upstream
sends it, so bandwidth is the upstream's and latency the proxy's.

  delay_proxy.py --listen 127.0.0.1:9001 --upstream 127.0.0.1:9000 --delay-ms 30

Prints "listening HOST:PORT" on stdout once it accepts connections (port 0: one is chosen), then
serves until killed. Stdlib only (Debian's python3).
"""
import argparse
import asyncio
import sys
import time


def _address(text):
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, int(port)


class _Connection:
    def __init__(self, delay_s):
        self.delay_s = delay_s
        self.asked_at = None  # when the request now waiting for its answer was sent

    async def client_to_upstream(self, reader, writer):
        try:
            while data := await reader.read(1 << 16):
                if self.asked_at is None:
                    self.asked_at = time.monotonic()
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

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


async def _serve(listen, upstream, delay_s):
    async def handle(client_reader, client_writer):
        try:
            up_reader, up_writer = await asyncio.open_connection(*upstream)
        except OSError:
            client_writer.close()
            return
        c = _Connection(delay_s)
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
    p.add_argument("--delay-ms", type=float, required=True, help="first-byte delay of each response, ms (>= 0)")
    args = p.parse_args()
    if args.delay_ms < 0:
        p.error("--delay-ms must be >= 0")
    try:
        asyncio.run(_serve(args.listen, args.upstream, args.delay_ms / 1000))
    except KeyboardInterrupt:
        pass
    except OSError as e:
        print(f"delay_proxy: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
