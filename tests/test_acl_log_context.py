"""ACL LOG entries name the denied command and its context as valkey-server 8.1.8 does.

Valkey looks a command up before its ACL check, so a denied command is the
client's last command: the entry's client-info and a later CLIENT LIST say
``cmd=get``.  A denial inside a script is logged with context ``lua`` and the
info of the client running the script (``cmd=eval``), not of the script's own
client.  Both cases run against hotkv and the reference server (Valkey's Tcl
unit acl: "ACL LOG shows failed command executions at toplevel", "ACL can log
errors in the context of Lua scripting").
"""

from __future__ import annotations

import pytest
import valkey


def _field(info: bytes, name: str) -> str | None:
    for word in info.decode().split():
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


@pytest.fixture
def denied(target):
    admin = valkey.Valkey(host=target.host, port=target.port)
    admin.execute_command("ACL", "LOG", "RESET")
    admin.execute_command("ACL", "SETUSER", "logctx", ">pw", "on", "+set", "+eval",
                          "+client", "~object:1234")
    user = valkey.Valkey(host=target.host, port=target.port)
    user.execute_command("AUTH", "logctx", "pw")
    yield admin, user
    user.close()
    admin.execute_command("ACL", "DELUSER", "logctx")
    admin.execute_command("ACL", "LOG", "RESET")
    admin.close()


def _last_entry(admin) -> dict:
    entry = admin.execute_command("ACL", "LOG")[0]
    return dict(zip(entry[::2], entry[1::2]))


def test_denied_command_is_the_clients_last_command(denied):
    admin, user = denied
    me = user.execute_command("CLIENT", "ID")
    with pytest.raises(valkey.exceptions.NoPermissionError):
        user.get("foo")
    entry = _last_entry(admin)
    assert (entry[b"context"], entry[b"object"]) == (b"toplevel", b"get")
    assert _field(entry[b"client-info"], "cmd") == "get"
    listing = admin.execute_command("CLIENT", "LIST", "ID", me)
    assert _field(listing, "cmd") == "get"


def test_denial_in_a_script_is_logged_in_lua_context(denied):
    admin, user = denied
    me = user.execute_command("CLIENT", "ID")
    with pytest.raises(valkey.exceptions.ResponseError, match="ACL failure in script"):
        user.eval("return redis.call('incr', 'foo')", 0)
    entry = _last_entry(admin)
    assert (entry[b"context"], entry[b"object"]) == (b"lua", b"incr")
    assert _field(entry[b"client-info"], "cmd") == "eval"
    assert _field(entry[b"client-info"], "id") == str(me)
