"""Length-prefixed pickle frames between the engine and its worker processes (both sides are ours): one codec, read
blocking by the worker and awaited by the pool."""
from __future__ import annotations

import asyncio
import pickle
import struct
from typing import Any, BinaryIO

HEADER = struct.Struct(">I")


def frame(payload: bytes) -> bytes:
    """A pickled payload with its length in front."""
    return HEADER.pack(len(payload)) + payload


def encode(obj: Any) -> bytes:
    return frame(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def read_frame(stream: BinaryIO) -> Any:
    """The next object, or None at end of stream."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    return pickle.loads(stream.read(size))


def write_frame(stream: BinaryIO, obj: Any) -> None:
    stream.write(encode(obj))
    stream.flush()


async def aread_frame(stream: asyncio.StreamReader) -> Any:
    """The next object; ``IncompleteReadError`` when the stream ends first."""
    (size,) = HEADER.unpack(await stream.readexactly(HEADER.size))
    return pickle.loads(await stream.readexactly(size))
