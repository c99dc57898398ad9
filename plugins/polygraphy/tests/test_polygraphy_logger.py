"""parity_polygraphy.logger: Polygraphy's logger (severities, per-path severities, callbacks, log file, line
information, indentation, Python logging) and the global G_LOGGER steering Parity's own logger."""

from __future__ import annotations

import inspect
import logging
import os

import pytest
from parity_polygraphy.exception import PolygraphyException, PolygraphyInternalException
from parity_polygraphy.logger import G_LOGGER, Logger, LogMode, SeverityTrie

from parity import api as parity_api


def here() -> int:
    """The line number of the caller."""
    return inspect.currentframe().f_back.f_lineno


def test_messages_below_the_severity_are_dropped_and_their_functions_never_called(capsys):
    logger = Logger(severity=Logger.WARNING)
    called = []
    logger.info(lambda: called.append(1) or "hidden")
    logger.warning("shown")
    logger.error(lambda: "built on demand")
    assert called == []
    assert capsys.readouterr().out == "[W] shown\n[E] built on demand\n"


def test_critical_logs_to_stderr_and_raises_polygraphy_exception(capsys):
    logger = Logger()
    with pytest.raises(PolygraphyException, match="^broken$"):
        logger.critical("broken")
    with pytest.raises(KeyError):
        logger.critical("missing", ExceptionType=KeyError)
    assert "[!] broken" in capsys.readouterr().err


def test_internal_error_raises_only_with_internal_checks_on(monkeypatch):
    from parity_polygraphy import config

    logger = Logger()
    monkeypatch.setattr(config, "INTERNAL_CORRECTNESS_CHECKS", False)
    logger.internal_error("ignored")
    monkeypatch.setattr(config, "INTERNAL_CORRECTNESS_CHECKS", True)
    with pytest.raises(PolygraphyInternalException, match="a bug"):
        logger.internal_error("a bug")
    assert not issubclass(PolygraphyInternalException, PolygraphyException)


def test_severity_mapping_letters_and_once_mode(capsys):
    logger = Logger(severity=Logger.ULTRA_VERBOSE)
    assert Logger.SEVERITY_LETTER_MAPPING[Logger.START] == "[I]" and Logger.SEVERITY_LETTER_MAPPING[Logger.CRITICAL] == "[!]"
    for _ in range(3):
        logger.verbose("once only", mode=LogMode.ONCE)
    logger.ultra_verbose("u")
    logger.extra_verbose("x")
    assert capsys.readouterr().out == "[V] once only\n[U] u\n[X] x\n"


def test_indent_and_multiline_messages_line_up(capsys):
    logger = Logger()
    with logger.indent():
        logger.info("a\nb")
        with logger.indent(2):
            logger.info("c")
    logger.info("d")
    assert capsys.readouterr().out == "[I]     a\n        b\n[I]             c\n[I] d\n"


def test_log_file_receives_each_message_and_is_made_with_its_folder(tmp_path):
    logger = Logger()
    path = tmp_path / "logs" / "run.log"
    logger.log_file = str(path)
    assert logger.log_file == str(path)
    logger.info("first")
    logger.warning("second")
    assert path.read_text() == "[I] first\n[W] second\n"
    logger.log_file = None
    logger.info("not written")
    assert path.read_text() == "[I] first\n[W] second\n"


def test_line_info_names_the_callers_file_and_line(tmp_path, monkeypatch):
    monkeypatch.chdir(os.path.dirname(__file__))
    logger = Logger(line_info=True)
    logger.log_file = str(tmp_path / "log.txt")
    logger.info("where")
    line = here() - 1
    assert (tmp_path / "log.txt").read_text() == f"[I] [test_polygraphy_logger.py:{line}] where\n"


def test_per_path_severities_follow_the_longest_prefix():
    trie = SeverityTrie({"": 30, "backend/trt": 20, "backend/trt/loader.py": 50, "backend//onnx": 28})
    assert trie.get() == 30 and trie.get("backend") == 30 and trie.get("comparator/compare.py") == 30
    assert trie.get("backend/trt") == 20 and trie.get("backend/trt/runner.py") == 20
    assert trie.get("backend/trt/loader.py") == 50 and trie.get("backend/onnx/loader.py") == 28
    assert trie.get("/backend///trt") == 20
    with pytest.raises(ValueError):
        SeverityTrie({"backend": 10})


def test_a_severity_for_this_file_shows_its_verbose_messages_only(capsys, monkeypatch):
    monkeypatch.chdir(os.path.dirname(__file__))
    logger = Logger(severity={"test_polygraphy_logger.py": Logger.VERBOSE})
    assert logger.module_severity.get() == Logger.INFO
    logger.verbose("this file is verbose")
    assert capsys.readouterr().out == "[V] this file is verbose\n"
    logger.module_severity = {"elsewhere.py": Logger.VERBOSE}
    logger.verbose("hidden")
    assert capsys.readouterr().out == ""


def test_callbacks_hear_of_every_change_including_verbosity_blocks():
    logger = Logger()
    seen = []
    logger.register_callback(lambda trie: seen.append(trie.get()))
    assert seen == [Logger.INFO]
    logger.module_severity = Logger.ERROR
    with logger.verbosity(Logger.VERBOSE):
        assert logger.module_severity.get() == Logger.VERBOSE
    assert seen == [Logger.INFO, Logger.ERROR, Logger.VERBOSE, Logger.ERROR]
    with logger.verbosity():
        assert logger.module_severity.get() == Logger.CRITICAL


def test_python_logging_system_gets_the_records_at_logging_levels(caplog):
    logger = Logger(severity=Logger.ULTRA_VERBOSE)
    logger.use_python_logging_system = True
    with caplog.at_level(1, logger="Polygraphy"):
        logger.ultra_verbose("u")
        logger.verbose("v")
        logger.start("s")
        logger.warning("w")
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("Polygraphy", 2, "[U] u"), ("Polygraphy", logging.DEBUG, "[V] v"), ("Polygraphy", 22, "[I] s"), ("Polygraphy", logging.WARNING, "[W] w")]


def test_log_exception_logs_foreign_errors_once_and_reraises(capsys):
    logger = Logger()

    @logger.log_exception
    def fails(exc):
        raise exc

    with pytest.raises(ValueError):
        fails(ValueError("bad value"))
    with pytest.raises(PolygraphyException):
        fails(PolygraphyException("already reported"))
    out = capsys.readouterr().out
    assert "[E] bad value" in out and "already reported" not in out


def test_the_global_logger_steers_parity_and_restores_it():
    before, ours = parity_api.logger.G_LOGGER.severity, G_LOGGER.module_severity
    try:
        G_LOGGER.module_severity = G_LOGGER.INFO
        with G_LOGGER.verbosity(G_LOGGER.VERBOSE):
            assert parity_api.logger.G_LOGGER.severity == parity_api.logger.G_LOGGER.VERBOSE
        with G_LOGGER.verbosity(G_LOGGER.ERROR):
            assert parity_api.logger.G_LOGGER.severity == parity_api.logger.G_LOGGER.ERROR
        assert parity_api.logger.G_LOGGER.severity == parity_api.logger.G_LOGGER.INFO
    finally:
        G_LOGGER.module_severity = ours
        parity_api.logger.G_LOGGER.severity = before
