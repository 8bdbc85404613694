"""The list type: LPUSH ... LMPOP and the blocking pops (Redis's t_list.c).

A list is a ``hotkv.types.lists.ListValue`` (a deque): pushes and pops at either end
are O(1); LRANGE/LINDEX/LSET walk from the nearer end.  The data operations
(range, index, insert, LPOS, LREM, LTRIM, counted pops) are the type's
(hotkv/types/lists.py's "List API"); this module parses arguments, replies,
announces changes and chooses what is logged.  It is the
core of the job-queue use case: LPUSH + BRPOP, and the reliable queue
(BLMOVE into a processing list, LREM to acknowledge, LMOVE to requeue).

Invariants:
* a list is never empty in the keyspace: the command that removes the last
  element deletes the key (and emits the generic ``del`` event after its
  own list event, as Redis does) -- one helper, ``_removed``, for every
  command that removes elements;
* every change goes through ``server.written`` with Redis's event name and
  Redis's dirty increment (one per element pushed/popped/removed; LMOVE
  counts one; LTRIM counts the elements trimmed, possibly zero -- it still
  touches WATCHers and waiters);
* argument errors come before the key lookup exactly where Redis parses
  first (LRANGE, LTRIM, LREM, LPOS, the pops' counts), and after it where
  Redis looks up first (LINDEX, LSET);
* a blocking command that is served is logged as its non-blocking form
  (BLPOP -> LPOP key, BLMPOP -> LPOP key count-actually-popped, BLMOVE ->
  LMOVE, BRPOPLPUSH -> RPOPLPUSH); LMPOP is logged as LPOP/RPOP with the
  count popped, so replaying the AOF gives the same data;
* a blocking command that cannot be served calls ``blocking.block``; inside
  MULTI/EXEC (or an AOF replay) it acts as its non-blocking form and answers
  the null reply Redis gives there (BLMOVE: a null bulk, the others a null
  array), while a *timed out* BLMOVE answers a null array, as Redis does.

Queue counters: while the dashboard is on (``server.queue_counts``, see
hotkv/http/counts.py) every element pushed or removed is counted per key;
off, the cost is one attribute test per command.

Fast paths: the push and pop closures (``_pusher``, ``_popper``) count
their own change when nobody watches, waits on or listens to the key,
instead of calling ``Server.written``; tests/test_fastpaths_server.py::
test_list_handlers_count_changes_as_written_does compares both branches'
replies and change counts with Valkey's.
"""

from __future__ import annotations

from ..core import blocking
from ..core.registry import command, spec
from ..protocol.errors import (
    NO_SUCH_KEY,
    NOT_INTEGER,
    NOT_POSITIVE,
    OUT_OF_RANGE,
    SYNTAX,
    CommandError,
    WrongType,
    wrong_args,
)
from ..protocol.resp import NULL_ARRAY, OK
from ..protocol.util import string2ll
from ..types.lists import LEFT, RIGHT, ListValue

_LONG_MAX = 9223372036854775807

RANGE_LONG = ("ERR value is out of range, value must between -9223372036854775807 "
              "and 9223372036854775807")
NUMKEYS = "ERR numkeys should be greater than 0"
COUNT_POSITIVE = "ERR count should be greater than 0"
RANK_ZERO = ("ERR RANK can't be zero: use 1 to start from the first match, 2 from the "
             "second ... or use negative to start from the end of the list")

_POP = (b"LPOP", b"RPOP")
_POP_EVENT = ("lpop", "rpop")
_PUSH_EVENT = ("lpush", "rpush")


# ----------------------------------------------------------------------
# Argument helpers
# ----------------------------------------------------------------------

def _long(arg: bytes, message: str = NOT_INTEGER) -> int:
    v = string2ll(arg)
    if v is None:
        raise CommandError(message)
    return v


def _positive(arg: bytes, message: str = NOT_POSITIVE) -> int:
    v = string2ll(arg)
    if v is None or v < 0:
        raise CommandError(message)
    return v


def _where(arg: bytes) -> int:
    low = arg.lower()
    if low == b"left":
        return LEFT
    if low == b"right":
        return RIGHT
    raise CommandError(SYNTAX)


def _lookup(db, key):
    """The list at key, None when missing, WRONGTYPE otherwise (a read-only
    command's lookup is counted as a read: Database.lookup_typed)."""
    value = db.lookup(key)
    cmd = db.server.current_cmd
    if cmd is not None and cmd.readonly:
        db.count_read(key, value)
    if value is not None and type(value) is not ListValue:
        raise WrongType()
    return value


