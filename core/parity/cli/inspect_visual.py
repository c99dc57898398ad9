"""``parity inspect model --visual / --save-visual / --visual-port`` (Polygraphy 0.53.6's flags): an ONNX model's
graph as an interactive page, nodes placed in layers from inputs to outputs; clicking one shows its op, tensors
(dtype and shape) and attributes.

The page is one self-contained HTML file: the layout is computed here and drawn as SVG by a few lines of inline
script, with no library from a CDN (Polygraphy loads Cytoscape.js from one), so it also works on machines without
internet access. ``--save-visual FILE`` writes it; ``--visual`` serves it on 127.0.0.1 (``--visual-port``, 8000 by
default, 0 for any free port) until Ctrl+C, opening a browser only where there is a display: on a headless machine
it prints the address and how to forward the port.
"""

from __future__ import annotations

import html
import http.server
import json
import os
import signal
import sys
import webbrowser
from typing import TYPE_CHECKING, Any

from parity.cli.common import echo
from parity.cli.inspect_layout import OnnxLayout, tensor_entry
from parity.errors import UsageError
from parity.onnx_models import load, topological_order
from parity.util.fs import atomic_write

if TYPE_CHECKING:  # pragma: no cover
    import onnx

COLUMN, ROW = 190, 70  # px between nodes across a layer and between layers
SHORT = 80  # characters of an attribute's text kept on the page


def graph_data(model: onnx.ModelProto) -> dict[str, Any]:
    """The page's data: nodes (graph inputs, operators, graph outputs) with their layer and column, edges by tensor."""
    graph = model.graph
    layout = OnnxLayout({"layers", "attrs"}, None, ignore_external_data=True)  # Polygraphy's tensor and attribute text
    inits = {t.name for t in graph.initializer}
    known = {v.name: layout.value_meta(v) for v in (*graph.value_info, *graph.input, *graph.output)}
    known.update({t.name: layout.tensor_meta(t) for t in graph.initializer})
    nodes: list[dict[str, Any]] = []
    producer: dict[str, int] = {}
    for value in graph.input:
        if value.name not in inits:
            producer[value.name] = len(nodes)
            nodes.append({"label": value.name, "kind": "input", "layer": 0, "details": [tensor_entry(value.name, known.get(value.name))]})
    edges: list[tuple[int, int, str]] = []
    for index in topological_order(graph.node):
        node = graph.node[index]
        sources = [(producer[t], t) for t in node.input if t in producer]
        me = len(nodes)
        details = [f"Op: {node.op_type}", f"Name: {node.name or '(unnamed)'}", "Inputs:"]
        details += [f"  {tensor_entry(('Initializer | ' if t in inits else '') + t, known.get(t))}" for t in node.input if t]
        details += ["Outputs:"] + [f"  {tensor_entry(t, known.get(t))}" for t in node.output if t]
        attrs = [(a.name, layout.attribute(a, known, 0)) for a in node.attribute]
        if attrs:
            details.append("Attributes:")
            details += [f"  {name} = {_short(text)}" for name, text in attrs if text is not None]
        nodes.append({"label": node.op_type, "kind": "op", "layer": 1 + max((nodes[s]["layer"] for s, _ in sources), default=0), "details": details})
        edges += [(s, me, t) for s, t in sources]
        producer.update({t: me for t in node.output if t})
    for value in graph.output:
        me = len(nodes)
        source = producer.get(value.name)
        layer = nodes[source]["layer"] + 1 if source is not None else 1
        nodes.append({"label": value.name, "kind": "output", "layer": layer, "details": [tensor_entry(value.name, known.get(value.name))]})
        if source is not None:
            edges.append((source, me, value.name))
    columns: dict[int, int] = {}
    for node in nodes:
        node["column"] = columns.get(node["layer"], 0)
        columns[node["layer"]] = node["column"] + 1
    return {"title": f"{graph.name or 'graph'}", "nodes": nodes, "edges": edges}


def _short(text: str) -> str:
    text = " ".join(text.split())  # a subgraph's text or a tensor's values on one line
    return text if len(text) <= SHORT else text[: SHORT - 3] + "..."


