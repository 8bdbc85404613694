"""hotkv's version and the Redis version it reports.

A leaf module (it imports nothing), so that the core and the commands can
read the versions without importing the ``hotkv`` package itself -- whose
``__init__`` imports the server and every command module.
"""

__version__ = "0.1.0"
# The Redis version reported to clients (INFO redis_version, HELLO), as
# Valkey does for client-library compatibility.
REDIS_COMPAT_VERSION = "7.2.4"
