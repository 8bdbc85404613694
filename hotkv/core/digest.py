"""Dataset digests: the values DEBUG DIGEST and DEBUG DIGEST-VALUE report.

Owns the digest of a key's value (``value_digest``) and of every database
(``dataset_digest``), computed as valkey-server 8.1.8 computes them, so a
test can compare a whole dataset between hotkv and Valkey with one call.
A core helper: it reads the types' values (hotkv/types/) and the
databases, and imports nothing from hotkv/commands/.

The scheme (learned from Valkey's debug.c, written anew here), over 20-byte
SHA1 states:
* ``xor(d, data)``: d ^= SHA1(data) -- order-free, for members of sets,
  hash fields and zset members, and for keys within a database (each xors
  in the SHA1 of its own 20-byte digest);
* ``mix(d, data)``: d = SHA1(d ^ SHA1(data)) -- ordered, for list
  elements, stream entries and the parts of one element;
* a key's digest: mix(key), mix(type code as 4 big-endian bytes), then the
  value (below), then xor("!!expire!!") when the key has an expiry;
* strings: mix(bytes) (an integer-encoded string digests as its decimal
  text, which is the bytes hotkv holds);  lists: mix each element, head to
  tail;  sets: xor each member;  hashes: xor, per field, a fresh digest
  mixed with the field then the value;  sorted sets: xor, per member, a
  fresh digest mixed with the member then the score as fpconv_dtoa writes
  it (``fpconv_score``: shortest round-trip digits, scientific beyond 21
  integer digits);  streams: mix "ms.seq" then each field and value, per
  live entry in ID order -- consumer groups, PELs, consumers and the
  stream's counters are not part of Valkey's digest;
* a database: when it holds keys, the running dataset digest is mixed with
  its number (4 big-endian bytes), then every key's digest is xored in.
  An empty dataset digests to 20 zero bytes.

Invariants: digests never look at clocks or expire keys (Valkey digests
logically expired keys too); a listpack-encoded sorted set digests a zero
score as "0" because Valkey's listpack keeps no sign on zero, a skiplist
one keeps -0 as "-0".
"""

from __future__ import annotations

import hashlib
import struct

from ..protocol.fpconv import dtoa as fpconv_score
from ..types.hashes import HashValue
from ..types.lists import ListValue
from ..types.sets import SetValue
from ..types.stream import Stream
from ..types.zsets import ZSetValue

ZERO = bytes(20)
_EXPIRE_MARK = b"!!expire!!"
_sha1 = hashlib.sha1

# Redis's object type codes (OBJ_STRING ... OBJ_STREAM), as 4 BE bytes.
_TYPE_CODE = {bytes: 0, bytearray: 0, ListValue: 1, SetValue: 2, ZSetValue: 3,
              HashValue: 4, Stream: 6}
_TYPE_BYTES = {cls: struct.pack(">I", code) for cls, code in _TYPE_CODE.items()}


def _xor_into(state: int, data: bytes) -> int:
    """State (a 160-bit int) xored with SHA1(data)."""
    return state ^ int.from_bytes(_sha1(data).digest(), "big")


def _mix_into(state: int, data: bytes) -> int:
    """SHA1(state ^ SHA1(data)) as a 160-bit int."""
    x = state ^ int.from_bytes(_sha1(data).digest(), "big")
    return int.from_bytes(_sha1(x.to_bytes(20, "big")).digest(), "big")


def _stream_entries(stream: Stream):
    """(id, flat field/value tuple) for each live entry, in ID order."""
    for node in stream.nodes:
        ids = node.ids
        ms, seq = ids.ms, ids.seq
        for j, item in enumerate(node.items):
            if item is None:
                continue
            if type(item) is bytes:
                item = (node.fields[0], item)
            yield ms[j], seq[j], item


def _pair(first: bytes, second: bytes) -> bytes:
    """One hash field or zset member's own digest: a zero state mixed with
    its two parts (xored into the key's state through SHA1 once more)."""
    return _mix_into(_mix_into(0, first), second).to_bytes(20, "big")


def _value_state(state: int, value) -> int:
    """state with ``value`` digested into it (type code, then contents)."""
    cls = type(value)
    state = _mix_into(state, _TYPE_BYTES[cls])
    if cls is bytes or cls is bytearray:
        return _mix_into(state, bytes(value))
    if cls is ListValue:
        for element in value:
            state = _mix_into(state, element)
    elif cls is SetValue:
        for member in value:
            state = _xor_into(state, member)
    elif cls is HashValue:
        for field, val in value.items():
            state = _xor_into(state, _pair(field, val))
    elif cls is ZSetValue:
        small = not value.big
        for member, score in value.d.items():
            text = b"0" if small and score == 0 else fpconv_score(score)
            state = _xor_into(state, _pair(member, text))
    elif cls is Stream:
        for ms, seq, items in _stream_entries(value):
            state = _mix_into(state, b"%d.%d" % (ms, seq))
            for part in items:
                state = _mix_into(state, part)
    else:
        raise TypeError("no digest for %r" % cls)
    return state


def _key_state(value, expires: bool, state: int = 0) -> int:
    state = _value_state(state, value)
    if expires:
        state = _xor_into(state, _EXPIRE_MARK)
    return state


def value_digest(db, key: bytes) -> bytes:
    """DEBUG DIGEST-VALUE's 20 bytes for key in db: zeros when missing;
    the key's name is not part of it."""
    value = db.data.get(key)
    if value is None:
        return ZERO
    return _key_state(value, key in db.expires).to_bytes(20, "big")


def dataset_digest(dbs) -> bytes:
    """DEBUG DIGEST's 20 bytes over the databases ``dbs`` (in index order)."""
    final = 0
    for db in dbs:
        data = db.data
        if not data:
            continue
        final = _mix_into(final, struct.pack(">I", db.index))
        expires = db.expires
        for key, value in data.items():
            own = _key_state(value, key in expires, _mix_into(0, key))
            final = _xor_into(final, own.to_bytes(20, "big"))
    return final.to_bytes(20, "big")
