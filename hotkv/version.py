"""hotkv's version and the identity it reports.

A leaf module (it imports nothing), so that the core and the commands can
read the versions without importing the ``hotkv`` package itself -- whose
``__init__`` imports the server and every command module.
"""

__version__ = "0.1.0"
# The Redis version reported to clients (INFO redis_version; HELLO under
# extended-redis-compatibility), as Valkey does for client libraries.
REDIS_COMPAT_VERSION = "7.2.4"
# The server whose behaviour hotkv reproduces: HELLO's server and version,
# INFO's server_name / valkey_version / valkey_release_stage, as
# valkey-server 8.1.8 reports them.  hotkv's own version is INFO's
# hotkv_version, so tools can still tell them apart.
SERVER_NAME = "valkey"
VALKEY_COMPAT_VERSION = "8.1.8"
VALKEY_RELEASE_STAGE = "ga"
