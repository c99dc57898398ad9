"""The corpus reduce test's check: exit 1 while ``parity_debug.onnx`` (in the working folder) has a top-level node of
the op type given as the only argument, else 0.

It reads the protobuf wire format itself (ModelProto.graph = field 7, GraphProto.node = 1, NodeProto.op_type = 4)
and imports nothing (not even Parity's own wire reader, onnx_models.read_varint: under ``-S`` no installed package
is importable), so it runs under ``python -S``: about 20 ms a check where ``import onnx`` and ``onnx.load``
took 270 ms, and a reduce of the corpus makes about 170 checks.
"""

import sys


def varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def fields(data: bytes):
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


def op_types(model: bytes):
    for number, graph in fields(model):
        if number == 7:
            for field, node in fields(graph):
                if field == 1:
                    yield from (value.decode() for key, value in fields(node) if key == 4)


if __name__ == "__main__":
    with open("parity_debug.onnx", "rb") as f:
        sys.exit(1 if sys.argv[1] in op_types(f.read()) else 0)
