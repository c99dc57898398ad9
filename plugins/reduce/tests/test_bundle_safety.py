"""The repro bundle (``debug reduce --repro DIR``) never deletes or replaces a folder, refuses a non-empty one before
the search, and copies only the check's script and the user's --load-inputs data, never another file the check names."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from parity_reduce.testing import chain

from parity.testing import invoke

PY = sys.executable

# Fails iff every node name given is in the model; reads the files given with --data/--secret (as a real check
# would) and logs each call to calls.log in its working directory, so a test can tell that no check ran.
CHECK = """import sys
open('calls.log', 'a').write('x\\n')
data = open(sys.argv[1], 'rb').read()
names = []
args = iter(sys.argv[2:])
for a in args:
    if a.startswith('--'):
        path = a.split('=', 1)[1] if '=' in a else next(args)
        open(path, 'rb').read()
    else:
        names.append(a)
sys.exit(1 if all(b'\\x1a' + bytes([len(n)]) + n.encode() in data for n in names) else 0)
"""


@pytest.fixture()
def files(tmp_path):
    onnx.save(chain(60), str(tmp_path / "chain.onnx"))
    (tmp_path / "check.py").write_text(CHECK)
    (tmp_path / "secret.txt").write_text("aws_secret_access_key = hunter2\n")
    return tmp_path


def reduce_args(*extra: str) -> list[str]:
    return ["debug", "reduce", "chain.onnx", "-o", "red.onnx", *extra, "--check", PY, "check.py", "parity_debug.onnx", "n20", "n40"]


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def one_line_error(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("parity: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    "repro",
    [".", "myproject", "red_repro", "sub/.."],
    ids=["working-directory", "existing-project", "default-name-from-an-earlier-run", "dotdot"],
)
def test_a_non_empty_folder_is_refused_before_the_search(files, repro):
    (files / "myproject").mkdir()
    (files / "myproject" / "notes.txt").write_text("mine")
    (files / "red_repro").mkdir()
    (files / "red_repro" / "model.onnx").write_bytes(b"an earlier bundle")
    (files / "sub").mkdir()
    before = snapshot(files)
    args = reduce_args() if repro == "red_repro" else reduce_args("--repro", repro)
    code, _, err = invoke(*args)
    assert code == 2
    line = one_line_error(err)
    assert repro in line and "not empty" in line
    assert not (files / "calls.log").exists()  # no check was run
    assert snapshot(files) == before  # nothing deleted, nothing replaced, no output written


def test_a_file_as_the_bundle_folder_is_refused(files):
    code, _, err = invoke(*reduce_args("--repro", "secret.txt"))
    assert code == 2 and "secret.txt" in one_line_error(err)
    assert not (files / "calls.log").exists()
    assert (files / "secret.txt").read_text().startswith("aws_secret")


def test_an_existing_empty_folder_is_filled(files):
    (files / "bundle").mkdir()
    assert invoke(*reduce_args("--repro", "bundle")).exit_code == 0
    assert {p.name for p in (files / "bundle").iterdir()} - {"calls.log"} == {"model.onnx", "inputs.npz", "expected.npz", "check.sh", "check.py", "README.md"}
    assert subprocess.run(["sh", str(files / "bundle" / "check.sh")], cwd=files).returncode == 1
    assert not [p for p in files.rglob("*") if ".part" in p.name]


def test_bundle_copies_only_the_checks_script_and_the_users_load_inputs(files):
    assert invoke("run", "chain.onnx", "--onnxrt", "--save-inputs", "in.npz").exit_code == 0
    (files / "config.yaml").write_text("token: abc\n")
    check = [PY, "check.py", "parity_debug.onnx", "n20", "n40", "--data", "in.npz", "--secret", "secret.txt", "--config=config.yaml"]
    code, _, err = invoke("debug", "reduce", "chain.onnx", "-o", "red.onnx", "--load-inputs", "in.npz", "--repro", "out/bundle", "--check", *check)
    assert code == 0, err
    bundle = files / "out" / "bundle"
    assert {p.name for p in bundle.iterdir()} - {"calls.log"} == {"model.onnx", "inputs.npz", "expected.npz", "check.sh", "check.py", "in.npz", "README.md"}
    for path in bundle.iterdir():  # the secret's content is nowhere in the bundle
        assert b"hunter2" not in path.read_bytes() and b"token: abc" not in path.read_bytes()
    readme = (bundle / "README.md").read_text()
    assert "`check.py`: the check's script" in readme and "`in.npz`: your --load-inputs data" in readme
    assert str(files / "secret.txt") in readme and str(files / "config.yaml") in readme and "not** in this folder" in readme
    script = (bundle / "check.sh").read_text()
    assert "check.py model.onnx n20 n40 --data in.npz --secret " + str(files / "secret.txt") in script
    assert f"--config={files / 'config.yaml'}" in script
    # the bundle still reproduces here, from any directory
    assert subprocess.run(["sh", str(bundle / "check.sh")], cwd="/").returncode == 1


@pytest.mark.parametrize("options", [["-S"], ["-X", "dev", "-W", "ignore"], ["-Xdev", "-u"]])
def test_the_checks_script_is_copied_after_interpreter_options(files, options):
    """``python -S check.py`` names its script as surely as ``python check.py``: the bundle holds it and check.sh runs
    that copy (the script was taken only right after the interpreter, so such a bundle pointed outside itself)."""
    code, _, err = invoke("debug", "reduce", "chain.onnx", "-o", "red.onnx", "--repro", "b", "--check", PY, *options, "check.py", "parity_debug.onnx", "n20", "n40")
    assert code == 0, err
    bundle = files / "b"
    assert (bundle / "check.py").read_text() == CHECK
    assert f"{' '.join(options)} check.py model.onnx n20 n40" in (bundle / "check.sh").read_text()
    assert "`check.py`: the check's script" in (bundle / "README.md").read_text()
    (files / "check.py").write_text("import sys; sys.exit(0)\n")  # the bundle runs its own copy, which still fails
    assert subprocess.run(["sh", str(bundle / "check.sh")], cwd="/").returncode == 1


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_bundle_files_get_the_mode_the_umask_gives(files, umask):
    old = os.umask(umask)
    try:
        assert invoke(*reduce_args()).exit_code == 0
    finally:
        os.umask(old)
    bundle = files / "red_repro"
    assert stat.S_IMODE(bundle.stat().st_mode) == 0o777 & ~umask
    for name in ("model.onnx", "inputs.npz", "expected.npz", "README.md", "check.py"):
        assert stat.S_IMODE((bundle / name).stat().st_mode) == 0o666 & ~umask, name
    assert stat.S_IMODE((bundle / "check.sh").stat().st_mode) == 0o777 & ~umask


def test_a_bundle_folder_left_by_a_killed_run_is_removed_by_the_next_write(files):
    from parity.util.fs import part_path

    dead = subprocess.Popen([PY, "-c", "pass"])
    dead.wait()
    stale = Path(str(part_path(files)).replace(f".parity-{os.getpid()}-", f".parity-{dead.pid}-"))
    stale.mkdir()
    (stale / "model.onnx").write_bytes(b"half a bundle")
    assert invoke(*reduce_args()).exit_code == 0
    assert not stale.exists() and not [p for p in files.iterdir() if p.name.endswith(".part")]
