"""Parity never overwrites what the user passed in, writes files with the mode the umask gives, and leaves no
temporary file behind, even when killed (``kill -9``) in the middle of a write."""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import core_models
import pytest

PY = sys.executable


def one_line_error(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("parity: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def work(tmp_path, monkeypatch, main):
    """A model, its saved inputs and outputs, in the current directory."""
    monkeypatch.chdir(tmp_path)
    core_models.affine(tmp_path / "m.onnx")
    code, _, err = main("run", "m.onnx", "--onnxrt", "--save-inputs", "in.npz", "--save-outputs", "golden.npz")
    assert code == 0, err
    return tmp_path


# --- item: outputs onto inputs are refused before any work ------------------------------------------------------

RUN_CASES = {
    "save-outputs onto the model": (["--onnxrt", "--save-outputs", "m.onnx"], "m.onnx", "m.onnx"),
    "report onto the model (symlink)": (["--onnxrt", "--report", "link.onnx"], "m.onnx", "link.onnx"),
    "save-inputs onto the model (./ path)": (["--onnxrt", "--save-inputs", "./m.onnx"], "m.onnx", "./m.onnx"),
    "save-inputs onto load-inputs": (["--onnxrt", "--load-inputs", "in.npz", "--save-inputs", "in.npz"], "in.npz", "in.npz"),
    "save-inputs onto load-inputs (hard link)": (["--onnxrt", "--load-inputs", "in.npz", "--save-inputs", "hard.npz"], "in.npz", "hard.npz"),
    "save-outputs onto load-outputs": (["--onnxrt", "--load-outputs", "golden.npz", "--save-outputs", "golden.npz"], "golden.npz", "golden.npz"),
    "report onto load-outputs (absolute)": (["--load-outputs", "golden.npz", "--report", "{abs}/golden.npz"], "golden.npz", "/golden.npz"),
    "save-outputs onto load-inputs": (["--onnxrt", "--load-inputs", "in.npz", "--save-outputs", "sub/../in.npz"], "in.npz", "sub/../in.npz"),
    "save-inputs and save-outputs one file": (["--onnxrt", "--save-inputs", "x.npz", "--save-outputs", "x.npz"], "x.npz", "x.npz"),
    "save-report-html onto the model (symlink)": (["--onnxrt", "--save-report-html", "link.onnx"], "m.onnx", "link.onnx"),
    "save-model-explorer onto load-outputs": (["--onnxrt", "--load-outputs", "golden.npz", "--save-model-explorer", "golden.npz"], "golden.npz", "golden.npz"),
    "save-report-html and report one file": (["--onnxrt", "--report", "r.out", "--save-report-html", "r.out"], "--report", "--save-report-html"),
}


@pytest.mark.parametrize("case", RUN_CASES, ids=list(RUN_CASES))
def test_run_refuses_to_write_onto_its_inputs(work, main, case):
    args, first, second = RUN_CASES[case]
    (work / "sub").mkdir()
    os.symlink("m.onnx", work / "link.onnx")
    os.link(work / "in.npz", work / "hard.npz")
    before = {p.name: digest(p) for p in work.iterdir() if p.is_file()}
    code, out, err = main("run", "m.onnx", *[a.replace("{abs}", str(work)) for a in args])
    line = one_line_error(err)
    assert code == 2
    assert first in line and second in line, line  # names both paths
    assert "PASSED" not in out and "iteration" not in out  # refused before any work
    assert {p.name: digest(p) for p in work.iterdir() if p.is_file()} == before
    assert not [p for p in work.iterdir() if p.name.endswith(".part")]


@pytest.mark.parametrize("command", ["concat", "merge"])
@pytest.mark.parametrize("output", ["in.npz", "./in.npz", "hard.npz"])
def test_data_refuses_to_write_onto_an_input_file(work, main, command, output):
    os.link(work / "in.npz", work / "hard.npz")
    before = digest(work / "in.npz")
    code, out, err = main("data", command, "in.npz", "golden.npz", "-o", output)
    line = one_line_error(err)
    assert code == 2 and "in.npz" in line and output in line and "wrote" not in out
    assert digest(work / "in.npz") == before


def test_refusal_does_not_stop_legitimate_outputs(work, main):
    code, _, err = main("run", "m.onnx", "--onnxrt", "--load-inputs", "in.npz", "--load-outputs", "golden.npz", "--save-outputs", "new.npz", "--report", "r.json")
    assert code == 0, err
    assert main("data", "concat", "in.npz", "in.npz", "-o", "two.npz")[0] == 0


# --- item: modes -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_new_files_get_the_mode_the_umask_gives(work, main, umask):
    old = os.umask(umask)
    try:
        code, _, err = main("run", "m.onnx", "--onnxrt", "--save-inputs", "i2.npz", "--save-outputs", "o2.npz", "--report", "r.json")
        assert code == 0, err
        assert main("data", "concat", "in.npz", "in.npz", "-o", "c.npz")[0] == 0
    finally:
        os.umask(old)
    for name in ("i2.npz", "o2.npz", "r.json", "c.npz"):
        assert stat.S_IMODE((work / name).stat().st_mode) == 0o666 & ~umask, name


def test_replacing_a_file_keeps_its_mode(work, main):
    os.chmod(work / "golden.npz", 0o640)
    os.chmod(work / "in.npz", 0o604)
    before = digest(work / "golden.npz")
    code, _, err = main("run", "m.onnx", "--onnxrt", "--seed", "7", "--save-inputs", "in.npz", "--save-outputs", "golden.npz")
    assert code == 0, err
    assert digest(work / "golden.npz") != before  # replaced
    assert stat.S_IMODE((work / "golden.npz").stat().st_mode) == 0o640
    assert stat.S_IMODE((work / "in.npz").stat().st_mode) == 0o604


# --- item: kill -9 mid-write leaves nothing behind ---------------------------------------------------------------

SLOW_LOADER = """
import time
from pathlib import Path
import numpy as np

def load_data():
    for k in range(3):
        yield {"x": np.full((1, 4), k, np.float32)}
        Path("ready").touch()  # the first iteration is in the outputs file by now
        time.sleep(120)
"""

NO_TMPFILE = "import parity.util.fs as fs; fs._open_unnamed = lambda directory: None\n"


def _kill_mid_run(work: Path, prelude: str = "") -> int:
    (work / "slow_loader.py").write_text(SLOW_LOADER)
    code = prelude + "import sys\nfrom parity.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    argv = ["run", "m.onnx", "--onnxrt", "--data-loader-script", "slow_loader.py", "--save-outputs", "golden.npz", "--save-inputs", "out/in2.npz"]
    proc = subprocess.Popen([PY, "-c", code, *argv], cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (work / "ready").exists():
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    if proc.stderr:
        proc.stderr.close()
    (work / "ready").unlink()
    return proc.pid


def _listing(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


def test_kill_9_during_save_outputs_leaves_no_temporary_file(work):
    before = digest(work / "golden.npz")
    files = _listing(work)
    _kill_mid_run(work)
    assert _listing(work) == files | {"out", "slow_loader.py"}  # nothing new: the unnamed (O_TMPFILE) files went with the process
    assert _listing(work / "out") == set()
    assert digest(work / "golden.npz") == before  # the previous file is untouched


def test_without_o_tmpfile_the_next_write_removes_stale_parts(work, main):
    """Where O_TMPFILE is unsupported the temporary has a name; the next write in that directory removes the
    parts of dead processes (and only those)."""
    before = digest(work / "golden.npz")
    pid = _kill_mid_run(work, NO_TMPFILE)
    stale = [p.name for p in work.iterdir() if p.name.endswith(".part")]
    assert len(stale) == 1 and stale[0].startswith(f".parity-{pid}-"), stale
    assert digest(work / "golden.npz") == before
    assert [p.name for p in (work / "out").iterdir()][0].startswith(f".parity-{pid}-")
    # a part of a live process stays
    alive = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"])
    try:
        live_part = work / stale[0].replace(f".parity-{pid}-", f".parity-{alive.pid}-")
        live_part.write_bytes(b"in progress")
        code, _, err = main("run", "m.onnx", "--onnxrt", "--report", "r.json")
        assert code == 0, err
        assert _listing(work) >= {"r.json", live_part.name} and stale[0] not in _listing(work)
    finally:
        alive.kill()
        alive.wait()
    assert len(list((work / "out").iterdir())) == 1  # another directory is cleaned by a write there
    assert main("data", "concat", "in.npz", "-o", "out/c.npz")[0] == 0
    assert _listing(work / "out") == {"c.npz"}


def test_named_fallback_writes_the_same_files_with_the_same_modes(tmp_path):
    script = NO_TMPFILE + textwrap.dedent(
        f"""
        import os
        from parity.util.fs import write_text_atomic
        os.umask(0o027)
        write_text_atomic({str(tmp_path / 'a.txt')!r}, "one")
        os.chmod({str(tmp_path / 'a.txt')!r}, 0o604)
        write_text_atomic({str(tmp_path / 'a.txt')!r}, "two")
        write_text_atomic({str(tmp_path / 'b.txt')!r}, "new")
        """
    )
    subprocess.run([PY, "-c", script], check=True)
    assert (tmp_path / "a.txt").read_text() == "two" and _listing(tmp_path) == {"a.txt", "b.txt"}
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o604
    assert stat.S_IMODE((tmp_path / "b.txt").stat().st_mode) == 0o640


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    from parity.util.fs import atomic_write, write_text_atomic

    write_text_atomic(tmp_path / "a.txt", "old")
    with pytest.raises(RuntimeError), atomic_write(tmp_path / "a.txt", "w") as handle:
        handle.write("new")
        raise RuntimeError("interrupted")
    assert (tmp_path / "a.txt").read_text() == "old" and _listing(tmp_path) == {"a.txt"}


def test_a_symlink_loop_among_the_paths_is_no_crash(work, main):
    os.symlink("loop", work / "loop")
    code, _, err = main("data", "concat", "in.npz", "-o", "loop")  # replaces the broken link, as any writer would
    assert code == 0 and "error" not in err, err
    code, _, err = main("data", "concat", "loop", "-o", "loop")
    assert code == 2 and "loop" in one_line_error(err)


# --- debug files Parity deletes at the end: only its own -------------------------------------------


@pytest.mark.parametrize("option", ["--state", "--iteration-info"])
@pytest.mark.parametrize("target", ["m.onnx", "notes.json"])
def test_debug_refuses_a_state_or_info_file_it_did_not_write(work, main, option, target):
    (work / "notes.json").write_text('{"mine": true}')
    before = digest(work / target)
    code, _, err = main("debug", "repeat", "--until", "1", option, target, "--check", PY, "-S", "-c", "pass")
    assert code == 2, err
    assert option in one_line_error(err) and target in one_line_error(err)
    assert digest(work / target) == before


def test_debug_state_file_it_wrote_is_resumed_and_removed(work, main):
    code, _, err = main("debug", "repeat", "--until", "2", "--state", "s.json", "--check", PY, "-S", "-c", "pass")
    assert code == 0, err
    assert not (work / "s.json").exists()  # Parity's own file, removed when the run completes


def test_a_full_disk_is_one_line_naming_the_file(work):
    """RLIMIT_FSIZE stands in for a full disk: the write fails with EFBIG, and the error names the output."""
    import resource

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    proc = subprocess.run(["parity", "data", "concat", "in.npz", "in.npz", "-o", "both.npz"], cwd=work, capture_output=True, text=True, preexec_fn=small_files)
    line = one_line_error(proc.stderr)
    assert proc.returncode == 3 and "cannot write" in line and "both.npz" in line and "OSError" not in line
    assert not (work / "both.npz").exists() and not list(work.glob(".*part*"))


@pytest.fixture
def read_only_folder(work):
    """A folder no write can go into: a read-only bind mount as root (which ignores modes), else mode 0555."""
    folder = work / "ro"
    folder.mkdir()
    mounted = False
    if os.geteuid() == 0:
        bind = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True)
        mounted = bind.returncode == 0 and subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True).returncode == 0
        if bind.returncode == 0 and not mounted:
            subprocess.run(["umount", str(folder)], capture_output=True)
    else:
        folder.chmod(0o555)
    if os.access(folder, os.W_OK):
        pytest.skip("cannot make a read-only folder here (root without mount)")
    yield folder
    if mounted:
        subprocess.run(["umount", str(folder)], capture_output=True)
    else:
        folder.chmod(0o755)


def test_an_unwritable_output_folder_is_refused_before_the_search(work, main, read_only_folder):
    code, _, err = main("debug", "reduce", "m.onnx", "-o", "ro/r.onnx", "--no-repro", "--check", PY, "-S", "-c", "import sys; sys.exit(1)")
    assert code == 2 and "ro/r.onnx" in one_line_error(err)
    assert not (work / "parity_debug.onnx.state.json").exists()


def test_run_into_an_unwritable_folder_is_one_line(work, main, read_only_folder):
    code, _, err = main("run", "m.onnx", "--onnxrt", "--save-outputs", "ro/out.npz")
    assert code == 2 and "ro/out.npz" in one_line_error(err)


def test_run_never_writes_over_the_models_external_data(llm_decoder, tmp_path, parity_invoke):
    """--save-outputs/--save-inputs/--report naming the model's data file: refused before any work, the weights
    untouched (before, --save-outputs dec.onnx.data replaced the weights and exited 0)."""
    import shutil

    source = llm_decoder(layers=1, hidden=64, heads=2, vocab=100, seq=4)
    folder = tmp_path / "m"
    shutil.copytree(source.parent, folder)
    model, data = folder / source.name, folder / f"{source.name}.data"
    before = data.read_bytes()
    for option in ("--save-outputs", "--save-inputs", "--report"):
        code, text, err = parity_invoke("run", model, "--onnxrt", option, data, "--val-range", "input_ids:[0,99]")
        assert code == 2 and "refusing to overwrite the model's data file" in err, (option, text + err)
    assert data.read_bytes() == before


def test_users_scripts_and_plugin_files_leave_no_bytecode_beside_them(work, main, monkeypatch):
    """Python writes __pycache__ beside what it imports unless told not to: a data loader script, the helper module
    it imports and a --plugin file are the user's folders, which Parity does not write to (the suite's environment
    had forbidden bytecode everywhere and hid it)."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    scripts = work / "scripts"
    scripts.mkdir()
    (scripts / "shapes.py").write_text("SHAPE = (1, 4)\n")
    (scripts / "loader.py").write_text("import numpy as np\nfrom shapes import SHAPE\n\ndef load_data():\n    yield {'x': np.ones(SHAPE, np.float32)}\n")
    (scripts / "plug.py").write_text("from parity import hookimpl\n")
    code, _, err = main("--plugin", scripts / "plug.py", "run", "m.onnx", "--onnxrt", "--data-loader-script", scripts / "loader.py")
    assert code == 0, err
    assert sorted(p.name for p in scripts.iterdir()) == ["loader.py", "plug.py", "shapes.py"]
    assert sys.dont_write_bytecode is False  # restored
