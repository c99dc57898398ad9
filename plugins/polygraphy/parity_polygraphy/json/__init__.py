"""``polygraphy.json``: Polygraphy's JSON format, with types registering their own encoding."""

from parity_polygraphy.json.serde import Decoder, Encoder, add_json_methods, from_json, load_json, save_json, to_json

__all__ = ["Decoder", "Encoder", "add_json_methods", "from_json", "load_json", "save_json", "to_json"]
