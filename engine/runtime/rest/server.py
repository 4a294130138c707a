"""``RestServerEndpoint``: Flink's REST API and the dashboard page over HTTP (Flink's
``WebMonitorEndpoint``), on the standard library's ``ThreadingHTTPServer``.

Routes (``:jobid`` and ``:vertexid`` are 32-hex ids):

==========================================================  ===================================
``GET /overview``                                           cluster overview
``GET /config``                                             dashboard configuration
``GET /jobs``, ``GET /jobs/overview``                       job ids with status; job overviews
``GET /jobs/:jobid``                                        job details (+ backpressure root cause)
``GET /jobs/:jobid/plan``, ``/exceptions``                  plan; exceptions
``GET /jobs/:jobid/vertices/:vertexid``                     subtasks with records and bytes
``GET .../vertices/:vertexid/backpressure``, ``/watermarks``  ratios and levels; watermarks
``GET /taskmanagers``                                       TaskExecutors
``PATCH /jobs/:jobid[?mode=cancel]``                        cancel (bearer token, see ``auth``)
``POST /jobs/:jobid/savepoints``                            savepoint [then cancel] (bearer token)
``POST /jobs/:jobid/stop``                                  stop with a savepoint (bearer token)
``GET /jobs/:jobid/savepoints/:triggerid``                  a savepoint operation's status
``GET /jobs/:jobid/checkpoints``                            checkpoint statistics (404 without checkpointing)
``POST``/``DELETE /jobs/:jobid/channel-timelines``          start / stop recording channel timelines (token)
``GET /metrics``                                            Prometheus text format (see ``prometheus``)
``GET /openapi.json``, ``GET /`` (``/index.html``)          OpenAPI description; the dashboard
==========================================================  ===================================

Errors are Flink's ``ErrorResponseBody``: ``{"errors": ["..."]}`` with 400, 401, 404, 405, 409
or 500. Threading: one thread per request (daemon threads); handlers only read snapshots and call
the gateway, which is thread-safe. The server runs on its own daemon thread until
:meth:`RestServerEndpoint.close`.
"""

from __future__ import annotations

import errno
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Callable, Dict, List, Optional, Tuple

from prometheus_client import CollectorRegistry
from urllib.parse import parse_qs, urlsplit

from rill.runtime.rest import channel_timelines, messages
from rill.runtime.rest.auth import check_authorization, derive_bearer_token
from rill.runtime.rest.gateway import JobNotFoundError, RestfulGateway
from rill.runtime.rest.options import RestEndpointConfig
from rill.runtime.rest.prometheus import CONTENT_TYPE_LATEST, FlinkMetricsCollector, render_metrics
from rill.runtime.taskmanager.channel_timeline import ChannelTimelineStateError

__all__ = ["RestServerEndpoint", "RestError"]

_ID = r"([0-9a-fA-F]{32})"


