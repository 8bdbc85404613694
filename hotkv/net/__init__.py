"""The network: transports, and the only code that reads or writes one.

``connection`` holds one ``asyncio.Protocol`` per connection (bytes in to
``hotkv.protocol.resp``'s parser, replies out through the client's output
buffer); ``listeners`` the TCP and unix listeners, the cron and the event
loop's birth and end; ``busy`` the busy-script server (clients served while
a script holds the loop); ``tls`` the TLS listener.  In-process clients
(``hotkv.inprocess``) use the same connection class with no transport at all.
"""
