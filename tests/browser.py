"""Headless Chromium from Debian's packages, without root: for tests that look at Parity's HTML report in a real
browser (the ``chromium`` fixture, root conftest.py).

``apt-get download`` fetches ``chromium`` and ``chromium-common`` into a cache; ``dpkg -x`` unpacks them there.
The shared libraries the binary needs and the machine lacks (``ldd`` says "not found") are fetched the same way:
each soname is matched to a package of the downloaded packages' ``Depends`` (Debian names them after the soname:
``libFLAC.so.12`` -> ``libflac12``, ``libopenh264.so.7`` -> ``libopenh264-7``, ``libvorbis.so.0`` ->
``libvorbis0a``), then unpacked too, until nothing is missing. The binary runs with ``LD_LIBRARY_PATH`` pointing at
the unpacked libraries. Nothing is installed; a second run finds the cache ready.

Cache: ``$PARITY_CHROMIUM_CACHE``, else ``~/.cache/parity-chromium``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

PACKAGES = ("chromium", "chromium-common")
BINARY = "usr/lib/chromium/chromium"
# no request leaves the browser: every host name fails to resolve and every proxied fetch goes nowhere
OFFLINE = ("--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--disable-extensions", "--disable-background-networking", "--mute-audio")


class BrowserUnavailable(RuntimeError):
    """Chromium could not be set up (a download or a library failed); the message says which."""


def cache_dir() -> Path:
    return Path(os.environ.get("PARITY_CHROMIUM_CACHE") or Path.home() / ".cache" / "parity-chromium")


def apt_available() -> bool:
    return shutil.which("apt-get") is not None and shutil.which("dpkg") is not None and shutil.which("ldd") is not None


class Chromium:
    """A headless Chromium unpacked in ``root``; every run is offline (:data:`OFFLINE`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.binary = root / BINARY

    def env(self) -> dict[str, str]:
        dirs = library_dirs(self.root)
        return {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join([*map(str, dirs), os.environ.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep)}

    def run(self, args: Sequence[str], timeout: int = 120) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="parity-chromium-profile-") as profile:
            argv = [str(self.binary), *FLAGS, *OFFLINE, f"--user-data-dir={profile}", *args]
            return subprocess.run(argv, capture_output=True, text=True, env=self.env(), timeout=timeout)

    def dump_dom(self, page: Path) -> str:
        """The DOM after the page's scripts ran (``--dump-dom``)."""
        proc = self.run(["--virtual-time-budget=5000", "--dump-dom", page.resolve().as_uri()])
        if proc.returncode != 0 or "<html" not in proc.stdout:
            raise AssertionError(f"chromium --dump-dom {page} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        return proc.stdout

    def screenshot(self, page: Path, png: Path, width: int = 1200, height: int = 1400) -> Path:
        # no --virtual-time-budget here: with it, Chromium captured before painting the lower part of the window
        proc = self.run([f"--window-size={width},{height}", f"--screenshot={png.resolve()}", page.resolve().as_uri()])
        if proc.returncode != 0 or not png.is_file() or png.stat().st_size == 0:
            raise AssertionError(f"chromium --screenshot {page} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        return png


_GEOMETRY = r"""<script>(function(){
  function box(e){ var r=e.getBoundingClientRect(); return {x:r.left, y:r.top, w:r.width, h:r.height}; }
  function texts(svg, sel){ return [].map.call(svg.querySelectorAll(sel), function(t){ return {text:t.textContent, cls:t.getAttribute("class"), box:box(t)}; }); }
  var out={charts:[], main:box(document.querySelector("main"))};
  document.querySelectorAll("svg.chart").forEach(function(svg){
    var area=svg.querySelector(".plot-area");
    out.charts.push({cls:svg.getAttribute("class"), label:svg.getAttribute("aria-label"), box:box(svg), plot:area?box(area):null,
      tol:[].map.call(svg.querySelectorAll(".tol"), box), ticks:texts(svg, "text.tick"), labels:texts(svg, "text.axis-label,text.legend,text.first-label"),
      points:[].map.call(svg.querySelectorAll(".pt"), function(p){ var b=box(p); return {x:b.x+b.w/2, y:b.y+b.h/2, cls:p.getAttribute("class"),
        position:p.getAttribute("data-position"), size:p.getAttribute("data-size")}; })});
  });
  var row=document.querySelector("tr.first"); out.first_row=row?[].map.call(row.cells, function(c){ return c.textContent; }):null;
  var pre=document.createElement("pre"); pre.id="geometry"; pre.textContent=JSON.stringify(out); document.body.appendChild(pre);
})();</script></body>"""


def geometry(chromium: Chromium, page: Path, width: int = 1400, height: int = 1000) -> dict:
    """Where things are drawn on ``page`` in a ``width`` x ``height`` window, read by a script run after the page's
    own (on a copy: the page is unchanged): per ``svg.chart`` its box, plot area (``.plot-area``), tolerance lines,
    tick and label texts and points (boxes in CSS pixels); ``main``'s box; the cells of the table's first-divergence
    row."""
    import html

    probe = page.with_name(f"{page.stem}_geometry.html")
    text = page.read_text()
    probe.write_text(text[: text.rindex("</body>")] + _GEOMETRY + text[text.rindex("</body>") + len("</body>") :])
    proc = chromium.run([f"--window-size={width},{height}", "--virtual-time-budget=5000", "--dump-dom", probe.resolve().as_uri()])
    found = re.search(r'<pre id="geometry">(.*?)</pre>', proc.stdout, re.S)
    if proc.returncode != 0 or not found:
        raise AssertionError(f"chromium --dump-dom {probe} gave no geometry (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(html.unescape(found.group(1)))


def screenshot_settled(chromium: Chromium, url: str, png: Path, wait: float, steps: Sequence[str] = ()) -> Path:
    """A screenshot of ``url`` taken ``wait`` seconds after it opened, through Chrome's DevTools protocol over
    ``--remote-debugging-pipe`` (``--screenshot`` captures at the load event, before a web app such as Model
    Explorer has drawn its graph). ``steps``: ``"x,y"`` clicks (8 s pause after each) and ``"x,y,dy"`` ctrl+wheel
    zooms. WebGL runs on SwiftShader. Online: meant for a local server. Used for docs/images/model-explorer.png:
    ``python tests/browser.py URL out.png 20 388,77 520,300,-250 520,300,-250`` with ``model-explorer MODEL
    --extensions=model_explorer_onnx --node_data_paths=nodes.json --no_open_in_browser`` serving URL."""
    import base64
    import time

    commands, command_end = os.pipe()
    events_end, events = os.pipe()
    commands, events = os.dup(commands), os.dup(events)  # above 4, so the child's dup2 onto 3 and 4 cannot clash

    def pipes() -> None:
        os.dup2(commands, 3)
        os.dup2(events, 4)

    with tempfile.TemporaryDirectory(prefix="parity-chromium-profile-") as profile:
        argv = [str(chromium.binary), "--headless", "--no-sandbox", "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--hide-scrollbars",
                "--no-first-run", "--remote-debugging-pipe", f"--user-data-dir={profile}", "--window-size=1400,900", "about:blank"]
        proc = subprocess.Popen(argv, env=chromium.env(), preexec_fn=pipes, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(commands)
        os.close(events)
        pending, counter = b"", iter(range(1, 1 << 30))

        def call(method: str, params: dict | None = None, session: str | None = None) -> dict:
            nonlocal pending
            ident = next(counter)
            os.write(command_end, json.dumps({"id": ident, "method": method, "params": params or {}, **({"sessionId": session} if session else {})}).encode() + b"\0")
            while True:
                while b"\0" in pending:
                    raw, pending = pending.split(b"\0", 1)
                    message = json.loads(raw)
                    if message.get("id") == ident:
                        return message.get("result", {})
                chunk = os.read(events_end, 1 << 20)
                if not chunk:
                    raise BrowserUnavailable("chromium closed its DevTools pipe")
                pending += chunk

        try:
            target = call("Target.createTarget", {"url": url})["targetId"]
            session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            time.sleep(wait)
            for step in steps:
                x, y, *dy = map(float, step.split(","))
                if dy:
                    call("Input.dispatchMouseEvent", {"type": "mouseWheel", "x": x, "y": y, "deltaX": 0, "deltaY": dy[0], "modifiers": 2}, session)
                    time.sleep(1.5)
                    continue
                for kind in ("mousePressed", "mouseReleased"):
                    call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}, session)
                time.sleep(8)
            png.write_bytes(base64.b64decode(call("Page.captureScreenshot", {"format": "png"}, session)["data"]))
        finally:
            proc.kill()
            proc.wait()
            os.close(command_end)
            os.close(events_end)
    return png


def library_dirs(root: Path) -> list[Path]:
    """Every unpacked folder holding shared libraries (``usr/lib/x86_64-linux-gnu``, its ``pulseaudio``, chromium's own)."""
    return sorted({p.parent for p in root.rglob("*.so*") if p.is_file()})


def missing_libraries(root: Path) -> list[str]:
    binary = root / BINARY
    env = Chromium(root).env()
    proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=env, timeout=60)
    return sorted(set(re.findall(r"^\s*(\S+) => not found", proc.stdout, re.M)))


def package_for(soname: str) -> str:
    """Debian's name for the package of a shared library: ``libfoo.so.1`` -> ``libfoo1``, ``libfoo2.so.3`` -> ``libfoo2-3``."""
    base, _, version = soname.partition(".so.")
    base = base.lower()
    return f"{base}-{version}" if base[-1:].isdigit() else f"{base}{version}"


def _apt(args: Sequence[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["apt-get", *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def _installed(package: str) -> bool:
    return subprocess.run(["dpkg", "-s", package], capture_output=True, text=True).returncode == 0


def _depends(packages: Sequence[str]) -> list[str]:
    proc = subprocess.run(["apt-cache", "depends", "--no-recommends", "--no-suggests", *packages], capture_output=True, text=True, timeout=120)
    return sorted({m for m in re.findall(r"^\s*(?:Pre)?Depends: ([^\s<>]+)", proc.stdout, re.M)})


def _fetch(packages: Sequence[str], debs: Path, root: Path) -> None:
    """``apt-get download`` the packages into ``debs`` and unpack each into ``root``."""
    before = set(debs.glob("*.deb"))
    proc = _apt(["download", *packages], cwd=debs)
    if proc.returncode != 0:
        raise BrowserUnavailable(f"apt-get download {' '.join(packages)} failed: {proc.stderr.strip()[-600:]}")
    for deb in sorted(set(debs.glob("*.deb")) - before):
        unpacked = subprocess.run(["dpkg", "-x", str(deb), str(root)], capture_output=True, text=True, timeout=300)
        if unpacked.returncode != 0:
            raise BrowserUnavailable(f"dpkg -x {deb.name} failed: {unpacked.stderr.strip()[-600:]}")


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One process sets the cache up at a time (pytest-xdist workers, two suites on one machine)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def chromium(rounds: int = 8) -> Chromium:
    """The cached Chromium, set up on first use (see the module docstring). Raises :class:`BrowserUnavailable`."""
    folder = cache_dir()
    root, debs, ready = folder / "root", folder / "debs", folder / "ready.json"
    with _locked(folder):
        if ready.is_file() and (root / BINARY).is_file() and not missing_libraries(root):
            return Chromium(root)
        debs.mkdir(parents=True, exist_ok=True)
        root.mkdir(parents=True, exist_ok=True)
        fetched = list(PACKAGES)
        if not (root / BINARY).is_file():
            _fetch(PACKAGES, debs, root)
        for _ in range(rounds):
            missing = missing_libraries(root)
            if not missing:
                break
            candidates = [d for d in _depends(fetched) if d not in fetched and not _installed(d)]
            wanted: list[str] = []
            for soname in missing:
                guess = package_for(soname)
                match = next((d for d in candidates if d == guess), None) or next((d for d in candidates if d.startswith(guess)), None)
                if match is None and _apt(["download", "--print-uris", guess]).returncode == 0:
                    match = guess
                if match is None:
                    raise BrowserUnavailable(f"no package provides {soname} (tried {guess} and the Depends of {', '.join(fetched)})")
                if match not in wanted:
                    wanted.append(match)
            _fetch(wanted, debs, root)
            fetched += wanted
        still = missing_libraries(root)
        if still:
            raise BrowserUnavailable(f"chromium still lacks {', '.join(still)} after fetching {', '.join(fetched)}")
        version = Chromium(root).run(["--version"]).stdout.strip()
        ready.write_text(json.dumps({"packages": fetched, "version": version}, indent=1))
        shutil.rmtree(debs, ignore_errors=True)  # unpacked: the .deb files are 100 MB of nothing
    return Chromium(root)


if __name__ == "__main__":  # python tests/browser.py URL OUT.png WAIT [STEP ...]: see screenshot_settled
    import sys

    screenshot_settled(chromium(), sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]), sys.argv[4:])
