"""Thespian's TCP transport with every message signed by the cluster's secret and verified
before a byte of it is unpickled.

Why: Thespian 4.0.1's ``TCPTransport`` frames a message as ``b"<length>>" + pickle.dumps((sender,
message))`` and its ``ReceiveBuffer.completed`` calls ``pickle.loads`` on whatever arrived, from
anyone who can connect. One pickle sent to the admin port, to any actor's port or to a client's
own endpoint runs code as the cluster's user (issue 10). Rill's messages themselves carry
cloudpickled job graphs, descriptors and failures, so a peer must be authenticated before
anything it sends is deserialized.

What changes on the wire (Thespian's framing is kept, so the length-prefixed exchange, ACKs and
retries work unchanged)::

    b"<length>>" | HMAC-SHA256(secret, body) (32 bytes) | body = pickle.dumps((sender, message))

``length`` counts the MAC and the body. A receiver, before unpickling anything:

1. accepts at most ``len(str(max_message_bytes))`` ASCII digits before ``>`` and refuses any
   other byte there (Thespian's ``int()`` took signs, spaces, underscores, and buffered a header
   without ``>`` forever);
2. refuses a length above ``max_message_bytes`` (``cluster.rpc.max-message-size``) or too short
   to hold a MAC, as soon as the header is read, so a huge header is never buffered;
3. once the announced bytes are in, checks the MAC in constant time
   (:func:`hmac.compare_digest`) against the secret(s) this process holds, and only then
   unpickles the body.

A refused message closes the connection without a reply and is logged at WARNING with the
peer's address: in a cluster's processes straight into the cluster log (``install``'s
``log_file``; a record sent through Thespian's log forwarding from inside its transport loop
waits for the process' next message, and may never leave a process that exits), elsewhere
through the ``rill.cluster.auth`` logger.
Thespian's two acknowledgement packets (``ACK``, ``ACK+DATAERR``) stay unsigned constants: the
receiver recognises them by comparing bytes, never by unpickling, and a forged one can only make
a sender believe a message arrived (or retry it), which an on-path attacker can cause anyway.

Secrets: :func:`install` sets the process' secret before its actor system or client endpoint
starts; Thespian forks every actor process from there (``fork`` start method), so they inherit
it. Each transport signs with the secret current when it was created (a client that talks to
two clusters keeps one endpoint per cluster); a received message is accepted if it verifies
under any secret this process has installed.

Not covered (stated in the README's threat model): a message is not bound to its connection or
to a nonce, so an attacker who can *read* the traffic (another host's network, no TLS) can
replay a captured message, though never forge a new one; a connected peer can make a process
buffer up to ``max_message_bytes`` per connection before the MAC is checked (memory, not code).

Also here, because it is the same code path: sending and receiving are linear in a message's
size (Thespian 4.0.1 copies the rest of a message on every ``send`` and appends each ``recv`` to
``bytes``, quadratic for a 21 MB job graph); the message goes out as one ``memoryview`` and is
received into a ``bytearray``.

Flink counterpart: Pekko's RPC with ``security.ssl.internal.*`` (mutual TLS between the
cluster's processes) and ``pekko.framesize`` (the largest RPC message); Rill authenticates with
a shared secret instead of certificates and names its limit ``cluster.rpc.max-message-size``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import pickle
import threading
import weakref
from typing import List, Optional, Tuple

__all__ = [
    "MAC_BYTES",
    "LOGGER_NAME",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "MIN_SECRET_BYTES",
    "MessageRefusedError",
    "MessageTooLargeError",
    "AuthenticatedReceiveBuffer",
    "install",
    "installed_secret",
    "log_to_cluster_file",
    "sign",
]

#: Length of the HMAC-SHA256 tag that precedes every message's body.
MAC_BYTES = 32
#: Default of ``cluster.rpc.max-message-size``: job graphs with a source's collection inside
#: reach tens of MB.
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
#: A secret shorter than this is refused (HMAC keys below 128 bits are guessable).
MIN_SECRET_BYTES = 16
#: Logger of refused messages (created per call: Thespian replaces the logging manager in the
#: processes it forks, so a logger object made before the fork would write nowhere).
LOGGER_NAME = "rill.cluster.auth"


class MessageRefusedError(ValueError):
    """A received message was refused before anything of it was deserialized.

    :ivar reason: why (header, size, or signature), for the log.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class MessageTooLargeError(ValueError):
    """A message to send is larger than ``cluster.rpc.max-message-size``; the receiver would
    refuse it, so it is not sent."""


