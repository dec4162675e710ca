import numpy as np
import pytest

from booku_memory.services.logic.novelty import novelty_energy, principal_basis, principal_coordinates


def _unit(vector):
    vector = np.asarray(vector, dtype=np.float64)
    return vector / np.linalg.norm(vector)


def test_copy_of_a_neighbour_has_no_novelty():
    e0, e1 = np.eye(6)[0], np.eye(6)[1]
    neighbours = np.vstack([e0, e1, _unit(e0 + e1)])
    assert novelty_energy(e0.copy(), neighbours) == pytest.approx(0.0, abs=1e-9)
    rng = np.random.default_rng(1)
    single = rng.normal(size=(1, 16))
    assert novelty_energy(single[0] * 3.0, single) == pytest.approx(0.0, abs=1e-9)


def test_orthogonal_vector_is_fully_novel():
    neighbours = np.eye(8)[:3]
    assert novelty_energy(np.eye(8)[5], neighbours) == pytest.approx(1.0)


def test_single_neighbour_novelty_is_one_minus_cos_squared():
    a = _unit([1.0, 0.0, 0.0])
    v = _unit([1.0, 1.0, 0.0])
    assert novelty_energy(v, [a]) == pytest.approx(1.0 - 0.5)


def test_no_usable_neighbours_means_fully_novel():
    v = _unit([1.0, 2.0, 3.0])
    assert novelty_energy(v, []) == 1.0
    assert novelty_energy(v, [None, [], [0.0, 0.0, 0.0], [1.0, 2.0]]) == 1.0


def test_invalid_first_row_does_not_disable_the_check():
    v = _unit([0.0, 1.0, 0.0])
    assert novelty_energy(v, [[], [0.0, 1.0, 0.0]]) == pytest.approx(0.0)


def test_basis_stops_at_ninety_percent_energy():
    # Energies 0.8 / 0.15 / 0.05: the first two directions hold 95 % >= 90 %, the third is left out.
    matrix = np.diag([np.sqrt(0.8), np.sqrt(0.15), np.sqrt(0.05)])
    basis = principal_basis(matrix)
    assert basis.shape == (2, 3)
    assert np.allclose(np.abs(basis @ basis.T), np.eye(2))
    assert novelty_energy(np.array([0.0, 0.0, 1.0]), matrix) == pytest.approx(1.0)


def test_zero_vector_has_zero_novelty():
    assert novelty_energy(np.zeros(3), np.eye(3)) == 0.0


@pytest.mark.parametrize("rows", [8, 50, 400])
def test_principal_coordinates_are_the_vectors_coordinates_on_the_principal_basis(rows):
    """The fast path (the small eigenproblem, or the SVD when rows outnumber dimensions) gives ``principal_basis @ v``
    up to the sign of each direction, and the novelty is what the basis leaves of ``v``."""
    rng = np.random.default_rng(rows)
    matrix = rng.standard_normal((rows, 384)) @ np.diag(np.linspace(2.0, 0.1, 384))
    vector = matrix[:3].mean(axis=0) + 0.3 * rng.standard_normal(384)
    basis = principal_basis(matrix)
    coordinates = principal_coordinates(list(matrix), vector)
    assert coordinates.shape == (basis.shape[0],)
    assert np.allclose(np.abs(coordinates), np.abs(basis @ vector), atol=1e-9)
    residual = vector - basis.T @ (basis @ vector)
    expected = float(residual @ residual) / float(vector @ vector)
    assert novelty_energy(vector, matrix) == pytest.approx(expected, abs=1e-9)
