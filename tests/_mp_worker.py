"""One process of a multi-process test launch (see :mod:`tests._multiproc`).

Sets dlmg up on the asked engine, runs the named scenarios of
:mod:`tests._mp_scenarios` in order and writes ``rank<r>.json`` after each
one, so a process that dies leaves what it had done.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", required=True, choices=["torch", "mpi", "jax"])
    parser.add_argument("--out", required=True)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--scenarios", required=True)
    args = parser.parse_args()
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

    if args.engine == "jax":
        import jax

        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(
            f"127.0.0.1:{os.environ['DLMG_TEST_JAX_PORT']}",
            num_processes=int(os.environ["WORLD_SIZE"]), process_id=int(os.environ["RANK"]),
        )

    import dlmg.distributed as dd
    from tests import _mp_scenarios as scenarios

    dd.init("mpi" if args.engine == "mpi" else "torch", timeout=args.timeout)
    rank = dd.rank()
    results: dict[str, dict] = {}
    path = Path(args.out) / f"rank{rank}.json"
    for name in args.scenarios.split(","):
        entry = {"ok": True, "error": None, "value": None}
        try:
            entry["value"] = scenarios.SCENARIOS[name]()
        except BaseException as exc:  # noqa: BLE001 - every failure is reported, then the next scenario runs
            entry = {"ok": False, "error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-3000:]}",
                     "value": None}
        results[name] = entry
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(results, default=str))
        tmp.replace(path)
    dd.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
