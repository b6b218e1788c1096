import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(20240611)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs torch with a CUDA device (skipped without one)")
