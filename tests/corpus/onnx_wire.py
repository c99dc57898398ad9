"""ONNX's protobuf wire format read with the standard library alone, for the checks tests hand to ``debug`` commands:
they run under ``python -S`` (about 20 ms a start, where ``import onnx`` and ``onnx.load`` take 270 ms), so they can
import neither onnx nor Parity (whose own reader is ``parity.onnx_models.read_varint``). A check script puts this
folder on ``sys.path`` and imports :func:`node_strings`.

Run as a script (``onnx_wire.py MODEL OP_TYPE``) it is the corpus reduce test's check (tests/corpus/commands.py):
exit 1 while MODEL has a top-level node of that op type, else 0. It imports nothing of its own folder, so the repro
bundle's copy of it runs as it is."""

from __future__ import annotations

from collections.abc import Iterator

NODE_NAME, NODE_OP_TYPE = 3, 4  # NodeProto's fields; ModelProto.graph is field 7 and GraphProto.node field 1


def varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def fields(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(field number, bytes) of each length-delimited field of one message; other wire types are skipped."""
    pos = 0
    while pos < len(data):
        key, pos = varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size, pos = varint(data, pos)
            yield number, data[pos : pos + size]
            pos += size
        else:
            raise ValueError(f"wire type {wire} at byte {pos}")


def node_strings(model: bytes, field: int) -> Iterator[str]:
    """One string field (:data:`NODE_NAME`, :data:`NODE_OP_TYPE`) of each top-level node of a serialized model."""
    for number, graph in fields(model):
        if number == 7:
            for key, node in fields(graph):
                if key == 1:
                    yield from (value.decode() for k, value in fields(node) if k == field)


if __name__ == "__main__":
    import sys

    with open(sys.argv[1], "rb") as f:
        sys.exit(1 if sys.argv[2] in node_strings(f.read(), NODE_OP_TYPE) else 0)
