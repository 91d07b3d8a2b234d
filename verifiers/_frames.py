"""Length-prefixed pickle frames between the engine and its worker processes (both sides are ours)."""
from __future__ import annotations

import pickle
import struct
from typing import Any, BinaryIO

HEADER = struct.Struct(">I")


def read_frame(stream: BinaryIO) -> Any:
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    return pickle.loads(stream.read(size))


def write_frame(stream: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(data)) + data)
    stream.flush()
