"""Shared by the Python tests: the op's fallback warns once per reason; the tests that run the
fallback on purpose (every CPU test) keep those warnings quiet. test_fallback_warns_with_the_reason
checks the warning itself."""
import warnings

import pytest


@pytest.fixture(autouse=True)
def quiet_fallback():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