# ----------------------------------------------------------------------
# Announcing a removal
# ----------------------------------------------------------------------

def _removed(server, db, key, lst, event: str, n: int):
    """After n elements left the list at key: the queue counters, then the
    list event and n changes; when the list is now empty the key is deleted
    first and the generic ``del`` event follows (Redis's order)."""
    if server.queue_counts is not None:
        server.queue_counts.pop(db, key, n)
    if lst:
        server.written(db, key, "l", event, n)
    else:
        db.delete(key)
        server.written(db, key, "l", event, n)
        server.event(db, key, "g", "del")


def _pop_range_reply(c, db, key, lst, where: int, count: int):
    """LMPOP/BLMPOP: pop up to count, reply [key, [elements]], log as [LR]POP key n."""
    n = min(count, len(lst))
    items = lst.pop_n(where, n)
    _removed(c.server, db, key, lst, _POP_EVENT[where], n)
    c.server.propagate_as([_POP[where], key, b"%d" % n])
    return [key, items]


def _pusher(where: int, only_existing: bool, doc: str):
    """The handler of LPUSH, RPUSH, LPUSHX or RPUSHX: a closure over where
    and only_existing rather than a shared helper taking them, so that the
    path of every job is one call shorter."""
    left = where == LEFT
    event = _PUSH_EVENT[where]

    def push(c, argv):
        db = c.db
        key = argv[1]
        lst = db.lookup(key)
        if lst is None:
            if only_existing:
                return 0
            lst = ListValue()
            db.add(key, lst)
        elif type(lst) is not ListValue:
            raise WrongType()
        if len(argv) == 3:
            if left:
                lst.appendleft(argv[2])
            else:
                lst.append(argv[2])
        elif left:
            lst.extendleft(argv[2:])
        else:
            lst.extend(argv[2:])
        server = c.server
        # Server.written, inlined for what most pushes (and pops, and
        # XADDs) meet: nobody watches, waits on or listens to the key, so
        # counting the change is all there is to do.
        if key in db.watched or key in db.blocking or server.notify is not None \
                or server.tracking_on and (key in server.tracking.table
                                           or server.tracking.prefixes):
            server.written(db, key, "l", event, len(argv) - 2)
        else:
            server.dirty += len(argv) - 2
        if server.queue_counts is not None:
            server.queue_counts.push(db, key, len(argv) - 2)
        return len(lst)

    push.__doc__ = doc
    return push


# ----------------------------------------------------------------------
# Pushes
# ----------------------------------------------------------------------

lpush = command("lpush", -3, "write denyoom fast", keys=(1, 1, 1), group="list",
                key_flags="RW insert", args="key:k element...",
                complexity="O(1) for each element added, so O(N) to add N elements when the "
                           "command is called with multiple arguments.",
                history=(("2.4.0", "Accepts multiple `element` arguments."),))(_pusher(
    LEFT, False, "Prepends one or more elements to a list. Creates the key if it doesn't exist."))
rpush = command("rpush", -3, "write denyoom fast", keys=(1, 1, 1), group="list",
                key_flags="RW insert", args="key:k element...",
                complexity="O(1) for each element added, so O(N) to add N elements when the "
                           "command is called with multiple arguments.",
                history=(("2.4.0", "Accepts multiple `element` arguments."),))(_pusher(
    RIGHT, False, "Appends one or more elements to a list. Creates the key if it doesn't exist."))
lpushx = command("lpushx", -3, "write denyoom fast", keys=(1, 1, 1), group="list",
                 since="2.2.0", key_flags="RW insert", args="key:k element...",
                 complexity="O(1) for each element added, so O(N) to add N elements when the "
                            "command is called with multiple arguments.",
                 history=(("4.0.0", "Accepts multiple `element` arguments."),))(_pusher(
    LEFT, True, "Prepends one or more elements to a list only when the list exists."))
rpushx = command("rpushx", -3, "write denyoom fast", keys=(1, 1, 1), group="list",
                 since="2.2.0", key_flags="RW insert", args="key:k element...",
                 complexity="O(1) for each element added, so O(N) to add N elements when the "
                            "command is called with multiple arguments.",
                 history=(("4.0.0", "Accepts multiple `element` arguments."),))(_pusher(
    RIGHT, True, "Appends an element to a list only when the list exists."))


