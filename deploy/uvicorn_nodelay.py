"""An asyncio event loop for the MLflow server's uvicorn workers whose connections send without Nagle's delay.

    mlflow server ... --workers 4 --uvicorn-opts "--loop uvicorn_nodelay:NoDelayLoop"   (deploy/ on PYTHONPATH)

With ``--workers`` above 1, uvicorn binds the listening socket itself and hands it to each worker; asyncio sets
TCP_NODELAY only on accepted sockets whose protocol reads IPPROTO_TCP, and that socket's reads 0, so every
connection keeps Nagle's algorithm (uvicorn issue #3149). uvicorn writes a response's headers and body
separately; on a kept-alive connection the body then waits for the client's delayed ACK of the headers: about
40 ms on Linux, per request. This loop sets TCP_NODELAY on the listening socket, which accepted sockets inherit.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any


class NoDelayLoop(asyncio.SelectorEventLoop):
    """uvicorn's asyncio loop, its TCP listeners with TCP_NODELAY (``--loop uvicorn_nodelay:NoDelayLoop``)."""

    async def create_server(self, *args: Any, sock: socket.socket | None = None, **kwargs: Any) -> asyncio.Server:
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return await super().create_server(*args, sock=sock, **kwargs)
