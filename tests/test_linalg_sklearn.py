"""scikit-learn with ``array_api_dispatch=True`` on an ``X`` split in rows over four devices:
the fits equal scikit-learn's on the whole NumPy ``X``, and the SVD runs by TSQR (``U`` keeps
``X``'s row split)."""

from __future__ import annotations

import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # scikit-learn's array API mode needs SciPy's, set before import

import numpy as np
import pytest

import dlmg
from dlmg import Layout

sklearn = pytest.importorskip("sklearn")
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis  # noqa: E402
from sklearn.linear_model import Ridge  # noqa: E402

DEVICES = ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]


@pytest.fixture
def dispatch():
    try:
        with sklearn.config_context(array_api_dispatch=True):
            yield
    except RuntimeError as exc:  # SciPy imported before SCIPY_ARRAY_API was set
        pytest.skip(f"needs SciPy's array API mode (SCIPY_ARRAY_API=1 before SciPy is imported): {exc}")


def _data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((203, 6)) * np.arange(1, 7)
    y = X @ rng.standard_normal(6) + 0.1 * rng.standard_normal(203)
    labels = (X[:, 0] + X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 0.5)
    return X, y, labels


def _rows(a):
    return dlmg.scatter(a, Layout.slab(a.shape, 0, DEVICES))


def test_pca_full_svd_on_row_split_x(dispatch):
    X, _, _ = _data()
    dx = _rows(X)
    u, _, _ = dlmg.linalg.svd(dx, full_matrices=False)
    assert u.layout.same_distribution(dx.layout)  # the SVD PCA calls keeps the rows split
    got = PCA(n_components=3, svd_solver="full").fit(dx)
    with sklearn.config_context(array_api_dispatch=False):
        want = PCA(n_components=3, svd_solver="full").fit(X)
    np.testing.assert_allclose(np.abs(got.components_.gather()), np.abs(want.components_), atol=1e-10)
    np.testing.assert_allclose(got.explained_variance_.gather(), want.explained_variance_, rtol=1e-10)


def test_ridge_svd_on_row_split_x(dispatch):
    X, y, _ = _data()
    got = Ridge(alpha=1.0, solver="svd").fit(_rows(X), _rows(y))
    with sklearn.config_context(array_api_dispatch=False):
        want = Ridge(alpha=1.0, solver="svd").fit(X, y)
    np.testing.assert_allclose(got.coef_.gather(), want.coef_, atol=1e-10)


def test_lda_on_row_split_x(dispatch):
    X, _, labels = _data()
    got = LinearDiscriminantAnalysis().fit(_rows(X), _rows(labels))
    with sklearn.config_context(array_api_dispatch=False):
        want = LinearDiscriminantAnalysis().fit(X, labels)
    np.testing.assert_allclose(got.coef_.gather(), want.coef_, atol=1e-10)
