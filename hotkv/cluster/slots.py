"""Hash slots: the CRC16 (XMODEM) of a key's hash tag, modulo 16,384.

``key_slot(key)`` is Valkey's keyHashSlot: when the key holds a ``{`` and a
later ``}`` with at least one byte between them, only those bytes are
hashed (the hash tag), else the whole key.  The value is what CLUSTER
KEYSLOT answers and what every routing decision of hotkv.cluster uses.

Invariants: a pure function of the bytes; 0 <= slot < SLOTS.
"""

from __future__ import annotations

from binascii import crc_hqx

SLOTS = 16384


def crc16(data: bytes) -> int:
    """CRC16-XMODEM (poly 0x1021, initial 0), Valkey's crc16: the standard
    library's ``binascii.crc_hqx`` computes exactly this, in C (a pure
    Python loop cost ~0.1 us a byte on the routing path)."""
    return crc_hqx(data, 0)


def key_slot(key: bytes) -> int:
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    return crc16(key) & 0x3FFF


def pattern_slot(pattern: bytes) -> int:
    """The one slot every key matching a glob pattern hashes to, or -1 when
    the keys may be in any slot (Valkey's patternHashSlot, used by SORT's BY
    and GET in cluster mode): a wildcard (``*``, ``?``, ``[``) or an escape
    before a closed non-empty hash tag means any slot; a closed non-empty tag
    is hashed alone; an empty ``{}`` first means the whole pattern; a pattern
    without wildcards is one key, hashed whole."""
    opening = -1        # index of the first '{'; -2 once an empty tag was met
    for i, ch in enumerate(pattern):
        if ch in b"*?[\\":
            return -1
        if opening == -1 and ch == 0x7B:           # '{'
            opening = i
        elif opening >= 0 and ch == 0x7D:          # '}'
            if i == opening + 1:
                opening = -2
            else:
                return crc16(pattern[opening + 1:i]) & 0x3FFF
    return crc16(pattern) & 0x3FFF


def ranges(slots) -> list[tuple[int, int]]:
    """Sorted slot numbers -> [(first, last), ...] of consecutive runs."""
    out: list = []
    for s in slots:
        if out and out[-1][1] == s - 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out
