"""A console client for tests: real HTTP to a live server on 127.0.0.1, its own cookie jar, redirects not
followed (the tests look at them), form fields pulled out of the pages as a browser would post them."""

from __future__ import annotations

import html
import http.client
import re
from urllib.parse import urlencode


class Page:
    def __init__(self, status: int, headers: dict, body: str):
        self.status, self.headers, self.text = status, headers, body

    @property
    def location(self) -> str | None:
        return self.headers.get("location")

    def field(self, name: str, nth: int = 0) -> str:
        """The value of the nth hidden/text input named `name` on the page."""
        found = re.findall(r'<input[^>]*name="' + re.escape(name) + r'"[^>]*value="([^"]*)"', self.text)
        return html.unescape(found[nth])


class Client:
    def __init__(self, port: int):
        self.port = port
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, form: dict | None = None, headers: dict | None = None) -> Page:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        hdrs = dict(headers or {})
        if self.cookies:
            hdrs["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if form is not None:
            body = urlencode(form).encode()
            hdrs["Content-Type"] = "application/x-www-form-urlencoded"
        conn.request(method, path, body, hdrs)
        resp = conn.getresponse()
        text = resp.read().decode("utf-8", "replace")
        for raw in resp.headers.get_all("Set-Cookie") or []:
            name, _, rest = raw.partition("=")
            value = rest.split(";", 1)[0]
            if 'max-age=0' in raw.lower() or value in ('""', ""):
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = value
        conn.close()
        page = Page(resp.status, {k.lower(): v for k, v in resp.getheaders()}, text)
        page.set_cookies = resp.headers.get_all("Set-Cookie") or []
        return page

    def get(self, path: str) -> Page:
        return self.request("GET", path)

    def post(self, path: str, form: dict) -> Page:
        return self.request("POST", path, form)

    def login(self, token: str) -> Page:
        form = self.get("/login")
        return self.post("/login", {"csrf": form.field("csrf"), "next": "/runs", "token": token})
