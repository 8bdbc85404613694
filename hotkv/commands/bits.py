"""Bitmap commands (Valkey's bitops.c): SETBIT, GETBIT, BITCOUNT, BITPOS,
BITOP, BITFIELD and BITFIELD_RO.

A bitmap is a string value; bit 0 is the most significant bit of byte 0.
A missing key reads as an endless run of zero bits.

Invariants and rules, all Valkey 8.1's:
* a writing command takes the value through ``strings.string_for_write``
  (Valkey's lookupStringForBitCommand): the key then holds a ``bytearray``
  (the "raw" encoding) grown with zero bytes to the highest bit written --
  even when no bit ends up changing -- and later writes change it in place;
* readers use ``strings.read_string_raw`` (no copy) and never hand the
  stored object out: every reply is an int or a new ``bytes``;
* ``server.written`` (dirty, WATCH, event "setbit") runs only when a bit
  changed or the value was created or grown; BITFIELD counts one dirty per
  such operation.  A BITFIELD whose writes all FAIL still creates the key
  (zero-filled) without a write being counted, so it is not propagated --
  Valkey's behaviour;
* BITOP stores a new raw value with SET's effects (TTL dropped, event
  "set"); an all-empty result deletes the destination (event "del");
* offsets: a non-negative int64 whose byte (offset >> 3) is below
  proto-max-bulk-len (the AOF loader is exempt); BITFIELD's ``#N`` offsets
  are N * width, multiplied in wrapping int64 arithmetic as C does;
* BITFIELD overflow checks are Valkey's checkSignedBitfieldOverflow /
  checkUnsignedBitfieldOverflow computed in wrapping 64-bit arithmetic, so
  their corner cases (a SET value far outside the type) match bit for bit.
"""

from __future__ import annotations

from ..core.registry import command, spec
from ..protocol import errors
from ..protocol.errors import CommandError, WrongType
from ..protocol.util import string2ll
from .strings import read_string_raw, string_for_write

BIT_OFFSET_ERR = "ERR bit offset is not an integer or out of range"
BIT_VALUE_ERR = "ERR bit is not an integer or out of range"
BITFIELD_TYPE_ERR = ("ERR Invalid bitfield type. Use something like i16 u8. "
                     "Note that u64 is not supported but i64 is.")

_M64 = (1 << 64) - 1
_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1


def _s64(v: int) -> int:
    """v wrapped to a signed 64-bit integer (C's two's complement)."""
    v &= _M64
    return v - (1 << 64) if v >> 63 else v


def _bit_offset(c, arg: bytes, bits: int = 0) -> int:
    """getBitOffsetFromArgument: ``bits`` > 0 allows the ``#N`` form."""
    usehash = bits > 0 and arg[:1] == b"#"
    v = string2ll(arg[1:] if usehash else arg)
    if v is None:
        raise CommandError(BIT_OFFSET_ERR)
    if usehash:
        v = _s64(v * bits)
    if v < 0 or ((v >> 3) >= c.server.config.values["proto-max-bulk-len"]
                 and not c.is_fake):
        raise CommandError(BIT_OFFSET_ERR)
    return v


# ----------------------------------------------------------------------
# SETBIT / GETBIT
# ----------------------------------------------------------------------

@command("setbit", 4, "write denyoom", (1, 1, 1), group="bitmap", since="2.2.0",
         args="key:k offset:i value:i", complexity="O(1)")
def setbit(c, argv):
    """Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist."""
    offset = _bit_offset(c, argv[2])
    on = string2ll(argv[3])
    if on is None or on & ~1:
        raise CommandError(BIT_VALUE_ERR)
    key = argv[1]
    byte = offset >> 3
    buf, dirty = string_for_write(c, key, byte + 1)
    shift = 7 - (offset & 7)
    old = buf[byte]
    bitval = (old >> shift) & 1
    if dirty or bitval != on:
        buf[byte] = (old & ~(1 << shift)) | (on << shift)
        c.server.written(c.db, key, "$", "setbit")
    return bitval


@command("getbit", 3, "readonly fast", (1, 1, 1), group="bitmap", since="2.2.0",
         args="key:k offset:i", complexity="O(1)")
