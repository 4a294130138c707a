"""The wire format: length-prefixed frames (Flink's ``NettyMessage`` and its encoder/decoder).

Every frame is ``length (uint32, big endian) | type (uint8) | body``, ``length`` counting the
type byte and the body. A receiver refuses a length above its maximum frame size before reading
the body, and a frame whose body does not match its type's layout, as
:class:`~rill.network.netty.exceptions.CorruptFrameError`.

==================== ===== ======== ==================================================================
message              type  from     body
==================== ===== ======== ==================================================================
Hello                0x01  client   ``"RILL"`` version flags(1: flow control) client_nonce[32]
Challenge            0x02  server   server_nonce[32] hmac(secret, "rill-server"+client_nonce+server_nonce)
Auth                 0x03  client   hmac(secret, "rill-client"+server_nonce+client_nonce)
AuthFailed           0x04  server   (empty); the server closes the connection after it
PartitionRequest     0x10  client   receiver_id[16] subpartition(u32) initial_credit(u32) partition ids
AddCredit            0x11  client   receiver_id[16] credit(u32)
CancelPartitionReq.  0x12  client   receiver_id[16]
CloseRequest         0x13  client   (empty)
BufferResponse       0x20  server   receiver_id[16] sequence(u32) backlog(u32) flags(u8) buffers(u16) payload
ErrorResponse        0x21  server   receiver_id[16] (zeros: the whole connection) code(u8) utf-8 text
==================== ===== ======== ==================================================================

``receiver_id`` is the consuming channel's id (Flink's ``InputChannelID``): one connection
multiplexes every channel between two processes. BufferResponse flags: ``FLAG_EVENT``,
``FLAG_COMPRESSED``, ``FLAG_LAST_SEGMENT`` (the payload's last segment; a payload that fits one
segment has it set), ``FLAG_PRIORITY`` (with ``FLAG_EVENT``: a priority event, the barrier of an
unaligned checkpoint, which the receiver puts ahead of the entries it queued; Flink's
``PRIORITIZED_EVENT_BUFFER``; like every event it takes no credit).

``buffers`` is how many network buffers (segments) the frame carries, each one credit (Flink's
``BufferResponse.numOfPartialBuffers``, FLINK-33743, counted from 1): a sender with credit for
several segments of one payload sends them in one frame, sequence numbers ``sequence`` to
``sequence + buffers - 1``, ``backlog`` as after the last of them. The segments are consecutive
slices of one payload, all ``segment_size_bytes`` long except a last one, so unlike Flink's frame
their sizes are not sent: the receiver reassembles the payload and only counts the credits.
An event frame carries 1.

The handshake is a mutual HMAC-SHA256 challenge (as ``multiprocessing.connection``): neither side
deserializes anything from the other before it proved knowledge of the shared secret; until
then only fixed-size fields are parsed.
"""

from __future__ import annotations

import hmac
import os
import struct

from .exceptions import CorruptFrameError

__all__ = [
    "MAGIC",
    "PROTOCOL_VERSION",
    "HELLO",
    "CHALLENGE",
    "AUTH",
    "AUTH_FAILED",
    "PARTITION_REQUEST",
    "ADD_CREDIT",
    "CANCEL_PARTITION_REQUEST",
    "CLOSE_REQUEST",
    "BUFFER_RESPONSE",
    "ERROR_RESPONSE",
    "FLAG_EVENT",
    "FLAG_COMPRESSED",
    "FLAG_LAST_SEGMENT",
    "FLAG_PRIORITY",
    "HELLO_FLOW_CONTROL",
    "ERROR_PARTITION_NOT_FOUND",
    "ERROR_PARTITION_RELEASED",
    "ERROR_SERIALIZATION",
    "ERROR_PROTOCOL",
    "NO_RECEIVER",
    "NONCE_BYTES",
    "LENGTH",
    "BUFFER_RESPONSE_HEADER",
    "MAX_BUFFERS_PER_FRAME",
    "new_nonce",
    "encode_hello",
    "decode_hello",
    "encode_challenge",
    "decode_challenge",
    "encode_auth",
    "check_auth",
    "encode_empty",
    "encode_partition_request",
    "decode_partition_request",
    "encode_add_credit",
    "decode_add_credit",
    "encode_cancel",
    "decode_receiver",
    "encode_buffer_response_header",
    "decode_buffer_response",
    "decode_buffer_response_header",
    "BUFFER_RESPONSE_PAYLOAD_OFFSET",
    "encode_error_response",
    "decode_error_response",
]

