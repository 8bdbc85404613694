"""The ``hotkv`` command's usage text (``hotkv --help``, ``hotkv serve --help``):
its own module, so the entry point (hotkv/tools/cli.py) and ``hotkv serve``
(hotkv/tools/serve.py) share it without the one loading the other."""

USAGE = """usage: hotkv serve [CONFIG_FILE] [--name value ...]
       hotkv serve --help-config
       hotkv cli [-h HOST] [-p PORT] [-a PASS] [-u URL] [--resp3] [cmd [arg ...]]
       hotkv queues [--url URL] [--once]
       hotkv check-rdb FILE
       hotkv check-aof [--fix|--truncate-to-timestamp TS] FILE.manifest|FILE.aof
       hotkv valkey-server [CONFIG_FILE] [--name value ...]
       hotkv --version

  serve          run a server (--http-port N adds the dashboard and /metrics);
                 --help-config lists every setting, its default and what hotkv ignores
  cli            a redis-cli: interactive, or one command (hotkv cli -p 6379 LPUSH q job)
  queues         the queues of a server (hotkv or Valkey) in the terminal, refreshing
  check-rdb      check an RDB file
  check-aof      check (or fix) an AOF
  valkey-server  valkey-server's own command line (for Valkey's test harness)

Any redis.conf parameter hotkv knows can be given as --name value, e.g.
  hotkv serve --port 6379 --bind 127.0.0.1 --requirepass secret --appendonly yes
  hotkv serve /etc/hotkv.conf --loglevel warning
"""
