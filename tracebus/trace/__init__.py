"""The trace domain: event domains, sources, synthetic data, results and job state."""
