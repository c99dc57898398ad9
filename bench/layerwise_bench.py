"""Bench: layerwise comparison, Parity vs Polygraphy 0.53.6, in the same run.

    python bench/layerwise_bench.py                # 158-node encoder: time, peak RSS, saved-file size, losslessness
    python bench/layerwise_bench.py --big          # also the 4.5 GiB-activation chain: peak RSS under a budget
    python bench/layerwise_bench.py --reports densenet121   # also the HTML report + Model Explorer's cost on it

Encoder: ``run --onnxrt --onnxrt --onnx-outputs mark all`` for both tools (and ``--save-outputs``), plus
``parity debug localize --all-tensors``. Targets: no slower than Polygraphy; saved file <= 0.8x
Polygraphy's; lossless (every saved array bit-identical to Polygraphy's). Chain: ``parity debug localize
--memory-budget 1G`` stays under 1 GiB while Polygraphy's mark-all grows with the model.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import clean_env, median, run_measured, table, tool, verdict  # noqa: E402
from models import activation_chain, transformer_encoder  # noqa: E402


def light_model(name: str) -> str:
    """A path as given, or one of the onnx wheel's ``light`` models by its short name (``densenet121``)."""
    if os.path.exists(name):
        return name
    import onnx

    return str(Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx")


def measure(cmds: dict[str, list[str]], repeat: int) -> dict[str, tuple[float, float]]:
    times: dict[str, list[float]] = {k: [] for k in cmds}
    rss: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(repeat):
        for name, cmd in cmds.items():
            wall, peak, code, out = run_measured(cmd, env=clean_env())
            if code not in (0, 1):
                print(out[-3000:])
                raise SystemExit(f"{name}: exit {code}")
            times[name].append(wall)
            rss[name].append(peak)
    return {k: (median(times[k]), median(rss[k])) for k in cmds}


def encoder(tmp: str, repeat: int) -> bool:
    from parity.results.files import load_results, save_results

    model = str(transformer_encoder(Path(tmp) / "encoder.onnx"))
    mark = ["--onnxrt", "--onnxrt", "--onnx-outputs", "mark", "all"]
    cmds = {
        "polygraphy run mark all": [tool("polygraphy"), "run", model, *mark],
        "parity run mark all": [tool("parity"), "run", model, *mark],
        "parity debug localize --all-tensors": [tool("parity"), "debug", "localize", model, "--onnxrt", "--onnxrt", "--all-tensors"],
        "polygraphy run mark all --save-outputs": [tool("polygraphy"), "run", model, *mark, "--save-outputs", f"{tmp}/poly.json"],
        "parity run mark all --save-outputs": [tool("parity"), "run", model, *mark, "--save-outputs", f"{tmp}/parity.out"],
    }
    res = measure(cmds, repeat)
    print(table(["encoder (158 nodes)", "median s", "peak RSS MiB"], [[k, *v] for k, v in res.items()]))
    poly_size, parity_size = os.path.getsize(f"{tmp}/poly.json"), os.path.getsize(f"{tmp}/parity.out")
    ours, theirs = load_results(f"{tmp}/parity.out"), load_results(f"{tmp}/poly.json")
    # lossless: Polygraphy's saved arrays, written in Parity's format and read back, are the same bits (the two
    # runs' own values are compared apart: their sessions differ in prepacking, and so in MatMul's last bits)
    save_results(theirs, f"{tmp}/roundtrip.out")
    compared, identical = _same_bits(load_results(f"{tmp}/roundtrip.out"), theirs)
    run_compared, run_identical = _same_bits(ours, theirs)
    t_ratio = res["parity run mark all"][0] / res["polygraphy run mark all"][0]
    l_ratio = res["parity debug localize --all-tensors"][0] / res["polygraphy run mark all"][0]
    s_ratio = parity_size / poly_size
    print(f"saved outputs: parity {parity_size / 2**20:.1f} MiB, polygraphy {poly_size / 2**20:.1f} MiB, ratio {s_ratio:.2f}")
    print(f"time ratios vs polygraphy mark all: parity run {t_ratio:.2f}, parity localize {l_ratio:.2f}")
    ok = verdict("layerwise run no slower than Polygraphy", t_ratio <= 1.0, f"{t_ratio:.2f}x")
    ok &= verdict("localize (all tensors) no slower than Polygraphy mark all", l_ratio <= 1.0, f"{l_ratio:.2f}x")
    ok &= verdict("saved results <= 0.8x Polygraphy's file", s_ratio <= 0.8, f"{s_ratio:.2f}x")
    ok &= verdict("lossless", compared > 0 and identical == compared, f"{identical}/{compared} of Polygraphy's arrays bit-identical after Parity's save and load")
    why = "Parity's sessions skip onnxruntime's weight prepacking unless --onnxrt-prepack: MatMul's last bits differ"
    print(f"info  the two tools' runs: {run_identical}/{run_compared} arrays bit-identical ({why})")
    return ok


def _same_bits(ours, theirs) -> tuple[int, int]:
    """(arrays compared, arrays bit-identical) between two RunResults' first iterations, runner by runner."""
    compared = identical = 0
    for (_, a_iters), (_, b_iters) in zip(ours, theirs):
        for name, value in a_iters[0].items():
            compared += 1
            other = b_iters[0][name]
            identical += int(value.dtype == other.dtype and value.shape == other.shape and value.tobytes() == other.tobytes())
    return compared, identical


def reports(tmp: str, repeat: int, model: str) -> bool:
    """The HTML report and Model Explorer's node data on a layerwise run: their cost over the same run without
    them (the floor), Polygraphy's mark-all run beside (it writes neither). The reports read each tensor's
    histogram, so the comparisons select no median or percentile (the "histogram" statistics level)."""
    mark = ["--onnxrt", "--onnxrt", "--onnx-outputs", "mark", "all"]
    cmds = {
        "polygraphy run mark all": [tool("polygraphy"), "run", model, *mark],
        "parity run mark all": [tool("parity"), "run", model, *mark],
        "parity run mark all + HTML + Model Explorer": [
            tool("parity"), "run", model, *mark, "--save-report-html", f"{tmp}/r.html", "--save-model-explorer", f"{tmp}/me.json"
        ],  # fmt: skip
    }
    res = measure(cmds, repeat)
    print(table([f"{Path(model).name}", "median s", "peak RSS MiB"], [[k, *v] for k, v in res.items()]))
    over = res["parity run mark all + HTML + Model Explorer"][0] / res["parity run mark all"][0]
    poly = res["parity run mark all + HTML + Model Explorer"][0] / res["polygraphy run mark all"][0]
    # no target of its own (issue 30 asks layerwise runs to gain what the compare engine gains): figures only
    print(f"info  reports: {over:.2f}x the same run without them, {poly:.2f}x Polygraphy's mark-all run (which writes no report)")
    return True


def big(tmp: str, budget: str, with_polygraphy: bool) -> bool:
    model = str(activation_chain(Path(tmp) / "chain.onnx"))
    print("chain: 73 tensors of 64 MiB = 4.6 GiB of activations per runner")
    localize = [tool("parity"), "debug", "localize", model, "--onnxrt", "--onnxrt", "--memory-budget", budget, "--all-tensors"]
    cmds = {f"parity debug localize --memory-budget {budget}": localize}
    if with_polygraphy:
        cmds["polygraphy run mark all"] = [tool("polygraphy"), "run", model, "--onnxrt", "--onnxrt", "--onnx-outputs", "mark", "all"]
    res = measure(cmds, 1)
    print(table(["chain (4.6 GiB activations)", "s", "peak RSS MiB"], [[k, *v] for k, v in res.items()]))
    limit = {"k": 2**10, "m": 2**20, "g": 2**30}[budget[-1].lower()] * float(budget[:-1]) / 2**20
    peak = res[next(iter(cmds))][1]
    ok = verdict(f"peak RSS under the {budget} budget", peak <= limit, f"{peak:.0f} MiB")
    if with_polygraphy:
        poly = res["polygraphy run mark all"][1]
        print(f"peak RSS ratio parity/polygraphy: {peak / poly:.2f}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--big", action="store_true", help="also the 4.6 GiB-activation chain (several minutes)")
    parser.add_argument("--budget", default="1G")
    parser.add_argument("--no-polygraphy-big", action="store_true", help="skip Polygraphy on the chain (it needs about 10 GiB)")
    parser.add_argument("--reports", metavar="MODEL", help="also the HTML report + Model Explorer on MODEL's layerwise run ('densenet121': onnx's light_densenet121)")
    parser.add_argument("--no-encoder", action="store_true", help="skip the encoder's cases (with --reports or --big)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ok = args.no_encoder or encoder(tmp, args.repeat)
        if args.reports:
            ok &= reports(tmp, args.repeat, light_model(args.reports))
        if args.big:
            ok &= big(tmp, args.budget, not args.no_polygraphy_big)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
