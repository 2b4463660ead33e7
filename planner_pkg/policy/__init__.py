"""The learned depth policy: a CNN + GRU trained through a differentiable point mass.

"Back to Newton's Laws" style (Zhang et al. 2024): the network maps a 12 x 16 inverse-depth image
and a small state vector to an acceleration command; it is trained by back-propagating losses
through a batched point-mass simulation written in ``autograd_core``, exported to one data-only
file, and run on board with ``autograd_core.runtime`` (NumPy only) at 15 Hz.

One concern per module:

    config      typed, validated configuration (the YAML files in config/policy/ are views)
    dynamics    the differentiable point mass (one fused autograd node per step)
    distance    differentiable distance to the world's surfaces (World.signed_distance)
    render      batched depth rendering for training (all agents' cameras at once)
    observation inverse-depth image and state vector, shared by training and the planner
    network     the CNN + GRU policy network
    losses      the training losses
    env         seeded training scenarios and domain randomisation
    rollout     one training rollout (render -> network -> dynamics -> losses)
    trainer     AdamW + cosine training loop, checkpoints, CSV/PNG
    export      model file export / loading with shape checks
    planner     ``PolicyPlanner``: the runner's Planner protocol and a node-facing ``step``
    evaluate    closed-loop evaluation in the embedded simulator
    cli         ``python -m planner_pkg policy train|export|eval``

Typical use::

    from planner_pkg.policy.planner import PolicyPlanner
    planner = PolicyPlanner("model.agm")
    planner.set_goal([15.0, 0.0, 1.5])
    setpoint = planner.step(vehicle_state, depth_image_m, depth_stamp_s)

Nothing is imported here, so ``import planner_pkg.policy.planner`` on a companion computer loads
the planner, the observation code and ``autograd_core.runtime`` only.
"""