class RestError(Exception):
    """An error answered as ``{"errors": [message]}`` with HTTP ``status``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _static(name: str) -> bytes:
    return resources.files("rill.runtime.rest").joinpath("static", name).read_bytes()


class RestServerEndpoint:
    """Serves one gateway on ``config.bind_address`` and the first free port of
    ``config.bind_ports``.

    :param gateway: what the handlers ask.
    :param config: where to bind (:class:`RestEndpointConfig`).
    :param secret: the cluster's secret (>= 16 bytes); actions need its bearer token.
    :raises OSError: when no candidate port can be bound (the message names address and ports).
    """

    def __init__(self, gateway: RestfulGateway, config: RestEndpointConfig, secret: bytes):
        self.gateway = gateway
        self.config = config
        self.bearer_token = derive_bearer_token(secret)
        self.metrics_registry = CollectorRegistry(auto_describe=False)
        self.metrics_registry.register(FlinkMetricsCollector(gateway, config.bind_address))
        self._httpd = self._bind(config)
        self._httpd.endpoint = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name=f"rest-endpoint-{self.port}", daemon=True)
        self._thread.start()

    @staticmethod
    def _bind(config: RestEndpointConfig) -> ThreadingHTTPServer:
        last: Optional[OSError] = None
        for port in config.bind_ports:
            try:
                httpd = ThreadingHTTPServer((config.bind_address, port), _Handler)
                httpd.daemon_threads = True
                return httpd
            except OSError as e:
                if e.errno != errno.EADDRINUSE:
                    raise OSError(e.errno, f"REST endpoint cannot bind {config.bind_address}:{port}: {e.strerror}") from e
                last = e
        ports = config.bind_ports
        span = str(ports[0]) if len(ports) == 1 else f"{ports[0]}-{ports[-1]}"
        raise OSError(errno.EADDRINUSE, f"REST endpoint cannot bind {config.bind_address}:{span} "
                      f"(rest.bind-port): every port is in use") from last

    @property
    def address(self) -> str:
        return self._httpd.server_address[0]

    @property
    def port(self) -> int:
        """The bound port (the ephemeral one when ``rest.port`` is 0)."""
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """``http://address:port`` (Flink's ``getWebInterfaceURL``)."""
        return f"http://{self.address}:{self.port}"

    def close(self) -> None:
        """Stop serving and close the socket; returns when the server thread has ended."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5.0)

    # -- routing -----------------------------------------------------------------------------
    def handle_get(self, path: str) -> Tuple[int, object]:
        """(status, JSON body) for a GET of ``path``. :raises RestError: 404 for an unknown
        path, job or vertex."""
        g = self.gateway
        if path == "/overview":
            jobs, tms = g.list_jobs(), g.list_taskmanagers()
            return 200, messages.cluster_overview(jobs, len(tms), sum(t["slotsNumber"] for t in tms),
                                                  sum(t["freeSlots"] for t in tms))
        if path == "/config":
            return 200, messages.dashboard_config(self.config.refresh_interval_ms)
        if path == "/jobs":
            return 200, messages.job_ids_with_status(g.list_jobs())
        if path == "/jobs/overview":
            return 200, messages.multiple_job_details(g.list_jobs())
        if path == "/taskmanagers":
            return 200, messages.taskmanagers_info(g.list_taskmanagers())
        m = re.fullmatch(r"/jobs/" + _ID + r"/savepoints/" + _ID, path)
        if m:
            return self._savepoint_status(m.group(1), m.group(2))
        m = re.fullmatch(r"/jobs/" + _ID + r"/checkpoints", path)
        if m:
            try:
                stats = g.checkpoint_stats(m.group(1).lower())
            except JobNotFoundError as e:
                raise RestError(404, str(e)) from None
            if stats is None:
                raise RestError(404, f"Checkpointing is not enabled for job {m.group(1).lower()}")
            return 200, messages.checkpointing_statistics(stats)
        for pattern, handler in _JOB_ROUTES:
            m = re.fullmatch(pattern, path)
            if m:
                job = self._job(m.group(1))
                if len(m.groups()) == 1:
                    return 200, handler(job)
                v = job.vertex(m.group(2).lower())
                if v is None:
                    raise RestError(404, f"Vertex {m.group(2)} not found in job {job.job_id}")
                return 200, handler(job, v)
        raise RestError(404, f"Not found: {path}")

    def handle_patch(self, path: str, query: Dict[str, List[str]], authorization: Optional[str]) -> Tuple[int, object]:
        """Cancel: ``PATCH /jobs/:jobid`` with ``mode`` absent or ``cancel``; 202 and ``{}``.
        :raises RestError: 401 without the bearer token, 400 for another mode, 404."""
        m = re.fullmatch(r"/jobs/" + _ID, path)
        if not m:
            raise RestError(404, f"Not found: PATCH {path}")
        if not check_authorization(authorization, self.bearer_token):
            raise RestError(401, "Cancelling a job needs 'Authorization: Bearer <token>', the token derived "
                                 "from the cluster's secret (see rill.runtime.rest.auth)")
        mode = query.get("mode", ["cancel"])[0]
        if mode != "cancel":
            raise RestError(400, f"Unsupported mode {mode!r}: Rill supports mode=cancel (stop needs savepoints)")
        try:
            self.gateway.cancel_job(m.group(1).lower())
        except JobNotFoundError as e:
            raise RestError(404, str(e)) from None
        return 202, {}

    def handle_post(self, path: str, body: bytes, authorization: Optional[str]) -> Tuple[int, object]:
        """Savepoints (Flink's ``SavepointTriggerHeaders`` / ``StopWithSavepointTriggerHeaders``):
        ``POST /jobs/:jobid/savepoints`` with ``{"target-directory": ..., "cancel-job": false}``
        (``true``: cancel the job once the savepoint completed) and ``POST /jobs/:jobid/stop``
        with ``{"targetDirectory": ..., "drain": false}``; 202 and ``{"request-id": <trigger
        id>}``, whose status ``GET /jobs/:jobid/savepoints/:triggerid`` gives. ``POST
        /jobs/:jobid/channel-timelines`` starts a recording (see ``channel_timelines``).

        :raises RestError: 405 for another path, 401 without the bearer token, 400 for a body
            that is not a JSON object or a field of the wrong type, 404 for an unknown job, 409
            for a recording that cannot start.
        """
        m = re.fullmatch(r"/jobs/" + _ID + r"/(savepoints|stop|channel-timelines)", path)
        if not m:
            raise RestError(405, f"Method POST is not allowed on {path}")
        timelines = m.group(2) == "channel-timelines"
        if not check_authorization(authorization, self.bearer_token):
            raise RestError(401, f"{'Channel timelines' if timelines else 'Savepoints'} need 'Authorization: "
                                 "Bearer <token>', the token derived from the cluster's secret (see rill.runtime.rest.auth)")
        try:
            request = json.loads(body or b"{}")
        except ValueError as e:
            raise RestError(400, f"Request body is not JSON: {e}") from None
        if not isinstance(request, dict):
            raise RestError(400, f"Request body must be a JSON object, got {type(request).__name__}")
        if timelines:
            return self._start_channel_timelines(m.group(1).lower(), request)
        stop = m.group(2) == "stop"
        target = request.get("targetDirectory" if stop else "target-directory")
        if target is not None and not isinstance(target, str):
            raise RestError(400, f"{'targetDirectory' if stop else 'target-directory'} must be a string, got {target!r}")
        flag = request.get("drain" if stop else "cancel-job", False)
        if not isinstance(flag, bool):
            raise RestError(400, f"{'drain' if stop else 'cancel-job'} must be a boolean, got {flag!r}")
        try:
            trigger_id = self.gateway.trigger_savepoint(m.group(1).lower(), target, flag if stop else None,
                                                        cancel_job=not stop and flag)
        except JobNotFoundError as e:
            raise RestError(404, str(e)) from None
        return 202, {"request-id": trigger_id}

    def _start_channel_timelines(self, job_id: str, request: Dict) -> Tuple[int, object]:
        try:
            settings = channel_timelines.parse_start_request(request)
        except ValueError as e:
            raise RestError(400, str(e)) from None
        try:
            self.gateway.start_channel_timelines(job_id, settings)
        except JobNotFoundError as e:
            raise RestError(404, str(e)) from None
        except ChannelTimelineStateError as e:
            raise RestError(409, str(e)) from None
        return 202, channel_timelines.start_response(job_id, settings)

    def handle_delete(self, path: str, authorization: Optional[str]) -> Tuple[int, object]:
        """``DELETE /jobs/:jobid/channel-timelines``: stop the recording; 200 and ``{"files"}``
        once every task wrote its file.

        :raises RestError: 405 for another path, 401 without the bearer token, 404 for an
            unknown job, 409 when nothing is being recorded.
        """
        m = re.fullmatch(r"/jobs/" + _ID + r"/channel-timelines", path)
        if not m:
            raise RestError(405, f"Method DELETE is not allowed on {path}")
        if not check_authorization(authorization, self.bearer_token):
            raise RestError(401, "Channel timelines need 'Authorization: Bearer <token>', the token derived from "
                                 "the cluster's secret (see rill.runtime.rest.auth)")
        try:
            files = self.gateway.stop_channel_timelines(m.group(1).lower())
        except JobNotFoundError as e:
            raise RestError(404, str(e)) from None
        except ChannelTimelineStateError as e:
            raise RestError(409, str(e)) from None
        return 200, channel_timelines.stop_response(files)

    def _savepoint_status(self, job_id: str, trigger_id: str) -> Tuple[int, object]:
        status = self.gateway.savepoint_status(job_id.lower(), trigger_id.lower())
        if status is None:
            raise RestError(404, f"No savepoint operation {trigger_id} of job {job_id}")
        return 200, messages.savepoint_info(status)

    def _job(self, job_id: str):
        try:
            return self.gateway.get_job(job_id.lower())
        except JobNotFoundError as e:
            raise RestError(404, str(e)) from None


_JOB_ROUTES: List[Tuple[str, Callable]] = [
    (r"/jobs/" + _ID, messages.job_details),
    (r"/jobs/" + _ID + r"/plan", messages.job_plan),
    (r"/jobs/" + _ID + r"/exceptions", messages.job_exceptions),
    (r"/jobs/" + _ID + r"/vertices/" + _ID, messages.vertex_details),
    (r"/jobs/" + _ID + r"/vertices/" + _ID + r"/backpressure", messages.vertex_backpressure),
    (r"/jobs/" + _ID + r"/vertices/" + _ID + r"/watermarks", lambda job, v: messages.vertex_watermarks(v)),
]

_STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
           "/index.html": ("index.html", "text/html; charset=utf-8"),
           "/openapi.json": ("openapi.json", "application/json")}


class _Handler(BaseHTTPRequestHandler):
    server_version = "rill-rest"
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass  # quiet: a polling dashboard would fill stderr

    @property
    def endpoint(self) -> RestServerEndpoint:
        return self.server.endpoint  # type: ignore[attr-defined]

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: object) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json; charset=utf-8")

    def _dispatch(self, fn) -> None:
        try:
            status, body = fn()
            self._json(status, body)
        except RestError as e:
            self._json(e.status, {"errors": [str(e)]})
        except Exception as e:  # noqa: BLE001 - answered, never kills the server
            self._json(500, {"errors": [f"Internal server error: {type(e).__name__}: {e}"]})

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = urlsplit(self.path).path.rstrip("/") or "/"
        if path in _STATIC:
            name, ctype = _STATIC[path]
            self._send(200, _static(name), ctype)
            return
        if path == "/metrics":
            try:
                body = render_metrics(self.endpoint.metrics_registry)
            except Exception as e:  # noqa: BLE001 - answered, never kills the server
                self._json(500, {"errors": [f"Internal server error: {type(e).__name__}: {e}"]})
                return
            self._send(200, body, CONTENT_TYPE_LATEST)
            return
        self._dispatch(lambda: self.endpoint.handle_get(path))

    def do_PATCH(self) -> None:  # noqa: N802
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self._dispatch(lambda: self.endpoint.handle_patch(parts.path.rstrip("/"), parse_qs(parts.query),
                                                          self.headers.get("Authorization")))

    def do_POST(self) -> None:  # noqa: N802
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self._dispatch(lambda: self.endpoint.handle_post(parts.path.rstrip("/"), body,
                                                         self.headers.get("Authorization")))

    def do_DELETE(self) -> None:  # noqa: N802
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self._dispatch(lambda: self.endpoint.handle_delete(parts.path.rstrip("/"), self.headers.get("Authorization")))

    def _not_allowed(self) -> None:
        self._json(405, {"errors": [f"Method {self.command} is not allowed on {urlsplit(self.path).path}"]})

    do_PUT = _not_allowed  # noqa: N815
