"""deploy/uvicorn_nodelay.py: a connection accepted on a listener bound as uvicorn's workers get it sends without
Nagle's delay."""

from __future__ import annotations

import asyncio
import importlib.util
import socket
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_connection_on_a_listener_bound_as_uvicorn_binds_it_has_tcp_nodelay() -> None:
    spec = importlib.util.spec_from_file_location("uvicorn_nodelay", REPO / "deploy" / "uvicorn_nodelay.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    listener = socket.socket(family=socket.AF_INET)  # as uvicorn's Config.bind_socket: its protocol reads 0
    listener.bind(("127.0.0.1", 0))
    accepted: asyncio.Future[int] = asyncio.Future(loop=(loop := module.NoDelayLoop()))

    class Report(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    async def serve() -> int:
        server = await loop.create_server(Report, sock=listener)
        async with server:
            _, writer = await asyncio.open_connection(*listener.getsockname())
            nodelay = await asyncio.wait_for(accepted, 10)
            writer.close()
            return nodelay

    try:
        assert loop.run_until_complete(serve()) == 1
    finally:
        loop.close()
