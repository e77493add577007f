"""Scale-out analysis of distributed jobs: one worker per rank, compact results, cross-rank analyses.

* ``tables``: the compact per-rank tables (per-step, per-collective, rank summary) computed from one rank's
  events; what a worker returns instead of the event table.
* ``worker``: ``analyze_rank(path, settings)`` imports one rank, runs the per-rank rules and builds the tables.
* ``executor``: runs the workers on a local process pool or a dask.distributed cluster.
* ``crossrank``: the cross-rank analyses over the tables (collective matching and skew, clock alignment, the
  straggler, bus bandwidth against the link peak, exposed communication per rank, the rank x step matrix).
"""