class _State:
    """The process' secrets and limit (module state: Thespian creates its transports itself)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.secret: Optional[bytes] = None  # new transports sign with this one
        self.keyring: Tuple[bytes, ...] = ()  # any of these verifies a received message
        self.max_message_bytes = DEFAULT_MAX_MESSAGE_BYTES
        self.patched = False
        self.control: dict = {}  # Thespian's ACK payloads (bytes -> the string they stand for)
        self.external_endpoints: "weakref.WeakSet" = weakref.WeakSet()  # this process' client endpoints
        self.file_logger: Optional[logging.Logger] = None  # writes to the cluster log directly


_state = _State()


def sign(secret: bytes, body) -> bytes:
    """The 32-byte HMAC-SHA256 of ``body`` under ``secret`` (what precedes the body on the wire)."""
    return hmac.new(secret, body, hashlib.sha256).digest()


def installed_secret() -> Optional[bytes]:
    """The secret new transports of this process sign with, or ``None`` before :func:`install`."""
    return _state.secret


def install(secret: bytes, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, log_file: Optional[str] = None,
            log_format: str = "%(asctime)s %(process)d %(levelname)s %(name)s %(message)s") -> None:
    """Make this process' Thespian TCP transport sign and verify with ``secret``.

    Call it before the process starts or reaches an actor system (processes Thespian forks
    later inherit it). Calling it again with another secret adds that secret: transports
    created afterwards sign with it, and messages verifying under either are accepted.

    :param secret: the cluster's shared secret, at least :data:`MIN_SECRET_BYTES` bytes.
    :param max_message_bytes: the largest message (MAC + pickled body) this process sends or
        accepts, in bytes (``cluster.rpc.max-message-size``); at least 1 KiB.
    :param log_file: the cluster log, where this process and those it forks write refusals
        (``None``: keep the one set before, or log through ``rill.cluster.auth``).
    :param log_format: the cluster log's line format (a :class:`logging.Formatter` format).
    :raises ValueError: for a secret that is not bytes or too short, or a limit below 1 KiB.
    """
    if not isinstance(secret, (bytes, bytearray)) or len(secret) < MIN_SECRET_BYTES:
        got = f"{len(secret)} bytes" if isinstance(secret, (bytes, bytearray)) else type(secret).__name__
        raise ValueError(f"The cluster secret must be at least {MIN_SECRET_BYTES} bytes, got {got}")
    if isinstance(max_message_bytes, bool) or not isinstance(max_message_bytes, int) or max_message_bytes < 1024:
        raise ValueError(f"cluster.rpc.max-message-size must be at least 1024 bytes, got {max_message_bytes!r}")
    secret = bytes(secret)
    with _state.lock:
        _patch_thespian()
        _state.secret = secret
        if secret not in _state.keyring:
            _state.keyring = _state.keyring + (secret,)
        _state.max_message_bytes = max_message_bytes
        if log_file is not None:
            # a Logger outside logging's manager: Thespian replaces the manager in the processes
            # it forks, and this one (with its append-mode file) survives that
            file_logger = logging.Logger(LOGGER_NAME, logging.WARNING)
            handler = logging.FileHandler(log_file, mode="a", delay=True)
            handler.setFormatter(logging.Formatter(log_format))
            file_logger.addHandler(handler)
            _state.file_logger = file_logger


def log_to_cluster_file(*logger_names: str, level: Optional[int] = None) -> None:
    """Make the named loggers of this process write straight to the cluster log given to
    :func:`install` (and not propagate), when there is one; with ``level``, at that level.

    For loggers used by threads other than an actor's own: Thespian's log forwarding sends each
    record through the actor's transport, which only the actor's thread may use. Idempotent.
    """
    file_logger = _state.file_logger
    if file_logger is None:
        return
    for name in logger_names:
        logger = logging.getLogger(name)  # now: Thespian replaced the logging tree in this process
        if level is not None:
            logger.setLevel(level)
        for handler in file_logger.handlers:
            if handler not in logger.handlers:
                logger.addHandler(handler)
        logger.propagate = False


def _verifies(mac, body) -> bool:
    expected = bytes(mac)
    ok = False
    for secret in _state.keyring:  # no early exit: the time does not say which secret matched
        ok |= hmac.compare_digest(sign(secret, body), expected)
    return ok


class AuthenticatedReceiveBuffer:
    """One incoming message being read (replaces Thespian's ``streamBuffer.ReceiveBuffer``,
    same methods): header checks as bytes arrive, the MAC checked once the message is
    complete, the body unpickled only by :meth:`completed` and only after that.

    A refused buffer does not raise (Thespian reads acknowledgements through it outside any
    ``try``); it reports itself done, :meth:`completed` returns ``None`` (Thespian's "corrupted
    packet") and :attr:`refusal` says why. The incoming-socket hook raises on it so that
    Thespian closes the connection.

    :param serializer: what Thespian passes (``pickle.loads``); ignored.
    :param max_message_bytes: the size limit (default: the one :func:`install` set).
    :ivar refusal: ``None``, or why the message was refused.
    """

    def __init__(self, serializer=None, max_message_bytes: Optional[int] = None):  # noqa: ARG002
        self._head: Optional[bytearray] = bytearray()
        self._buf = bytearray()
        self._size: Optional[int] = None
        self._extra = b""
        self._verified = False
        self._control: Optional[str] = None
        self.refusal: Optional[str] = None
        self.logged = False
        self._max = _state.max_message_bytes if max_message_bytes is None else max_message_bytes

    def _refuse(self, reason: str) -> None:
        self.refusal = reason
        self._head = None
        self._buf = bytearray()

    def addMore(self, buf) -> None:  # noqa: N802 - Thespian's name
        """Take the next received bytes (header, then body, then the next message's start)."""
        if self.refusal is not None:
            return
        if self._size is None:
            self._head += buf
            mark = self._head.find(b">")
            digits = self._head if mark < 0 else self._head[:mark]
            if (digits and not digits.isdigit()) or len(digits) > len(str(self._max)):
                shown = bytes(self._head[:24])
                return self._refuse(f"its length header {shown!r} is not a decimal length of at most "
                                    f"{self._max} bytes")
            if mark < 0:
                return
            if not digits:
                return self._refuse("its length header is empty")
            size = int(digits)
            if size > self._max:
                return self._refuse(f"it announces {size} bytes, more than cluster.rpc.max-message-size "
                                    f"({self._max} bytes)")
            if size < MAC_BYTES and size not in {len(p) for p in _state.control}:
                return self._refuse(f"it announces {size} bytes, too short for a signed message")
            rest = self._head[mark + 1:]
            self._head = None
            self._size = size
            buf = rest
        want = self._size - len(self._buf)
        if want >= len(buf):  # the usual case (Thespian reads at most what is missing): no slice copy
            self._buf += buf
        elif want > 0:
            self._buf += buf[:want]
            self._extra = bytes(buf[want:])
        else:
            self._extra += bytes(buf)
        if len(self._buf) == self._size and not self._verified and self._control is None:
            self._check()

    def _check(self) -> None:
        if len(self._buf) <= MAC_BYTES:
            control = _state.control.get(bytes(self._buf))
            if control is None:
                return self._refuse(f"its {len(self._buf)} bytes are neither a signed message nor an "
                                    "acknowledgement")
            self._control = control
            return
        view = memoryview(self._buf)
        if not _verifies(view[:MAC_BYTES], view[MAC_BYTES:]):
            return self._refuse("its signature does not verify with the cluster's secret")
        self._verified = True

    def is_empty(self) -> bool:
        """No byte of a message received yet (Thespian's meaning)."""
        return self._size is None and not self._head and self.refusal is None

    def remainingAmount(self) -> int:  # noqa: N802 - Thespian's name
        """How many bytes to ``recv`` next: a few for the header, then the rest of the body."""
        if self.refusal is not None:
            return 1
        if self._size is None:
            return 20
        return self._size - len(self._buf)

    def isDone(self) -> bool:  # noqa: N802 - Thespian's name
        """Whether to stop reading: the message is complete, or refused."""
        return self.refusal is not None or (self._size is not None and len(self._buf) == self._size)

    def removeExtra(self) -> None:  # noqa: N802 - Thespian's name
        """Forget bytes received after this message (Thespian handles them separately)."""
        self._extra = b""

    def completed(self):
        """``(message, extra bytes)`` once complete and verified; ``None`` otherwise (refused
        or incomplete): the only place a received body is unpickled."""
        if self.refusal is not None or self._size is None or len(self._buf) != self._size:
            return None
        if self._control is not None:
            return self._control, self._extra
        if not self._verified:  # unreachable: _check ran when the last byte arrived
            return None
        return pickle.loads(memoryview(self._buf)[MAC_BYTES:]), self._extra

    def __str__(self) -> str:
        state = f"refused: {self.refusal}" if self.refusal else f"{len(self._buf)}/{self._size}"
        return f"AuthenticatedReceiveBuffer({state})"


def _log_refusal(peer: str, local: str, reason: str) -> None:
    logger = _state.file_logger or logging.getLogger(LOGGER_NAME)
    logger.warning(
        "refused a message from %s to %s before deserializing it: %s; connection closed", peer, local, reason)


def _addresses(sock) -> Tuple[str, str]:
    out: List[str] = []
    for name in ("getpeername", "getsockname"):
        try:
            host, port = getattr(sock, name)()[:2]
            out.append(f"{host}:{port}")
        except (OSError, AttributeError, ValueError, TypeError):
            out.append("an unknown address")
    return out[0], out[1]


def _close_inherited_listeners() -> None:
    """After a fork: close the listening sockets of the parent's external endpoints.

    Thespian forks the admin from the process that starts a system, and that process' own
    endpoint (an external one, as a client's) stays open in the admin and in every process
    forked from it: once the starting process exits, a port that accepts connections (into the
    kernel's backlog) which no process ever reads or closes. Actor transports are not touched:
    Thespian closes a parent actor's sockets in its child by their numbers (``closeFileNums``),
    and closing them here first would let those numbers be reused and then closed."""
    for transport in list(_state.external_endpoints):
        sock = getattr(transport, "socket", None)
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
    _state.external_endpoints = weakref.WeakSet()


def _patch_thespian() -> None:
    """Replace Thespian's framing, receive buffer and the two hooks that log refusals. Once per
    process (forked processes inherit the patched classes)."""
    if _state.patched:
        return
    from thespian.system.transport import TCPTransport as tcp  # noqa: PLC0415 - cluster mode only
    from thespian.system.transport import streamBuffer  # noqa: PLC0415

    for packet in (streamBuffer.ackMsg, streamBuffer.ackDataErrMsg):
        payload = bytes(packet[packet.index(b">") + 1:])
        _state.control[payload] = streamBuffer.ackPacket if packet == streamBuffer.ackMsg \
            else streamBuffer.ackDataErrPacket

    transport = tcp.TCPTransport
    original_init = transport.__init__

    def __init__(self, initType, *args, **kwargs):  # noqa: N803,N807 - Thespian's names
        original_init(self, initType, *args, **kwargs)
        self._rill_secret = _state.secret  # this endpoint keeps the cluster it was made for
        self._rill_max_message_bytes = _state.max_message_bytes
        if not isinstance(initType, tcp.TCPEndpoint):  # a client's (external) endpoint
            _state.external_endpoints.add(self)

    def serializer(self, intent):
        body = pickle.dumps((self.myAddress, intent.message))
        size = MAC_BYTES + len(body)
        if size > self._rill_max_message_bytes:
            raise MessageTooLargeError(
                f"{type(intent.message).__name__} to {intent.targetAddr} is {size} bytes serialized, more than "
                f"cluster.rpc.max-message-size ({self._rill_max_message_bytes} bytes); raise it on every host of "
                "the cluster and on the client")
        return memoryview(b"".join((b"%d>" % size, sign(self._rill_secret, body), body)))

    incoming = tcp.TCPIncoming_Common

    def addData(self, newData):  # noqa: N802 - Thespian's name
        buffer = self._rData
        buffer.addMore(newData)
        refusal = getattr(buffer, "refusal", None)
        if refusal is not None:
            if not buffer.logged:
                buffer.logged = True
                _log_refusal(*_addresses(self.socket), refusal)
            raise MessageRefusedError(refusal)  # Thespian closes the socket, sends nothing back

    check_reply = transport._check_XMIT_4_done

    def _check_XMIT_4_done(self, intent, rcv):  # noqa: N802 - Thespian's name
        buffer = intent.ackbuf
        result = check_reply(self, intent, rcv)
        if getattr(buffer, "refusal", None) is not None and not buffer.logged:
            buffer.logged = True  # a reply on a connection we opened: Thespian retries the send
            _log_refusal(str(intent.targetAddr), str(self.myAddress), buffer.refusal)
        return result

    transport.__init__ = __init__
    transport.serializer = serializer
    transport._check_XMIT_4_done = _check_XMIT_4_done
    incoming.addData = addData
    tcp.ReceiveBuffer = AuthenticatedReceiveBuffer
    os.register_at_fork(after_in_child=_close_inherited_listeners)
    _state.patched = True
