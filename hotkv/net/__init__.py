"""The network: transports, and the only code that reads or writes one.

``connection`` holds one ``asyncio.Protocol`` per connection (bytes in to
``hotkv.protocol.resp``'s parser, replies out through the client's output
buffer), the TCP and unix listeners and the busy-script server; ``tls``
the TLS listener.  In-process clients (``hotkv.inprocess``) use the same
connection class with no transport at all.
"""
