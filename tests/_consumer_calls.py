"""One list of calls that libraries written against the Array API make, run on dlmg tensors.

Each call is run on NumPy arrays and on dlmg tensors (one fragment, row slabs over
2 and 4 host devices; NumPy, torch and JAX fragments) and the values are compared.
``python tests/_consumer_calls.py`` prints how many calls pass per consumer and
configuration; the consumer test modules run the same calls.

SciPy reads ``SCIPY_ARRAY_API`` once, at its first import, and the consumers compute in
float64, which JAX holds only with ``jax_enable_x64``: so the calls run in a fresh
process (:func:`run_in_child`, or this file as a script), which sets both, never in
the test process itself.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections import Counter
from typing import Any, Callable, NamedTuple

import json
import subprocess
from pathlib import Path

if __name__ == "__main__":  # run as a script: this checkout's dlmg, whatever is installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

import dlmg

RNG = np.random.default_rng(3)
N, D = 24, 4
HOST_X = RNG.standard_normal((N, D)) + 2.0
HOST_Y = np.arange(N) % 3                     # class labels
HOST_R = HOST_X @ np.arange(1.0, D + 1) + 0.1 * RNG.standard_normal(N)  # a regression target
HOST_P = np.abs(HOST_X) + 0.1                 # positive values


class Config(NamedTuple):
    framework: str
    devices: int

    def __str__(self) -> str:
        return f"{self.framework}x{self.devices}"


CONFIGS = (Config("numpy", 1), Config("numpy", 2), Config("numpy", 4), Config("torch", 4), Config("jax", 2))


def dist(host: np.ndarray, config: Config) -> Any:
    """``host`` as a dlmg tensor: one fragment, or slabs of rows over ``config.devices`` devices."""
    devices = [f"cpu:{i}" for i in range(config.devices)]
    layout = (dlmg.Layout.single(host.shape, "cpu:0") if config.devices == 1
              else dlmg.Layout.slab(host.shape, 0, devices))
    return dlmg.scatter(host, layout, framework=config.framework)


def host_of(value: Any) -> Any:
    """A result as NumPy values (tuples element by element, scalars as floats)."""
    if isinstance(value, (tuple, list)):
        return [host_of(v) for v in value]
    if isinstance(value, dlmg.DistributedTensor):
        return np.asarray(value.gather(framework="numpy"))
    if hasattr(value, "values") and hasattr(value, "dims"):  # xarray
        return host_of(value.data)
    if hasattr(value, "compute") and hasattr(value, "chunks"):  # cubed
        return host_of(value.compute())
    if hasattr(value, "statistic"):  # a SciPy result object
        return [host_of(value.statistic), host_of(value.pvalue)]
    if type(value).__module__.startswith(("torch", "jax")):
        return np.asarray(value)
    return np.asarray(value) if not isinstance(value, (int, float, bool, np.generic)) else np.asarray(value)


class Call(NamedTuple):
    consumer: str
    name: str
    run: Callable[[Callable[[np.ndarray], Any]], Any]   # run(wrap): wrap turns host arrays into inputs


def _sk(estimator_factory: Callable[[], Any], method: str, target: np.ndarray | None = None) -> Callable:
    def run(wrap: Callable) -> Any:
        import sklearn

        with sklearn.config_context(array_api_dispatch=True):
            est = estimator_factory()
            x = wrap(HOST_X)
            if target is None:
                return getattr(est.fit(x), method)(x)
            return getattr(est.fit(x, wrap(target)), method)(x)
    return run


def _sk_metric(name: str, *hosts: np.ndarray, module: str = "sklearn.metrics", **kw: Any) -> Callable:
    def run(wrap: Callable) -> Any:
        import importlib

        import sklearn

        with sklearn.config_context(array_api_dispatch=True):
            return getattr(importlib.import_module(module), name)(*[wrap(h) for h in hosts], **kw)
    return run


def label_encode(y: Any) -> Any:
    """scikit-learn's ``LabelEncoder().fit_transform(y)``."""
    from sklearn.preprocessing import LabelEncoder

    return LabelEncoder().fit_transform(y)


