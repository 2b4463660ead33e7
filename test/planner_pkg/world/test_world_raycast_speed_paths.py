"""The fast single-origin ray casting paths (image-plane culling, ``raycast_fast``) return exactly
what the brute-force every-pair driver returns: random worlds of each primitive type, random
pinhole cameras (any yaw, pitch and roll, straight down and straight up), grazing rays, origins
inside and on obstacles, shuffled and irregular ray sets, and the layered and chunked code paths
forced on."""
import math

import numpy as np
import pytest

from planner_pkg.world import Box, Cylinder, Sphere, World
from planner_pkg.world import raycast_fast
from planner_pkg.world.raycast import cast_angular_groups, cast_brute, cast_single_origin
from planner_pkg.world.raycast_fast import RayImage, cast_image

LOW, HIGH = (-20.0, -20.0, 0.0), (20.0, 20.0, 8.0)


def look_rotation(yaw, pitch, roll=0.0):
    """(3, 3) optical (x right, y down, z forward) -> world ENU for a camera looking at azimuth
    ``yaw`` and elevation ``pitch`` (radians; +-pi/2 exactly straight up/down), rolled about its
    axis."""
    right = np.array([math.sin(yaw), -math.cos(yaw), 0.0])
    if pitch == math.pi / 2 or pitch == -math.pi / 2:
        forward = np.array([0.0, 0.0, math.copysign(1.0, pitch)])
    else:
        forward = np.array([math.cos(pitch) * math.cos(yaw), math.cos(pitch) * math.sin(yaw),
                            math.sin(pitch)])
    down = np.cross(forward, right)
    c, s = math.cos(roll), math.sin(roll)
    right, down = c * right + s * down, c * down - s * right
    return np.column_stack([right, down, forward])


def camera_directions(rotation, width=64, height=48, hfov_deg=90.0):
    """(height * width, 3) unit rays through the pixel centres of a pinhole image, row-major,
    as ``planner_pkg.sim.camera.DepthCamera`` forms them."""
    f = 0.5 * width / math.tan(0.5 * math.radians(hfov_deg))
    rays = np.empty((height, width, 3))
    rays[..., 0] = ((np.arange(width) - 0.5 * (width - 1)) / f)[None, :]
    rays[..., 1] = ((np.arange(height) - 0.5 * (height - 1)) / f)[:, None]
    rays[..., 2] = 1.0
    d = rays.reshape(-1, 3) @ rotation.T
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def random_world(rng, kind, n, spread=15.0):
    obstacles = []
    for _ in range(n):
        k = kind if kind != "mixed" else ("cylinder", "box", "sphere")[rng.integers(3)]
        if k == "cylinder":
            obstacles.append(Cylinder(tuple(rng.uniform(-spread, spread, 2)),
                                      rng.uniform(0.15, 1.5), rng.uniform(0.3, 6.0)))
        elif k == "box":
            size = rng.uniform(0.2, 4.0, 3)
            if rng.random() < 0.2:          # long thin walls
                size[rng.integers(2)] = rng.uniform(6.0, 12.0)
            yaw = rng.choice([0.0, math.pi / 2, rng.uniform(-4.0, 4.0)])
            obstacles.append(Box((*rng.uniform(-spread, spread, 2), rng.uniform(-1.0, 6.0)),
                                 tuple(size), float(yaw)))
        else:
            obstacles.append(Sphere((*rng.uniform(-spread, spread, 2), rng.uniform(-1.0, 7.0)),
                                    rng.uniform(0.15, 2.0)))
    return World(LOW, HIGH, obstacles)


def assert_matches_brute(world, origin, directions, max_range=math.inf):
    """The single-origin driver (and the image path under it) equals brute force bitwise."""
    origin = np.asarray(origin, dtype=np.float64)
    blocks = world._blocks
    brute = cast_brute(blocks, origin[None], directions)
    got = cast_single_origin(blocks, origin, directions, max_range)
    if math.isinf(max_range):
        np.testing.assert_array_equal(got, brute)
    else:
        np.testing.assert_array_equal(np.where(got <= max_range, got, np.inf),
                                      np.where(brute <= max_range, brute, np.inf))
    return brute


