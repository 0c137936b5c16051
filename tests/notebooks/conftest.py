"""The notebooks import what they share (``notebooks/_notebook.py``) as a sibling
module; tests that load a notebook script by path need its folder on ``sys.path``.

Each paper notebook is executed once, by its own test file (so that ``--dist
loadfile`` spreads them over the workers), through the ``execute_notebook`` fixture."""

import base64
import importlib.util
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
NOTEBOOKS = HERE.parents[1] / "notebooks"
if str(NOTEBOOKS) not in sys.path:
    sys.path.insert(0, str(NOTEBOOKS))

_spec = importlib.util.spec_from_file_location("nbexec", HERE / "nbexec.py")
nbexec = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nbexec)

# generous: the small modes take well under a minute of CPU, but the kernel start and
# JAX compilation on a loaded 2-core machine can take several
CELL_TIMEOUT = 900
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def execute_notebook(data_root, fast_compile_flags):
    """``run(name, args="--small") -> (notebook, pngs, text)``: executes
    ``notebooks/NAME.ipynb`` with nbclient in a fresh ``python3`` kernel on the real
    data (``JAXANNOT_DATA``) with ``JAXANNOT_NOTEBOOK_ARGS=args``. Every figure in the
    outputs is a PNG and no output names a machine path; ``text`` is every text
    output joined: the printed lines (what ``python NAME.py`` writes to stdout and
    stderr) and the cells' results. The kernel's XLA compiles cheaply
    (``fast_compile_flags``): the small modes are smoke runs whose time is mostly
    XLA compiling (the harmoniums notebook's 8 ``fit_cd`` and 5 SVM programs, each K
    and model its own), and the checks are on their results, not their speed."""

    def run(name, args="--small"):
        nb = nbexec.execute(
            nbexec.NOTEBOOKS / f"{name}.ipynb",
            args,
            timeout=CELL_TIMEOUT,
            env={
                "JAXANNOT_DATA": str(data_root),
                "OPENBLAS_NUM_THREADS": "1",
                "XLA_FLAGS": fast_compile_flags,
            },
        )
        pngs = [base64.b64decode(p) for p in nbexec.images(nb)]
        assert all(p.startswith(PNG) for p in pngs)
        assert not nbexec.machine_paths(nb)
        return nb, pngs, nbexec.texts(nb)

    return run


def _random_order_map(truth, draws=4000, seed=0):
    """MAP of a ranking that knows nothing: per word with a positive, the mean AP over
    ``draws`` uniformly random orders of the images (hand-written AP, checked on one
    order against sklearn), averaged over the words."""
    import numpy as np
    from sklearn.metrics import average_precision_score

    truth = np.asarray(truth) > 0
    rng = np.random.default_rng(seed)
    places = np.argsort(rng.random((draws, len(truth))), axis=1)  # image -> place
    aps = []
    for w in np.flatnonzero(truth.any(0)):
        ranks = np.sort(places[:, truth[:, w]], axis=1) + 1  # positives' ranks
        ap = np.mean(np.arange(1, ranks.shape[1] + 1) / ranks, axis=1)
        sklearn_ap = average_precision_score(truth[:, w], -places[0])
        assert abs(ap[0] - sklearn_ap) < 1e-12
        aps.append(ap.mean())
    return float(np.mean(aps))


@pytest.fixture
def random_order_map():
    return _random_order_map
