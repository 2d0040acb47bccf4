"""The email sender: one message over SMTP (stdlib smtplib, in a thread), STARTTLS when the channel asks for it,
a login from secret references when it has one. The Message-ID is derived from the idempotency key, so every send
of one notification is the same message to the receiver's deduplication.

SMTP 4xx answers and connection failures are retried; 5xx (recipient refused, message refused) is final."""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formatdate

from ...errors import A44Error
from .messages import Notification, email_text, message_id
from .outcome import Outcome, Secrets


def build_message(n: Notification, config: dict) -> EmailMessage:
    subject, text = email_text(n)
    msg = EmailMessage()
    msg["From"] = config["from"]
    msg["To"] = ", ".join(config["to"])
    msg["Subject"] = subject
    msg["Date"] = formatdate(n.created_at.timestamp(), usegmt=True)
    msg["Message-ID"] = message_id(n.idempotency_key, config["from"])
    msg["X-A44-Idempotency-Key"] = n.idempotency_key
    msg["X-A44-Severity"] = n.severity
    msg.set_content(text)
    return msg


def _send(msg: EmailMessage, config: dict, login: tuple[str, str] | None, timeout: float) -> None:
    smtp = config["smtp"]
    with smtplib.SMTP(smtp["host"], smtp["port"], timeout=timeout) as client:
        if smtp.get("starttls"):
            client.starttls(context=ssl.create_default_context())
        if login is not None:
            client.login(*login)
        client.send_message(msg, from_addr=config["from"], to_addrs=config["to"])


async def send_email(n: Notification, config: dict, secrets: Secrets, timeout: float) -> Outcome:
    smtp = config["smtp"]
    where = f"smtp://{smtp['host']}:{smtp['port']}"
    try:
        login = (await secrets(smtp["usernameSecretRef"]), await secrets(smtp["passwordSecretRef"])) \
            if "usernameSecretRef" in smtp else None
    except A44Error as exc:
        return Outcome.of_error(exc)
    msg = build_message(n, config)
    try:
        # the socket timeout bounds each SMTP exchange; the outer one the whole conversation
        await asyncio.wait_for(asyncio.to_thread(_send, msg, config, login, timeout), timeout * 3)
    except TimeoutError:
        return Outcome.later(f"{where} did not finish within {timeout * 3:g}s")
    except smtplib.SMTPRecipientsRefused as exc:
        codes = [c for c, _ in exc.recipients.values()]
        detail = "; ".join(f"{r}: {c} {m.decode('utf-8', 'replace') if isinstance(m, bytes) else m}"
                           for r, (c, m) in exc.recipients.items())
        if all(400 <= c < 500 for c in codes):
            return Outcome.later(f"{where} deferred the recipients: {detail}")
        return Outcome.refused(f"{where} refused the recipients: {detail}")
    except smtplib.SMTPResponseException as exc:
        answer = exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) else exc.smtp_error
        text = f"{where} answered {exc.smtp_code} {answer}"
        return Outcome.later(text) if 400 <= exc.smtp_code < 500 else Outcome.refused(text)
    except (smtplib.SMTPException, OSError) as exc:
        return Outcome.later(f"{where}: {type(exc).__name__}: {exc}")
    return Outcome.ok()
