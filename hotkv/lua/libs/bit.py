"""bit for scripts: LuaBitOp's functions (tobit, bnot, band, bor, bxor,
lshift, rshift, arshift, rol, ror, bswap, tohex) as Redis ships them.

Owns 32-bit integer arithmetic on Lua numbers: every argument is first
made a signed 32-bit value as LuaBitOp does (``tobit``: rounded to the
nearest integer, a half to even, modulo 2^32); results are signed
32-bit; shift counts use their low 5 bits; tohex's width defaults to 8,
a negative width gives upper-case digits.  Error texts are LuaBitOp's.

Invariant: ``op`` returns (True, value) or (False, message), never raises,
and touches no Lua state.
"""

from __future__ import annotations

import struct

from ..values import lua_tonumber, lua_type_name


def signed(u: int) -> int:
    return u - (1 << 32) if u & 0x80000000 else u


def tobit(n) -> int:
    """LuaBitOp's barg: the low 32 bits of the double n + 2^52 + 2^51.  For
    |n| < 2^51 that is n rounded to the nearest integer (a half to even, as
    the FPU rounds the sum) modulo 2^32; beyond, whatever the sum's mantissa
    holds; NaN and Inf give 0."""
    try:
        x = float(n) + 6755399441055744.0
    except OverflowError:   # an integer beyond any double: strtod's HUGE_VAL
        return 0
    return signed(struct.unpack("<Q", struct.pack("<d", x))[0] & 0xFFFFFFFF)


def op(name, *args):
    """bit.<name>(args...): (True, result) or (False, message)."""
    name = name.decode() if isinstance(name, bytes) else name
    nums = []
    for i, a in enumerate(args, 1):
        try:
            nums.append(tobit(lua_tonumber(a)))
        except (TypeError, ValueError):
            return False, ("bad argument #%d to '%s' (number expected, got %s)"
                           % (i, name, lua_type_name(a))).encode()
    if not nums:
        return False, ("bad argument #1 to '%s' (number expected, got no value)"
                       % name).encode()
    x = nums[0]
    u = x & 0xFFFFFFFF
    if name == "tobit":
        r = x
    elif name == "bnot":
        r = ~x
    elif name in ("band", "bor", "bxor"):
        r = x
        for y in nums[1:]:
            r = r & y if name == "band" else (r | y if name == "bor" else r ^ y)
    elif name == "bswap":
        r = int.from_bytes(u.to_bytes(4, "little"), "big")
    elif name == "tohex":
        w = nums[1] if len(nums) > 1 else 8
        digits = "0123456789abcdef"
        if w < 0:
            w = -w
            digits = digits.upper()
        w = min(w, 8)
        s = ""
        for _ in range(w):
            s = digits[u & 15] + s
            u >>= 4
        return True, s.encode()
    else:
        if len(nums) < 2:
            return False, ("bad argument #2 to '%s' (number expected, got no value)"
                           % name).encode()
        sh = nums[1] & 31
        if name == "lshift":
            r = u << sh
        elif name == "rshift":
            r = u >> sh
        elif name == "arshift":
            r = signed(u) >> sh
        elif name == "rol":
            r = (u << sh) | (u >> (32 - sh)) if sh else u
        else:  # ror
            r = (u >> sh) | (u << (32 - sh)) if sh else u
    return True, signed(r & 0xFFFFFFFF)
