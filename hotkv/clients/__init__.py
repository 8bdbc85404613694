"""Clients: who is connected, what each may do, and what each is sent.

One ``client.Client`` per connection with its buffers (``clientbufs``), its
CLIENT LIST line (``clientinfo``) and limits (``limits``, ``client_eviction``);
users and their rights (``acl``, ``acl_rules``); what a client subscribes to
and is told without asking: pub/sub (``pubsub``) and client-side caching's
invalidations (``tracking``).  Knows no socket: ``hotkv.net`` gives a client
its transport.
"""