@command("linsert", 5, "write denyoom", keys=(1, 1, 1), group="list", since="2.2.0",
         key_flags="RW insert", args="key:k where(BEFORE | AFTER) pivot element",
         complexity="O(N) where N is the number of elements to traverse before seeing the value "
                    "pivot. This means that inserting somewhere on the left end on the list (head) "
                    "can be considered O(1) and inserting somewhere on the right end (tail) is "
                    "O(N).")
def linsert(c, argv):
    """Inserts an element before or after another element in a list."""
    pos = argv[2].lower()
    if pos == b"after":
        after = True
    elif pos == b"before":
        after = False
    else:
        raise CommandError(SYNTAX)
    db = c.db
    key = argv[1]
    lst = _lookup(db, key)
    if lst is None:
        return 0
    n = lst.insert_at_pivot(argv[3], argv[4], after)
    if n < 0:
        return -1
    c.server.written(db, key, "l", "linsert")
    if c.server.queue_counts is not None:
        c.server.queue_counts.push(db, key, 1)
    return n


# ----------------------------------------------------------------------
# Reads
# ----------------------------------------------------------------------

@command("llen", 2, "readonly fast", keys=(1, 1, 1), group="list", key_flags="RO", args="key:k",
         complexity="O(1)")
def llen(c, argv):
    """Returns the length of a list."""
    lst = _lookup(c.db, argv[1])
    return 0 if lst is None else len(lst)


@command("lrange", 4, "readonly", keys=(1, 1, 1), group="list", args="key:k start:i stop:i",
         complexity="O(S+N) where S is the distance of start offset from HEAD for small lists, "
                    "from nearest end (HEAD or TAIL) for large lists; and N is the number of "
                    "elements in the specified range.")
def lrange(c, argv):
    """Returns a range of elements from a list."""
    start = _long(argv[2])
    end = _long(argv[3])
    lst = _lookup(c.db, argv[1])
    if lst is None:
        return []
    return lst.range(start, end)


@command("lindex", 3, "readonly", keys=(1, 1, 1), group="list", args="key:k index:i",
         complexity="O(N) where N is the number of elements to traverse to get to the element at "
                    "index. This makes asking for the first or the last element of the list O(1).")
def lindex(c, argv):
    """Returns an element from a list by its index."""
    lst = _lookup(c.db, argv[1])
    if lst is None:
        return None
    return lst.element(_long(argv[2]))


@command("lpos", -3, "readonly", keys=(1, 1, 1), group="list", since="6.0.6",
         args="key:k element [RANK rank:i] [COUNT num-matches:i] [MAXLEN len:i]",
         complexity="O(N) where N is the number of elements in the list, for the average case. "
                    "When searching for elements near the head or the tail of the list, or when "
                    "the MAXLEN option is provided, the command may run in constant time.")
def lpos(c, argv):
    """Returns the index of matching elements in a list."""
    rank, count, maxlen = 1, -1, 0
    i = 3
    n = len(argv)
    while i < n:
        opt = argv[i].lower()
        more = i + 1 < n
        if opt == b"rank" and more:
            i += 1
            rank = _long(argv[i])
            if rank < -_LONG_MAX:
                raise CommandError(RANGE_LONG)
            if rank == 0:
                raise CommandError(RANK_ZERO)
        elif opt == b"count" and more:
            i += 1
            count = _positive(argv[i], "ERR COUNT can't be negative")
        elif opt == b"maxlen" and more:
            i += 1
            maxlen = _positive(argv[i], "ERR MAXLEN can't be negative")
        else:
            raise CommandError(SYNTAX)
        i += 1
    lst = _lookup(c.db, argv[1])
    if lst is None:
        return [] if count != -1 else None
    # Without COUNT: the first match, as COUNT 1 finds it.
    found = lst.positions(argv[2], rank, 1 if count == -1 else count, maxlen)
    if count != -1:
        return found
    return found[0] if found else None


# ----------------------------------------------------------------------
# Updates
# ----------------------------------------------------------------------

@command("lset", 4, "write denyoom", keys=(1, 1, 1), group="list", key_flags="RW update",
         args="key:k index:i element",
         complexity="O(N) where N is the length of the list. Setting either the first or the "
                    "last element of the list is O(1).")
