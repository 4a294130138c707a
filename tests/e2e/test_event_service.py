"""The example service (``rill.examples.event_service``) end to end over real HTTP on
127.0.0.1: events POSTed into the running job, totals read back from its keyed state, errors,
and the README command in a process of its own. Synchronized by the service's answers (a POST
returns once the job applied its event), never by sleeps."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import aiohttp
import pytest
from aiohttp import web

from rill.examples.event_service import create_app


@pytest.fixture
async def base_url():
    runner = web.AppRunner(create_app(parallelism=2))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()  # ends the job's input and waits for the job to finish


async def test_posted_events_update_the_jobs_state_and_gets_read_it(base_url):
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base_url}/events", json={"user": "alice", "amount": 10}) as r:
            assert r.status == 200
            assert await r.json() == {"user": "alice", "total": 10.0, "count": 1}
        batch = [{"user": u, "amount": a} for u, a in [("bob", 1), ("alice", 2.5), ("carol", 4), ("bob", 2)]]
        async with http.post(f"{base_url}/events", json=batch) as r:
            assert await r.json() == [
                {"user": "bob", "total": 1.0, "count": 1}, {"user": "alice", "total": 12.5, "count": 2},
                {"user": "carol", "total": 4.0, "count": 1}, {"user": "bob", "total": 3.0, "count": 2}]
        # fire and forget, then one waited event of the same user: per key, events apply in order
        async with http.post(f"{base_url}/events?wait=false",
                             json=[{"user": "dave", "amount": i} for i in range(100)]) as r:
            assert r.status == 202 and await r.json() == {"accepted": 100}
        async with http.post(f"{base_url}/events", json={"user": "dave", "amount": 0.5}) as r:
            assert await r.json() == {"user": "dave", "total": 4950.5, "count": 101}
        expected = {"alice": (12.5, 2), "bob": (3.0, 2), "carol": (4.0, 1), "dave": (4950.5, 101)}
        for user, (total, count) in expected.items():
            async with http.get(f"{base_url}/users/{user}") as r:
                assert r.status == 200
                assert await r.json() == {"user": user, "total": total, "count": count}
        async with http.get(f"{base_url}/health") as r:
            health = await r.json()
        assert health["status"] == "RUNNING" and health["accepted"] == health["applied"] == 106


async def test_bad_requests_are_refused_naming_the_field_and_nothing_is_queued(base_url):
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base_url}/users/nobody") as r:
            assert r.status == 404 and await r.json() == {"error": "no events for user 'nobody'"}
        async with http.post(f"{base_url}/events", data="not json") as r:
            assert r.status == 400 and (await r.json())["error"].startswith("the body is not JSON")
        bad = [{"user": "erin", "amount": 1}, {"user": "erin", "amount": "12"}]
        async with http.post(f"{base_url}/events", json=bad) as r:
            assert r.status == 400
            assert await r.json() == {"error": "event 1: 'amount' must be a finite number, got \"12\""}
        async with http.post(f"{base_url}/events", json={"user": "", "amount": 1}) as r:
            assert await r.json() == {"error": "event 0: 'user' must be a non-empty string, got \"\""}
        async with http.get(f"{base_url}/users/erin") as r:
            assert r.status == 404  # the valid first event of the refused request was not queued
        async with http.get(f"{base_url}/health") as r:
            assert (await r.json())["accepted"] == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(url: str, body=None):
    data = None if body is None else json.dumps(body).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=30) as r:
        return r.status, json.loads(r.read())


def test_the_readme_command_serves_and_stops_cleanly():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "rill.examples.event_service", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:  # until the service answers (its job is submitted at startup)
            try:
                status, health = _request(f"http://127.0.0.1:{port}/health")
                break
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None, proc.stdout.read()
                assert time.monotonic() < deadline, "the service never answered"
                time.sleep(0.05)
        assert status == 200 and health["status"] == "RUNNING"
        assert _request(f"http://127.0.0.1:{port}/events", {"user": "zoe", "amount": 7}) == \
            (200, {"user": "zoe", "total": 7.0, "count": 1})
        assert _request(f"http://127.0.0.1:{port}/users/zoe") == (200, {"user": "zoe", "total": 7.0, "count": 1})
        proc.send_signal(signal.SIGINT)  # aiohttp's graceful shutdown: the job finishes
        assert proc.wait(60) == 0, proc.stdout.read()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
