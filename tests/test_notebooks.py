"""Execute the notebooks in ``notebooks/`` (small settings; each < 90 s on 2 cores)."""

import pathlib

import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")
pytest.importorskip("ipykernel")

NOTEBOOKS = sorted(pathlib.Path(__file__).parents[1].joinpath("notebooks").glob("*.ipynb"))

#: Seconds a single cell may run (NUTS cells compile and sample; generous for slow CI).
CELL_TIMEOUT = 600


def test_notebooks_exist():
    assert {p.name for p in NOTEBOOKS} >= {
        "car_joint_pmf.ipynb",
        "movielens_ratings.ipynb",
        "squarem_vs_em.ipynb",
        "dsn_vlad_topics.ipynb",
        "dsn_corpus.ipynb",
        "lca_end_to_end.ipynb",
        "distal_outcomes.ipynb",
    }


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_saved_without_outputs(path):
    book = nbformat.read(path, as_version=4)
    for cell in book.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, path.name


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    book = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        book,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()  # raises CellExecutionError naming the failing cell
