"""Notification channels and the durable delivery of notifications to them (docs/notifications.md).

An alert decides what to say and enqueues a row in `automation.notifications`; from that row on, this package:
the channels (channels.py), what each kind of receiver gets (messages.py), the senders (senders.py, email.py), the
outbox's reads and writes (outbox.py) and the worker every daemon runs to deliver them (delivery.py)."""
