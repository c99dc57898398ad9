"""Base64 for large payloads (Polygraphy's JSON arrays), chunk by chunk and on several cores.

``binascii`` holds the GIL and decodes at a few hundred MB/s, so a 256 MiB array's base64 costs seconds. OpenSSL's
``EVP_EncodeBlock`` / ``EVP_DecodeBlock`` (libcrypto, which Python's ``ssl`` and ``hashlib`` link) are 2-5x faster
on one core, and through ``ctypes`` they run without the GIL, so chunks of 1 MiB of text go to a few threads,
each chunk in cache. Where libcrypto cannot be loaded (or fails its self-check) the same chunks go through
``binascii`` on one thread. Either way the text is checked as strictly as ``binascii.a2b_base64(strict_mode=True)``
would: ``EVP_DecodeBlock`` refuses any character outside the alphabet but ``=``, which it reads as ``A`` (so a chunk
holding one is refused before it is decoded), and its output length is checked, since it trims whitespace at the
edges of what it is given.
"""

from __future__ import annotations

import binascii
import ctypes  # numpy imports it anyway
import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

TEXT_CHUNK = 1 << 20  # base64 characters per chunk (a multiple of 4)
DATA_CHUNK = TEXT_CHUNK // 4 * 3  # bytes per chunk (a multiple of 3)
MAX_THREADS = 8  # base64 at memory bandwidth needs a few cores; more only add contention

_lib: Any = None  # libcrypto's functions, False where there are none (see _crypto)


def _crypto() -> Any:
    """libcrypto's EVP_EncodeBlock and EVP_DecodeBlock (with libc's memchr), or None. Loaded once, on the first large payload."""
    global _lib
    if _lib is None:
        _lib = _load_crypto() or False
    return _lib or None


def _load_crypto() -> Any:
    try:
        memchr = ctypes.CDLL(None).memchr  # EVP_DecodeBlock reads "=" as "A": a chunk holding one is refused first
    except (OSError, AttributeError):  # pragma: no cover - no C library to ask
        return None
    memchr.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    memchr.restype = ctypes.c_void_p
    for name in ("libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.3.dylib", "libcrypto.dylib"):
        try:
            lib = ctypes.CDLL(name)
            encode, decode = lib.EVP_EncodeBlock, lib.EVP_DecodeBlock
        except (OSError, AttributeError):
            continue
        for func in (encode, decode):
            func.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
            func.restype = ctypes.c_int
        sample = bytes(range(256)) * 3
        text = binascii.b2a_base64(sample, newline=False)
        out = ctypes.create_string_buffer(len(text) + 1)
        back = ctypes.create_string_buffer(len(sample))
        if encode(out, sample, len(sample)) == len(text) and out.raw[:-1] == text and decode(back, text, len(text)) == len(sample) and back.raw == sample:
            return _Crypto(encode, decode, memchr)
    return None


class _Crypto:
    __slots__ = ("decode", "encode", "memchr")

    def __init__(self, encode: Any, decode: Any, memchr: Any) -> None:
        self.encode, self.decode, self.memchr = encode, decode, memchr


def threads() -> int:
    """How many threads base64 uses here: the cores this process may run on, at most :data:`MAX_THREADS`."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_THREADS, cores))


def _address(buffer: Any) -> int:
    return np.frombuffer(buffer, np.uint8).ctypes.data


def encode_to(write: Callable[[Any], Any], data: memoryview) -> None:
    """``write`` the base64 of ``data`` (bytes; a length that is a multiple of 3 except at the very end of the
    encoded stream, where ``=`` padding is written), in order, one chunk of at most 1 MiB of text at a time."""
    lib = _crypto()
    size = len(data)
    if lib is None or size <= DATA_CHUNK:
        for i in range(0, size, DATA_CHUNK):
            write(binascii.b2a_base64(data[i : i + DATA_CHUNK], newline=False))
        return
    base = _address(data)
    workers = threads()
    # each chunk's text goes to one of 2 * workers buffers, reused once its text is written (one more byte: the NUL
    # EVP_EncodeBlock ends with)
    buffers = [bytearray(TEXT_CHUNK + 1) for _ in range(2 * workers)]
    views = [memoryview(b) for b in buffers]

    def encode(i: int, slot: int) -> memoryview:
        n = min(DATA_CHUNK, size - i)
        length = lib.encode(_address(buffers[slot]), base + i, n)
        return views[slot][:length]

    with ThreadPoolExecutor(workers) as pool:
        pending: deque[Future[memoryview]] = deque()
        starts = iter(range(0, size, DATA_CHUNK))
        for slot, i in zip(range(len(buffers)), starts):
            pending.append(pool.submit(encode, i, slot))
        slot = 0
        while pending:
            write(pending.popleft().result())
            i = next(starts, None)
            if i is not None:  # the buffer just written is free again
                pending.append(pool.submit(encode, i, slot))
            slot = (slot + 1) % len(buffers)


def decode_into(text: Any, out: np.ndarray) -> None:
    """Decode ``text`` (a buffer of base64 characters, a multiple of 4, no ``=`` padding) into ``out`` (uint8,
    exactly ``len(text) // 4 * 3`` bytes). ``binascii.Error`` names the first chunk holding a bad character."""
    chars = np.frombuffer(text, np.uint8)
    size = len(chars)
    if size % 4 or len(out) != size // 4 * 3:
        raise binascii.Error(f"{size} base64 characters do not decode to {len(out)} bytes")
    lib = _crypto()
    if lib is None or size <= TEXT_CHUNK:
        for i in range(0, size, TEXT_CHUNK):
            piece = a2b(chars[i : i + TEXT_CHUNK])
            if len(piece) != min(TEXT_CHUNK, size - i) // 4 * 3:
                raise binascii.Error(f"invalid base64 between characters {i} and {i + TEXT_CHUNK}")
            out[i // 4 * 3 : i // 4 * 3 + len(piece)] = np.frombuffer(piece, np.uint8)
        return
    src, dst = chars.ctypes.data, out.ctypes.data

    def decode(i: int) -> bool:
        n = min(TEXT_CHUNK, size - i)
        return not lib.memchr(src + i, 61, n) and lib.decode(dst + i // 4 * 3, src + i, n) == n // 4 * 3  # 61: '='

    with ThreadPoolExecutor(threads()) as pool:
        for i, ok in zip(range(0, size, TEXT_CHUNK), pool.map(decode, range(0, size, TEXT_CHUNK))):
            if not ok:
                raise binascii.Error(f"invalid base64 between characters {i} and {i + TEXT_CHUNK}")


def a2b(text: Any) -> bytes:
    """``binascii.a2b_base64`` in strict mode where Python has it (3.11); on 3.10, which skips characters outside
    the alphabet, callers check the decoded length, which a skipped character shortens."""
    return binascii.a2b_base64(text, strict_mode=True) if STRICT else binascii.a2b_base64(text)


try:
    binascii.a2b_base64(b"", strict_mode=True)
    STRICT = True
except TypeError:  # pragma: no cover - Python 3.10
    STRICT = False
