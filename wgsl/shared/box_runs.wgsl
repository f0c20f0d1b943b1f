// box_runs: statements of box_pass (wgsl/blur_box.wgsl), imported inside its chunk loop: a
// thread's running sums over its BOX_PPT positions x, each adding e(x + r) - e(x - r - 1) for
// the positions of the line before the segment's end, into `run` and `local`. Its twin
// box_runs_host4 reads the host's 8-bit layout four pixels at a time. (Statements, not a
// function: the driver compiled the RGB8 column pass 11-13% slower with the loop in one,
// call GJ.)
for (var i = 0u; i < BOX_PPT; i++) {
    let x = i32(c0 + t * BOX_PPT + i);
    if in_range && x < i32(wk.end) {
        run += load(line, x + r) - load(line, x - r - 1);
    }
    local[i] = run;
}
