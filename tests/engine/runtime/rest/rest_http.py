"""A small HTTP client for the REST tests (real HTTP, JSON bodies, polling with a deadline)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request


class Http:
    """Real HTTP against ``base`` (``http://127.0.0.1:PORT``)."""

    def __init__(self, base: str):
        self.base = base

    def request(self, method: str, path: str, headers=None, body=None):
        """(status, parsed JSON body or raw text); ``body`` is sent as JSON when given."""
        data = None if body is None else json.dumps(body).encode()
        headers = dict(headers or {}, **({} if data is None else {"Content-Type": "application/json"}))
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                status, body, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            status, body, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
        return status, (json.loads(body) if "json" in ctype else body.decode())

    def get(self, path: str):
        status, body = self.request("GET", path)
        assert status == 200, (path, status, body)
        return body

    def poll(self, path: str, predicate, deadline_s: float = 60.0, what: str = ""):
        """GET ``path`` until ``predicate(body)`` holds; fail with the last body at the deadline."""
        end = time.monotonic() + deadline_s
        body = None
        while time.monotonic() < end:
            body = self.get(path)
            if predicate(body):
                return body
            time.sleep(0.1)
        raise AssertionError(f"{what or path}: not reached within {deadline_s}s; last: {json.dumps(body)[:2000]}")
