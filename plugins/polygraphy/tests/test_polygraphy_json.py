"""parity_polygraphy.json: Polygraphy's JSON format with registered encoders and decoders, to and from text,
paths and open files, and the files Polygraphy itself writes."""

from __future__ import annotations

import base64
import io
import json
import pickle

import numpy as np
import pytest
from parity_polygraphy.common import FormattedArray
from parity_polygraphy.constants import TYPE_MARKER
from parity_polygraphy.exception import PolygraphyException
from parity_polygraphy.json import Decoder, Encoder, add_json_methods, from_json, load_json, save_json, to_json


@add_json_methods("a point")
class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)


@Encoder.register(Point)
def encode_point(point):
    return {"x": point.x, "y": point.y}


@Decoder.register(Point, alias="OldPoint")
def decode_point(dct):
    assert TYPE_MARKER not in dct  # the marker is gone before the decoder sees the dict
    return Point(dct["x"], dct["y"])


class Unreadable:
    pass


@Encoder.register(Unreadable)
def encode_unreadable(obj):
    return {}


def test_registered_types_are_marked_with_their_class_and_indented_by_four():
    assert encode_point(Point(1, 2)) == {"x": 1, "y": 2, TYPE_MARKER: "Point"}
    assert to_json(Point(1, 2)) == '{\n    "x": 1,\n    "y": 2,\n    "polygraphy_class": "Point"\n}'


def test_round_trip_of_nested_objects_and_arrays():
    arrays = {"f": np.random.default_rng(0).random((2, 3)).astype(np.float32), "i": np.arange(5, dtype=np.int64), "b": np.array([True, False])}
    decoded = from_json(to_json({"points": [Point(1, 2), Point(3, 4)], "arrays": arrays, "n": np.float32(1.5)}))
    assert decoded["points"] == [Point(1, 2), Point(3, 4)] and decoded["n"] == 1.5
    for name, array in arrays.items():
        assert decoded["arrays"][name].dtype == array.dtype and np.array_equal(decoded["arrays"][name], array)


def test_an_alias_decodes_a_renamed_class():
    assert from_json('{"x": 5, "y": 6, "polygraphy_class": "OldPoint"}') == Point(5, 6)


def test_a_type_without_decoder_is_refused_by_name():
    with pytest.raises(PolygraphyException, match="Could not decode serialized type: Unreadable"):
        from_json(to_json(Unreadable()))


def test_registering_twice_is_refused():
    with pytest.raises(PolygraphyException, match="Duplicate serialization function"):
        Encoder.register(Point)(encode_point)


def test_save_and_load_through_paths_and_open_files(tmp_path):
    path = tmp_path / "sub" / "points.json"
    save_json([Point(1, 2)], str(path))
    assert load_json(str(path)) == [Point(1, 2)]
    assert sorted(p.name for p in path.parent.iterdir()) == ["points.json"]  # written atomically: no temporary left
    buffer = io.StringIO()
    save_json({"a": np.ones(3)}, buffer)
    assert np.array_equal(load_json(buffer)["a"], np.ones(3))  # read from the start of the open file
    with pytest.raises(FileNotFoundError, match="No such file"):
        load_json(str(tmp_path / "missing.json"))


def test_json_methods_refuse_another_type(tmp_path):
    point = Point(7, 8)
    assert Point.from_json(point.to_json()) == point
    point.save(str(tmp_path / "p.json"))
    assert Point.load(str(tmp_path / "p.json")) == point
    with pytest.raises(PolygraphyException, match="JSON cannot be decoded into a Point"):
        Point.from_json(to_json([1, 2]))


def test_formatted_arrays_keep_their_shape():
    decoded = FormattedArray.from_json(FormattedArray(np.arange(8, dtype=np.uint8), (1, 2, 2)).to_json())
    assert isinstance(decoded, FormattedArray) and list(decoded.shape) == [1, 2, 2] and np.array_equal(decoded.array, np.arange(8))


def test_reads_what_polygraphy_writes(tmp_path):
    polygraphy_json = pytest.importorskip("polygraphy.json")
    path = tmp_path / "from_polygraphy.json"
    array = np.arange(6, dtype=np.float16).reshape(2, 3)
    polygraphy_json.save_json({"x": array, "meta": [1, "two"]}, str(path))
    loaded = load_json(str(path))
    assert np.array_equal(loaded["x"], array) and loaded["x"].dtype == np.float16 and loaded["meta"] == [1, "two"]
    # and Polygraphy reads what this writes
    save_json({"x": array}, str(path))
    assert np.array_equal(polygraphy_json.load_json(str(path))["x"], array)


def test_a_pickled_array_is_refused_not_unpickled():
    payload = base64.b64encode(pickle.dumps(np.ones(2))).decode()
    with pytest.raises(PolygraphyException):
        from_json(json.dumps({"array": payload, TYPE_MARKER: "ndarray"}))
