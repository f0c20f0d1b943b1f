// scan_walk_subgroup: scan_lookback's walk by the workgroup's first subgroup, a window of
// its size of tiles a step: lane i polls tile end - 1 - i, the lanes wait until every tile
// of the window has published (each belongs to a workgroup that drew its ticket earlier and
// publishes its total before its own walk, so the wait needs no workgroup to start), and the
// window's values up to the nearest inclusive prefix are combined in one subgroup reduction.
// 32 tiles a round trip to memory on 32-lane subgroups, where scan_walk_serial takes one.
// The look-back's operators (integer sums, min, max) are associative and commutative, so
// the reduction's order does not change the result. Its twin is scan_walk_serial.

// As scan_walk_serial's: publishes `total`, walks back, finishes the tile.
fn look_back(tile: u32, total: u32, last: bool, lane: Lane) {
    if lane.sid != 0u {
        return;
    }
    var before = carries[params.carry_slot];
    if tile > 0u {
        if lane.sgi == 0u {
            publish(tile, AGGREGATE, total);
        }
        var after = identity();
        // The window: tiles end - sgs .. end - 1.
        var end = tile;
        var found = false;
        var gave_up = false;
        for (var step = 0u; step < tile && !found && !gave_up; step++) {
            // Lanes past tile 0 hold the identity as a prefix: tile 0's own PREFIX, nearer,
            // ends the walk first.
            var s = vec2<u32>(identity(), PREFIX);
            let valid = lane.sgi < end;
            let j = end - 1u - select(0u, lane.sgi, valid);
            if valid {
                s = published(j);
            }
            for (var round = 0u; round < ROUNDS && subgroupAny(s.y == NOT_READY); round++) {
                s = poll8(poll8(poll8(poll8(s, j), j), j), j);
            }
            if subgroupAny(s.y == NOT_READY) {
                gave_up = true;
            } else {
                // The nearest lane holding an inclusive prefix (sgs where none does).
                let nearest = subgroupMin(select(lane.sgs, lane.sgi, s.y == PREFIX));
                let window = subgroup_reduce(select(identity(), s.x, lane.sgi <= nearest));
                after = combine(window, after);
                found = nearest < lane.sgs;
                end -= min(end, lane.sgs);
            }
        }
        // A wait that gave up, or a walk that lavapipe's loop limit cut short: the result is
        // wrong, and the host says so.
        if !found && lane.sgi == 0u {
            atomicStore(&fault[0], 1u);
        }
        before = after;
    }
    if lane.sgi == 0u {
        finish(tile, before, total, last);
    }
}
