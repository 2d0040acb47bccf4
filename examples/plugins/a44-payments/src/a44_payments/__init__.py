"""Example a44 connector plugin: `payments.authorize` and `payments.void` over a local SQLite ledger."""

__version__ = "0.1.0"
