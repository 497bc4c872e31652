"""Marks a test to run on the one-node Redis and on the 3-master Redis Cluster (conftest)."""

import pytest

#: ``@ON_NODE_AND_CLUSTER`` runs the test once per topology (the ``topology`` fixture).
ON_NODE_AND_CLUSTER = pytest.mark.parametrize("topology", ["single", "cluster"], indirect=True)