@pytest.fixture(params=["default", "forced"])
def paths(request, monkeypatch):
    """Run with the default tuning, then with every optional path forced on: two nearest-first
    layers with occlusion culling, tiny kernel chunks, and the bounding-ball pre-cull."""
    if request.param == "forced":
        monkeypatch.setattr(raycast_fast, "LAYER_MIN_AREA", 0.0)
        monkeypatch.setattr(raycast_fast, "LAYER_AREA", 0.2)
        monkeypatch.setattr(raycast_fast, "PAIR_CHUNK", 97)
        monkeypatch.setattr(raycast_fast, "PRECULL_MIN", 0)
    return request.param


def random_pose(rng, trial):
    """Yaw, pitch, roll: level, tilted, rolled, and exactly straight down / up."""
    yaw = float(rng.uniform(-math.pi, math.pi))
    if trial % 5 == 3:
        return yaw, -math.pi / 2, float(rng.uniform(-math.pi, math.pi))
    if trial % 5 == 4:
        return yaw, math.pi / 2, float(rng.uniform(-math.pi, math.pi))
    pitch = 0.0 if trial % 5 == 0 else float(rng.uniform(-1.2, 1.2))
    roll = 0.0 if trial % 5 < 2 else float(rng.uniform(-math.pi, math.pi))
    return yaw, pitch, roll


@pytest.mark.parametrize("kind", ["cylinder", "box", "sphere", "mixed"])
def test_random_cameras_match_brute_force_bitwise(kind, paths):
    rng = np.random.default_rng(["cylinder", "box", "sphere", "mixed"].index(kind))
    world = random_world(rng, kind, 150)
    hits = 0
    for trial in range(10):
        origin = np.array([*rng.uniform(-12.0, 12.0, 2), rng.uniform(0.2, 6.0)])
        if trial % 5 == 3:
            origin[2] = rng.uniform(8.0, 20.0)      # high above, looking down
        if trial % 5 == 4:
            origin[2] = rng.uniform(-3.0, 0.5)      # low, looking up
        yaw, pitch, roll = random_pose(rng, trial)
        width, height = [(64, 48), (33, 25), (20, 40), (7, 5)][trial % 4]
        directions = camera_directions(look_rotation(yaw, pitch, roll), width, height,
                                       hfov_deg=rng.uniform(30.0, 90.0))
        image = RayImage.build(directions)
        assert image is not None and image.order is None     # a pinhole grid, image order
        brute = assert_matches_brute(world, origin, directions)
        assert_matches_brute(world, origin, directions, max_range=float(rng.uniform(2.0, 12.0)))
        hits += int(np.isfinite(brute).sum())
    assert hits > 2000


@pytest.mark.parametrize("kind", ["cylinder", "box", "sphere", "mixed"])
def test_dense_worlds_and_origins_in_or_on_obstacles(kind, paths):
    rng = np.random.default_rng(10 + ["cylinder", "box", "sphere", "mixed"].index(kind))
    world = random_world(rng, kind, 600, spread=12.0)
    directions = camera_directions(look_rotation(0.3, -0.2, 0.1))
    for obstacle in world.obstacles[:6]:
        if isinstance(obstacle, Cylinder):
            inside = (*obstacle.center, 0.5 * obstacle.height)
            surface = (obstacle.center[0] + obstacle.radius, obstacle.center[1],
                       0.5 * obstacle.height)
        elif isinstance(obstacle, Sphere):
            inside = obstacle.center
            surface = (obstacle.center[0], obstacle.center[1],
                       obstacle.center[2] + obstacle.radius)
        else:
            inside = obstacle.center
            surface = (obstacle.center[0], obstacle.center[1],
                       obstacle.center[2] + 0.5 * obstacle.size[2])
        brute = assert_matches_brute(world, inside, directions)
        assert (brute == 0.0).all()                     # every ray starts in a solid
        assert_matches_brute(world, surface, directions)   # on the surface, up to rounding
    for _ in range(4):
        assert_matches_brute(world, rng.uniform(-10.0, 10.0, 3) + [0, 0, 3], directions)