def _sklearn_calls() -> list[Call]:
    from sklearn import discriminant_analysis as da, kernel_approximation as ka, linear_model as lm
    from sklearn import mixture, naive_bayes as nb, preprocessing as pp
    from sklearn.decomposition import PCA

    calls = [
        Call("sklearn", "StandardScaler", _sk(pp.StandardScaler, "transform")),
        Call("sklearn", "MinMaxScaler", _sk(pp.MinMaxScaler, "transform")),
        Call("sklearn", "MaxAbsScaler", _sk(pp.MaxAbsScaler, "transform")),
        Call("sklearn", "Normalizer", _sk(pp.Normalizer, "transform")),
        Call("sklearn", "Binarizer", _sk(lambda: pp.Binarizer(threshold=2.0), "transform")),
        Call("sklearn", "PolynomialFeatures", _sk(pp.PolynomialFeatures, "transform")),
        Call("sklearn", "KernelCenterer", lambda wrap: _sk(pp.KernelCenterer, "transform")(
            lambda h: wrap(HOST_X @ HOST_X.T) if h is HOST_X else wrap(h))),
        Call("sklearn", "PCA(full)", _sk(lambda: PCA(2, svd_solver="full"), "transform")),
        Call("sklearn", "PCA(covariance_eigh)", _sk(lambda: PCA(2, svd_solver="covariance_eigh"), "transform")),
        Call("sklearn", "Nystroem", _sk(lambda: ka.Nystroem(n_components=8, random_state=0), "transform")),
        Call("sklearn", "GaussianNB", _sk(nb.GaussianNB, "predict_proba", HOST_Y)),
        Call("sklearn", "LinearDiscriminantAnalysis", _sk(da.LinearDiscriminantAnalysis, "predict_proba", HOST_Y)),
        Call("sklearn", "Ridge", _sk(lm.Ridge, "predict", HOST_R)),
        Call("sklearn", "RidgeCV", _sk(lm.RidgeCV, "predict", HOST_R)),
        Call("sklearn", "RidgeClassifier", _sk(lm.RidgeClassifier, "decision_function", HOST_Y)),
        Call("sklearn", "RidgeClassifierCV", _sk(lm.RidgeClassifierCV, "decision_function", HOST_Y)),
        Call("sklearn", "LogisticRegression", _sk(lambda: lm.LogisticRegression(max_iter=200), "predict_proba", HOST_Y)),
        Call("sklearn", "PoissonRegressor", _sk(lm.PoissonRegressor, "predict", np.abs(HOST_R))),
        Call("sklearn", "GaussianMixture", _sk(lambda: mixture.GaussianMixture(
            2, init_params="random_from_data", random_state=0), "predict_proba")),
        Call("sklearn", "LabelEncoder", _sk_metric("label_encode", HOST_Y, module="_consumer_calls")),
        Call("sklearn", "label_binarize", _sk_metric("label_binarize", HOST_Y, module="sklearn.preprocessing",
                                                     classes=[0, 1, 2])),
        Call("sklearn", "accuracy_score", _sk_metric("accuracy_score", HOST_Y, (HOST_Y * 2) % 3)),
        Call("sklearn", "r2_score", _sk_metric("r2_score", HOST_R, HOST_R + 0.3)),
        Call("sklearn", "mean_squared_error", _sk_metric("mean_squared_error", HOST_R, HOST_R * 1.1)),
        Call("sklearn", "mean_absolute_error", _sk_metric("mean_absolute_error", HOST_R, HOST_R * 1.1)),
        Call("sklearn", "zero_one_loss", _sk_metric("zero_one_loss", HOST_Y, (HOST_Y * 2) % 3)),
        Call("sklearn", "confusion_matrix", _sk_metric("confusion_matrix", HOST_Y, (HOST_Y * 2) % 3)),
        Call("sklearn", "f1_score", _sk_metric("f1_score", HOST_Y, (HOST_Y * 2) % 3, average="macro")),
        Call("sklearn", "euclidean_distances", _sk_metric("euclidean_distances", HOST_X)),
        Call("sklearn", "cosine_similarity", _sk_metric("cosine_similarity", HOST_X, module="sklearn.metrics.pairwise")),
        Call("sklearn", "rbf_kernel", _sk_metric("rbf_kernel", HOST_X, module="sklearn.metrics.pairwise")),
        Call("sklearn", "linear_kernel", _sk_metric("linear_kernel", HOST_X, module="sklearn.metrics.pairwise")),
        Call("sklearn", "polynomial_kernel", _sk_metric("polynomial_kernel", HOST_X, module="sklearn.metrics.pairwise")),
    ]
    return calls


