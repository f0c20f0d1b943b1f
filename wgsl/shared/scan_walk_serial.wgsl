// scan_walk_serial: scan_lookback's walk by one invocation, one tile a step (a round trip to
// memory for each tile it passes). Its twin on the subgroup path is scan_walk_subgroup.

// Publishes tile `tile`'s `total`, walks back to the nearest tile with an inclusive prefix and
// finishes the tile (`finish`). `last`: the segment's last tile.
fn look_back(tile: u32, total: u32, last: bool, lane: Lane) {
    if lane.lid != 0u {
        return;
    }
    // The combination of every element before this tile, the segment's carry first.
    var before = carries[params.carry_slot];
    if tile > 0u {
        publish(tile, AGGREGATE, total);
        // Tiles j+1 .. tile-1, walking back; tile 0 (a PREFIX from the start) always ends
        // the walk, within `tile` steps.
        var after = identity();
        var j = tile - 1u;
        var found = false;
        for (var step = 0u; step < tile && !found; step++) {
            let s = wait_for(j);
            if s.y == NOT_READY {
                break;
            }
            after = combine(s.x, after);
            found = s.y == PREFIX;
            j -= 1u;
        }
        // A wait that gave up, or a walk that lavapipe's loop limit cut short: the result is
        // wrong, and the host says so.
        if !found {
            atomicStore(&fault[0], 1u);
        }
        before = after;
    }
    finish(tile, before, total, last);
}
