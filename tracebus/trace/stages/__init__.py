"""The MSD page's first stages, seed-resolve and lineage, and their one-unit jobs.

:mod:`.answers` checks the stage requests and answers them (in the API process, or in a worker
for a large one), :mod:`.params` holds the checked forms and their validators, :mod:`.jobs`
admits a large request as a ``trace-seed`` / ``trace-lin`` job and serves its poll and result,
and :mod:`.units` is the unit a worker runs for one.
"""
