# pyright: basic
"""Length-prefixed JSON frames over the worker's two private fds."""

import json
import os
import struct
import threading

HEADER = struct.Struct(">I")


class Channel:
    """Frames over the two private fds."""

    def __init__(self, fd_in, fd_out):
        self.fd_in = fd_in
        self.fd_out = fd_out
        self.lock = threading.Lock()

    def send(self, message):
        body = json.dumps(message, allow_nan=False, default=str).encode()
        data = HEADER.pack(len(body)) + body
        with self.lock:
            view = memoryview(data)
            while view:
                written = os.write(self.fd_out, view)
                view = view[written:]

    def _read_exact(self, n):
        chunks = []
        while n:
            chunk = os.read(self.fd_in, min(n, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def receive(self):
        header = self._read_exact(HEADER.size)
        if header is None:
            return None
        body = self._read_exact(HEADER.unpack(header)[0])
        return None if body is None else json.loads(body)