MAGIC = b"RILL"
PROTOCOL_VERSION = 2  # 2: BufferResponse carries its buffer count

HELLO = 0x01
CHALLENGE = 0x02
AUTH = 0x03
AUTH_FAILED = 0x04
PARTITION_REQUEST = 0x10
ADD_CREDIT = 0x11
CANCEL_PARTITION_REQUEST = 0x12
CLOSE_REQUEST = 0x13
BUFFER_RESPONSE = 0x20
ERROR_RESPONSE = 0x21

FLAG_EVENT = 0x01
FLAG_COMPRESSED = 0x02
FLAG_LAST_SEGMENT = 0x04
FLAG_PRIORITY = 0x08

HELLO_FLOW_CONTROL = 0x01

ERROR_PARTITION_NOT_FOUND = 1
ERROR_PARTITION_RELEASED = 2
ERROR_SERIALIZATION = 3
ERROR_PROTOCOL = 4

#: The receiver id of an ErrorResponse about the whole connection.
NO_RECEIVER = bytes(16)
NONCE_BYTES = 32

#: The length prefix.
LENGTH = struct.Struct(">I")
_TYPE_ONLY = struct.Struct(">IB")
_HELLO = struct.Struct(">IB4sBB32s")
_HELLO_BODY = struct.Struct(">4sBB32s")
_CHALLENGE = struct.Struct(">IB32s32s")
_AUTH = struct.Struct(">IB32s")
_PARTITION_REQUEST = struct.Struct(">IB16sII")
_ADD_CREDIT = struct.Struct(">IB16sI")
_RECEIVER = struct.Struct(">IB16s")
#: BufferResponse header: length, type, receiver id, sequence number, backlog, flags, buffers.
BUFFER_RESPONSE_HEADER = struct.Struct(">IB16sIIBH")
#: The most segments one BufferResponse may carry (its u16 count).
MAX_BUFFERS_PER_FRAME = 0xFFFF
_ERROR = struct.Struct(">IB16sB")
_U16 = struct.Struct(">H")
_U32_MAX = 0xFFFFFFFF


def new_nonce() -> bytes:
    """A fresh random nonce."""
    return os.urandom(NONCE_BYTES)


def _mac(secret: bytes, label: bytes, first: bytes, second: bytes) -> bytes:
    return hmac.new(secret, label + first + second, "sha256").digest()


def _expect(frame, size: int, name: str) -> None:
    if len(frame) != size:
        raise CorruptFrameError(f"{name} frame of {len(frame)} bytes, expected {size}")


# ---------------------------------------------------------------------- handshake

def encode_hello(client_nonce: bytes, flow_control: bool) -> bytes:
    """The client's first frame."""
    flags = HELLO_FLOW_CONTROL if flow_control else 0
    return _HELLO.pack(_HELLO.size - 4, HELLO, MAGIC, PROTOCOL_VERSION, flags, client_nonce)


def decode_hello(frame) -> tuple[bytes, bool]:
    """``(client_nonce, flow_control)`` of a Hello frame (``frame`` starts at the type byte).

    :raises CorruptFrameError: wrong size, magic or version.
    """
    _expect(frame, _HELLO.size - 4, "Hello")
    magic, version, flags, nonce = _HELLO_BODY.unpack_from(frame, 1)
    if magic != MAGIC or version != PROTOCOL_VERSION:
        raise CorruptFrameError(f"not a Rill client (magic {magic!r}, protocol version {version})")
    return nonce, bool(flags & HELLO_FLOW_CONTROL)


