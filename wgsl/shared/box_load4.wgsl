// box_load4: the loads of several pixels at a time that box_runs takes: none. Its twin
// box_load4_host8 holds those of box_runs_host4.