def getbit(c, argv):
    """Returns a bit value by offset."""
    offset = _bit_offset(c, argv[2])
    v = read_string_raw(c.db, argv[1])
    if v is None:
        return 0
    byte = offset >> 3
    if byte >= len(v):
        return 0
    return (v[byte] >> (7 - (offset & 7))) & 1


# ----------------------------------------------------------------------
# BITCOUNT / BITPOS
# ----------------------------------------------------------------------

def _unit_is_bit(arg: bytes) -> bool:
    unit = arg.upper()
    if unit == b"BIT":
        return True
    if unit != b"BYTE":
        raise CommandError(errors.SYNTAX)
    return False


def _int_arg(arg: bytes) -> int:
    v = string2ll(arg)
    if v is None:
        raise CommandError(errors.NOT_INTEGER)
    return v


def _bit_range(start: int, end: int, total: int, isbit: bool):
    """Clamp a BYTE or BIT range to the string as Valkey does: (first byte,
    last byte, mask of the first byte's bits before the range, mask of the
    last byte's bits after it)."""
    if isbit:
        total <<= 3
    if start < 0:
        start += total
    if end < 0:
        end += total
    if start < 0:
        start = 0
    if end < 0:
        end = 0
    if end >= total:
        end = total - 1
    first_mask = last_mask = 0
    if isbit and start <= end:
        first_mask = ~((1 << (8 - (start & 7))) - 1) & 0xFF
        last_mask = (1 << (7 - (end & 7))) - 1
        start >>= 3
        end >>= 3
    return start, end, first_mask, last_mask


@command("bitcount", -2, "readonly", (1, 1, 1), group="bitmap", since="2.6.0",
         args="key:k range[start:i end-unit-block[end:i unit[BYTE | BIT]@7.0.0]]",
         complexity="O(N)",
         history=(("7.0.0", "Added the `BYTE|BIT` option."),
                  ("8.0.0",
                   "`end` made optional; when called without argument the command reports the "
                   "last BYTE.")))
def bitcount(c, argv):
    """Counts the number of set bits (population counting) in a string."""
    n = len(argv)
    first_mask = last_mask = 0
    if 3 <= n <= 5:
        start = _int_arg(argv[2])
        isbit = _unit_is_bit(argv[4]) if n == 5 else False
        end = _int_arg(argv[3]) if n >= 4 else 0
        v = read_string_raw(c.db, argv[1])
        total = len(v) if v is not None else 0
        if n < 4:
            end = total - 1
        if start < 0 and end < 0 and start > end:
            return 0
        start, end, first_mask, last_mask = _bit_range(start, end, total, isbit)
    elif n == 2:
        v = read_string_raw(c.db, argv[1])
        start = 0
        end = (len(v) if v is not None else 0) - 1
    else:
        raise CommandError(errors.SYNTAX)
    if v is None or start > end:
        return 0
    count = int.from_bytes(v[start:end + 1], "big").bit_count()
    if first_mask:
        count -= (v[start] & first_mask).bit_count()
    if last_mask:
        count -= (v[end] & last_mask).bit_count()
    return count


def _first_bit(buf, bit: int) -> int:
    """Valkey's serverBitpos: the first bit equal to ``bit`` in buf; when
    there is none, -1 looking for a 1 and len(buf) * 8 looking for a 0."""
    if bit:
        rest = buf.lstrip(b"\x00")
        if not rest:
            return -1
        return (len(buf) - len(rest)) * 8 + 8 - rest[0].bit_length()
    rest = buf.lstrip(b"\xff")
    if not rest:
        return len(buf) * 8
    return (len(buf) - len(rest)) * 8 + 8 - (~rest[0] & 0xFF).bit_length()


def _edge_byte(value: int, mask: int, bit: int) -> int:
    """A partial edge byte with its out-of-range bits made not to match."""
    return value & ~mask & 0xFF if bit else value | mask


@command("bitpos", -3, "readonly", (1, 1, 1), group="bitmap", since="2.8.7",
         args="key:k bit:i range[start:i end-unit-block[end:i unit[BYTE | BIT]@7.0.0]]",
         complexity="O(N)", history=(("7.0.0", "Added the `BYTE|BIT` option."),))