def lset(c, argv):
    """Sets the value of an element in a list by its index."""
    db = c.db
    key = argv[1]
    lst = _lookup(db, key)
    if lst is None:
        raise CommandError(NO_SUCH_KEY)
    index = _long(argv[2])
    # Redis passes the index on as a C int: wrap it the same way.
    index = ((index + 0x80000000) & 0xFFFFFFFF) - 0x80000000
    if not lst.replace(index, argv[3]):
        raise CommandError(OUT_OF_RANGE)
    c.server.written(db, key, "l", "lset")
    return OK


@command("lrem", 4, "write", keys=(1, 1, 1), group="list", key_flags="RW delete",
         args="key:k count:i element",
         complexity="O(N+M) where N is the length of the list and M is the number of elements "
                    "removed.")
def lrem(c, argv):
    """Removes elements from a list. Deletes the list if the last element was removed."""
    toremove = _long(argv[2])
    if toremove < -_LONG_MAX:
        raise CommandError(RANGE_LONG)
    db = c.db
    key = argv[1]
    lst = _lookup(db, key)
    if lst is None:
        return 0
    removed = lst.remove_matches(argv[3], toremove)
    if removed:
        _removed(c.server, db, key, lst, "lrem", removed)
    return removed


@command("ltrim", 4, "write", keys=(1, 1, 1), group="list", key_flags="RW delete",
         args="key:k start:i stop:i",
         complexity="O(N) where N is the number of elements to be removed by the operation.")
def ltrim(c, argv):
    """Removes elements from both ends a list. Deletes the list if all elements were trimmed."""
    start = _long(argv[2])
    end = _long(argv[3])
    db = c.db
    key = argv[1]
    lst = _lookup(db, key)
    if lst is None:
        return OK
    trimmed = lst.trim(start, end)
    if trimmed:     # an emptied list was trimmed of all it held
        _removed(c.server, db, key, lst, "ltrim", trimmed)
    else:   # nothing trimmed: the event only, as Valkey (no WATCH abort, no invalidation)
        c.server.event(db, key, "l", "ltrim")
    return OK


# ----------------------------------------------------------------------
# Pops
# ----------------------------------------------------------------------

def _popper(where: int, doc: str):
    """The handler of LPOP or RPOP (a closure, as _pusher's)."""
    left = where == LEFT
    name = "lpop" if left else "rpop"
    event = _POP_EVENT[where]

    def pop(c, argv):
        n = len(argv)
        if n > 3:
            raise wrong_args(name)
        count = _positive(argv[2]) if n == 3 else -1
        db = c.db
        key = argv[1]
        lst = db.lookup(key)
        if lst is None:
            return NULL_ARRAY if count != -1 else None
        if type(lst) is not ListValue:
            raise WrongType()
        if count == -1:
            value = lst.popleft() if left else lst.pop()
            server = c.server
            if lst and key not in db.watched and key not in db.blocking \
                    and server.notify is None and not (server.tracking_on and (
                        key in server.tracking.table or server.tracking.prefixes)):
                server.dirty += 1       # Server.written, inlined (see _pusher)
                if server.queue_counts is not None:
                    server.queue_counts.pop(db, key, 1)
            else:
                _removed(server, db, key, lst, event, 1)
            return value
        if count == 0:
            return []
        count = min(count, len(lst))
        items = lst.pop_n(where, count)
        _removed(c.server, db, key, lst, event, count)
        return items

    pop.__doc__ = doc
    return pop


lpop = command("lpop", -2, "write fast", keys=(1, 1, 1), group="list",
               key_flags="RW access delete", args="key:k [count:i]@6.2.0",
               complexity="O(N) where N is the number of elements returned",
               history=(("6.2.0", "Added the `count` argument."),))(_popper(
    LEFT, "Returns the first elements in a list after removing it. Deletes the list if the "
    "last element was popped."))
rpop = command("rpop", -2, "write fast", keys=(1, 1, 1), group="list",
               key_flags="RW access delete", args="key:k [count:i]@6.2.0",
               complexity="O(N) where N is the number of elements returned",
               history=(("6.2.0", "Added the `count` argument."),))(_popper(
    RIGHT, "Returns and removes the last elements of a list. Deletes the list if the last "
    "element was popped."))


