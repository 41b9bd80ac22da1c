"""Run dlmg's benchmark suite: ``python benchmarks/run.py [--full] [--gpu] [--out DIR]``.

Sets up the environment before any framework starts (JAX's 8 CPU devices, no
JAX GPU memory preallocation so that torch and CuPy share the GPU), then runs
:func:`benchmarks.suite.main`. ``--help`` lists the options.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _prepare_environment() -> None:
    flag = "--xla_force_host_platform_device_count=8"
    if flag not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)


if __name__ == "__main__":
    _prepare_environment()
    from benchmarks.suite import main

    sys.exit(main())