def bitpos(c, argv):
    """Finds the first set (1) or clear (0) bit in a string."""
    bit = _int_arg(argv[2])
    if bit != 0 and bit != 1:
        raise CommandError("ERR The bit argument must be 1 or 0.")
    n = len(argv)
    end_given = False
    first_mask = last_mask = 0
    if 4 <= n <= 6:
        start = _int_arg(argv[3])
        isbit = _unit_is_bit(argv[5]) if n == 6 else False
        if n >= 5:
            end = _int_arg(argv[4])
            end_given = True
        v = read_string_raw(c.db, argv[1])
        total = len(v) if v is not None else 0
        if n < 5:
            end = total - 1
        start, end, first_mask, last_mask = _bit_range(start, end, total, isbit)
    elif n == 3:
        v = read_string_raw(c.db, argv[1])
        start = 0
        end = (len(v) if v is not None else 0) - 1
    else:
        raise CommandError(errors.SYNTAX)
    if v is None:
        return -1 if bit else 0
    if start > end:
        return -1
    nbytes = end - start + 1
    pos = _bitpos_in(v, bit, start, end, nbytes, first_mask, last_mask)
    if type(pos) is tuple:
        pos, start, nbytes = pos
    # With an explicit end, the bits past the range are not zero padding:
    # "no clear bit in range" is -1, not the first bit after it.
    if end_given and bit == 0 and pos == nbytes << 3:
        return -1
    if pos != -1:
        pos += start << 3
    return pos


def _bitpos_in(v, bit, start, end, nbytes, first_mask, last_mask):
    """The search of bitposCommand over bytes start..end: (position relative
    to the (possibly advanced) start, that start, the bytes left)."""
    if first_mask:
        edge = _edge_byte(v[start], first_mask, bit)
        if last_mask and nbytes == 1:
            edge = _edge_byte(edge, last_mask, bit)
        pos = _first_bit(bytes((edge,)), bit)
        if nbytes == 1 or (pos != -1 and pos != 8):
            return pos, start, nbytes
        start += 1
        nbytes -= 1
    cur = nbytes - (1 if last_mask else 0)
    if cur > 0:
        pos = _first_bit(v[start:start + cur], bit)
        if nbytes == cur or (pos != -1 and pos != cur << 3):
            return pos, start, nbytes
        start += cur
        nbytes -= cur
    pos = _first_bit(bytes((_edge_byte(v[end], last_mask, bit),)), bit)
    return pos, start, nbytes


# ----------------------------------------------------------------------
# BITOP
# ----------------------------------------------------------------------

_BITOPS = {b"AND": 0, b"OR": 1, b"XOR": 2, b"NOT": 3}


@command("bitop", -4, "write denyoom", group="bitmap", since="2.6.0",
         key_specs=(spec("OW update", "index 2"),
                    spec("RO access", "index 3", "range -1 1 0")),
         args="operation(AND | OR | XOR | NOT) destkey:k key:k1...", complexity="O(N)")
def bitop(c, argv):
    """Performs bitwise operations on multiple strings, and stores the result."""
    op = _BITOPS.get(argv[1].upper())
    if op is None:
        raise CommandError(errors.SYNTAX)
    if op == 3 and len(argv) != 4:
        raise CommandError("ERR BITOP NOT must be called with a single source key.")
    db = c.db
    sources = []
    for key in argv[3:]:
        v = db.lookup_read(key)
        if v is None:
            v = b""
        elif type(v) is not bytes and type(v) is not bytearray:
            raise WrongType()
        sources.append(v)
    maxlen = max(len(v) for v in sources)
    target = argv[2]
    if not maxlen:
        if db.delete(target):
            c.server.written(db, target, "g", "del")
        return 0
    # Each source as one big-endian integer, zero-padded on the right to
    # maxlen bytes: the operation is then a single integer operation.
    ints = [int.from_bytes(v, "big") << ((maxlen - len(v)) << 3) for v in sources]
    acc = ints[0]
    if op == 0:
        for x in ints[1:]:
            acc &= x
    elif op == 1:
        for x in ints[1:]:
            acc |= x
    elif op == 2:
        for x in ints[1:]:
            acc ^= x
    else:
        acc = ~acc & ((1 << (maxlen << 3)) - 1)
    db.set(target, bytearray(acc.to_bytes(maxlen, "big")))
    c.server.written(db, target, "$", "set")
    return maxlen


