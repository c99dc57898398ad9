"""Registers ``--executor ray``. Imports only click and parity: ray is imported when the executor is built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from parity import hookimpl


def _factory(options: Mapping[str, Any]) -> Any:
    from parity_ray.executor import RayExecutor  # here: ray is imported only when --executor ray runs

    return RayExecutor(
        jobs=int(options.get("jobs") or 1),
        address=options.get("ray_address"),
        gpus_per_check=float(options.get("gpus_per_check") or 0),
        cpus_per_check=options.get("cpus_per_check"),
    )


@hookimpl
def parity_register_executors(register):
    # here, not at the top: every command imports this hooks module while discovering plugins; the registry's
    # types are needed only when the executors are registered
    from parity.api import ExecutorSpec

    options = (
        click.Option(
            ["--ray-address"],
            default=None,
            metavar="ADDRESS",
            help="ray: the cluster to join ('auto', HOST:PORT, ray://...). Default: start a local Ray for the run and stop it after.",
        ),
        click.Option(
            ["--gpus-per-check"],
            type=click.FloatRange(min=0),
            default=None,
            metavar="N",
            help="ray: GPUs each check holds (Ray's num_gpus; the check sees only them through CUDA_VISIBLE_DEVICES). Default 0.",
        ),
        click.Option(
            ["--cpus-per-check"],
            type=click.FloatRange(min=0),
            default=None,
            metavar="N",
            help="ray: CPUs each check holds (Ray's num_cpus). Default 1 (0 when checks hold GPUs).",
        ),
    )
    register(ExecutorSpec("ray", _factory, "checks run in long-lived Ray actors (--jobs N in flight), on this machine or a cluster", options=options))
