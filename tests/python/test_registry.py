"""altgrad.Registry against `altgrad-host list` and `describe`: the same information."""
import os
import shutil

import numpy as np
import pytest

import altgrad
from conftest import host_json, plugin_dir

# The bundled plugins, as the README lists them.
BUNDLED_FORMATS = {"e5m2", "e4m3", "e3m4", "e1m6", "e7m0", "e0m7", "bf16", "fp16", "fp32", "fp4_e2m1", "fp6_e2m3",
                   "fp6_e3m2", "ue8m0", "float", "int"}
BUNDLED_DIAGNOSTICS = {"range", "stiffness", "grid_alignment", "bit_stall", "ulp", "grad_stiffness", "kurtosis",
                       "attention_entropy"}
BUNDLED_INTERVENTIONS = {"partition_clip", "mantissa_shift", "precision_schedule"}
BUNDLED_TRANSFORMS = {"hadamard", "random_hadamard"}


def test_lists_the_bundled_plugins_by_kind(registry):
    assert set(registry.formats()) == BUNDLED_FORMATS
    assert set(registry.diagnostics()) == BUNDLED_DIAGNOSTICS
    assert set(registry.interventions()) == BUNDLED_INTERVENTIONS
    assert set(registry.transforms()) == BUNDLED_TRANSFORMS
    assert registry.broken() == {}


def test_plugins_are_what_list_json_says(registry):
    assert registry.plugins() == host_json("list")["plugins"]


@pytest.mark.parametrize("name,table", [("e4m3", True), ("fp4_e2m1", True), ("bf16", False), ("range", False),
                                        ("mantissa_shift", False), ("random_hadamard", False)])
def test_describe_is_describe_json(registry, name, table):
    args = ["describe", name] + (["--table"] if table else [])
    assert registry.describe(name, table=table) == host_json(*args)


def test_describe_with_parameters(registry):
    described = registry.describe("mantissa_shift", params={"nan_patience": 5})
    assert described == host_json("describe", "mantissa_shift", "--param", "nan_patience=5")


def test_broken_plugins_are_reported_with_their_reason(tmp_path):
    shutil.copytree(os.path.join(plugin_dir(), "e4m3"), tmp_path / "e4m3")
    (tmp_path / "ghost").mkdir()
    (tmp_path / "ghost" / "manifest.toml").write_text(
        '[plugin]\nname = "ghost"\nkind = "format"\nversion = "1.0.0"\nabi_version = "1.2"\n'
        'library = "libaltgrad_ghost.so"\ndescription = "a library that is not there"\n')
    (tmp_path / "typo").mkdir()
    (tmp_path / "typo" / "manifest.toml").write_text("name = \n")
    with altgrad.Registry(tmp_path) as reg:
        plugins = reg.plugins()
        assert plugins == host_json("list", plugins=str(tmp_path))["plugins"]
        assert reg.formats() == ["e4m3"]
        broken = reg.broken()
        assert set(broken) == {"ghost", "typo"}
        assert "libaltgrad_ghost.so" in broken["ghost"]
        with pytest.raises(altgrad.Error, match="plugin 'ghost' is broken"):
            reg.format("ghost")


def test_unknown_format_names_the_known_ones(registry):
    with pytest.raises(altgrad.Error, match=r"no plugin named 'e9m9' in .*\(plugins there: .*e4m3"):
        registry.format("e9m9")


def test_a_diagnostic_is_not_a_format(registry):
    with pytest.raises(altgrad.Error, match="'range' is a diagnostic plugin, not a format"):
        registry.format("range")


def test_closed_registry_refuses_every_call():
    reg = altgrad.Registry()
    e4m3 = reg.format("e4m3")
    reg.close()
    assert reg.closed
    for call in (reg.formats, reg.plugins, lambda: reg.describe("e4m3"), lambda: reg.format("e4m3")):
        with pytest.raises(ValueError, match=r"altgrad.Registry\('.*'\) is closed"):
            call()
    # A format made before stays usable: it holds its plugin.
    import numpy as np
    assert e4m3.quantize(np.array([1.0], dtype=np.float32)).output[0] == 1.0


def test_missing_folder_is_an_error(tmp_path):
    with pytest.raises(altgrad.Error, match="no_such_folder"):
        altgrad.Registry(tmp_path / "no_such_folder")


def test_a_plugin_that_crashes_or_hangs_while_loading_leaves_python_alone(tmp_path):
    # The deliberately broken test plugins of the build (tests/plugins/): each library is probed in
    # a child process, so a segfault, an abort or a hang while loading is a reason, not a crash.
    build = os.environ.get("ALTGRAD_BUILD_DIR") or os.path.dirname(os.path.normpath(plugin_dir()))
    for name in ("broken_load_segv", "broken_entry_abort", "broken_entry_loop"):
        source = os.path.join(build, "test-plugins", name)
        if not os.path.isdir(source):
            pytest.fail(f"{source}: the test plugins are not built")
        shutil.copytree(source, tmp_path / name)
    shutil.copytree(os.path.join(plugin_dir(), "e5m2"), tmp_path / "e5m2")
    with altgrad.Registry(tmp_path, probe_seconds=2) as reg:
        broken = reg.broken()
        assert set(broken) == {"broken_load_segv", "broken_entry_abort", "broken_entry_loop"}
        assert broken["broken_load_segv"].endswith("load: the plugin killed the process with signal 11 "
                                                   "(Segmentation fault)")
        assert broken["broken_entry_abort"].endswith("load: the plugin killed the process with signal 6 (Aborted)")
        assert broken["broken_entry_loop"].endswith("load: still running after 2 s; killed")
        assert reg.formats() == ["e5m2"]
        assert reg.format("e5m2").quantize(np.float32([1.1])).output[0] == 1.0


def test_parameters_keep_their_python_type(registry):
    # As in a config: a string where the manifest says integer is refused; numpy's integers are integers.
    import numpy as np
    refused = "parameter 'exponent_bits' = \"8\": expected an integer, got a string"
    with pytest.raises(altgrad.Error, match=refused):
        registry.format("float", params={"exponent_bits": "8", "mantissa_bits": 13})
    with pytest.raises(TypeError, match=r"params\['mantissa_bits'\]: expected a string, number or boolean"):
        registry.format("float", params={"mantissa_bits": [13]})
    e8m13 = registry.format("float", params={"exponent_bits": np.int64(8), "mantissa_bits": 13})
    # 13 fraction bits: 1 + 2^-13 is a value; 1 + 2^-14 is the tie between 1 and it, to even: 1.
    values = np.array([1.0 + 2.0**-13, 1.0 + 2.0**-14], dtype=np.float32)
    assert e8m13.quantize(values).output.tolist() == [1.0 + 2.0**-13, 1.0]


def test_one_default_registry_serves_every_call_and_is_remade_when_closed():
    import altgrad.torch as aqt
    shared = altgrad.default_registry()
    assert aqt.default_registry() is shared and altgrad.default_registry() is shared
    shared.close()
    remade = altgrad.default_registry()
    assert remade is not shared and not remade.closed
    # A call given no registry works after the close: it loads its plugin from the new one.
    a = np.full((1, 32), 3.0, dtype=np.float32)  # 32 products of 9: 288, exact in every format here
    d = altgrad.matmul(a, a.T, accumulator="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3")
    assert d[0, 0] == 288.0
