"""`cmake --install` puts an importable package beside the installed plugins."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT


def test_the_installed_package_finds_the_installed_plugins(tmp_path):
    build = os.environ.get("ALTGRAD_BUILD_DIR") or os.path.join(ROOT, "build")
    cmake = shutil.which("cmake")
    if not os.path.isfile(os.path.join(build, "cmake_install.cmake")) or cmake is None:
        pytest.fail(f"no configured build at {build} (set ALTGRAD_BUILD_DIR)")
    prefix = tmp_path / "prefix"
    subprocess.run([cmake, "--install", build, "--prefix", str(prefix)], check=True, capture_output=True)
    package_root = prefix / "lib" / "python3" / "dist-packages"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ALTGRAD_PLUGIN_DIR")}
    env["PYTHONPATH"] = str(package_root)
    code = ("import altgrad, numpy as np; print(altgrad.__file__); print(altgrad.default_plugin_dir()); "
            "print(altgrad.Registry().format('e4m3').quantize(np.float32([0.1, 464])).output.tolist())")
    p = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    module, plugins, values = p.stdout.splitlines()
    assert module == str(package_root / "altgrad" / "__init__.py")
    assert plugins == str(prefix / "lib" / "altgrad" / "plugins")
    # E4M3 (3 mantissa bits): 0.1 = 1.6 * 2^-4 rounds to 1.625 * 2^-4; 464 saturates to 448.
    assert values == "[0.1015625, 448.0]"
    # altgrad.torch runs the installed trainer module (_train) on the installed plugins: a 1x1 layer
    # whose weight 0.1 is E4M3's 0.1015625, times an input of 1.
    code = ("import torch, altgrad.torch as aqt, altgrad._train as t; print(t.__file__); "
            "q = aqt.QuantLinear(1, 1, bias=False, weight='e4m3'); q.weight.data.fill_(0.1); "
            "print(q(torch.ones(1, 1)).item())")
    p = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    module, value = p.stdout.splitlines()
    assert os.path.dirname(module) == str(package_root / "altgrad") and value == "0.1015625"