def test_grazing_rays_on_faces_edges_rims_and_tangents(paths):
    """Odd image sizes put the centre row and column exactly in a face's plane, a cylinder's
    tangent plane or a cap's plane (direction components exactly zero)."""
    box = Box((5.0, 0.0, 1.0), (2.0, 2.0, 2.0), 0.0)
    yawed = Box((5.0, 4.0, 1.0), (2.0, 1.0, 2.0), math.pi / 4)
    cylinder = Cylinder((5.0, -5.0), 1.0, 3.0)
    sphere = Sphere((5.0, 9.0, 2.0), 1.0)
    world = World(LOW, HIGH, [box, yawed, cylinder, sphere], ground=False)
    level = look_rotation(0.0, 0.0)
    cases = [
        ((0.0, 0.0, 2.0), level),             # centre row in the box's top face plane
        ((0.0, 1.0, 1.0), level),             # centre column in the box's side face plane
        ((0.0, 1.0, 2.0), level),             # along the box's top edge
        ((0.0, -4.0, 1.0), level),            # tangent to the cylinder's side
        ((0.0, -5.0, 3.0), level),            # in the cylinder's top cap plane
        ((0.0, -4.0, 3.0), level),            # along the cap's rim tangent
        ((0.0, 8.0, 2.0), level),             # tangent to the sphere
        ((0.0, 9.0, 3.0), level),             # tangent to the sphere's top
        ((5.0, -4.0, 6.0), look_rotation(0.0, -math.pi / 2)),   # straight down on the rim
        ((5.0, -5.0, 6.0), look_rotation(0.0, -math.pi / 2)),   # straight down on the cap
        ((5.0, 0.0, 6.0), look_rotation(0.0, -math.pi / 2)),    # straight down on the box
        ((6.0, 1.0, -2.0), look_rotation(0.0, math.pi / 2)),    # up along the box's edge
        ((5.0, 4.0 - math.sqrt(2) * 0.5, 6.0), look_rotation(math.pi / 4, -math.pi / 2)),
    ]
    for origin, rotation in cases:
        for width, height in ((33, 25), (65, 49)):
            directions = camera_directions(rotation, width, height)
            brute = assert_matches_brute(world, origin, directions)
            assert np.isfinite(brute).any()


def test_shuffled_jittered_and_scattered_rays(paths):
    """Rays that are not a pinhole image in order fall back to binning and sorting; rays that
    spread too wide fall back to the angular-group driver; all give brute force's answer."""
    rng = np.random.default_rng(3)
    world = random_world(rng, "mixed", 300)
    origin = np.array([0.0, 0.0, 2.0])
    grid = camera_directions(look_rotation(0.7, 0.1, 0.2))
    shuffled = grid[rng.permutation(len(grid))]
    jittered = grid + rng.normal(scale=0.01, size=grid.shape)
    jittered /= np.linalg.norm(jittered, axis=1, keepdims=True)
    axis = np.array([0.3, -0.9, 0.1]) / np.linalg.norm([0.3, -0.9, 0.1])
    cone = axis + rng.normal(scale=0.4, size=(2000, 3))
    cone /= np.linalg.norm(cone, axis=1, keepdims=True)
    cone = cone[cone @ axis > 0.5]
    cone[1] = cone[0]                   # no row direction from the first two rays
    line = camera_directions(look_rotation(0.2, 0.0), 5000, 1)     # one long row of rays
    column = camera_directions(look_rotation(0.2, 0.0), 1, 150, hfov_deg=1.0)   # one column
    for directions in (shuffled, jittered, cone, line, column):
        assert cast_image(world._blocks, origin, directions, math.inf) is not None
        assert_matches_brute(world, origin, directions)
    assert RayImage.build(shuffled).order is not None
    # Rows stored bottom first, or the image stored column by column: still image order.
    upside_down = grid.reshape(48, 64, 3)[::-1].reshape(-1, 3)
    transposed = grid.reshape(48, 64, 3).transpose(1, 0, 2).reshape(-1, 3)
    for directions in (upside_down, transposed):
        assert RayImage.build(directions).order is None
        assert_matches_brute(world, origin, directions)
    wide = rng.normal(size=(1000, 3))
    wide /= np.linalg.norm(wide, axis=1, keepdims=True)
    assert cast_image(world._blocks, origin, wide, math.inf) is None
    assert_matches_brute(world, origin, wide)