_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>TITLE</title>
<style>
body{margin:0;font:13px sans-serif;display:flex;height:100vh}
#g{flex:1;overflow:auto}#d{width:360px;overflow:auto;border-left:1px solid #ccc;padding:8px;white-space:pre-wrap;font-family:monospace}
rect{stroke:#333;rx:6}.op rect{fill:#dde8f7}.input rect{fill:#cdeccd}.output rect{fill:#f7dccd}
g.n{cursor:pointer}g.n.sel rect{stroke:#c00;stroke-width:2}line{stroke:#888;marker-end:url(#a)}
</style></head>
<body><div id="g"></div><div id="d">Click a node to see its tensors and attributes.</div>
<script id="data" type="application/json">DATA</script>
<script>
const D=JSON.parse(document.getElementById("data").textContent),S="http://www.w3.org/2000/svg",C=COLUMN,R=ROW,W=C-30,H=30;
const el=(n,a)=>{const e=document.createElementNS(S,n);for(const k in a)e.setAttribute(k,a[k]);return e};
const pos=n=>[20+n.column*C,20+n.layer*R];
const width=20+C*Math.max(1,...D.nodes.map(n=>n.column+1)),height=20+R*Math.max(1,...D.nodes.map(n=>n.layer+1));
const svg=el("svg",{width:width,height:height});
const m=el("marker",{id:"a",viewBox:"0 0 10 10",refX:10,refY:5,markerWidth:6,markerHeight:6,orient:"auto"});
m.appendChild(el("path",{d:"M0,0L10,5L0,10z",fill:"#888"}));const defs=el("defs",{});defs.appendChild(m);svg.appendChild(defs);
for(const [s,t,name] of D.edges){const [x1,y1]=pos(D.nodes[s]),[x2,y2]=pos(D.nodes[t]);
 const l=el("line",{x1:x1+W/2,y1:y1+H,x2:x2+W/2,y2:y2});const tt=el("title",{});tt.textContent=name;l.appendChild(tt);svg.appendChild(l)}
D.nodes.forEach((n,i)=>{const [x,y]=pos(n),g=el("g",{class:"n "+n.kind,transform:`translate(${x},${y})`});
 g.appendChild(el("rect",{width:W,height:H}));const t=el("text",{x:W/2,y:H/2+4,"text-anchor":"middle"});
 t.textContent=n.label.length>24?n.label.slice(0,22)+"\u2026":n.label;g.appendChild(t);
 g.onclick=()=>{document.querySelectorAll("g.sel").forEach(e=>e.classList.remove("sel"));g.classList.add("sel");
  document.getElementById("d").textContent=n.details.join("\\n")};svg.appendChild(g)});
document.getElementById("g").appendChild(svg);
</script></body></html>
"""


def page(model_path: str, options: dict[str, Any]) -> str:
    """The self-contained HTML page of an ONNX model (no weight is read)."""
    model = load(model_path, load_external_data=False, ignore_external_data=True)
    data = graph_data(model)
    # "</" would end the script element early: JSON allows "<\\/" for it
    text = json.dumps(data).replace("</", "<\\/")
    return (_PAGE.replace("TITLE", html.escape(f"{data['title']} - {os.path.basename(model_path)}"))
            .replace("COLUMN", str(COLUMN)).replace("ROW", str(ROW)).replace("DATA", text))


def save(model_path: str, target: str, options: dict[str, Any]) -> None:
    with atomic_write(target, "w") as out:
        out.write(page(model_path, options))
    echo(f"Viewer page saved to {target}")


def has_display() -> bool:
    """Whether a browser window can open here: always off Linux; on Linux only with an X or Wayland display."""
    return not sys.platform.startswith("linux") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def serve(model_path: str, port: int, options: dict[str, Any]) -> None:
    """Serve the page on 127.0.0.1:port until interrupted (Ctrl+C or SIGTERM)."""
    body = page(model_path, options).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            if self.path not in ("/", "/index.html"):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:  # the terminal shows the address, not every request
            pass

    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as exc:
        raise UsageError(f"--visual-port {port}: cannot listen there ({exc.strerror}); give another port, or 0 for any free one") from None
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    echo(f"Viewer available at {url}  (press Ctrl+C to exit)")
    if not has_display() or not webbrowser.open(url):
        echo(f"No browser opened (no display). Open {url} in a browser here, or from another machine forward the "
             f"port first: ssh -L {server.server_address[1]}:127.0.0.1:{server.server_address[1]} THIS_HOST")
    sys.stdout.flush()

    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.server_close()
