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
