"""Error replies: the exception handlers raise and Redis's exact texts.

Every error text a client can see that more than one module uses lives here,
so a text is written once and matches Redis/Valkey byte for byte.  A handler
raises ``CommandError(text)``; the dispatcher turns it into ``-text\\r\\n``
and counts it under the first word (``ERR``, ``WRONGTYPE``...) in INFO
errorstats.
"""

from __future__ import annotations


class CommandError(Exception):
    """A command failed; ``str(self)`` is the reply without the leading '-'."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class WrongType(CommandError):
    def __init__(self):
        super().__init__(WRONGTYPE)


WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
SYNTAX = "ERR syntax error"
NOT_INTEGER = "ERR value is not an integer or out of range"
NOT_FLOAT = "ERR value is not a valid float"
OUT_OF_RANGE = "ERR index out of range"
NO_SUCH_KEY = "ERR no such key"
OVERFLOW = "ERR increment or decrement would overflow"
NOT_POSITIVE = "ERR value is out of range, must be positive"
TIMEOUT_NEGATIVE = "ERR timeout is negative"
TIMEOUT_NOT_FLOAT = "ERR timeout is not a float or out of range"
TIMEOUT_OUT_OF_RANGE = "ERR timeout is out of range"
INVALID_EXPIRE = "ERR invalid expire time in '%s' command"
DB_INDEX = "ERR DB index is out of range"
SAME_OBJECT = "ERR source and destination objects are the same"
NOAUTH = "NOAUTH Authentication required."
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
EXECABORT = "EXECABORT Transaction discarded because of previous errors."
NESTED_MULTI = "ERR MULTI calls can not be nested"
EXEC_WITHOUT_MULTI = "ERR EXEC without MULTI"
DISCARD_WITHOUT_MULTI = "ERR DISCARD without MULTI"
WATCH_IN_MULTI = "ERR WATCH inside MULTI is not allowed"
NOT_IN_MULTI = "ERR Command not allowed inside a transaction"
UNKNOWN_COMMAND = "ERR unknown command '%s', with args beginning with: %s"
UNKNOWN_SUBCOMMAND = "ERR unknown subcommand '%s'. Try %s HELP."
WRONG_ARGS = "ERR wrong number of arguments for '%s' command"
SUBSCRIBED = ("ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / "
              "PING / QUIT / RESET are allowed in this context")
OOM = "OOM command not allowed when used memory > 'maxmemory'."
LOADING = "LOADING Valkey is loading the dataset in memory"
UNBLOCKED = "UNBLOCKED client unblocked via CLIENT UNBLOCK"


def wrong_args(name: str) -> CommandError:
    return CommandError(WRONG_ARGS % name)
