"""A script's return value as RESP for its caller (Lua -> RESP), following
Valkey's script_lua.c luaReplyToRedisReply.

Owns ``ReplyWriter``, the part of ``hotkv.lua.engine.Engine`` that encodes
the value a script returned: numbers truncated to integers, a string as a
bulk string, true -> 1 and false -> nil in RESP2 (booleans in RESP3 after
``redis.setresp(3)``), tables classified by the prelude (``classify``:
array up to the first nil, ``{err=}``, ``{ok=}``, ``{double=}``,
``{big_number=}``, ``{verbatim_string=}``, ``{map=}``, ``{set=}``).

Invariants:
* the reply is written whole into ``out`` (no partial reply on an error);
* nesting stops at MAX_REPLY_DEPTH with Valkey's "reached lua stack limit";
* an ``{err=}`` the script returns counts in the error stats unless it came
  from a call that counted it already (``ignore_error_stats_update``);
* CR and LF in a status or error text are written as spaces.
"""

from __future__ import annotations

from ..protocol.resp import Double, encode
from .values import truncate

MAX_REPLY_DEPTH = 200
# Arrays up to this length come out of Lua in one call (Engine._items: Lua's
# unpack, whose results must fit the C stack's 8,000 slots); longer ones
# item by item.
UNPACK_MAX = 7000
_INT64 = 1 << 63


class ReplyWriter:
    """Engine's Lua -> RESP half (mixed into hotkv.lua.engine.Engine)."""

    # Lua -> RESP -------------------------------------------------------
    def _reply(self, v, out: list, resp3: bool, script_resp3: bool, depth: int = 0):
        t = type(v)
        if t is bytes:
            encode(v, out, resp3)
        elif t is bool:
            if not script_resp3:
                out.append(b":1\r\n" if v else (b"_\r\n" if resp3 else b"$-1\r\n"))
            elif resp3:
                out.append(b"#t\r\n" if v else b"#f\r\n")
            else:
                out.append(b":1\r\n" if v else b":0\r\n")
        elif t is int or t is float:
            out.append(b":%d\r\n" % truncate(v))
        elif self.lua_type(v) == "table":
            if depth >= MAX_REPLY_DEPTH:
                # Valkey nests until the Lua C stack is full (~8000 levels);
                # we stop earlier, with its error text.
                out.append(b"-ERR reached lua stack limit\r\n")
                return
            self._reply_table(v, out, resp3, script_resp3, depth + 1)
        else:
            out.append(b"_\r\n" if resp3 else b"$-1\r\n")

    def _reply_table(self, v, out, resp3, script_resp3, depth):
        res = self._classify(v)
        kind = res[0]
        if kind == b"array":
            n = res[1]
            out.append(b"*%d\r\n" % n)
            if n > UNPACK_MAX:
                for i in range(1, n + 1):
                    self._reply(v[i], out, resp3, script_resp3, depth)
                return
            # The items in one crossing (raw reads, as classify counted
            # them): a string or an integer written here, the rest by _reply.
            items = self._items(v, n) if n > 1 else (v[1],) if n else ()
            reply = self._reply
            append = out.append
            for x in items:
                t = type(x)
                if t is bytes:
                    append(b"$%d\r\n%b\r\n" % (len(x), x))
                elif t is int and -_INT64 <= x < _INT64:
                    append(b":%d\r\n" % x)
                else:
                    reply(x, out, resp3, script_resp3, depth)
        elif kind == b"err":
            err = res[1]
            if not res[2]:
                self.server.count_error(err.decode("utf-8", "surrogateescape"), True)
            out.append(b"-" + err.replace(b"\r", b" ").replace(b"\n", b" ") + b"\r\n")
        elif kind == b"ok":
            out.append(b"+" + res[1].replace(b"\r", b" ").replace(b"\n", b" ") + b"\r\n")
        elif kind == b"double":
            encode(Double(res[1]), out, resp3)
        elif kind == b"big":
            big = res[1].replace(b"\r", b" ").replace(b"\n", b" ")
            if resp3:
                out.append(b"(" + big + b"\r\n")
            else:
                out.append(b"$%d\r\n%b\r\n" % (len(big), big))
        elif kind == b"verbatim":
            s, fmt = res[1], res[2]
            if resp3:
                out.append(b"=%d\r\n%b:%b\r\n" % (len(s) + 4, fmt[:3], s))
            else:
                out.append(b"$%d\r\n%b\r\n" % (len(s), s))
        elif kind == b"map":
            items = list(res[1].items())
            out.append((b"%%%d\r\n" if resp3 else b"*%d\r\n") % (len(items) * (1 if resp3 else 2)))
            for k, val in items:
                self._reply(k, out, resp3, script_resp3, depth)
                self._reply(val, out, resp3, script_resp3, depth)
        else:   # set
            keys = list(res[1].keys())
            out.append((b"~%d\r\n" if resp3 else b"*%d\r\n") % len(keys))
            for k in keys:
                self._reply(k, out, resp3, script_resp3, depth)