# ----------------------------------------------------------------------
# BITFIELD / BITFIELD_RO
# ----------------------------------------------------------------------

WRAP, SAT, FAIL = 0, 1, 2
GET, SET, INCRBY = 0, 1, 2
_OVERFLOWS = {b"WRAP": WRAP, b"SAT": SAT, b"FAIL": FAIL}
_SUBCOMMANDS = {b"GET": (GET, 2), b"SET": (SET, 3), b"INCRBY": (INCRBY, 3)}


def _bitfield_type(arg: bytes):
    """(signed, bits) of an ``i<bits>`` / ``u<bits>`` argument."""
    sign = arg[:1]
    if sign != b"i" and sign != b"u":
        raise CommandError(BITFIELD_TYPE_ERR)
    signed = sign == b"i"
    # Valkey reads the width as a C string: it ends at a NUL byte.
    bits = string2ll(arg[1:].split(b"\x00", 1)[0])
    if bits is None or bits < 1 or bits > (64 if signed else 63):
        raise CommandError(BITFIELD_TYPE_ERR)
    return signed, bits


def _get_field(buf, offset: int, bits: int) -> int:
    """The unsigned value of the ``bits`` bits at bit ``offset``; bytes past
    the end of buf read as zeros."""
    first = offset >> 3
    last = (offset + bits - 1) >> 3
    chunk = buf[first:last + 1]
    width = (last - first + 1) << 3
    v = int.from_bytes(chunk, "big") << ((width >> 3) - len(chunk) << 3)
    return (v >> (width - (offset & 7) - bits)) & ((1 << bits) - 1)


def _set_field(buf: bytearray, offset: int, bits: int, value: int):
    """Write the low ``bits`` bits of value at bit ``offset`` (buf is long
    enough: string_for_write grew it)."""
    first = offset >> 3
    last = (offset + bits - 1) >> 3
    width = (last - first + 1) << 3
    shift = width - (offset & 7) - bits
    mask = ((1 << bits) - 1) << shift
    old = int.from_bytes(buf[first:last + 1], "big")
    new = (old & ~mask) | ((value << shift) & mask)
    buf[first:last + 1] = new.to_bytes(width >> 3, "big")


def _signed_overflow(value: int, incr: int, bits: int, owtype: int):
    """checkSignedBitfieldOverflow: (overflow?, the value to store instead)."""
    vmax = _I64_MAX if bits == 64 else (1 << (bits - 1)) - 1
    vmin = -vmax - 1
    maxincr = _s64(vmax - value)
    minincr = _s64(vmin - value)
    if value > vmax or (bits != 64 and incr > maxincr) or (
            value >= 0 and incr > 0 and incr > maxincr):
        limit = vmax
    elif value < vmin or (bits != 64 and incr < minincr) or (
            value < 0 and incr < 0 and incr < minincr):
        limit = vmin
    else:
        return False, 0
    if owtype == WRAP:
        r = (value + incr) & _M64
        if bits < 64:
            r = r | (_M64 << bits) & _M64 if r >> (bits - 1) & 1 else r & ((1 << bits) - 1)
        limit = _s64(r)
    return True, limit


def _unsigned_overflow(value: int, incr: int, bits: int, owtype: int):
    """checkUnsignedBitfieldOverflow (value an unsigned 64-bit integer)."""
    vmax = (1 << bits) - 1
    maxincr = _s64(vmax - value)
    minincr = _s64(-value)
    if value > vmax or (incr > 0 and incr > maxincr):
        limit = vmax
    elif incr < 0 and incr < minincr:
        limit = 0
    else:
        return False, 0
    if owtype == WRAP:
        limit = (value + incr) & vmax
    return True, limit


