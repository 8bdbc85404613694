"""Dataset digests: the values DEBUG DIGEST and DEBUG DIGEST-VALUE report.

Owns the digest of a key's value (``value_digest``) and of every database
(``dataset_digest``), computed as valkey-server 8.1.8 computes them, so a
test can compare a whole dataset between hotkv and Valkey with one call.
A core helper: it reads the databases, and each value through its row in
the type table (hotkv/types/table.py: its object type code, and its
contents as ordered parts, members or pairs); it imports nothing from
hotkv/commands/ and switches on no value class.

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

from ..types.table import BY_CLASS

ZERO = bytes(20)
_EXPIRE_MARK = b"!!expire!!"
_sha1 = hashlib.sha1

# Each value class's object type code (its row's OBJ_TYPE), as 4 BE bytes.
_TYPE_BYTES = {cls: struct.pack(">I", t.obj_type) for cls, t in BY_CLASS.items()}


def _xor_into(state: int, data: bytes) -> int:
    """State (a 160-bit int) xored with SHA1(data)."""
    return state ^ int.from_bytes(_sha1(data).digest(), "big")


def _mix_into(state: int, data: bytes) -> int:
    """SHA1(state ^ SHA1(data)) as a 160-bit int."""
    x = state ^ int.from_bytes(_sha1(data).digest(), "big")
    return int.from_bytes(_sha1(x.to_bytes(20, "big")).digest(), "big")


def _pair(first: bytes, second: bytes) -> bytes:
    """One hash field or zset member's own digest: a zero state mixed with
    its two parts (xored into the key's state through SHA1 once more)."""
    return _mix_into(_mix_into(0, first), second).to_bytes(20, "big")


def _value_state(state: int, value) -> int:
    """state with ``value`` digested into it (type code, then contents, as
    its row in the type table says: ordered parts mixed, members or pairs
    xored)."""
    cls = type(value)
    t = BY_CLASS.get(cls)
    if t is None:
        raise TypeError("no digest for %r" % cls)
    state = _mix_into(state, _TYPE_BYTES[cls])
    kind = t.digest
    if kind == "ordered":
        for part in t.digest_parts(value):
            state = _mix_into(state, part)
    elif kind == "members":
        for member in t.digest_parts(value):
            state = _xor_into(state, member)
    else:       # "pairs"
        for first, second in t.digest_parts(value):
            state = _xor_into(state, _pair(first, second))
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
