"""Session fixture: the scale-0.01 synthetic database, generated once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracebus.trace.synth import generate


@pytest.fixture(scope="session")
def sample_db(tmp_path_factory) -> Path:
    """Path of a scale-0.01 synthetic MES database (about 1,200 containers, 20K event rows)."""
    path = tmp_path_factory.mktemp("sample") / "sample.db"
    generate(path, scale=0.01)
    return path