def _parse_mpop(argv, numkeys_idx: int):
    """numkeys, keys, where, count of [B]LMPOP."""
    numkeys = string2ll(argv[numkeys_idx])
    if numkeys is None or numkeys < 1:
        raise CommandError(NUMKEYS)
    where_idx = numkeys_idx + numkeys + 1
    n = len(argv)
    if where_idx >= n:
        raise CommandError(SYNTAX)
    where = _where(argv[where_idx])
    count = -1
    j = where_idx + 1
    while j < n:
        if count == -1 and argv[j].lower() == b"count" and j + 1 < n:
            j += 1
            count = string2ll(argv[j])
            if count is None or count < 1:
                raise CommandError(COUNT_POSITIVE)
        else:
            raise CommandError(SYNTAX)
        j += 1
    if count == -1:
        count = 1
    return argv[numkeys_idx + 1:where_idx], where, count


def _mpop_keys(numkeys_idx: int):
    def keys_fn(argv):
        if len(argv) <= numkeys_idx:
            return []
        numkeys = string2ll(argv[numkeys_idx])
        if numkeys is None or numkeys < 1:
            return []
        return list(range(numkeys_idx + 1, min(numkeys_idx + 1 + numkeys, len(argv))))
    return keys_fn


@command("lmpop", -4, "write", keys_fn=_mpop_keys(1), group="list", since="7.0.0",
         key_specs=(spec("RW access delete", "index 1", "keynum 0 1 1"),),
         summary="Returns multiple elements from a list after removing them. Deletes the list if"
                  " the last element was popped.",
         args="numkeys:i key:k... where(LEFT | RIGHT) [COUNT count:i]",
         complexity="O(N+M) where N is the number of provided keys and M is the number of "
                    "elements returned.")
def lmpop(c, argv):
    keys, where, count = _parse_mpop(argv, 1)
    db = c.db
    for key in keys:
        lst = _lookup(db, key)
        if lst:
            return _pop_range_reply(c, db, key, lst, where, count)
    return NULL_ARRAY


# ----------------------------------------------------------------------
# LMOVE
# ----------------------------------------------------------------------

def _lmove(c, src, dst, wherefrom: int, whereto: int):
    """Pop from src, push to dst; None when src is missing.  The
    destination's type is checked only when there is something to move."""
    db = c.db
    slst = _lookup(db, src)
    if slst is None:
        return None
    dlst = db.lookup(dst)
    if dlst is not None and type(dlst) is not ListValue:
        raise WrongType()
    value = slst.popleft() if wherefrom == LEFT else slst.pop()
    server = c.server
    if dlst is None:
        dlst = ListValue()
        db.add(dst, dlst)
    if whereto == LEFT:
        dlst.appendleft(value)
    else:
        dlst.append(value)
    # Redis's order: the push event, then the pop (and del); one dirty.
    server.written(db, dst, "l", _PUSH_EVENT[whereto], 0)
    if server.queue_counts is not None:
        server.queue_counts.push(db, dst, 1)
    _removed(server, db, src, slst, _POP_EVENT[wherefrom], 1)
    return value


@command("lmove", 5, "write denyoom", group="list", since="6.2.0",
         key_specs=(spec("RW access delete"), spec("RW insert", "index 2")),
         summary="Returns an element after popping it from one list and pushing it to another. "
                  "Deletes the list if the last element was moved.",
         args="source:k destination:k1 wherefrom(LEFT | RIGHT) whereto(LEFT | RIGHT)",
         complexity="O(1)")
def lmove(c, argv):
    wherefrom = _where(argv[3])
    whereto = _where(argv[4])
    return _lmove(c, argv[1], argv[2], wherefrom, whereto)


@command("rpoplpush", 3, "write denyoom", group="list", since="1.2.0",
         key_specs=(spec("RW access delete"), spec("RW insert", "index 2")),
         summary="Returns the last element of a list after removing and pushing it to another "
                  "list. Deletes the list if the last element was popped.",
         args="source:k destination:k1",
         deprecated=("6.2.0", "`LMOVE` with the `RIGHT` and `LEFT` arguments"), complexity="O(1)")
def rpoplpush(c, argv):
    return _lmove(c, argv[1], argv[2], RIGHT, LEFT)


# ----------------------------------------------------------------------
# Blocking commands
# ----------------------------------------------------------------------

def _blocking_pop(c, keys, where: int, deadline: int, count: int):
    """BLPOP/BRPOP (count -1: reply [key, element]) and BLMPOP (count >= 1:
    reply [key, [elements]]): serve from the first non-empty key or block."""
    db = c.db
    for key in keys:
        lst = _lookup(db, key)
        if not lst:
            continue
        if count != -1:
            return _pop_range_reply(c, db, key, lst, where, count)
        value = lst.popleft() if where == LEFT else lst.pop()
        _removed(c.server, db, key, lst, _POP_EVENT[where], 1)
        c.server.propagate_as([_POP[where], key])
        return [key, value]
    return blocking.block(c, keys, deadline, ListValue, NULL_ARRAY)


