"""Live view of a flight: ROS-free pieces shared by ``fly --viz`` and the ROS viz node.

* :mod:`planner_pkg.viz.config`: :class:`LiveViewConfig`, the server's port, host and rate limits.
* :mod:`planner_pkg.viz.geometry`: obstacles as drawable shapes, trajectory sampling, the flown
  path (plain numpy; the ROS node and the Foxglove server both draw from it).
* :mod:`planner_pkg.viz.foxglove_live`: :class:`LiveView`, a Foxglove WebSocket server
  (``foxglove-sdk``, the ``viz`` extra) fed through a bounded queue by its own thread.
* :mod:`planner_pkg.viz.tap`: :class:`VizTap`, a planner wrapper that feeds a LiveView from the
  embedded simulator's closed loop (what ``fly --viz`` uses).

Nothing here imports the package's ``foxglove`` dependency at import time: without the ``viz``
extra, starting a LiveView raises :class:`~planner_pkg.viz.foxglove_live.VizUnavailableError`
saying what to install.
"""