def _sp(module: str, name: str, *hosts: np.ndarray, **kw: Any) -> Callable:
    def run(wrap: Callable) -> Any:
        import importlib

        return getattr(importlib.import_module(module), name)(*[wrap(h) for h in hosts], **kw)
    return run


def _scipy_calls() -> list[Call]:
    half = HOST_X[: N // 2]
    return [
        Call("scipy", f"special.{name}", _sp("scipy.special", name, HOST_X))
        for name in ("erf", "expit", "gammaln", "ndtr", "entr", "logit", "xlogy") if name != "xlogy"
    ] + [
        Call("scipy", "special.logsumexp", _sp("scipy.special", "logsumexp", HOST_X, axis=0)),
        Call("scipy", "special.softmax", _sp("scipy.special", "softmax", HOST_X, axis=1)),
        Call("scipy", "stats.entropy", _sp("scipy.stats", "entropy", HOST_P, axis=0)),
        Call("scipy", "stats.moment", _sp("scipy.stats", "moment", HOST_X, order=3)),
        Call("scipy", "stats.skew", _sp("scipy.stats", "skew", HOST_X)),
        Call("scipy", "stats.kurtosis", _sp("scipy.stats", "kurtosis", HOST_X)),
        Call("scipy", "stats.zscore", _sp("scipy.stats", "zscore", HOST_X)),
        Call("scipy", "stats.variation", _sp("scipy.stats", "variation", HOST_P)),
        Call("scipy", "stats.ttest_ind", _sp("scipy.stats", "ttest_ind", half, HOST_X[N // 2:])),
        Call("scipy", "stats.pearsonr", _sp("scipy.stats", "pearsonr", HOST_X[:, 0], HOST_X[:, 1])),
        Call("scipy", "fft.fft", _sp("scipy.fft", "fft", HOST_X, axis=1)),
        Call("scipy", "fft.rfft", _sp("scipy.fft", "rfft", HOST_X, axis=1)),
        Call("scipy", "fft.dct", _sp("scipy.fft", "dct", HOST_X, axis=1)),
        Call("scipy", "cluster.vq.whiten", _sp("scipy.cluster.vq", "whiten", HOST_X)),
    ]


def _xr(body: Callable[[Any], Any]) -> Callable:
    def run(wrap: Callable) -> Any:
        import xarray as xr

        da = xr.DataArray(wrap(HOST_X), dims=("t", "f"), coords={"g": ("t", HOST_Y)})
        return body(da)
    return run


def _xarray_calls() -> list[Call]:
    import xarray as xr

    return [
        Call("xarray", "wrap+values", _xr(lambda da: da.values)),
        Call("xarray", "mean()", _xr(lambda da: da.mean())),
        Call("xarray", "mean(t)", _xr(lambda da: da.mean("t"))),
        Call("xarray", "sum(t)", _xr(lambda da: da.sum("t"))),
        Call("xarray", "max(f)", _xr(lambda da: da.max("f"))),
        Call("xarray", "min(t)", _xr(lambda da: da.min("t"))),
        Call("xarray", "std(t)", _xr(lambda da: da.std("t"))),
        Call("xarray", "std(t, ddof=1)", _xr(lambda da: da.std("t", ddof=1))),
        Call("xarray", "var(f)", _xr(lambda da: da.var("f"))),
        Call("xarray", "prod(f)", _xr(lambda da: da.prod("f"))),
        Call("xarray", "cumsum(t)", _xr(lambda da: da.cumsum("t"))),
        Call("xarray", "arithmetic", _xr(lambda da: (da * 2 + 1).data)),
        Call("xarray", "rolling(t=3).mean()", _xr(lambda da: da.rolling(t=3).mean())),
        Call("xarray", "groupby(g).mean()", _xr(lambda da: da.groupby("g").mean())),
        Call("xarray", "concat", _xr(lambda da: xr.concat([da, da], dim="t"))),
        Call("xarray", "isel", _xr(lambda da: da.isel(t=slice(2, 9)))),
        Call("xarray", "transpose", _xr(lambda da: da.transpose("f", "t"))),
    ]


def _cubed_calls() -> list[Call]:
    def from_array(wrap: Callable) -> Any:
        import cubed

        return cubed.from_array(wrap(HOST_X), chunks=(N // 2, D)) + 1

    def as_backend(wrap: Callable) -> Any:
        import cubed
        import cubed.array_api as cxp

        spec = cubed.Spec(allowed_mem="200MB")
        x = wrap(HOST_X)
        a = cubed.from_array(x, chunks=(N // 2, D), spec=spec)
        return cxp.sum(a * 2, axis=0)

    return [Call("cubed", "from_array", from_array), Call("cubed", "sum(from_array*2)", as_backend)]


def _einops_calls() -> list[Call]:
    def ein(fname: str, pattern: str, **kw: Any) -> Callable:
        def run(wrap: Callable) -> Any:
            import einops.array_api as ea

            return getattr(ea, fname)(wrap(HOST_X), pattern, **kw)
        return run

    return [
        Call("einops", "rearrange", ein("rearrange", "t f -> f t")),
        Call("einops", "rearrange split", ein("rearrange", "(a t) f -> t (a f)", a=2)),
        Call("einops", "reduce mean", ein("reduce", "t f -> f", reduction="mean")),
        Call("einops", "reduce max", ein("reduce", "t f -> t", reduction="max")),
        Call("einops", "repeat", ein("repeat", "t f -> t f r", r=2)),
    ]


def _xpx_calls() -> list[Call]:
    def x1(name: str, *hosts: np.ndarray, **kw: Any) -> Callable:
        def run(wrap: Callable) -> Any:
            import array_api_extra as xpx

            return getattr(xpx, name)(*[wrap(h) for h in hosts], **kw)
        return run

    return [
        Call("array-api-extra", "cov", x1("cov", HOST_X.T.copy())),
        Call("array-api-extra", "sinc", x1("sinc", HOST_X)),
        Call("array-api-extra", "pad", x1("pad", HOST_X, pad_width=1)),
        Call("array-api-extra", "expand_dims", x1("expand_dims", HOST_X, axis=(0, 2))),
        Call("array-api-extra", "atleast_nd", x1("atleast_nd", HOST_X, ndim=3)),
        Call("array-api-extra", "isclose", x1("isclose", HOST_X, HOST_X + 1e-12)),
        Call("array-api-extra", "nunique", x1("nunique", HOST_Y)),
        Call("array-api-extra", "setdiff1d", x1("setdiff1d", HOST_Y, np.array([1]), assume_unique=False)),
        Call("array-api-extra", "kron", x1("kron", HOST_X[:3], HOST_X[:2])),
        Call("array-api-extra", "nan_to_num", x1("nan_to_num", HOST_X)),
    ]


def all_calls() -> list[Call]:
    """Every call, consumer by consumer (a consumer not installed is left out)."""
    calls: list[Call] = []
    for make, module in ((_sklearn_calls, "sklearn"), (_scipy_calls, "scipy"), (_xarray_calls, "xarray"),
                         (_cubed_calls, "cubed"), (_einops_calls, "einops"), (_xpx_calls, "array_api_extra")):
        try:
            __import__(module)
        except ImportError:
            continue
        calls.extend(make())
    return calls


def _stays_distributed(call: Call, want: Any, got: Any) -> None:
    """Array results of array-API code are dlmg tensors again (xarray's: its ``.data``)."""
    if call.consumer == "cubed" or call.name == "wrap+values":
        return
    if hasattr(got, "dims"):
        got = got.data
    if isinstance(want, np.ndarray) and want.ndim and not isinstance(got, (tuple, list)):
        assert isinstance(got, dlmg.DistributedTensor), f"{call.name} returned {type(got).__name__}"


def check(call: Call, config: Config) -> None:
    """Run ``call`` on NumPy and on dlmg tensors of ``config``; raise AssertionError if the values differ."""
    want_raw = call.run(lambda h: h)
    want = host_of(want_raw)
    got_raw = call.run(lambda h: dist(h, config))
    _stays_distributed(call, want_raw.data if hasattr(want_raw, "dims") else want_raw, got_raw)
    got = host_of(got_raw)
    rtol = 1e-7
    for g, w in zip(got if isinstance(got, list) else [got], want if isinstance(want, list) else [want]):
        np.testing.assert_allclose(np.asarray(g, dtype=np.asarray(w).dtype), w, rtol=rtol, atol=rtol)


def outcomes(consumer: str | None = None) -> dict[str, str]:
    """``"config call" -> "pass"`` or the error, for every call (of ``consumer``) and configuration."""
    warnings.simplefilter("ignore")
    out = {}
    for config in CONFIGS:
        try:
            __import__(config.framework)
        except ImportError:
            continue
        for call in all_calls():
            if consumer is not None and call.consumer != consumer:
                continue
            try:
                check(call, config)
                out[f"{config} {call.name}"] = "pass"
            except Exception as exc:  # noqa: BLE001 - reported to the test process
                out[f"{config} {call.name}"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return out


def _environment() -> dict[str, str]:
    env = dict(os.environ, SCIPY_ARRAY_API="1", JAX_ENABLE_X64="1")
    flag = "--xla_force_host_platform_device_count=8"
    if flag not in env.get("XLA_FLAGS", ""):
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + flag).strip()
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def run_in_child(consumer: str) -> dict[str, str]:
    """:func:`outcomes` of ``consumer``'s calls, run in a fresh Python process."""
    done = subprocess.run([sys.executable, __file__, "--json", consumer], capture_output=True, text=True,
                          env=_environment(), timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"the consumer calls of {consumer} did not run:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    if os.environ.get("SCIPY_ARRAY_API") != "1" or os.environ.get("JAX_ENABLE_X64") != "1":
        return subprocess.run([sys.executable, __file__, *argv], env=_environment()).returncode
    if argv[:1] == ["--json"]:
        print(json.dumps(outcomes(argv[1])))
        return 0
    warnings.simplefilter("ignore")
    calls = all_calls()
    passed: Counter = Counter()
    total: Counter = Counter()
    failures = []
    for config in CONFIGS:
        try:
            __import__(config.framework)
        except ImportError:
            continue
        for call in calls:
            total[call.consumer] += 1
            try:
                check(call, config)
                passed[call.consumer] += 1
            except Exception as exc:  # noqa: BLE001 - counted, reported below
                failures.append(f"{config} {call.consumer} {call.name}: {type(exc).__name__}: {str(exc)[:150]}")
    if "-v" in argv:
        print("\n".join(failures))
    for consumer in total:
        print(f"{consumer:16s} {passed[consumer]:4d} / {total[consumer]:4d}")
    print(f"{'all':16s} {sum(passed.values()):4d} / {sum(total.values()):4d}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


# -- what is known not to work, and why ---------------------------------------------------

#: ``(consumer, call) -> (reason, strict, only on several devices)``
KNOWN: dict[tuple[str, str], tuple[str, bool, bool]] = {
    # xarray's own limitation: reported upstream as "rolling on array-API arrays needs
    # sliding_window_view, which the standard does not have"
    ("xarray", "rolling(t=3).mean()"): (
        "xarray's rolling calls xp.lib.stride_tricks.sliding_window_view, NumPy's own API, on every "
        "array namespace", True, False),
}


def params(consumer: str) -> list[Any]:
    """pytest parameters ``"config call"`` for ``consumer``'s calls, the known failures marked xfail."""
    import pytest

    out = []
    for config in CONFIGS:
        for call in all_calls():
            if call.consumer != consumer:
                continue
            marks = []
            known = KNOWN.get((consumer, call.name))
            if known is not None and (config.devices > 1 or not known[2]):
                marks.append(pytest.mark.xfail(reason=known[0], strict=known[1]))
            out.append(pytest.param(f"{config} {call.name}", marks=marks, id=f"{config}-{call.name}"))
    return out


def verdict(found: dict[str, str], key: str) -> None:
    """Fail with the call's own error unless it passed (a framework not installed: skipped)."""
    import pytest

    if key not in found:
        pytest.skip(f"{key.split()[0].rstrip('x0123456789')} is not installed")
    if found[key] != "pass":
        raise AssertionError(found[key])