def encode_challenge(secret: bytes, client_nonce: bytes, server_nonce: bytes) -> bytes:
    """The server's answer: its nonce and its proof of the secret."""
    proof = _mac(secret, b"rill-server", client_nonce, server_nonce)
    return _CHALLENGE.pack(_CHALLENGE.size - 4, CHALLENGE, server_nonce, proof)


def decode_challenge(frame, secret: bytes, client_nonce: bytes) -> bytes:
    """Verify the server's proof; returns its nonce.

    :raises AuthenticationError: if the server does not know the secret.
    """
    from .exceptions import AuthenticationError

    _expect(frame, _CHALLENGE.size - 4, "Challenge")
    server_nonce = bytes(frame[1:33])
    proof = bytes(frame[33:65])
    if not hmac.compare_digest(proof, _mac(secret, b"rill-server", client_nonce, server_nonce)):
        raise AuthenticationError("the server failed to prove it knows the shared secret")
    return server_nonce


def encode_auth(secret: bytes, server_nonce: bytes, client_nonce: bytes) -> bytes:
    """The client's proof of the secret."""
    return _AUTH.pack(_AUTH.size - 4, AUTH, _mac(secret, b"rill-client", server_nonce, client_nonce))


def check_auth(frame, secret: bytes, server_nonce: bytes, client_nonce: bytes) -> bool:
    """Whether an Auth frame proves the secret (constant-time comparison)."""
    if len(frame) != _AUTH.size - 4 or frame[0] != AUTH:
        return False
    return hmac.compare_digest(bytes(frame[1:]), _mac(secret, b"rill-client", server_nonce, client_nonce))


def encode_empty(message_type: int) -> bytes:
    """A frame without body (AuthFailed, CloseRequest)."""
    return _TYPE_ONLY.pack(1, message_type)


# ---------------------------------------------------------------------- client -> server

def encode_partition_request(receiver_id: bytes, partition_id: str, producer_id: str,
                             subpartition_index: int, initial_credit: int) -> bytes:
    """A PartitionRequest frame."""
    ids = b"".join(_U16.pack(len(s)) + s for s in (partition_id.encode(), producer_id.encode()))
    head = _PARTITION_REQUEST.pack(
        _PARTITION_REQUEST.size - 4 + len(ids), PARTITION_REQUEST, receiver_id, subpartition_index,
        initial_credit,
    )
    return head + ids


def decode_partition_request(frame) -> tuple[bytes, str, str, int, int]:
    """``(receiver_id, partition_id, producer_id, subpartition_index, initial_credit)``.

    :raises CorruptFrameError: if the body is malformed.
    """
    fixed = _PARTITION_REQUEST.size - 4
    if len(frame) < fixed + 4:
        raise CorruptFrameError(f"PartitionRequest frame of {len(frame)} bytes is too short")
    receiver_id = bytes(frame[1:17])
    subpartition, credit = struct.unpack_from(">II", frame, 17)
    pos = fixed
    ids = []
    try:
        for _ in range(2):
            (size,) = _U16.unpack_from(frame, pos)
            pos += 2
            if pos + size > len(frame):
                raise CorruptFrameError("PartitionRequest partition id runs past the frame")
            ids.append(bytes(frame[pos:pos + size]).decode())
            pos += size
    except (struct.error, UnicodeDecodeError) as error:
        raise CorruptFrameError(f"malformed PartitionRequest: {error}") from error
    if pos != len(frame):
        raise CorruptFrameError("PartitionRequest frame has trailing bytes")
    return receiver_id, ids[0], ids[1], subpartition, credit


def encode_add_credit(receiver_id: bytes, credit: int) -> bytes:
    """An AddCredit frame."""
    return _ADD_CREDIT.pack(_ADD_CREDIT.size - 4, ADD_CREDIT, receiver_id, credit)


