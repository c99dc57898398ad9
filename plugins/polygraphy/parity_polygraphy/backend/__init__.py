"""Polygraphy's ``polygraphy.backend`` on Parity: loaders and runners with Polygraphy's names and behaviour
(``base``, ``common``, ``onnx``, ``onnxrt``, ``tf``), built on Parity's plugins (parity_onnxrt, parity_surgeon)."""