def test_angular_group_driver_still_matches_on_camera_rays():
    """The previous single-origin driver (now the wide-ray-set fallback) on camera rays."""
    rng = np.random.default_rng(6)
    world = random_world(rng, "mixed", 200)
    for trial in range(4):
        origin = np.array([*rng.uniform(-8.0, 8.0, 2), rng.uniform(0.5, 4.0)])
        directions = camera_directions(look_rotation(*random_pose(rng, trial + 1)))
        np.testing.assert_array_equal(
            cast_angular_groups(world._blocks, origin, directions, math.inf),
            cast_brute(world._blocks, origin[None], directions))


def test_depth_camera_rays_through_world_raycast_equal_the_brute_force_path():
    """Public API: ``World.raycast`` on a depth camera's rays (image path) equals the same rays
    cast 63 at a time (below the culling threshold: brute force), ground and ceiling included."""
    from planner_pkg.sim import DepthCamera
    from planner_pkg.types import VehicleState

    rng = np.random.default_rng(8)
    world = random_world(rng, "mixed", 200)
    world = World(LOW, HIGH, world.obstacles, ceiling=7.5)
    camera = DepthCamera()
    for _ in range(6):
        attitude = rng.normal(size=4)
        state = VehicleState(t=0.0, position=np.array([*rng.uniform(-10, 10, 2), 1.5]),
                             velocity=np.zeros(3), attitude=attitude / np.linalg.norm(attitude),
                             angular_velocity=np.zeros(3))
        position, rotation = camera.pose(state)
        directions = camera._unit_rays @ rotation.T
        fast = world.raycast(position, directions, camera._max_ray_length)
        slow = np.concatenate([world.raycast(position, directions[i:i + 63],
                                             camera._max_ray_length)
                               for i in range(0, len(directions), 63)])
        np.testing.assert_array_equal(fast, slow)
        assert np.isfinite(fast).sum() > 100


def test_far_and_empty_worlds():
    directions = camera_directions(look_rotation(0.0, 0.0))
    empty = World(LOW, HIGH, [])
    assert np.isinf(cast_single_origin(empty._blocks, np.array([0.0, 0.0, 1.0]), directions,
                                       50.0)).all()
    far = World(LOW, HIGH, [Sphere((100.0, 0.0, 1.0), 1.0), Cylinder((0.0, 100.0), 1.0, 2.0)])
    origin = np.array([0.0, 0.0, 1.0])
    assert np.isinf(cast_image(far._blocks, origin, directions, 20.0)).all()
    assert_matches_brute(far, origin, directions)


def test_range_maximum_table_for_long_runs():
    rng = np.random.default_rng(4)
    acc = rng.random(9000)
    acc[rng.random(9000) < 0.1] = np.inf
    table = raycast_fast._range_max_table(acc, 6000)       # grows the log2 lookup
    starts = rng.integers(0, 3000, 200)
    lengths = rng.integers(1, 6000, 200)
    level = raycast_fast._LOG2[lengths]
    flat = table.reshape(-1)
    row = level * acc.shape[0] + starts
    got = np.maximum(flat[row], flat[row + lengths - (1 << level)])
    np.testing.assert_array_equal(got, [acc[s:s + n].max() for s, n in zip(starts, lengths)])