def decode_add_credit(frame) -> tuple[bytes, int]:
    """``(receiver_id, credit)``. :raises CorruptFrameError: on a wrong size."""
    _expect(frame, _ADD_CREDIT.size - 4, "AddCredit")
    return bytes(frame[1:17]), struct.unpack_from(">I", frame, 17)[0]


def encode_cancel(receiver_id: bytes) -> bytes:
    """A CancelPartitionRequest frame."""
    return _RECEIVER.pack(_RECEIVER.size - 4, CANCEL_PARTITION_REQUEST, receiver_id)


def decode_receiver(frame) -> bytes:
    """The receiver id of a CancelPartitionRequest. :raises CorruptFrameError: wrong size."""
    _expect(frame, _RECEIVER.size - 4, "CancelPartitionRequest")
    return bytes(frame[1:17])


# ---------------------------------------------------------------------- server -> client

def encode_buffer_response_header(receiver_id: bytes, sequence_number: int, backlog: int,
                                  flags: int, payload_size: int, buffers: int = 1) -> bytes:
    """The header of a BufferResponse of ``buffers`` segments (1 to
    :data:`MAX_BUFFERS_PER_FRAME`); the payload follows as a separate chunk (no copy)."""
    return BUFFER_RESPONSE_HEADER.pack(
        BUFFER_RESPONSE_HEADER.size - 4 + payload_size, BUFFER_RESPONSE, receiver_id,
        sequence_number & _U32_MAX, min(backlog, _U32_MAX), flags, buffers,
    )


_BR_FIXED = BUFFER_RESPONSE_HEADER.size - 4
_BR_BODY = struct.Struct(">16sIIBH")


def decode_buffer_response(frame) -> tuple[bytes, int, int, int, int, bytes]:
    """``(receiver_id, sequence_number, backlog, flags, buffers, payload)``; ``payload`` is a
    copy, so nothing keeps a view into the connection's read buffer.

    :raises CorruptFrameError: if the frame is shorter than the header.
    """
    if len(frame) < _BR_FIXED:
        raise CorruptFrameError(f"BufferResponse frame of {len(frame)} bytes is shorter than its header")
    receiver_id, sequence, backlog, flags, buffers = _BR_BODY.unpack_from(frame, 1)
    return receiver_id, sequence, backlog, flags, buffers, bytes(frame[_BR_FIXED:])


#: Where a BufferResponse's payload starts in its frame (the frame starts at the type byte).
BUFFER_RESPONSE_PAYLOAD_OFFSET = _BR_FIXED


def decode_buffer_response_header(frame) -> tuple[bytes, int, int, int, int]:
    """``(receiver_id, sequence_number, backlog, flags, buffers)``; the payload is
    ``frame[BUFFER_RESPONSE_PAYLOAD_OFFSET:]``, left where it is (the data path copies it once,
    into the channel's reassembly buffer, instead of into an intermediate ``bytes``).

    :raises CorruptFrameError: if the frame is shorter than the header.
    """
    if len(frame) < _BR_FIXED:
        raise CorruptFrameError(f"BufferResponse frame of {len(frame)} bytes is shorter than its header")
    return _BR_BODY.unpack_from(frame, 1)


def encode_error_response(receiver_id: bytes, code: int, message: str) -> bytes:
    """An ErrorResponse frame."""
    text = message.encode("utf-8", "replace")
    return _ERROR.pack(_ERROR.size - 4 + len(text), ERROR_RESPONSE, receiver_id, code) + text


def decode_error_response(frame) -> tuple[bytes, int, str]:
    """``(receiver_id, code, message)``. :raises CorruptFrameError: if too short."""
    fixed = _ERROR.size - 4
    if len(frame) < fixed:
        raise CorruptFrameError(f"ErrorResponse frame of {len(frame)} bytes is too short")
    return bytes(frame[1:17]), frame[17], bytes(frame[fixed:]).decode("utf-8", "replace")
