"""An HTTP service with a streaming job inside: events come in over HTTP POST, a running Rill
job keeps a per-user total in keyed state, and GET answers from that state (queryable state).

    pip install -e '.[service]'
    python -m rill.examples.event_service --port 8080

    curl -X POST localhost:8080/events -d '{"user": "alice", "amount": 12.5}'
        -> {"user": "alice", "total": 12.5, "count": 1}     (after the job applied it)
    curl -X POST 'localhost:8080/events?wait=false' -d '[{"user": "bob", "amount": 3}, ...]'
        -> 202 {"accepted": N}                               (queued, not yet applied)
    curl localhost:8080/users/alice       -> {"user": "alice", "total": 12.5, "count": 1}
    curl localhost:8080/health            -> {"job_id": "...", "status": "RUNNING", ...}

How it is put together (embedded mode, one process, one event loop):

* The service owns a bounded ``asyncio.Queue``; the job's source is an
  :class:`~rill.datastream.connectors.async_source.AsyncIteratorSource` over it. A POST puts
  ``(seq, user, amount)`` there; when the job is behind, the queue is full and the handler's
  ``await queue.put`` waits: back-pressure reaches the HTTP clients, nothing grows unbounded.
* The job: ``key_by(user)`` → :class:`UserTotals` (a ``KeyedProcessFunction`` with ValueStates
  ``total`` and ``count``, uid ``totals``, parallelism ``--parallelism``) → collect. The service
  iterates the collected records (``AsyncJobClient.collect()``) and completes the future of
  each waiting POST by its ``seq``: a POST answers with the user's total *after* its event.
* ``GET /users/{user}`` calls ``await client.get_state("totals", "total", user)``: the task
  owning the user's key group reads it in a mail, between two batches, without pausing the job.
* Shutdown (Ctrl-C, or the app's cleanup) puts ``END_OF_INPUT``: the job finishes after every
  queued event, then the service exits.

Errors: a body that is not JSON, or an event without a non-empty string ``user`` and a finite
number ``amount``, is refused with 400 naming the field and the rule; nothing of that request
is queued. A GET of a user without events is 404.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
from typing import Any, Dict, List, Optional, Tuple

from aiohttp import web

from rill.common import Types
from rill.datastream import AsyncJobClient, KeyedProcessFunction, StreamExecutionEnvironment
from rill.datastream.connectors.async_source import END_OF_INPUT, AsyncIteratorSource, queue_items
from rill.datastream.state import ValueStateDescriptor

__all__ = ["UserTotals", "EventService", "parse_events", "create_app", "main"]

#: the uid of the keyed operator, the name under which GET reads its state
TOTALS_UID = "totals"


class UserTotals(KeyedProcessFunction):
    """Per user: ``total`` (sum of amounts) and ``count`` (events), in ValueStates; emits
    ``(seq, user, total, count)`` after each event."""

    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.DOUBLE()))
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value: Tuple[int, str, float], ctx: Any):
        seq, user, amount = value
        total = (self.total.value() or 0.0) + amount
        count = (self.count.value() or 0) + 1
        self.total.update(total)
        self.count.update(count)
        yield seq, user, total, count


def parse_events(body: Any) -> List[Tuple[str, float]]:
    """``(user, amount)`` of one event object or a list of them.

    :raises ValueError: naming the event's index, the field and the rule, if an event is not an
        object with a non-empty string ``user`` and a finite number ``amount``.
    """
    events = body if isinstance(body, list) else [body]
    out = []
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise ValueError(f"event {i}: expected a JSON object, got {json.dumps(e)[:80]}")
        user, amount = e.get("user"), e.get("amount")
        if not isinstance(user, str) or not user:
            raise ValueError(f"event {i}: 'user' must be a non-empty string, got {json.dumps(user)[:80]}")
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not math.isfinite(amount):
            raise ValueError(f"event {i}: 'amount' must be a finite number, got {json.dumps(amount)[:80]}")
        out.append((user, float(amount)))
    return out


class EventService:
    """The job and the queue behind the HTTP handlers (one per app, on the app's loop).

    :param parallelism: parallelism of the keyed operator (its state is spread over that many
        subtasks by key group).
    :param buffer_timeout_ms: the job's output flush interval: the most a POST waits for a
        partly filled network buffer.
    :param max_queued: most events queued and not yet read by the job (back-pressure bound).
    """

    def __init__(self, parallelism: int = 2, buffer_timeout_ms: int = 5, max_queued: int = 1000):
        self.parallelism = parallelism
        self.buffer_timeout_ms = buffer_timeout_ms
        self.queue: "asyncio.Queue[Any]" = asyncio.Queue(maxsize=max_queued)
        self.client: Optional[AsyncJobClient] = None
        self._seq = itertools.count()
        self._waiting: Dict[int, "asyncio.Future[Tuple[str, float, int]]"] = {}
        self._consumer: Optional["asyncio.Task[None]"] = None
        self.accepted = 0
        self.applied = 0

    async def start(self) -> None:
        """Submit the job and start consuming its output."""
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(1)
        env.set_buffer_timeout(self.buffer_timeout_ms)
        source = AsyncIteratorSource(queue_items(self.queue), asyncio.get_running_loop())
        applied = (env.from_source(source, source_name="http events")
                   .key_by(lambda e: e[1])
                   .process(UserTotals()).uid(TOTALS_UID).name("UserTotals")
                   .set_parallelism(self.parallelism))
        self.client = await AsyncJobClient.execute_and_collect(applied, "event service")
        self._consumer = asyncio.get_running_loop().create_task(self._consume())

    async def _consume(self) -> None:
        error: Optional[BaseException] = None
        try:
            async for seq, user, total, count in self.client.collect():
                self.applied += 1
                waiter = self._waiting.pop(seq, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result((user, total, count))
        except Exception as e:  # noqa: BLE001 - the job failed: waiting requests get it
            error = e
        for waiter in self._waiting.values():
            if not waiter.done():
                waiter.set_exception(error or RuntimeError("the job ended before applying the event"))
        self._waiting.clear()

    async def submit(self, events: List[Tuple[str, float]], wait: bool) -> List[Tuple[str, float, int]]:
        """Queue ``events`` (waits while the queue is full); with ``wait``, return each event's
        ``(user, total, count)`` once the job applied it."""
        loop = asyncio.get_running_loop()
        waiters = []
        for user, amount in events:
            seq = next(self._seq)
            if wait:
                waiters.append(self._waiting.setdefault(seq, loop.create_future()))
            await self.queue.put((seq, user, amount))
            self.accepted += 1
        return list(await asyncio.gather(*waiters)) if waiters else []

    async def user(self, user: str) -> Optional[Dict[str, Any]]:
        """The user's total and count read from the job's state, or None."""
        total = await self.client.get_state(TOTALS_UID, "total", user)
        if total is None:
            return None
        count = await self.client.get_state(TOTALS_UID, "count", user)
        return {"user": user, "total": total, "count": count}

    async def stop(self) -> None:
        """End the input; wait for the job to apply everything queued and finish."""
        if self.client is None:
            return
        await self.queue.put(END_OF_INPUT)
        await self._consumer
        await self.client.get_job_execution_result()


_SERVICE = web.AppKey("service", EventService)


async def _post_events(request: web.Request) -> web.Response:
    try:
        body = json.loads(await request.text())
        events = parse_events(body)
    except json.JSONDecodeError as e:
        return web.json_response({"error": f"the body is not JSON: {e}"}, status=400)
    except ValueError as e:
        return web.json_response({"error": str(e)}, status=400)
    service = request.app[_SERVICE]
    wait = request.query.get("wait", "true").lower() not in ("false", "0", "no")
    applied = await service.submit(events, wait)
    if not wait:
        return web.json_response({"accepted": len(events)}, status=202)
    results = [{"user": u, "total": t, "count": c} for u, t, c in applied]
    return web.json_response(results if isinstance(body, list) else results[0])


async def _get_user(request: web.Request) -> web.Response:
    user = request.match_info["user"]
    found = await request.app[_SERVICE].user(user)
    if found is None:
        return web.json_response({"error": f"no events for user {user!r}"}, status=404)
    return web.json_response(found)


async def _health(request: web.Request) -> web.Response:
    service = request.app[_SERVICE]
    status = await service.client.get_job_status()
    return web.json_response({"job_id": service.client.get_job_id(), "status": status.name,
                              "accepted": service.accepted, "applied": service.applied})


def create_app(parallelism: int = 2, buffer_timeout_ms: int = 5, max_queued: int = 1000) -> web.Application:
    """The aiohttp application; the job starts with the app and finishes with it (see the
    module docstring for the routes)."""
    app = web.Application()

    async def job(app_: web.Application):
        service = EventService(parallelism, buffer_timeout_ms, max_queued)
        await service.start()
        app_[_SERVICE] = service
        yield
        await service.stop()

    app.cleanup_ctx.append(job)
    app.router.add_post("/events", _post_events)
    app.router.add_get("/users/{user}", _get_user)
    app.router.add_get("/health", _health)
    return app


def main(argv: Optional[List[str]] = None) -> None:
    """``python -m rill.examples.event_service --port P [--host H] [--parallelism N]``."""
    parser = argparse.ArgumentParser(prog="python -m rill.examples.event_service", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args(argv)
    web.run_app(create_app(args.parallelism), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
