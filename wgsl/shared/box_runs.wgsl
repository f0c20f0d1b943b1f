// box_runs: box_pass's running sums over a thread's BOX_PPT positions of a chunk, from x0:
// entry i is the sum of e(x + r) - e(x - r - 1) over positions x0 to x0 + i of the line
// that lie before `end` (see wgsl/blur_box.wgsl). Its twin box_runs_quads reads four pixels
// at a time.
//
// The driver compiles box_pass differently with this loop in a function or written in place,
// and neither way is faster everywhere: on an H100 the 4K RGB8 box's column pass took 0.061
// ms with the loop in place at 8 lines a workgroup and 0.066-0.068 with it here, but 0.057
// in place against 0.056 here at 16 lines (its default, `box_rows_host`), and its row pass
// reading four pixels at a time 0.053 in place against 0.052 here; the other passes the
// same either way (calls GJ, GK, GM).
fn box_runs(line: u32, x0: i32, end: i32, in_range: bool) -> array<vec4<u32>, BOX_PPT> {
    let r = i32(params.radius);
    var local: array<vec4<u32>, BOX_PPT>;
    var run = vec4<u32>(0u);
    for (var i = 0u; i < BOX_PPT; i++) {
        let x = x0 + i32(i);
        if in_range && x < end {
            run += load(line, x + r) - load(line, x - r - 1);
        }
        local[i] = run;
    }
    return local;
}
