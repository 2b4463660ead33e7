"""Draw a racing flight: top view (gates, path coloured by speed) and height over time."""
from __future__ import annotations

import numpy as np

__all__ = ["plot_flight"]


def plot_flight(result, path) -> None:
    """Write a PNG of ``result`` (:class:`~planner_pkg.racing.evaluate.FlightResult` with a log).
    Raises ValueError when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError("matplotlib is not installed (pip install -e '.[plots]')") from None
    log = result.log
    fig, (ax, az) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [2, 1]})
    speed = np.linalg.norm(log[:, 4:7], axis=1)
    sc = ax.scatter(log[:, 1], log[:, 2], c=speed, s=3, cmap="viridis")
    fig.colorbar(sc, ax=ax, label="speed, m/s")
    for i, g in enumerate(result.track.gates):
        c, lat, nrm = np.asarray(g.center), g.lateral, g.normal
        a, b = c - lat * g.size / 2, c + lat * g.size / 2
        ax.plot([a[0], b[0]], [a[1], b[1]], "r-", lw=3)
        ax.arrow(c[0], c[1], nrm[0] * 0.8, nrm[1] * 0.8, head_width=0.3, color="r")
        ax.annotate(str(i), (c[0], c[1]), textcoords="offset points", xytext=(6, 6))
    ax.set_aspect("equal")
    ax.set_xlabel("x, m")
    ax.set_ylabel("y, m")
    s = result.summary()
    ax.set_title(f"gates {s['gates_passed']}/{s['gates_total']}, laps {s['lap_times_s']} s, "
                 f"crash {s['crash_reason']}, mean {s['mean_speed_mps']:.1f} m/s", fontsize=9)
    az.plot(log[:, 0], log[:, 3])
    az.set_xlabel("t, s")
    az.set_ylabel("z, m")
    fig.tight_layout()
    fig.savefig(str(path), dpi=100)
    plt.close(fig)
