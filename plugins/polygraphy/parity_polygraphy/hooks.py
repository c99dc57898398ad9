"""parity-polygraphy's hooks: Polygraphy's comparison functions and threshold flags on ``parity run``
(:mod:`parity_polygraphy.cli_metrics`), ``--save-accuracy-results`` and ``parity check accuracy``
(:mod:`parity_polygraphy.accuracy`). Imports click and the core's hook marker only: numpy and the metrics load
when a run compares."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parity import hookimpl

# Polygraphy's --compare choices this plugin adds, with their one-line help; simple and indices are the core's
_METRICS = {
    "l2": "Polygraphy's L2 distance ||a-b|| <= --l2-threshold [1e-5]",
    "cosine_similarity": "Polygraphy's cosine similarity >= --cosine-similarity-threshold [0.997]",
    "distance_metrics": "Polygraphy's alias: l2 and cosine_similarity, both must pass",
    "psnr": "Polygraphy's PSNR in dB (peak: max of the first runner's output) >= --psnr-threshold [30]",
    "snr": "Polygraphy's SNR in dB (signal: the first runner's output) >= --snr-threshold [20]",
    "quality_metrics": "Polygraphy's alias: psnr and snr, both must pass",
    "perceptual_metrics": "Polygraphy's LPIPS score <= --lpips-threshold [0.1] (needs torch and lpips)",
}
_FLAGS = {
    "l2": (["--l2-threshold", "--l2-tolerance"], "l2/distance_metrics: highest L2 distance that passes [1e-5]."),
    "cosine_similarity": (["--cosine-similarity-threshold"], "cosine_similarity/distance_metrics: lowest cosine similarity that passes [0.997]."),
    "psnr": (["--psnr-threshold", "--psnr-tolerance"], "psnr/quality_metrics: lowest PSNR in dB that passes [30]."),
    "snr": (["--snr-threshold", "--snr-tolerance"], "snr/quality_metrics: lowest SNR in dB that passes [20]."),
    "perceptual_metrics": (["--lpips-threshold", "--lpips-tolerance"], "perceptual_metrics: highest LPIPS score that passes [0.1]."),
}
_ALIAS_OF = {"l2": "distance_metrics", "cosine_similarity": "distance_metrics", "psnr": "quality_metrics", "snr": "quality_metrics"}


def threshold_option(part: str) -> Any:
    """A threshold flag, per output like ``--atol`` (``--l2-threshold 1e-5 out0:1e-3``)."""
    from parity.api import GreedyOption  # here: only when the comparators register

    class ThresholdOption(GreedyOption):
        """Read by a metric and by the alias that runs it (``--l2-threshold``: ``l2`` and ``distance_metrics``).
        The registry names an option's one owner as it registers it; the alias is added to what it names, so
        the option rule accepts the flag with either ``--compare`` name, and with no other."""

        extra: tuple[tuple[str, str], ...] = ()
        _owners: tuple[tuple[str, str], ...] = ()

        @property
        def parity_owners(self) -> tuple[tuple[str, str], ...]:
            return (*self._owners, *self.extra)

        @parity_owners.setter
        def parity_owners(self, owners: tuple[tuple[str, str], ...]) -> None:
            self._owners = tuple(owners)

    flags, text = _FLAGS[part]
    return ThresholdOption(flags, metavar="[OUT:]VALUE", help=text)


def _factory(name: str):
    def factory(options: Mapping[str, Any]):
        if name == "perceptual_metrics":
            from parity_polygraphy.cli_metrics import make_perceptual

            return make_perceptual(options)
        from parity_polygraphy.cli_metrics import make

        return make(name, options)

    return factory


# Each of Polygraphy's single metrics under its own name too (--compare psnr --psnr-threshold 30).
_OWN_NAMES = ("l2", "cosine_similarity", "psnr", "snr")


@hookimpl
def parity_register_comparators(register):
    from parity.api import ComparatorSpec  # here: `parity --help` imports this module and never needs the registry

    options = {part: threshold_option(part) for part in _FLAGS}
    for alias, parts in (("distance_metrics", ("l2", "cosine_similarity")), ("quality_metrics", ("psnr", "snr"))):
        register(ComparatorSpec(alias, _factory(alias), _METRICS[alias], tuple(options[p] for p in parts)))
    for part in _OWN_NAMES:
        register(ComparatorSpec(part, _factory(part), _METRICS[part], ()))
        options[part].extra = (("metric", part),)  # the flag is read by its own metric too
    register(ComparatorSpec("perceptual_metrics", _factory("perceptual_metrics"), _METRICS["perceptual_metrics"], (options["perceptual_metrics"],)))


@hookimpl
def parity_register_backends(register):
    from parity_polygraphy.pluginref_backend import register_backend  # here: `parity --help` never needs the backend

    register_backend(register)


@hookimpl
def parity_register_options(register):
    import click

    from parity.api import OptionSpec  # here: `parity --help` imports this module and never needs the registry

    register(
        OptionSpec(
            "polygraphy-accuracy-results",
            ("run",),
            [
                click.Option(
                    ["--save-accuracy-results"],
                    type=click.Path(dir_okay=False),
                    default=None,
                    help="Write each output's metric values and verdicts, per iteration, as Polygraphy's accuracy results JSON "
                    "(re-check them with other thresholds: parity check accuracy FILE).",
                )
            ],
            help="Polygraphy's accuracy results file",
            writes=("save_accuracy_results",),
        )
    )


@hookimpl
def parity_watch_run(options, reporter):
    if not options.get("save_accuracy_results"):
        return None
    from parity_polygraphy.accuracy import AccuracyResultsWatcher

    return AccuracyResultsWatcher(options["save_accuracy_results"], options)


@hookimpl
def parity_describe_commands(register):
    register("check", None, "Check models for problems.")  # the group parity-surgeon declares too (check lint)
    register("check accuracy", "parity_polygraphy.accuracy:make_command", "Re-check saved accuracy results (--save-accuracy-results) against other thresholds.")
