"""Option parsing and validation that needs no TensorRT: profiles, sizes, outputs, precision gates."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from parity_trt import options as opt
from parity_trt import versions

from parity.errors import UsageError


def test_repeated_names_start_new_profiles():
    profiles = opt.build_profiles(
        ["x:[1,3,28,28]", "x:[1,3,28,28]", "x:[128,3,28,28]"],
        ["x:[1,3,28,28]", "x:[4,3,28,28]", "x:[128,3,28,28]"],
        ["x:[1,3,28,28]", "x:[32,3,28,28]", "x:[128,3,28,28]"],
    )
    assert len(profiles) == 3
    assert profiles[1].shapes["x"] == ((1, 3, 28, 28), (4, 3, 28, 28), (32, 3, 28, 28))


def test_several_inputs_in_one_profile_and_space_separated_values():
    profiles = opt.build_profiles(["a:[1,2] b:[1]"], ["a:[2,2]", "b:[2]"], ["a:[4,2] b:[4]"])
    assert len(profiles) == 1
    assert profiles[0].shapes == {"a": ((1, 2), (2, 2), (4, 2)), "b": ((1,), (2,), (4,))}


def test_input_shapes_give_one_static_profile():
    [profile] = opt.build_profiles([], [], [], {"x": (2, 3)})
    assert profile.shapes["x"] == ((2, 3), (2, 3), (2, 3))
    assert opt.build_profiles(None, None, None) == []


@pytest.mark.parametrize(
    "mins, opts, maxs, message",
    [
        (["x:[1,3]"], [], [], "without --trt-opt-shapes, --trt-max-shapes"),
        (["x:[1,3]", "x:[2,3]"], ["x:[1,3]"], ["x:[1,3]"], "profile counts differ"),
        (["x:[4,3]"], ["x:[2,3]"], ["x:[8,3]"], "min <= opt <= max"),
        (["x:[1,3]"], ["x:[1,3,1]"], ["x:[1,3]"], "different ranks"),
        (["x:[1,3]"], ["y:[1,3]"], ["x:[1,3]"], "different inputs"),
        (["x:[N,3]"], ["x:[1,3]"], ["x:[1,3]"], "named dims"),
        (["x:1x3x"], ["x:[1,3]"], ["x:[1,3]"], "name:[d0,d1,...]"),  # broken (the old x:1x3 is read, with a warning)
    ],
)
def test_bad_profiles_are_one_line_usage_errors(mins, opts, maxs, message):
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")) as info:
        opt.build_profiles(mins, opts, maxs)
    assert "\n" not in str(info.value)


def test_complete_profile_checks_names_and_fills_dynamic_inputs():
    [profile] = opt.build_profiles(["x:[1,3]"], ["x:[2,3]"], ["x:[4,3]"])
    with pytest.warns(UserWarning, match="input 'mask' has dynamic shape"):
        full = opt.complete_profile(profile, {"x": (-1, 3), "mask": (-1, 5)})
    assert full.shapes["mask"] == ((1, 5), (1, 5), (1, 5))
    with pytest.raises(UsageError, match="no input 'imput' \\(did you mean 'input'\\?\\)"):
        opt.complete_profile(opt.Profile({"imput": ((1, 3), (1, 3), (1, 3))}), {"input": (-1, 3)})
    with pytest.raises(UsageError, match="static dims"):
        opt.complete_profile(opt.Profile({"x": ((1, 4), (1, 4), (1, 4))}), {"x": (-1, 3)})


def test_sizes_and_pool_limits():
    assert opt.parse_pool_limits(["workspace:16M", "tactic_dram:1g", "x:1024"]) == {"WORKSPACE": 16 << 20, "TACTIC_DRAM": 1 << 30, "X": 1024}
    assert opt.parse_pool_limits(["workspace:1G", "tactic_dram:256M"]) == {"WORKSPACE": 1 << 30, "TACTIC_DRAM": 256 << 20}
    for bad in (["workspace"], ["workspace:lots"]):
        with pytest.raises(UsageError):
            opt.parse_pool_limits(bad)
    with pytest.raises(UsageError, match=r"^--pool-limit: cannot read size 'lots'; write e.g. 16M, 1G or 1048576$"):
        opt.parse_pool_limits(["workspace:lots"])


def test_trt_outputs_forms():
    for value in (["mark", "all"], ["mark all"], ["*"], ["all"]):
        assert opt.parse_outputs(value) == opt.MARK_ALL
    assert opt.parse_outputs(["h", "y"]) == ["h", "y"]
    assert opt.parse_outputs([]) is None
    with pytest.raises(UsageError, match="cannot be combined"):
        opt.parse_outputs(["*", "h"])


def test_precision_flags_rejected_on_trt11_with_the_reason():
    assert opt.validate_precisions({"fp16": True}, 10) == ["fp16"]
    with pytest.raises(UsageError, match="--fp16, --int8: not available on TensorRT 11.x.*strongly typed"):
        opt.validate_precisions({"fp16": True, "int8": True}, 11)
    with pytest.raises(UsageError, match="precision-constraints obey"):
        opt.validate_precisions({"precision_constraints": "obey"}, 11)
    assert opt.validate_precisions({"precision_constraints": "none", "tf32": True}, 11) == []


def test_version_parsing_and_gates():
    assert versions.parse_version("10.16.1.11") == (10, 16, 1, 11)
    assert versions.parse_version("10.7.0.post1") == (10, 7, 0)
    gate = versions.Gate(since="10.7", until="11.0")
    assert gate.contains("10.8.0.43") and not gate.contains("10.0.1") and not gate.contains("11.4.0.106")


def test_require_and_enum_member_messages():
    # A module-shaped namespace standing in for the *shape* of `import tensorrt` (which lacks FP16 on 11.x).
    class BuilderFlag:
        pass

    BuilderFlag.TF32 = BuilderFlag()
    trt11 = SimpleNamespace(__version__="11.0.0.114", BuilderFlag=BuilderFlag)
    assert versions.require(trt11, "BuilderFlag.TF32", "--tf32") is BuilderFlag.TF32
    with pytest.raises(UsageError, match="--fp16 is not available on TensorRT 11.0.0.114 \\(needs TensorRT older than 11.0\\)"):
        versions.require(trt11, "BuilderFlag.FP16", "--fp16")
    assert versions.enum_member(trt11, "BuilderFlag", "tf32", "--trt-flags") is BuilderFlag.TF32
    with pytest.raises(UsageError, match="no BuilderFlag 'tf31' \\(did you mean 'TF32'\\?\\); choices: tf32"):
        versions.enum_member(trt11, "BuilderFlag", "tf31", "--trt-flags")