@command("blpop", -3, "write blocking", keys=(1, -2, 1), group="list", since="2.0.0",
         key_flags="RW access delete",
         summary="Removes and returns the first element in a list. Blocks until an element is "
                  "available otherwise. Deletes the list if the last element was popped.",
         args="key:k... timeout:d", complexity="O(N) where N is the number of provided keys.",
         history=(("6.0.0", "`timeout` is interpreted as a double instead of an integer."),))
def blpop(c, argv):
    deadline = blocking.parse_timeout(c.server, argv[-1])
    return _blocking_pop(c, argv[1:-1], LEFT, deadline, -1)


@command("brpop", -3, "write blocking", keys=(1, -2, 1), group="list", since="2.0.0",
         key_flags="RW access delete",
         summary="Removes and returns the last element in a list. Blocks until an element is "
                  "available otherwise. Deletes the list if the last element was popped.",
         args="key:k... timeout:d", complexity="O(N) where N is the number of provided keys.",
         history=(("6.0.0", "`timeout` is interpreted as a double instead of an integer."),))
def brpop(c, argv):
    deadline = blocking.parse_timeout(c.server, argv[-1])
    return _blocking_pop(c, argv[1:-1], RIGHT, deadline, -1)


@command("blmpop", -5, "write blocking", keys_fn=_mpop_keys(2), group="list", since="7.0.0",
         key_specs=(spec("RW access delete", "index 2", "keynum 0 1 1"),),
         summary="Pops the first element from one of multiple lists. Blocks until an element is "
                  "available otherwise. Deletes the list if the last element was popped.",
         args="timeout:d numkeys:i key:k... where(LEFT | RIGHT) [COUNT count:i]",
         complexity="O(N+M) where N is the number of provided keys and M is the number of "
                    "elements returned.")
def blmpop(c, argv):
    keys, where, count = _parse_mpop(argv, 2)
    deadline = blocking.parse_timeout(c.server, argv[1])
    return _blocking_pop(c, keys, where, deadline, count)


def _blmove(c, argv, wherefrom: int, whereto: int, deadline: int, logged: list):
    src = argv[1]
    if _lookup(c.db, src) is None:
        if c.in_exec or c.is_fake:
            return None   # MULTI: the non-blocking form's null bulk
        return blocking.block(c, [src], deadline, ListValue, NULL_ARRAY)
    value = _lmove(c, src, argv[2], wherefrom, whereto)
    c.server.propagate_as(logged)
    return value


@command("blmove", 6, "write denyoom blocking", group="list", since="6.2.0",
         key_specs=(spec("RW access delete"), spec("RW insert", "index 2")),
         summary="Pops an element from a list, pushes it to another list and returns it. Blocks "
                  "until an element is available otherwise. Deletes the list if the last element "
                  "was moved.",
         args="source:k destination:k1 wherefrom(LEFT | RIGHT) whereto(LEFT | RIGHT) timeout:d",
         complexity="O(1)")
def blmove(c, argv):
    wherefrom = _where(argv[3])
    whereto = _where(argv[4])
    deadline = blocking.parse_timeout(c.server, argv[5])
    return _blmove(c, argv, wherefrom, whereto, deadline,
                   [b"LMOVE", argv[1], argv[2], argv[3], argv[4]])


@command("brpoplpush", 4, "write denyoom blocking", group="list", since="2.2.0",
         key_specs=(spec("RW access delete"), spec("RW insert", "index 2")),
         summary="Pops an element from a list, pushes it to another list and returns it. Block "
                  "until an element is available otherwise. Deletes the list if the last element "
                  "was popped.", args="source:k destination:k1 timeout:d",
         deprecated=("6.2.0", "`BLMOVE` with the `RIGHT` and `LEFT` arguments"), complexity="O(1)",
         history=(("6.0.0", "`timeout` is interpreted as a double instead of an integer."),))
def brpoplpush(c, argv):
    deadline = blocking.parse_timeout(c.server, argv[3])
    return _blmove(c, argv, RIGHT, LEFT, deadline, [b"RPOPLPUSH", argv[1], argv[2]])
