"""Composition: where the parts (world, sim, planning, policy, bridges) are put together.

    planners     planner name -> planner object (``fly``, the planner node, tests)

This layer imports the parts; the parts never import it (docs/architecture.md). Nothing is
imported here, so ``import planner_pkg.app.planners`` loads only the registry.
"""
