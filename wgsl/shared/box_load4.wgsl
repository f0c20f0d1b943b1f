// box_load4: the loads of four pixels at a time that box_runs takes: none. Its twins
// box_load4_host8 and box_load4_pack16 hold box_runs_quads' `load4`.
