// box_load4: the module-scope functions of box_runs, the statements blur_box.wgsl's chunk
// loop imports: none. Its twin box_load4_host8 holds those of box_runs_host4.
