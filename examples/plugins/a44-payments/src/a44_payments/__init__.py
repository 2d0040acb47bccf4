"""Example a44 connector plugin: `payments.authorize` and `payments.void`, whose effect is an HTTP call to a
payments API (`$A44_PAYMENTS_URL`; `python -m a44_payments.standin` is a stand-in for it)."""

__version__ = "0.2.0"
