"""Large answers encoded in pieces: the same JSON and msgpack bytes as one ``orjson.dumps`` /
``msgpack.packb`` call, made by many small calls.

orjson and msgpack are C code that holds the GIL for the whole call: 45 ms to pack a 3.5 MB
lineage tree, 40 ms to write it as JSON. Made on a thread of the API (:mod:`api.offloop`),
that would still stop the API's event loop for as long; made in pieces of at most
:data:`SLICE` list items, the loop takes the GIL back between two pieces.
"""

from __future__ import annotations

import struct
from typing import Any, Iterator

import msgpack
import orjson

#: Items of a list encoded by one call.
SLICE = 1000


def json_bytes(value: Any) -> bytes:
    """``orjson.dumps(value)``, in pieces."""
    return b"".join(_json(value, top=True))


def _slices(value: dict | list) -> Iterator[dict | list]:
    items = list(value.items()) if isinstance(value, dict) else value
    for at in range(0, len(items), SLICE):
        yield dict(items[at:at + SLICE]) if isinstance(value, dict) else items[at:at + SLICE]


def _json(value: Any, top: bool = False) -> Iterator[bytes]:
    """A top-level map key by key; a long list or map (of str keys) in slices; else one call."""
    keyed = isinstance(value, dict) and all(type(k) is str for k in value)
    if top and keyed and value:
        yield b"{"
        for i, (key, item) in enumerate(value.items()):
            yield (b"," if i else b"") + orjson.dumps(key) + b":"
            yield from _json(item)
        yield b"}"
    elif (keyed or isinstance(value, list)) and len(value) > SLICE:
        yield b"{" if keyed else b"["
        for i, part in enumerate(_slices(value)):
            yield (b"," if i else b"") + orjson.dumps(part)[1:-1]
        yield b"}" if keyed else b"]"
    else:
        yield orjson.dumps(value)


def msgpack_bytes(value: Any) -> bytes:
    """``msgpack.packb(value, use_bin_type=True)``, in pieces (a map or array is its header, then
    its items, as msgpack writes them)."""
    return b"".join(_packed(value, top=True))


_MAP, _ARRAY = (0x80, 0xDE, 0xDF), (0x90, 0xDC, 0xDD)


def _header(kind: tuple[int, int, int], n: int) -> bytes:
    small, short, long = kind
    if n <= 15:
        return bytes((small | n,))
    return bytes((short,)) + struct.pack(">H", n) if n <= 0xFFFF else bytes((long,)) + struct.pack(">I", n)


def _packed(value: Any, top: bool = False) -> Iterator[bytes]:
    if top and type(value) is dict:
        yield _header(_MAP, len(value))
        for key, item in value.items():
            yield msgpack.packb(key, use_bin_type=True)
            yield from _packed(item)
    elif type(value) in (dict, list) and len(value) > SLICE:
        kind = _MAP if type(value) is dict else _ARRAY
        yield _header(kind, len(value))
        for part in _slices(value):
            yield msgpack.packb(part, use_bin_type=True)[len(_header(kind, len(part))):]
    else:
        yield msgpack.packb(value, use_bin_type=True)


def msgpack_value(raw: bytes) -> Any:
    """``msgpack.unpackb(raw, raw=False, strict_map_key=False)``, a top-level map's values and
    their maps' and arrays' items read one by one."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=max(len(raw), 1))
    unpacker.feed(raw)
    return _unpacked(unpacker, raw, 2)


def _unpacked(unpacker: msgpack.Unpacker, raw: bytes, depth: int) -> Any:
    first = raw[unpacker.tell()] if unpacker.tell() < len(raw) else None
    if depth and first is not None and (0x80 <= first <= 0x8F or first in _MAP[1:]):
        if depth == 1:
            return {unpacker.unpack(): unpacker.unpack() for _ in range(unpacker.read_map_header())}
        return {unpacker.unpack(): _unpacked(unpacker, raw, depth - 1) for _ in range(unpacker.read_map_header())}
    if depth and first is not None and (0x90 <= first <= 0x9F or first in _ARRAY[1:]):
        return [unpacker.unpack() for _ in range(unpacker.read_array_header())]
    return unpacker.unpack()