def _parse_bitfield(c, argv):
    """The operations of a BITFIELD: [(op, signed, bits, offset, arg, owtype)],
    and the highest bit a SET/INCRBY writes (-1 when none writes)."""
    ops = []
    owtype = WRAP
    highest = -1
    j = 2
    n = len(argv)
    while j < n:
        name = argv[j].upper()
        remaining = n - j - 1
        if name == b"OVERFLOW" and remaining >= 1:
            owtype = _OVERFLOWS.get(argv[j + 1].upper())
            if owtype is None:
                raise CommandError("ERR Invalid OVERFLOW type specified")
            j += 2
            continue
        sub = _SUBCOMMANDS.get(name)
        if sub is None or remaining < sub[1]:
            raise CommandError(errors.SYNTAX)
        op = sub[0]
        signed, bits = _bitfield_type(argv[j + 1])
        offset = _bit_offset(c, argv[j + 2], bits)
        arg = 0
        if op != GET:
            highest = max(highest, offset + bits - 1)
            arg = _int_arg(argv[j + 3])
        ops.append((op, signed, bits, offset, arg, owtype))
        j += sub[1] + 1
    return ops, highest


def _bitfield(c, argv, readonly_cmd: bool):
    ops, highest = _parse_bitfield(c, argv)
    db = c.db
    key = argv[1]
    if highest < 0:
        buf = read_string_raw(db, key)
        return [_field_value(buf, op) for op in ops]
    if readonly_cmd:
        raise CommandError("ERR BITFIELD_RO only supports the GET subcommand")
    buf, dirty = string_for_write(c, key, (highest >> 3) + 1)
    out = []
    changes = 0
    for op in ops:
        kind, signed, bits, offset, arg, owtype = op
        if kind == GET:
            out.append(_field_value(buf, op))
            continue
        old = _get_field(buf, offset, bits)
        if signed:
            if old >> (bits - 1):
                old -= 1 << bits
            if kind == INCRBY:
                overflow, new = _signed_overflow(old, arg, bits, owtype)
                if not overflow:
                    new = old + arg
                reply = new
            else:
                overflow, new = _signed_overflow(arg, 0, bits, owtype)
                if not overflow:
                    new = arg
                reply = old
        else:
            if kind == INCRBY:
                overflow, new = _unsigned_overflow(old, arg, bits, owtype)
                if not overflow:
                    new = (old + arg) & _M64
                reply = new
            else:
                # The SET value is reinterpreted as an unsigned 64-bit int.
                new = arg & _M64
                overflow, limit = _unsigned_overflow(new, 0, bits, owtype)
                if overflow:
                    new = limit
                reply = old
        if overflow and owtype == FAIL:
            out.append(None)
            continue
        out.append(reply)
        _set_field(buf, offset, bits, new)
        if dirty or old != new:
            changes += 1
    if changes:
        c.server.written(db, key, "$", "setbit", changes)
    return out


def _field_value(buf, op) -> int:
    _, signed, bits, offset, _, _ = op
    if buf is None:
        return 0
    v = _get_field(buf, offset, bits)
    if signed and v >> (bits - 1):
        v -= 1 << bits
    return v


@command("bitfield", -2, "write denyoom", group="bitmap", since="3.2.0",
         key_specs=(spec("RW access update variable_flags",
                         notes="This command allows both access and modification of the key"),),
         args="key:k operation[get-block(GET encoding offset:i) | write(overflow-block[OVERFLOW "
              "(WRAP | SAT | FAIL)] write-operation(set-block(SET encoding offset:i value:i) | "
              "incrby-block(INCRBY encoding offset:i increment:i)))]...",
         complexity="O(1) for each subcommand specified")
def bitfield(c, argv):
    """Performs arbitrary bitfield integer operations on strings."""
    return _bitfield(c, argv, False)


def _bitfield_key_flags(argv) -> tuple:
    """Valkey's bitfieldGetKeys: the key's flags are RO with only GET and
    OVERFLOW subcommands, RW as soon as a SET/INCRBY (or anything it cannot
    read) appears."""
    j = 2
    n = len(argv)
    while j < n:
        name = argv[j].upper()
        remaining = n - j - 1
        if name == b"GET" and remaining >= 2:
            j += 3
        elif name == b"OVERFLOW" and remaining >= 1:
            j += 2
        else:
            return (b"RW", b"access", b"update")
    return (b"RO", b"access")


bitfield.key_flags_fn = _bitfield_key_flags


@command("bitfield_ro", -2, "readonly fast", (1, 1, 1), group="bitmap", since="6.0.0",
         args="key:k get-block[GET encoding offset:i]...",
         complexity="O(1) for each subcommand specified")
def bitfield_ro(c, argv):
    """Performs arbitrary read-only bitfield integer operations on strings."""
    return _bitfield(c, argv, True)
